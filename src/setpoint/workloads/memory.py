"""`resources.limits.memory`, enforced: a watchdog that samples the memory of a child's
process group and SIGKILLs the group once it holds more than its limit, as the kernel's
OOM killer does to a container over its cgroup's `memory.max`.

* `group_rss(pid, pgid)`: the resident memory (RSS, `/proc/PID/statm`) of the process
  `pid` and of its descendants that are still in its process group `pgid` (found through
  `/proc/PID/task/TID/children`; without that file, by a scan of `/proc`), summed. Shared
  pages count once per process that maps them, so a group of forked workers (PostgreSQL's
  backends) is counted above what a cgroup would charge it: a limit is a ceiling on the
  sum, not on the machine's memory.
* `MemoryWatch(handle, limit, clock)`: `await watch.run()` samples every
  `LOOK_SECONDS` (on the injected clock) and, the first time the group holds more than
  `limit` bytes, kills the group (`supervisor.kill`) and returns the usage it saw
  (`watch.killed_at` says so too). The caller (`setpoint.workloads.children`) records the
  child's exit with reason `OOMKilled`, as Kubernetes does.

A cgroup v2 `memory.max` would be exact and immediate; this engine does not make cgroups
yet (it would need a delegated subtree it can move its children into), so the limit is
this watchdog's: a child that allocates fast may go over it for up to `LOOK_SECONDS`
before it is killed.

It decides nothing about restarts: the kind's plan treats the killed child as one that
ended by itself (restart policy and back-off apply).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from setpoint.clock import Clock
from setpoint.model.quantities import format_bytes
from setpoint.workloads import supervisor
from setpoint.workloads.procfs import _live_processes, _proc_stat, _read_proc

__all__ = ["LOOK_SECONDS", "OOM_KILLED", "MemoryWatch", "group_rss"]

LOOK_SECONDS = 0.1
"""How often a limited child's memory is sampled."""
OOM_KILLED = "OOMKilled"
"""The exit reason of a child killed over its memory limit (Kubernetes' word)."""
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _pgid_of(pid: int) -> int | None:
    stat = _proc_stat(pid)
    return None if stat is None else stat.pgid


def _rss(pid: int) -> int:
    try:
        statm = _read_proc(pid, "statm")
    except OSError:
        return 0
    return int(statm.split()[1]) * _PAGE if statm else 0


def _children(pid: int) -> list[int] | None:
    """The children of `pid` (None: the kernel does not say, or `pid` is gone)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    found: list[int] = []
    for tid in tasks:
        try:
            text = _read_proc(pid, f"task/{tid}/children")
        except OSError:
            return None
        found += [int(p) for p in text.split()]
    return found


def _group_by_scan(pgid: int) -> list[int]:
    return [pid for pid, stat in _live_processes().items() if stat.pgid == pgid]


def group_rss(pid: int, pgid: int) -> int:
    """The summed RSS, in bytes, of `pid` and its descendants in the process group `pgid`
    (see the module docstring); 0 when none of them runs."""
    members: list[int] = []
    todo = [pid]
    seen: set[int] = set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        if _pgid_of(current) == pgid:
            members.append(current)
        children = _children(current)
        if children is None:
            if current == pid:  # the leader is gone, or the kernel does not say: scan
                members = _group_by_scan(pgid)
                break
            continue
        todo += children
    return sum(_rss(p) for p in members)


@dataclass
class MemoryWatch:
    """Kill `handle`'s group once it holds more than `limit` bytes (see the module
    docstring). `killed_at` is the usage that got it killed (None: not killed)."""

    handle: supervisor.Running | supervisor.Adopted
    limit: int
    clock: Clock
    killed_at: int | None = None

    async def run(self) -> int:
        """Sample until the group is over its limit; kill it and return its usage. Runs
        until cancelled while the group stays within its limit."""
        while True:
            usage = group_rss(self.handle.pid, self.handle.pgid)
            if usage > self.limit:
                self.killed_at = usage
                supervisor.kill(self.handle)
                return usage
            await self.clock.sleep(LOOK_SECONDS)

    def verdict(self) -> str:
        """How far over its limit the killed group was, in words."""
        usage = (self.killed_at or 0) / 2**20
        return (
            f"memory {usage:.1f}Mi over its limit of {format_bytes(self.limit)} "
            "(spec.resources.limits.memory)"
        )
