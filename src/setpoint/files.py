"""Private files: what the engine keeps on disk (the store's database, children's logs and
state files, the workspace directories) is readable by its own user only.

Modes are set where a file or directory is made (`os.open` with 0600, `mkdir` with 0700),
never through the process umask, which children would inherit. Files and directories
made by an earlier, laxer version are tightened when opened (`make_private`: group and
other bits removed). A database file that SQLite creates itself is made private right
after it is opened, before anything is written to it; SQLite gives its `-wal` and `-shm`
files the mode of the database file.

Only the paths given are touched, never their parents: a store at `/tmp/x.db` must not
make `/tmp` private. No other I/O, no decisions about where files go.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_FILE_MODE",
    "ensure_private_dir",
    "make_private",
    "open_private",
    "sqlite_files",
]

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
_GROUP_AND_OTHER = 0o077


def make_private(*paths: str | os.PathLike[str]) -> None:
    """Remove the group and other permission bits of each path that exists and is ours
    (a 0644 file becomes 0600, a 0755 directory 0700). Missing paths, and paths of another
    user (which only their owner or root may change), are left as they are."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError, PermissionError):
            st = os.stat(path)
            if st.st_mode & _GROUP_AND_OTHER and st.st_uid == os.geteuid():
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~_GROUP_AND_OTHER)


def ensure_private_dir(path: str | os.PathLike[str]) -> Path:
    """`path` as a directory of mode 0700: made (with its missing parents, which get the
    usual mode) if missing, tightened if it exists with group or other bits. Returns it."""
    path = Path(path)
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    make_private(path)
    return path


def open_private(path: str | os.PathLike[str], flags: int) -> int:
    """`os.open(path, flags | O_CREAT)` with mode 0600, tightening a file that already
    existed with a wider mode. Returns the file descriptor."""
    fd = os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    try:
        st = os.fstat(fd)
        if st.st_mode & _GROUP_AND_OTHER and st.st_uid == os.geteuid():
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~_GROUP_AND_OTHER)
    except BaseException:
        os.close(fd)
        raise
    return fd


def sqlite_files(database: str | os.PathLike[str]) -> tuple[str, str, str]:
    """A SQLite database file and its WAL-mode companions (`-wal`, `-shm`)."""
    name = os.fspath(database)
    return name, f"{name}-wal", f"{name}-shm"
