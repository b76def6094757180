"""What the Process and Job controllers share: the table of children they supervise.

`Supervised` is one child in a controller's table; `ChildTable` is the part of a
controller that owns that table: stopping and cleaning up children, waking the
object when one exits, collecting orphans at startup, stopping or detaching every
child at shutdown. `record_exit` writes how a child ended into a status, and
`timestamp`/`parse_time` are the millisecond RFC 3339 times both kinds' statuses use.
The controllers decide; this module only does the bookkeeping and the supervisor calls.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from setpoint.clock import Clock, parse_rfc3339
from setpoint.runtime.controller import Controller
from setpoint.runtime.reconciler import Request
from setpoint.workloads import supervisor

log = logging.getLogger("setpoint.workloads")

StopSignal = Literal["SIGTERM", "SIGINT", "SIGQUIT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGKILL"]
"""The signals a spec's `stopSignal` may name (docker compose's `stop_signal`)."""

Key = tuple[str, str]
"""(namespace, name) of the object a child belongs to."""


def timestamp(ts: float) -> str:
    """RFC 3339 with milliseconds (back-off needs better than whole seconds)."""
    text = datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def parse_time(value: Any) -> float | None:
    """The epoch seconds of an RFC 3339 status time; None if absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError:
        return None


@dataclass(eq=False)
class Supervised:
    """One supervised child (or Job attempt): its handle, the spec generation it runs, and
    how it ended once it has."""

    handle: supervisor.Running | supervisor.Adopted
    generation: int
    grace: float = 30.0
    """Seconds between the stop signal and SIGKILL (`terminationGracePeriodSeconds`)."""
    stop_signal: int = signal.SIGTERM
    exit: supervisor.Exit | None = None
    finished_at: float | None = None
    cleaned: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def cancel_tasks(self) -> None:
        for task in self.tasks:
            task.cancel()


def stop_settings(spec: Mapping[str, Any]) -> dict[str, Any]:
    """`grace` and `stop_signal` of a `Supervised` from a Process or Job spec."""
    return {
        "grace": float(spec.get("terminationGracePeriodSeconds", 30)),
        "stop_signal": signal.Signals[spec.get("stopSignal") or "SIGTERM"],
    }


LAST_LINE_CHARS = 200
"""How much of a failed child's last output line its exit reason quotes."""


def record_exit(
    status: dict[str, Any],
    child: Supervised,
    now: float,
    because: str = "",
    log_dir: Path | None = None,
) -> None:
    """Write how `child` ended (and, if it was stopped, `because` of what) into `status`.

    A child that failed by itself (a non-zero code, or a signal nobody sent) has the last
    line of its output, from its log file in `log_dir`, added to the reason, as
    Kubernetes' `FallbackToLogsOnError` termination message: `exited with code 2: initdb:
    not found` says at once what `exited with code 2` makes one go and look for."""
    exit_ = child.exit or supervisor.Exit(None, None, "stopped")
    finished = child.finished_at if child.finished_at is not None else now
    reason = f"{exit_.reason} (stopped: {because})" if because else exit_.reason
    failed = exit_.code not in (0, None) or exit_.signal is not None
    if failed and not because and log_dir is not None:
        line = supervisor.last_line(log_dir / f"{child.handle.name}.log")
        if line:
            reason = f"{reason}: {line[:LAST_LINE_CHARS]}"
    last: dict[str, Any] = {"reason": reason, "finishedAt": timestamp(finished)}
    if exit_.code is not None:
        last["code"] = exit_.code
    if exit_.signal is not None:
        last["signal"] = exit_.signal
    status["lastExit"] = last
    status.pop("pid", None)


C = TypeVar("C", bound=Supervised)


class ChildTable(Generic[C]):
    """The table half of a workload controller. Subclasses set `kind_label` and call
    `ChildTable.__init__`; `controller` is set when they attach to a manager."""

    kind_label = "object"

    def __init__(self, state_dir: Path, clock: Clock) -> None:
        self.state_dir = state_dir
        self.clock = clock
        self.controller: Controller | None = None
        self._table: dict[Key, C] = {}
        self._orphans_collected = asyncio.Event()
        self._stopping: list[C] = []
        self._kill_now = False

    def _wake(self, key: Key) -> None:
        if self.controller is not None:
            self.controller.enqueue(Request(key[1], key[0]))

    async def _stop(self, child: C, grace: float | None = None) -> None:
        """Stop `child` with its stop signal, SIGKILL after `grace` (default: its own)."""
        child.cancel_tasks()
        grace = child.grace if grace is None else grace
        exit_ = await supervisor.stop(child.handle, grace, child.stop_signal)
        child.cleaned = True
        if child.exit is None:
            child.exit = exit_
            child.finished_at = self.clock.now()

    async def _cleanup(self, child: C) -> None:
        """Clear up after a child that exited by itself (its group, state file, logs)."""
        child.cancel_tasks()
        if not child.cleaned:
            child.cleaned = True
            await supervisor.stop(child.handle, 0.0)

    async def collect_orphans(self) -> None:
        """Stop children whose objects are gone, and remove stray state files.

        A runnable: it runs once, after the caches have synced."""
        try:
            await self._collect_orphans()
        finally:
            self._orphans_collected.set()

    async def wait_orphans_collected(self) -> None:
        """Return once `collect_orphans` has run."""
        await self._orphans_collected.wait()

    async def _collect_orphans(self) -> None:
        if not self.state_dir.is_dir() or self.controller is None:
            return
        cache = self.controller.informer.cache
        for path in sorted(self.state_dir.glob("*.json")):
            name = path.stem
            namespace, _, obj_name = name.partition("_")
            if not obj_name or cache.get(obj_name, namespace) is not None:
                continue
            handle = supervisor.find_adoptable(name, self.state_dir)
            if handle is None:
                supervisor.stray(name, self.state_dir)
                continue
            log.info(
                "stopping pid %d: its %s %s/%s is gone",
                handle.pid, self.kind_label, namespace, obj_name,
            )  # fmt: skip
            await supervisor.stop(handle, 0.0)

    async def _stop_children(self, grace: float | None = None) -> list[Key]:
        """Stop every child in the table (emptying it), each with its own grace period
        unless `grace` is given; return whose they were."""
        children = list(self._table.items())
        self._table.clear()
        self._stopping = [c for _, c in children]
        grace = 0.0 if self._kill_now else grace
        try:
            await asyncio.gather(
                *(self._stop(c, grace) for _, c in children), return_exceptions=True
            )
        finally:
            self._stopping = []
        return [key for key, _ in children]

    def kill_stopping(self) -> None:
        """No more grace (a second Ctrl-C): SIGKILL the children being stopped by
        `_stop_children`, and stop any it stops later at once."""
        self._kill_now = True
        for child in self._stopping:
            supervisor.kill(child.handle)

    async def detach(self) -> None:
        """Stop watching every child but leave them running (as an engine that dies would);
        a later controller on the same `state_dir` adopts them."""
        children = list(self._table.values())
        self._table.clear()
        for child in children:
            child.cancel_tasks()
            await asyncio.gather(*child.tasks, return_exceptions=True)

    def pids(self) -> dict[Key, int]:
        """(namespace, name) -> pid of every running child."""
        return {k: c.handle.pid for k, c in self._table.items() if c.exit is None}
