"""A throwaway etcd server for the tests and benchmarks of the `etcd://` store: one member
with a fresh temporary data directory, served on free loopback ports, a fresh key prefix per
store (`new_url`), restartable (`restart`) to test reconnects.

`missing()` says why there is none (no `etcd` binary: `apt-get install etcd-server`, which
`./dev` does as root), so that a test can skip with that reason locally and fail in CI.
Plain Python, no pytest: the fixture in tests/conftest.py and bench/distributed_etcd.py use
it. Waits poll a condition with a deadline; nothing sleeps a fixed time to let something
happen.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import json
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlencode

START_TIMEOUT = 60.0
"""Seconds etcd may take to answer its health check (a loaded machine is slow)."""


def binary() -> str | None:
    return shutil.which("etcd") or next(
        (p for p in ("/usr/bin/etcd", "/usr/local/bin/etcd") if Path(p).exists()), None
    )


def missing() -> str | None:
    """Why no etcd server can be started here, or None when one can."""
    if binary() is None:
        return "etcd is not installed (apt-get install etcd-server; ./dev does it as root)"
    return None


class PortTaken(RuntimeError):
    """etcd could not listen: the port picked as free was taken before it bound it."""


def _die_with_parent() -> None:
    """In the child before exec: have Linux stop it when the process that started it dies,
    so a test run killed outright (no fixture teardown) leaves no etcd behind. (Linux
    tracks the starting *thread*: start the server from one that outlives it, as the main
    thread or the event loop's executor do.)"""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class EtcdServer:
    """`with EtcdServer() as server:` one etcd member on loopback, stopped and its data
    removed at the end. `server.address` is "127.0.0.1:PORT"."""

    def __init__(self) -> None:
        self._etcd = binary()
        assert self._etcd is not None, missing()
        self._dir = Path(tempfile.mkdtemp(prefix="setpoint-etcd-"))
        self._pick_ports()
        self._counter = itertools.count()
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> EtcdServer:
        try:
            for attempt in itertools.count(1):
                try:
                    self.start()
                    break
                except PortTaken:
                    if attempt == 3:
                        raise
                    # Someone took a free port before etcd bound it: others, afresh.
                    shutil.rmtree(self._dir / "data", ignore_errors=True)
                    self._pick_ports()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _pick_ports(self) -> None:
        self.port, self.peer_port = free_port(), free_port()
        self.address = f"127.0.0.1:{self.port}"

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def new_url(self, **params: Any) -> str:
        """The URL of a fresh, empty store on this server (its own key prefix)."""
        query = urlencode({"prefix": f"/t{next(self._counter)}/", **params})
        return f"etcd://{self.address}?{query}"

    def start(self) -> None:
        client, peer = f"http://{self.address}", f"http://127.0.0.1:{self.peer_port}"
        command = [
            str(self._etcd),
            "--name=test",
            f"--data-dir={self._dir / 'data'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=test={peer}",
            "--max-request-bytes=2097152",  # room for a 1.5 MiB object and its key
            "--quota-backend-bytes=8589934592",
        ]
        log = (self._dir / "etcd.log").open("ab")
        self._process = subprocess.Popen(
            command, stdout=log, stderr=log, preexec_fn=_die_with_parent
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while not self._healthy():
            if self._process.poll() is not None:
                self._process = None
                tail = self.log_tail()
                raise (PortTaken if "address already in use" in tail else RuntimeError)(
                    f"etcd exited: {tail}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"etcd did not become healthy: {self.log_tail()}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def restart(self) -> None:
        """Stop the server (clients see it gone), then start it again on the same data."""
        self.stop()
        self.start()

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.address}/health", timeout=2) as answer:
                return bool(json.loads(answer.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def log_tail(self) -> str:
        return (self._dir / "etcd.log").read_text(errors="replace")[-2000:]
