"""The webapp example's PostgreSQL helper: find the binaries, make a data directory, run the
server in the foreground, and say whether it accepts connections.

    python3 pg.py bin NAME                      print the path of PostgreSQL's NAME (e.g. postgres)
    python3 pg.py init DATADIR [INITDB_ARG...]  initdb DATADIR once (a no-op when it exists)
    python3 pg.py serve DATADIR PORT [ARG...]   exec postgres on 127.0.0.1:PORT (the pid stays)
    python3 pg.py ready PORT                    exec pg_isready against 127.0.0.1:PORT

Binaries are looked for where distributions put them, not only on PATH: `$PG_BINDIR`, PATH,
`/usr/lib/postgresql/<highest version>/bin` (Debian, Ubuntu), `/usr/local/pgsql/bin` (built
from source), then `pg_config --bindir`. `$PG_SEARCH_ROOT` (default `/`) prefixes the two fixed
directories (the tests use it). When none is found, one line on stderr says how to install
PostgreSQL, and the exit code is 2.

PostgreSQL refuses to run as root. Run by root, `init` creates DATADIR, gives it to the
`postgres` OS user and runs initdb as that user, and `serve` becomes that user before it
execs postgres; run by anyone else, both run as the caller. When root's DATADIR lies where
the `postgres` user cannot reach (inside the private `.setpoint/`, or a 0700 home or
`mktemp -d` directory), the cluster lives in a directory of its own under that user's home
(`~postgres/setpoint/<hash of DATADIR>`), and DATADIR is a symbolic link to it: nothing to
chmod. Authentication is `trust`, and
the server listens on 127.0.0.1 only, with its unix socket in DATADIR (or the temporary
directory when that path is too long for a socket), never in /var/run/postgresql.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

INSTALL_HINT = (
    "PostgreSQL is not installed (looked on PATH, in /usr/lib/postgresql/*/bin, "
    "/usr/local/pgsql/bin and pg_config --bindir): install it with "
    "`apt-get install postgresql` (Debian, Ubuntu), `dnf install postgresql-server` "
    "(Fedora, RHEL) or `brew install postgresql` (macOS), or set PG_BINDIR to its bin directory"
)
OS_USER = "postgres"
"""The OS user PostgreSQL runs as when started by root."""
SOCKET_PATH_MAX = 107
"""The longest unix socket path (sun_path is 108 bytes on Linux, 104 on macOS and BSD)."""


class PgError(Exception):
    """A reason to stop, in one line; `code` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# -- finding the binaries ------------------------------------------------------------------


def version_key(name: str) -> tuple[int, ...]:
    """`"9.6"` -> (9, 6), so that 15 sorts above 9.6; names that are not versions sort first."""
    if not re.fullmatch(r"\d+(\.\d+)*", name):
        return (-1,)
    return tuple(int(part) for part in name.split("."))


def candidate_dirs(root: Path) -> list[Path]:
    """The fixed places PostgreSQL's binaries live in, best first, under `root`."""
    debian = root / "usr/lib/postgresql"
    versions = sorted(
        (d for d in debian.iterdir() if d.is_dir()) if debian.is_dir() else [],
        key=lambda d: version_key(d.name),
        reverse=True,
    )
    return [*(v / "bin" for v in versions), root / "usr/local/pgsql/bin"]


def find_binary(name: str) -> Path:
    """The path of PostgreSQL's `name`, or PgError (exit 2) with the install hint."""
    bindir = os.environ.get("PG_BINDIR")
    if bindir and (found := shutil.which(name, path=bindir)):
        return Path(found)
    # An unset PATH searches nothing (shutil.which would fall back to /bin:/usr/bin).
    if found := shutil.which(name, path=os.environ.get("PATH", "")):
        return Path(found)
    root = Path(os.environ.get("PG_SEARCH_ROOT", "/"))
    for directory in candidate_dirs(root):
        if (found := shutil.which(name, path=str(directory))) is not None:
            return Path(found)
    if pg_config := shutil.which("pg_config", path=os.environ.get("PATH", "")):
        result = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=False
        )
        bindir = result.stdout.strip()
        if result.returncode == 0 and (found := shutil.which(name, path=bindir)):
            return Path(found)
    raise PgError(f"pg.py: {name} not found. {INSTALL_HINT}", code=2)


# -- running as the postgres user when root ------------------------------------------------


