"""Private files: what the engine keeps on disk (the store's database, children's logs and
state files, the workspace directories, the TLS key, kubeconfigs) is readable by its own
user only, and no other user of the machine can make setpoint write elsewhere.

Modes are set where a file or directory is made (`os.open` with 0600, `mkdir` with 0700),
never through the process umask, which children would inherit. Files made by an earlier,
laxer version are tightened when opened (`make_private`: group and other bits removed).
A database file that SQLite creates itself is made private right after it is opened,
before anything is written to it (through an `O_PATH` descriptor: closing an opened one
would drop SQLite's POSIX locks); SQLite gives its `-wal` and `-shm` files the mode of
the database file.

Directories: `ensure_private_dir` makes a missing one 0700. An existing directory is
tightened only when it is, or is inside, a `.setpoint/` (`PRIVATE_DIR_NAME`): a store at
`/tmp/x.db` must not make `/tmp` (or any directory the user named) private. A private
directory (every one from the `.setpoint` component down) that is a symbolic link or
belongs to another user is refused.

Files: nothing here follows a symbolic link in the last component of a path it writes
(`O_NOFOLLOW`); a file replaced whole (`write_private`) is written to a new temporary
file (`O_EXCL`) in the same directory and renamed over it. Secrets read from files
(`read_secret`) must belong to the caller and not be writable by anyone else.

A refusal is a `PermissionError` naming the path and the reason in one line. No other
I/O, no decisions about where files go.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

__all__ = [
    "PRIVATE_DIR_MODE",
    "PRIVATE_DIR_NAME",
    "PRIVATE_FILE_MODE",
    "ensure_private_dir",
    "make_private",
    "open_private",
    "others_may_read",
    "read_secret",
    "refusal",
    "sqlite_files",
    "write_private",
]

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_NAME = ".setpoint"
"""The name of setpoint's own directories: the only existing directories it tightens."""
_GROUP_AND_OTHER = 0o077


def refusal(path: str | os.PathLike[str], reason: str) -> PermissionError:
    """The error of a refused path: `PATH: REASON` in one line."""
    return PermissionError(errno.EPERM, reason, os.fspath(path))


def make_private(*paths: str | os.PathLike[str]) -> None:
    """Remove the group and other permission bits of each path that exists and is ours
    (a 0644 file becomes 0600, a 0755 directory 0700). Missing paths, paths of another
    user (which only their owner or root may change) and symbolic links (whose target is
    not ours to change) are left as they are.

    The file is reached through an `O_PATH` descriptor, never opened for reading: closing
    a descriptor that was opened drops every POSIX lock this process holds on the file,
    and SQLite keeps its database's locks that way."""
    for path in paths:
        try:
            fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except (FileNotFoundError, PermissionError):
            continue
        try:
            st = os.fstat(fd)
            if stat.S_ISLNK(st.st_mode) or st.st_uid != os.geteuid():
                continue
            if st.st_mode & _GROUP_AND_OTHER:
                os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(st.st_mode) & ~_GROUP_AND_OTHER)
        finally:
            os.close(fd)


def _tighten(fd: int) -> None:
    st = os.fstat(fd)
    if st.st_mode & _GROUP_AND_OTHER and st.st_uid == os.geteuid():
        os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~_GROUP_AND_OTHER)


def ensure_private_dir(path: str | os.PathLike[str]) -> Path:
    """`path` as a directory of setpoint's own, returned: made mode 0700 if missing (and
    so are its missing parents from the `.setpoint` it is in; others get the usual mode);
    refused if it, or any directory between it and the `.setpoint` it is in, is a
    symbolic link, not a directory or another user's (checked before anything is made);
    tightened to 0700 if it has group or other bits and is, or is inside, a `.setpoint/`.
    An existing directory elsewhere keeps its mode (it may be the user's, or `/tmp`)."""
    path = Path(path)
    parts = path.parts
    first = parts.index(PRIVATE_DIR_NAME) if PRIVATE_DIR_NAME in parts else len(parts) - 1
    checked = [Path(*parts[:end]) for end in range(first + 1, len(parts) + 1)]
    for directory in checked:  # before anything is made in them
        if not os.path.lexists(directory):
            break
        _check_own_dir(directory)
    try:
        checked[0].parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # a file where a directory should be: say so, as a deeper path does
        parent = str(checked[0].parent)
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), parent) from None
    for directory in checked:
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, PRIVATE_DIR_MODE)
    for directory in checked:  # and as they are now
        _check_own_dir(directory)
    if PRIVATE_DIR_NAME in parts:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            _tighten(fd)
        finally:
            os.close(fd)
    return path


