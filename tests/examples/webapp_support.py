"""Helpers for the webapp example's tests: a real PostgreSQL started by the test (through the
example's own `pg.py`), and the example's migrate and app scripts run as subprocesses.

`running_postgres()` is the one to reuse: it initialises a cluster in a fresh directory
under the temporary directory (searchable by the `postgres` OS user, which owns the cluster
when the tests run as root), serves it on a free loopback port, waits until `pg.py ready`
says it accepts connections, and stops it with SIGINT (fast shutdown) at the end. It fails
the test with pg.py's install hint when PostgreSQL is not installed. A test whose PostgreSQL
`setpoint up` starts needs only its parts: `require_postgresql()` and `postgres_scratch_dir()`
(or `private_scratch_dir()`, closed to the postgres user as `mktemp -d` is).
Waits are on conditions with deadlines; nothing sleeps a fixed time to let something happen.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]
WEBAPP = ROOT / "examples" / "webapp"
PG = WEBAPP / "pg.py"
MIGRATE = WEBAPP / "migrate.py"
APP = WEBAPP / "app.py"
MIGRATIONS = WEBAPP / "migrations"

FAST_UNSAFE = ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
"""Server settings for throwaway test clusters: no waiting on the disk."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until(check: Callable[[], bool], within: float, what: str) -> None:
    """Return as soon as `check()` holds; AssertionError naming `what` after `within` s."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:g}s: {what}")
        time.sleep(0.02)


def run_script(
    *argv: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one of the example's scripts with this interpreter; output captured as text."""
    return subprocess.run(
        [sys.executable, *map(str, argv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@dataclass
class Postgres:
    """A PostgreSQL server on 127.0.0.1:`port` over the cluster in `datadir`."""

    datadir: Path
    port: int
    log: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def is_ready(self) -> bool:
        """Whether `pg.py ready` says the server accepts connections."""
        return run_script(PG, "ready", str(self.port)).returncode == 0

    def start(self, within: float = 60.0) -> None:
        """Start the server through `pg.py serve` and wait until it accepts connections."""
        assert self.process is None, "already started"
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, PG, "serve", self.datadir, str(self.port), *FAST_UNSAFE],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        process = self.process

        def up() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"postgres exited ({process.returncode}): {self.log_tail()}")
            return self.is_ready()

        wait_until(up, within, f"postgres on port {self.port} accepts connections")

    def stop(self, within: float = 30.0) -> None:
        """Fast shutdown (SIGINT), as the example's `db` Process is stopped; wait for the exit."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=within)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            raise
        finally:
            self.process = None

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
        """An autocommit connection as the postgres role."""
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname=dbname, autocommit=True
        )

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def require_postgresql() -> None:
    """Fail the test with pg.py's install hint unless PostgreSQL's binaries are installed."""
    found = run_script(PG, "bin", "postgres")
    if found.returncode != 0:
        pytest.fail(found.stderr.strip(), pytrace=False)


@contextlib.contextmanager
def postgres_scratch_dir() -> Iterator[Path]:
    """A fresh directory the postgres OS user can reach (for a data directory), removed with
    everything in it at the end. Not pytest's tmp_path: as root, its parents are closed to
    other users."""
    with private_scratch_dir() as base:
        base.chmod(0o711)
        yield base


@contextlib.contextmanager
def private_scratch_dir() -> Iterator[Path]:
    """A fresh directory as `mktemp -d` makes one (mode 0700: closed to the postgres user),
    removed at the end with everything in it and any cluster pg.py kept elsewhere for it."""
    base = Path(tempfile.mkdtemp(prefix="setpoint-pg-"))
    try:
        yield base
    finally:
        for place in linked_from(base):  # a cluster pg.py kept where postgres reaches it
            shutil.rmtree(place, ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)


def linked_from(base: Path) -> list[Path]:
    """Where the symbolic links under `base/.setpoint` point (as root, pg.py keeps a cluster
    the postgres user could not reach there under its home, and links it)."""
    workspace = base / ".setpoint"
    if not workspace.is_dir():
        return []
    return [link.resolve() for link in workspace.iterdir() if link.is_symlink()]


def processes_under(base: Path) -> list[int]:
    """Live processes whose working directory is in `base`, or where a link in it points
    (what an engine started there)."""
    places = [str(base), *map(str, linked_from(base))]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            state = (entry / "stat").read_bytes().rpartition(b")")[2].split()[0]
        except OSError:
            continue
        if any(cwd.startswith(place) for place in places) and state not in (b"Z", b"X"):
            found.append(int(entry.name))
    return found


@contextlib.contextmanager
def running_postgres() -> Iterator[Postgres]:
    """A fresh PostgreSQL cluster, served on a free port while the block runs, then removed."""
    require_postgresql()
    with postgres_scratch_dir() as base:
        datadir = base / "data"
        init = run_script(PG, "init", datadir, "--no-sync")
        assert init.returncode == 0, init.stdout + init.stderr
        server = Postgres(datadir=datadir, port=free_port(), log=base / "postgres.log")
        server.start()
        try:
            yield server
        finally:
            server.stop()


def migrate(
    server: Postgres, dbname: str, migrations: Path = MIGRATIONS
) -> subprocess.CompletedProcess[str]:
    """Run the example's migrate.py against `dbname` on `server`."""
    return run_script(MIGRATE, str(server.port), "--dbname", dbname, "--migrations", migrations)


@dataclass
class App:
    """The example's app.py, running on 127.0.0.1:`port`, its output going to `log`."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    def get(self, path: str, timeout: float = 30.0) -> tuple[int, str]:
        """(status, body) of GET `path`; error statuses are answers too."""
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            with error:
                return error.code, error.read().decode()

    def metric(self, line_start: str) -> float:
        """The value of the first /metrics sample whose line starts with `line_start`."""
        status, text = self.get("/metrics")
        assert status == 200
        for line in text.splitlines():
            if line.startswith(line_start):
                return float(line.rsplit(" ", 1)[1])
        raise AssertionError(f"no sample {line_start!r} in /metrics:\n{text}")


@contextlib.contextmanager
def running_app(
    server: Postgres, dbname: str, log: Path, replica: str = "web-test", version: str = "1"
) -> Iterator[App]:
    """app.py against `dbname` on `server`, listening before the block runs; killed after it
    if it has not exited."""
    port = free_port()
    env = {**os.environ, "REPLICA": replica, "APP_VERSION": version}
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                APP,
                "--port",
                str(port),
                "--db-port",
                str(server.port),
                "--db-name",
                dbname,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    app = App(process=process, port=port, log=log)

    def listening() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"app.py exited ({process.returncode}): {log.read_text()}")
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_until(listening, 30, f"app.py listens on port {port}")
        yield app
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