def postgres_user() -> pwd.struct_passwd | None:
    """The OS user to run PostgreSQL as: None when not root (run as the caller)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(OS_USER)
    except KeyError:
        raise PgError(
            f"pg.py: running as root, and PostgreSQL refuses root, but there is no "
            f"`{OS_USER}` OS user to run it as: create one (useradd --system {OS_USER}) "
            "or run setpoint as an ordinary user"
        ) from None


def can_search(path: Path, user: pwd.struct_passwd) -> bool:
    """Whether `user` may traverse the directory `path` (its x bit for owner, group or other)."""
    info = path.stat()
    groups = {user.pw_gid, *os.getgrouplist(user.pw_name, user.pw_gid)}
    if info.st_uid == user.pw_uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid in groups:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


def unreachable_parent(datadir: Path, user: pwd.struct_passwd) -> Path | None:
    """The first parent of `datadir` that `user` cannot traverse, if any (one that does not
    exist yet is made when the data directory is)."""
    for parent in reversed(datadir.parents):
        if parent.exists() and not can_search(parent, user):
            return parent
    return None


def reachable_home(datadir: Path, user: pwd.struct_passwd) -> Path:
    """Where `user` can keep the cluster named `datadir`: `datadir` itself when it can reach
    it, else a directory of its own under its home, linked from `datadir`."""
    parent = unreachable_parent(datadir, user)
    if parent is None:
        return datadir
    digest = hashlib.sha256(os.fsencode(datadir)).hexdigest()[:16]
    home = Path(user.pw_dir) / "setpoint" / digest
    if unreachable_parent(home, user) is not None or not Path(user.pw_dir).is_dir():
        raise PgError(
            f"pg.py: the {user.pw_name} user cannot reach {datadir} ({parent} is not "
            f"searchable by it) nor its home {user.pw_dir}: put the data directory elsewhere"
        )
    print(f"pg.py: {parent} is closed to {user.pw_name}: the cluster lives in {home}", flush=True)
    return home


def become(user: pwd.struct_passwd) -> None:
    """Switch this process to `user` for good (groups, then gid, then uid) and set HOME."""
    os.initgroups(user.pw_name, user.pw_gid)
    os.setgid(user.pw_gid)
    os.setuid(user.pw_uid)
    os.environ["HOME"] = user.pw_dir
    os.environ["USER"] = os.environ["LOGNAME"] = user.pw_name


# -- the subcommands -----------------------------------------------------------------------


def init(datadir: Path, initdb_args: list[str]) -> None:
    """initdb `datadir` unless it holds a cluster already (`PG_VERSION`)."""
    datadir = datadir.absolute()
    if (datadir / "PG_VERSION").exists():
        print(f"pg.py: {datadir} is initialised already: nothing to do", flush=True)
        return
    initdb = find_binary("initdb")
    user = postgres_user()
    if user is not None and not datadir.is_symlink():
        home = reachable_home(datadir, user)
        if home != datadir:
            home.mkdir(parents=True, exist_ok=True)
            os.chown(home.parent, user.pw_uid, user.pw_gid)
            datadir.parent.mkdir(parents=True, exist_ok=True)
            datadir.symlink_to(home, target_is_directory=True)
    datadir = datadir.resolve()
    if (datadir / "PG_VERSION").exists():
        print(f"pg.py: {datadir} is initialised already: nothing to do", flush=True)
        return
    datadir.mkdir(parents=True, exist_ok=True)
    if user is not None:
        os.chown(datadir, user.pw_uid, user.pw_gid)
    datadir.chmod(0o700)
    argv = [
        str(initdb),
        f"--pgdata={datadir}",
        "--username=postgres",
        "--auth=trust",  # safe only because the server listens on 127.0.0.1 alone
        "--encoding=UTF8",
        "--no-locale",
        *initdb_args,
    ]
    print(f"pg.py: {' '.join(argv)}", flush=True)
    if user is None:
        result = subprocess.run(argv, check=False)
    else:
        env = {**os.environ, "HOME": user.pw_dir, "USER": user.pw_name, "LOGNAME": user.pw_name}
        result = subprocess.run(
            argv,
            check=False,
            cwd=datadir,  # initdb complains when it cannot return to the caller's directory
            env=env,
            user=user.pw_uid,
            group=user.pw_gid,
            extra_groups=os.getgrouplist(user.pw_name, user.pw_gid),
        )
    if result.returncode != 0:
        raise PgError(f"pg.py: initdb of {datadir} failed with exit code {result.returncode}")


def socket_dir(datadir: Path, port: int) -> Path:
    """Where the unix socket goes: `datadir` when the socket's path fits, else the temp dir."""
    longest = datadir / f".s.PGSQL.{port}.lock"
    return datadir if len(os.fsencode(longest)) <= SOCKET_PATH_MAX else Path(tempfile.gettempdir())


def serve(datadir: Path, port: int, postgres_args: list[str]) -> None:
    """Replace this process with postgres on 127.0.0.1:`port` (as the postgres user if root)."""
    datadir = datadir.resolve()  # the cluster itself, where `init` linked it
    if not (datadir / "PG_VERSION").exists():
        raise PgError(f"pg.py: {datadir} holds no database cluster: run `pg.py init {datadir}`")
    postgres = find_binary("postgres")
    argv = [
        str(postgres),
        "-D",
        str(datadir),
        "-p",
        str(port),
        "-k",
        str(socket_dir(datadir, port)),
        "-c",
        "listen_addresses=127.0.0.1",
        *postgres_args,
    ]
    if (user := postgres_user()) is not None:
        become(user)
    print(f"pg.py: exec {' '.join(argv)}", flush=True)
    os.execv(argv[0], argv)


def ready(port: int) -> None:
    """Replace this process with pg_isready: exit 0 when the server accepts connections."""
    pg_isready = find_binary("pg_isready")
    argv = [str(pg_isready), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-t", "1"]
    os.execv(argv[0], argv)


def main(argv: list[str]) -> int:
    usage = (
        "usage: pg.py bin NAME | init DATADIR [ARG...] | serve DATADIR PORT [ARG...] | ready PORT"
    )
    try:
        match argv:
            case ["bin", name]:
                print(find_binary(name))
            case ["init", datadir, *rest]:
                init(Path(datadir), rest)
            case ["serve", datadir, port, *rest] if port.isdigit():
                serve(Path(datadir), int(port), rest)
            case ["ready", port] if port.isdigit():
                ready(int(port))
            case _:
                print(usage, file=sys.stderr)
                return 2
    except PgError as error:
        print(error, file=sys.stderr, flush=True)
        return error.code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