def _check_own_dir(path: Path) -> None:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise refusal(
            path, "a symbolic link where setpoint keeps private files: refusing to follow it"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise refusal(path, "not a directory")
    if st.st_uid != os.geteuid():
        raise refusal(path, _not_yours(st.st_uid, "keep private files in it"))


def _not_yours(uid: int, action: str) -> str:
    return f"belongs to another user (uid {uid}, not {os.geteuid()}): refusing to {action}"


def open_private(path: str | os.PathLike[str], flags: int) -> int:
    """`os.open(path, flags | O_CREAT)` with mode 0600, tightening a file of ours that
    already existed with a wider mode. Refused: a symbolic link (not followed), anything
    but a regular file, a file of another user. Returns the file descriptor."""
    opening = (flags & ~os.O_TRUNC) | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, opening, PRIVATE_FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refusal(path, "a symbolic link: refusing to write through it") from None
        if exc.errno == errno.ENXIO:  # a FIFO nobody reads
            raise refusal(path, "not a regular file: refusing to write to it") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise refusal(path, "not a regular file: refusing to write to it")
        if st.st_uid != os.geteuid():
            raise refusal(path, _not_yours(st.st_uid, "write to it"))
        _tighten(fd)
        if flags & os.O_TRUNC:  # only once it is known to be ours
            os.ftruncate(fd, 0)
        if not flags & os.O_NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_private(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace the file at `path` with `data`, mode 0600, in one rename: `data` is written
    to a new temporary file (`O_EXCL`, `O_NOFOLLOW`) in the same directory, synced, and
    renamed over `path`. A symbolic link (or anything but a regular file) at `path` is
    refused, neither followed nor replaced; a failed write leaves `path` as it was."""
    import tempfile  # here: only writers of whole files need it

    name = os.fspath(path)
    check_replaceable(name)
    directory, base = os.path.split(name)
    fd, partial = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=directory or ".")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, name)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise


def check_replaceable(path: str | os.PathLike[str]) -> None:
    """Refuse (`PermissionError`) what `write_private` would refuse to replace at `path`: a
    symbolic link, or anything but a regular file. Nothing there passes."""
    with contextlib.suppress(FileNotFoundError):
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise refusal(path, "a symbolic link: refusing to write through it or replace it")
        if not stat.S_ISREG(st.st_mode):
            raise refusal(path, "not a regular file: refusing to replace it")


def read_secret(path: str | os.PathLike[str], *, what: str) -> str:
    """The text of the file at `path` that holds a secret or says who may do what (`what`:
    "token file", "roles file"...).
    Refused: a file of another user (they chose what it says), and one that others may
    write (they could change it). One others may read is read (`others_may_read`)."""
    with open(path, encoding="utf-8") as file:
        st = os.fstat(file.fileno())
        if st.st_uid != os.geteuid():
            raise refusal(path, f"this {what} {_not_yours(st.st_uid, 'read it')}")
        if st.st_mode & 0o022:
            raise refusal(
                path,
                f"this {what} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}):"
                f" refusing to read it; chmod 600 {os.fspath(path)}",
            )
        return file.read()


def others_may_read(path: str | os.PathLike[str]) -> bool:
    """Whether other users may read the secret file `path` that `read_secret` accepts (a
    file it refuses, or cannot read, is not one to warn about: it is not used)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return bool(st.st_mode & 0o044) and not st.st_mode & 0o022 and st.st_uid == os.geteuid()


def sqlite_files(database: str | os.PathLike[str]) -> tuple[str, str, str]:
    """A SQLite database file and its WAL-mode companions (`-wal`, `-shm`)."""
    name = os.fspath(database)
    return name, f"{name}-wal", f"{name}-shm"
