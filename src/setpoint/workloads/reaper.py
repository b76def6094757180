"""The subreaper: the engine adopts the processes its children leave behind (a daemon that
double-forked, a child of a killed holder) and reaps them, so that no zombie outlives its
parent's engine. `become_subreaper` asks the kernel for it; `reap_orphans` collects the
exits of adopted processes that `start` did not start (`_started` holds those it did,
whose exits the event loop's child watcher collects).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.workloads.procfs import (
    MARKER_VARIABLE,
    _live_processes,
    _marker_of,
    _until_readable,
)

_started: set[int] = set()
"""Pids `start` started whose exits the event loop's child watcher collects."""

_PR_SET_CHILD_SUBREAPER = 36
_logger = logging.getLogger("setpoint.workloads.supervisor")


def become_subreaper() -> bool:
    """Make this process a child subreaper (`PR_SET_CHILD_SUBREAPER`): an orphaned
    descendant (a child's daemonized grandchild) is re-parented to it, not to init.

    The engine calls it once at start, before it starts a child; `reap_orphans_forever`
    then reaps such orphans. Returns False where the kernel refuses it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        _logger.warning("cannot become a child subreaper: %s", os.strerror(ctypes.get_errno()))
        return False
    return True


_orphans: dict[int, asyncio.Task[None]] = {}
"""Re-parented processes being watched, by pid: each is reaped once it exits."""


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


async def _reap_at_exit(pid: int, pidfd: int) -> None:
    try:
        await _until_readable(pidfd)
        _reap(pid)
    finally:
        os.close(pidfd)
        _orphans.pop(pid, None)


def reap_orphans() -> list[int]:
    """One pass: watch every child of this process that carries a child's marker and that
    `start` did not start (a grandchild re-parented to this subreaper), and reap it once it
    exits. Returns the pids newly watched. Call it from the event loop.

    It never waits for any other pid: the event loop's child watcher, and anyone else,
    keep the exits they expect."""
    loop = asyncio.get_running_loop()
    me = os.getpid()
    own = os.environ.get(MARKER_VARIABLE)  # an engine that is itself a managed child
    watched = []
    for pid, st in _live_processes().items():
        if st.ppid != me or pid in _started or pid in _orphans:
            continue
        marker = _marker_of(pid)
        if marker is None or marker == own:
            continue
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            continue
        _orphans[pid] = loop.create_task(_reap_at_exit(pid, pidfd), name=f"reap {pid}")
        watched.append(pid)
    return watched


async def reap_orphans_forever(interval: float = 5.0, *, clock: Clock = SYSTEM_CLOCK) -> None:
    """The engine's runnable: `reap_orphans()` every `interval` seconds, until cancelled.

    (`stop` reaps what it kills itself; this reaps an orphan that exits by itself.)"""
    try:
        while True:
            reap_orphans()
            await clock.sleep(interval)
    finally:
        for task in list(_orphans.values()):
            task.cancel()
