"""The subreaper: the engine adopts the processes its children leave behind (a daemon that
double-forked, a child of a killed holder) and reaps them, so that no zombie outlives its
parent's engine. `become_subreaper` asks the kernel for it; `reap_orphans` collects the
exits of adopted processes that `start` did not start (`_started` holds those it did,
whose exits the event loop's child watcher collects). `watch_exits_by_pidfd` makes that
watcher one of pidfds on the event loop, not a thread per child.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import sys
import warnings
from typing import Any

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


class _PidfdWatcher(asyncio.AbstractChildWatcher):
    """Python 3.12's pidfd child watcher, for 3.11: each child's exit is learnt on the
    event loop that started it, through a pidfd; no thread, no signal handler, and never a
    `waitpid` of a pid it was not given."""

    def __enter__(self) -> _PidfdWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def is_active(self) -> bool:
        return True

    def close(self) -> None:
        pass

    def attach_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        pass

    def add_child_handler(  # type: ignore[override]  # typeshed's variadic generics
        self, pid: int, callback: Any, *args: Any
    ) -> None:
        loop = asyncio.get_running_loop()
        pidfd = os.pidfd_open(pid)
        loop.add_reader(pidfd, self._do_wait, loop, pid, pidfd, callback, args)

    def _do_wait(
        self,
        loop: asyncio.AbstractEventLoop,
        pid: int,
        pidfd: int,
        callback: Any,
        args: tuple[Any, ...],
    ) -> None:
        loop.remove_reader(pidfd)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # reaped by someone else: as asyncio says it
            returncode = 255
            _logger.warning("child process pid %d exit status already read", pid)
        else:
            returncode = os.waitstatus_to_exitcode(status)
        os.close(pidfd)
        callback(pid, returncode, *args)

    def remove_child_handler(self, pid: int) -> bool:
        return True


_pidfd_watcher = False


def watch_exits_by_pidfd() -> bool:
    """Learn the exits of the children `start` starts through a pidfd each, on the event
    loop, not through a thread per child blocked in `waitpid` (Python 3.11's default;
    3.12 chooses pidfds itself): a thousand children are then a thousand file descriptors,
    not a thousand threads to create at start and end at stop. The engine calls it, before
    it starts a child; it holds for the whole process. False where it keeps the default."""
    global _pidfd_watcher
    if _pidfd_watcher or sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return _pidfd_watcher
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False  # a kernel older than 5.3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.set_child_watcher(_PidfdWatcher())
    _pidfd_watcher = True
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


_unmarked: set[int] = set()
"""Children of this process found carrying no child's marker (log holders, probes): not
read again while they stay its children (a pid is not reused before it is reaped)."""
_CHILDREN_FILES = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
"""Whether the kernel lists a task's children (`CONFIG_PROC_CHILDREN`)."""


def _own_children() -> list[int] | None:
    """The pids of this process's children (of any of its threads), from
    `/proc/self/task/TID/children`; None where the kernel does not list them."""
    if not _CHILDREN_FILES:
        return None
    found: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children", "rb") as f:
                found += [int(p) for p in f.read().split()]
        except FileNotFoundError:
            continue  # a thread that ended meanwhile
        except OSError:
            return None
    return found


def reap_orphans() -> list[int]:
    """One pass: watch every child of this process that carries a child's marker and that
    `start` did not start (a grandchild re-parented to this subreaper), and reap it once it
    exits. Returns the pids newly watched. Call it from the event loop.

    It reads only this process's children (the kernel lists them; a scan of `/proc`
    where it does not), and a child's environment only once while it stays a child. It
    never waits for any other pid: the event loop's child watcher, and anyone else, keep
    the exits they expect."""
    loop = asyncio.get_running_loop()
    me = os.getpid()
    own = os.environ.get(MARKER_VARIABLE)  # an engine that is itself a managed child
    children = _own_children()
    if children is None:
        children = [pid for pid, st in _live_processes().items() if st.ppid == me]
    _unmarked.intersection_update(children)
    watched = []
    for pid in children:
        if pid in _started or pid in _orphans or pid in _unmarked:
            continue
        marker = _marker_of(pid)
        if marker is None or marker == own:
            _unmarked.add(pid)
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
