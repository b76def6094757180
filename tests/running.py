"""A command the tests started and still runs: its output read line by line, waited on
with a timeout, stopped by a signal. Shared by the CLI's and the API's test kits."""

from __future__ import annotations

import contextlib
import queue
import signal
import subprocess
import threading
from collections.abc import Callable
from typing import IO

import pytest


class Running:
    """A command still running; its stdout is read line by line by a thread."""

    def __init__(self, proc: subprocess.Popen[str], *, timeout: float = 30.0) -> None:
        self.proc = proc
        self.timeout = timeout
        self.seen: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        assert proc.stdout is not None
        threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        # `stop` and `ended` read the rest with communicate(), which closes the stream under
        # this thread once the command has ended.
        with contextlib.suppress(ValueError):
            for line in stream:
                self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def expect(self, match: Callable[[str], bool], what: str) -> str:
        """The next line for which `match` is true (skipping others); fail after self.timeout."""
        while True:
            try:
                line = self._lines.get(timeout=self.timeout)
            except queue.Empty:
                self.kill()
                pytest.fail(
                    f"no line with {what} within {self.timeout}s; output so far: {self.seen}"
                )
            if line is None:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                pytest.fail(f"output ended before a line with {what}: {self.seen}; stderr: {err}")
            self.seen.append(line)
            if match(line):
                return line

    def stop(self, sig: signal.Signals) -> tuple[int, str]:
        """Send `sig`; return the exit status and stderr once the command has ended."""
        self.proc.send_signal(sig)
        try:
            _, err = self.proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"still running {self.timeout}s after {sig.name}")
        return self.proc.returncode, err

    def ended(self) -> tuple[int, str]:
        """The exit status and stderr once the command ends by itself (fail after self.timeout)."""
        try:
            _, err = self.proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"still running after {self.timeout}s; output so far: {self.seen}")
        return self.proc.returncode, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
