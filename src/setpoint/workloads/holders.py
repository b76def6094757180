"""Log holders: the small process (`setpoint.workloads.log_holder`) that reads a child's
FIFO and writes its log file with rotation, started beside each child, recorded in its
state file and adopted again by a restarted engine; where a child's output begins
(`LogStart`). Decides nothing (`setpoint.workloads.supervisor` does).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from setpoint.files import (
    make_private,
    open_private,
)
from setpoint.workloads import log_holder
from setpoint.workloads.procfs import (
    _proc_stat,
    _read_state,
    _state_path,
    _until_readable,
    _write_atomically,
)

_HOLDER_PROGRAM = Path(__file__).with_name("log_holder.py")


@dataclass(frozen=True)
class _LogSettings:
    path: Path
    """Absolute: a restarted engine may run from another directory."""
    max_bytes: int
    backups: int

    def files(self) -> list[Path]:
        """The log file and its backups (`.1`, `.2` ...), and the time index of each."""
        rotated = [self.path.with_name(f"{self.path.name}.{i}") for i in range(1, self.backups + 1)]
        logs = [self.path, *rotated]
        return [*logs, *(Path(log_holder.times_path(str(log))) for log in logs)]


@dataclass(frozen=True)
class LogStart:
    """Where a child's output begins: `offset` bytes into the file of inode `inode`, which is
    the log file `path` or, once rotated, one of its `backups` (`path.1`, `path.2` ...)."""

    path: Path
    backups: int
    inode: int
    offset: int


def _log_start(log: _LogSettings) -> LogStart:
    """The end of `log`'s file now (made if missing): where the next child's output begins."""
    fd = open_private(log.path, os.O_WRONLY | os.O_APPEND)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return LogStart(log.path, log.backups, st.st_ino, st.st_size)


def _recorded_log_start(record: Mapping[str, Any], log: _LogSettings) -> LogStart | None:
    """The `LogStart` a state record holds (None: an earlier version's record, without one)."""
    found = record.get("logStart")
    if not isinstance(found, Mapping):
        return None
    try:
        return LogStart(log.path, log.backups, int(found["inode"]), int(found["offset"]))
    except (KeyError, TypeError, ValueError):
        return None


class _Holder:
    """One child's log holder: a process started by this engine or an earlier one, pinned
    by a pidfd."""

    def __init__(self, pid: int, pidfd: int, popen: subprocess.Popen[bytes] | None) -> None:
        self.pid = pid
        self._pidfd = pidfd
        self._popen = popen
        self._exited: asyncio.Task[int | None] | None = None

    @staticmethod
    def start(fifo: Path, log: _LogSettings) -> _Holder:
        """Start a holder reading `fifo` (which must have a writer: it exits at end of file).
        Log files an earlier version left wider than 0600 are tightened first (the holder
        makes new ones 0600)."""
        make_private(*log.files())
        argv = [sys.executable, "-I", "-S", str(_HOLDER_PROGRAM), str(log.path)]
        argv += [str(log.max_bytes), str(log.backups)]
        read_end = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)  # never blocks
        try:
            popen = subprocess.Popen(
                argv,
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                env={},
                start_new_session=True,  # no terminal's Ctrl-C reaches it
            )
        finally:
            os.close(read_end)
        return _Holder(popen.pid, os.pidfd_open(popen.pid), popen)

    @staticmethod
    def find(record: Mapping[str, Any]) -> _Holder | None:
        """The holder an earlier engine recorded, if it still runs."""
        try:
            pid, starttime = int(record["pid"]), int(record["starttime"])
            pidfd = os.pidfd_open(pid)
        except (KeyError, TypeError, ValueError, OSError):
            return None
        st = _proc_stat(pid)
        if st is None or st.state in ("Z", "X") or st.starttime != starttime:
            os.close(pidfd)
            return None
        return _Holder(pid, pidfd, None)

    def record(self) -> dict[str, int] | None:
        st = _proc_stat(self.pid)
        return None if st is None else {"pid": self.pid, "starttime": st.starttime}

    async def wait(self) -> int | None:
        """Its exit status (None for an earlier engine's holder: not ours to know)."""
        if self._exited is None:
            self._exited = asyncio.ensure_future(self._wait())
        return await asyncio.shield(self._exited)

    async def _wait(self) -> int | None:
        try:
            await _until_readable(self._pidfd)
        finally:
            os.close(self._pidfd)
            self._pidfd = -1  # never signal through a closed (perhaps reused) descriptor
        return None if self._popen is None else self._popen.wait()

    def kill(self) -> None:
        if self._pidfd >= 0:
            with contextlib.suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)


def _record_holder(name: str, state_dir: Path, holder: _Holder) -> None:
    """Write `holder` into `name`'s state file: the next engine finds it, and starts no other."""
    record = _read_state(name, state_dir)
    if record:
        with contextlib.suppress(OSError):
            _write_atomically(_state_path(name, state_dir), {**record, "holder": holder.record()})
