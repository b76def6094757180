"""A throwaway PostgreSQL server for the tests and benchmarks of the `postgresql://` store:
one cluster in a fresh temporary directory, served on a free loopback port, with a fresh
database per store (`new_url`), restartable (`restart`) to test reconnects.

The cluster is made and served by the webapp example's `pg.py` (it finds the binaries, and
as root runs initdb and postgres as the `postgres` OS user, since PostgreSQL refuses root).
`PostgresServer.find()` says why there is none (`missing()`), so that a test can skip with
that reason locally and fail in CI. Plain Python, no pytest: the fixture in tests/conftest.py,
the hammer test's child processes and bench/distributed.py all use it. Waits poll a condition
with a deadline; nothing sleeps a fixed time to let something happen.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PG = ROOT / "examples" / "webapp" / "pg.py"

TEST_SETTINGS = ("-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=300")
"""For test clusters: no waiting on the disk (a killed client or a restarted server loses
nothing either way; only an OS crash would), room for many stores at once."""
BENCH_SETTINGS = ("-c", "max_connections=300")
"""For the benchmark: the defaults (fsync on, synchronous_commit on), as in production."""


def missing() -> str | None:
    """Why no PostgreSQL server can be started here, or None when one can."""
    found = subprocess.run(
        [sys.executable, str(PG), "bin", "postgres"], capture_output=True, text=True, check=False
    )
    return None if found.returncode == 0 else (found.stderr.strip() or "postgres not found")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PostgresServer:
    """A PostgreSQL cluster in its own temporary directory, on 127.0.0.1:`port`."""

    def __init__(self, settings: tuple[str, ...] = TEST_SETTINGS) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="setpoint-pgstore-"))
        self.base.chmod(0o711)  # the postgres OS user must reach the data directory
        self.datadir = self.base / "data"
        self.log = self.base / "postgres.log"
        self.port = free_port()
        self.settings = settings
        self.process: subprocess.Popen[bytes] | None = None
        self._databases = itertools.count()
        init = subprocess.run(
            [sys.executable, str(PG), "init", str(self.datadir), "--no-sync"],
            capture_output=True,
            text=True,
            check=False,
        )
        if init.returncode != 0:
            self.remove()
            raise RuntimeError(f"initdb failed: {init.stdout}{init.stderr}")

    def start(self, within: float = 60.0) -> None:
        """Serve the cluster and return once it accepts connections."""
        assert self.process is None, "already started"
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    str(PG),
                    "serve",
                    str(self.datadir),
                    str(self.port),
                    *self.settings,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + within
        while not self._accepts_connections():
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited ({self.process.returncode}): {self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres did not accept connections in {within}s")
            time.sleep(0.05)

    def _accepts_connections(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url("postgres"), connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def stop(self, mode: str = "fast", within: float = 60.0) -> None:
        """Stop the server: `fast` (SIGINT: clients are disconnected, a clean shutdown) or
        `immediate` (SIGQUIT: as a crash, recovered from the WAL at the next start)."""
        if self.process is None:
            return
        sig = {"fast": signal.SIGINT, "immediate": signal.SIGQUIT}[mode]
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(sig)
        try:
            self.process.wait(timeout=within)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        finally:
            self.process = None

    def restart(self, mode: str = "fast") -> None:
        self.stop(mode)
        self.start()

    def url(self, dbname: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def new_url(self, prefix: str = "store") -> str:
        """The URL of a fresh, empty database on this server."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(self._databases)}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def remove(self) -> None:
        """Stop the server (if running) and delete the cluster."""
        self.stop()
        link = self.datadir
        if link.is_symlink():  # pg.py kept the cluster where the postgres user reaches it
            shutil.rmtree(link.resolve(), ignore_errors=True)
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
