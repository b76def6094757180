"""Helpers for the supervisor tests: notification FIFOs, pidfd waits, /proc checks, clean-up.

Tests learn that a child reached a point by reading a line the child writes
into a FIFO, and that a process ended through a pidfd: never by sleeping. What
only shows in a file or in /proc is waited for with `eventually`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path

from setpoint.workloads.holders import SERVER_SOCKET

TIMEOUT = 5.0


class Notifications:
    """A FIFO children write lines into (`open(path, "w")`) and tests read lines from.

    The test holds it open for reading and writing, so a child's open never
    blocks and the test's read never sees a premature end of file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self._fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        self._reader: asyncio.StreamReader | None = None
        self._transport: asyncio.BaseTransport | None = None

    async def line(self, within: float = TIMEOUT) -> str:
        if self._reader is None:
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader()
            self._transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader),
                os.fdopen(os.dup(self._fd), "rb", buffering=0),
            )
            self._reader = reader
        raw = await asyncio.wait_for(self._reader.readline(), within)
        return raw.decode().strip()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        os.close(self._fd)


async def wait_pid_gone(pid: int, within: float = TIMEOUT) -> None:
    """Return once `pid` has exited (its pidfd turns readable), or raise TimeoutError."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    gone = loop.create_future()
    loop.add_reader(pidfd, lambda: gone.done() or gone.set_result(None))
    try:
        await asyncio.wait_for(gone, within)
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)


async def eventually(check: Callable[[], bool], within: float = TIMEOUT) -> None:
    """Wait until `check()` holds (a file's contents, a process's state), re-checking every few
    milliseconds; `TimeoutError` after `within` seconds."""
    async with asyncio.timeout(within):
        while not check():  # noqa: ASYNC110 - files and /proc send no events
            await asyncio.sleep(0.005)


def proc_ppid(pid: int) -> int | None:
    """The parent pid in /proc/PID/stat, or None if there is no such pid."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return None
    return int(raw[raw.rindex(b")") + 2 :].split()[1])


def proc_state(pid: int) -> str | None:
    """The state letter in /proc/PID/stat (`Z` for a zombie), or None if there is no such pid."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return None
    return raw[raw.rindex(b")") + 2 :].split()[0].decode()


def is_alive(pid: int) -> bool:
    return proc_state(pid) not in (None, "Z", "X")


def proc_starttime(pid: int) -> int:
    raw = Path(f"/proc/{pid}/stat").read_bytes()
    return int(raw[raw.rindex(b")") + 2 :].split()[22 - 3])


def kill_group(pgid: int) -> None:
    """SIGKILL a whole process group, if anything of it is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def listing(directory: Path) -> list[str]:
    """The sorted names in `directory`, but the log holders' fork server's socket (it stays
    for the directory's next children until the server has been idle for a while)."""
    return sorted(p.name for p in directory.iterdir() if p.name != SERVER_SOCKET)
