"""What the child lifecycle knows of each object's child, and what the kinds make of it.

`Supervised` is one entry of the lifecycle's table (`setpoint.workloads.children`): a child's
handle, the generation it runs, how to stop it, how it ended, and what its probes, memory
watchdog and env-file watch say. `ChildFacts` is what one look gathers for the kind's pure
`observe` (the child in the table, an end not yet recorded, a failed start, a refused
`user:`); `observed_fields` is the part of that `observe` Process and Job share (pure).
`ChildKind` is what makes the lifecycle a Process or a Job controller: the kind and its two
pure functions over these facts. The lifecycle does the I/O; nothing here starts, stops
or watches a child.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from setpoint.model import Kind, Object
from setpoint.runtime.plan import parse_time
from setpoint.workloads import supervisor
from setpoint.workloads.child_plan import (
    ChildDesired,
    ChildExit,
    ChildObserved,
    ChildPlan,
    CommandSchema,
    StartFailure,
)
from setpoint.workloads.env_file_watch import EnvFileWatch
from setpoint.workloads.memory import MemoryWatch

__all__ = ["ChildFacts", "ChildKind", "Key", "Supervised", "observed_fields"]

Key = tuple[str, str]
"""(namespace, name) of the object a child belongs to."""


@dataclass(eq=False)
class Supervised:
    """One supervised child in a controller's table: its handle, the spec generation it
    runs, how to stop it, how it ended once it has, and (for a Process) what its probes
    say."""

    handle: supervisor.Running | supervisor.Adopted
    generation: int
    grace: float
    """Seconds between the stop signal and SIGKILL (`terminationGracePeriodSeconds`)."""
    stop_signal: int
    exit: supervisor.Exit | None = None
    finished_at: float | None = None
    stop_reason: str | None = None
    cleaned: bool = False
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    ref: Object = field(default_factory=dict)
    """The object's reference, for events the child's probes emit."""
    started: bool = True
    """False until the startup probe has succeeded (no startup probe: True)."""
    readiness: Literal["Unknown", "Success", "Failure"] | None = None
    probe_message: str = ""
    unhealthy: str | None = None
    """Why a liveness or startup probe says to restart it."""
    env: Mapping[str, str] = field(default_factory=dict)
    """The environment it was started with (`env` and `envFrom`, Secrets' values resolved)."""
    secret_values: frozenset[str] = frozenset()
    """The values from Secrets in its environment: masked in what is quoted of its output."""
    memory: MemoryWatch | None = None
    """Its memory limit's watchdog (None: no `resources.limits.memory`)."""
    env_files: EnvFileWatch | None = None
    """What its env files were last seen to hold (None: it has none)."""

    @property
    def running(self) -> bool:
        return self.exit is None

    def cancel_tasks(self) -> None:
        for task in self.tasks:
            task.cancel()


@dataclass(frozen=True, slots=True)
class ChildFacts:
    """What the lifecycle knows of an object's child, for the kind's `decide`.

    `child` is the one in the table (running, or ended and not yet recorded); `ended` how a
    child ended whose end the status does not record yet (it exited, was stopped, or ended
    while no engine watched it); `start_failure` the last failed start, if the start since
    has not succeeded; `refused` why the spec's `user:` is refused."""

    child: Supervised | None = None
    ended: ChildExit | None = None
    start_failure: StartFailure | None = None
    refused: tuple[str, str] | None = None
    """(reason, message) when this engine may not run the spec's command as its `user:`
    (`setpoint.runtime.run_as.UserPolicy`)."""

    @property
    def running(self) -> bool:
        return self.child is not None and self.child.running


def observed_fields(
    status: Mapping[str, Any], facts: ChildFacts, unmet: str | None, now: float
) -> dict[str, Any]:
    """The fields of a `ChildObserved` from a stored status, what the lifecycle knows of
    the child (`facts`), and the first unmet dependency. Pure."""
    child = facts.child
    if facts.running and child is not None:
        env_files = () if child.env_files is None else tuple(child.env_files.items())
        return {
            "running": True, "generation": child.generation, "pid": child.handle.pid,
            "unmet": unmet, "start_failure": facts.start_failure, "status": status,
            "refused": facts.refused, "env_files": env_files,
        }  # fmt: skip
    started_at = parse_time(status.get("startTime"))
    last = facts.ended
    if last is not None and last.started_at is None:
        last = dataclasses.replace(last, started_at=started_at)
    if last is None:
        last = ChildExit.from_wire(status.get("lastExit"), started_at=started_at, now=now)
    generation = status.get("startedGeneration")
    return {
        "generation": None if generation is None else int(generation),
        "last_exit": last, "exit_is_new": facts.ended is not None, "unmet": unmet,
        "start_failure": facts.start_failure, "status": status, "refused": facts.refused,
    }  # fmt: skip


S = TypeVar("S", bound=CommandSchema)
ObservedT = TypeVar("ObservedT", bound=ChildObserved)
P = TypeVar("P", bound=ChildPlan)


@dataclass(frozen=True)
class ChildKind(Generic[S, ObservedT, P]):
    """What makes a `ChildLifecycle` a Process or a Job controller: the `kind`, its
    `finalizer`, its `spec_schema`, and its two pure functions: `observe(status, facts,
    unmet, now)` (the stored status, what the lifecycle knows of the child and the first
    unmet dependency, as the plan's input) and `plan(desired, observed, now)`."""

    kind: Kind
    finalizer: str
    spec_schema: type[S]
    observe: Callable[[Mapping[str, Any], ChildFacts, str | None, float], ObservedT]
    plan: Callable[[ChildDesired[S], ObservedT, float], P]
