"""The Process's plan, pure: its schemas, what it observes and `plan(desired, observed,
now)`, which says what to do with its child (start, stop, restart, wait, nothing), the
whole new status and the events. No I/O, no clock (`setpoint.workloads.process` is the
controller that carries it out).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from setpoint.errors import Invalid
from setpoint.model import Object, Schema
from setpoint.model.conditions import READY, get_condition, set_condition
from setpoint.model.crd import list_set
from setpoint.runtime.plan import PlannedEvent, timestamp
from setpoint.workloads.child_plan import (
    ENVIRONMENT_BACKOFF,
    Action,
    BackoffSchema,
    ChildDesired,
    ChildObserved,
    ChildPlan,
    CommandSchema,
    EnvFileStatusSchema,
    ExitSchema,
    backoff_delay,
    keep_observed_generation,
    plan_child,
    record_env_files,
    stopping_reason,
)
from setpoint.workloads.depends_on import DependsOn
from setpoint.workloads.probe_schema import Probe, ProbeResult, ProbeRole, check_probe_role

STARTED = "Started"
RestartPolicy = Literal["Always", "OnFailure", "Never"]
Phase = Literal[
    "Pending",
    "Waiting",
    "Starting",
    "Running",
    "Succeeded",
    "Failed",
    "CrashLoopBackOff",
    "Suspended",
]

# -- the kind ------------------------------------------------------------------------


class CrashLoopBackoffSchema(BackoffSchema):
    """Crash-loop back-off: `initialSeconds` doubling to `maxSeconds`; a run of
    `resetAfterSeconds` forgets earlier crashes."""

    reset_after_seconds: float = Field(default=600.0, ge=0)


class ProcessSpecSchema(CommandSchema):
    """What to run, how to restart it, how to tell it is healthy, and what it waits for."""

    ports: list[int] = Field(default_factory=list, json_schema_extra=list_set())
    restart_policy: RestartPolicy = "Always"
    backoff: CrashLoopBackoffSchema = Field(default_factory=CrashLoopBackoffSchema)
    startup_probe: Probe | None = None
    readiness_probe: Probe | None = None
    liveness_probe: Probe | None = None
    depends_on: DependsOn = Field(default_factory=list)
    suspend: bool = False

    @model_validator(mode="after")
    def _check(self) -> ProcessSpecSchema:
        for port in self.ports:
            if not 1 <= port <= 65535:
                raise PydanticCustomError("port", "ports: {port} is not in 1-65535", {"port": port})
        roles: tuple[tuple[ProbeRole, Probe | None, str], ...] = (
            ("startup", self.startup_probe, "startupProbe"),
            ("liveness", self.liveness_probe, "livenessProbe"),
        )
        for role, probe, name in roles:
            if probe is not None:
                try:
                    check_probe_role(probe, role, name)
                except Invalid as exc:
                    raise PydanticCustomError("probe_role", "{msg}", {"msg": str(exc)}) from None
        return self


class ProcessStatusSchema(Schema):
    """What the controller observed (see the module docstring)."""

    phase: Phase | None = None
    pid: int | None = None
    start_time: str | None = None
    restarts: int = 0
    last_exit: ExitSchema | None = None
    next_start_at: str | None = None
    observed_generation: int | None = None
    started_generation: int | None = None
    restarted_at: str | None = None
    recent_restarts: int = 0
    env_files: list[EnvFileStatusSchema] | None = None
    conditions: list[dict[str, Any]] = Field(default_factory=list)


# -- plan (pure) ----------------------------------------------------------------------


Desired: TypeAlias = ChildDesired[ProcessSpecSchema]
"""What a Process asks for: a `ChildDesired` (generation, spec, deleting) of its spec."""


@dataclass(frozen=True, slots=True)
class Observed(ChildObserved):
    """What is, as far as the plan cares (`ChildObserved`), and of a running child:
    `started_at`, what its probes say (`started`, `readiness`, `probe_message`) and
    `unhealthy`, why a liveness or startup probe says to restart it; `restarts` and
    `recent_restarts` (the restarts the back-off counts) as the status records them."""

    started_at: float | None = None
    restarts: int = 0
    recent_restarts: int = 0
    started: bool = True
    readiness: ProbeResult | None = None
    probe_message: str = ""
    unhealthy: str | None = None


@dataclass(frozen=True, slots=True)
class Plan(ChildPlan):
    """One step: `action` for `reason` (`ChildPlan`). `wait_seconds` > 0: look again then
    (back-off; the plan's `requeue_after`). `phase` is the phase once applied (None:
    unchanged); `recent_restarts` the count to record; `counts_as_restart` whether
    `status.restarts` goes up. `status` is the whole new status (for a stop: the status
    while the child stops, `Ready=False`; the next look records the exit), `events` what
    to emit, `stall` (reason, message) when the Process cannot progress until its spec
    changes."""

    phase: Phase | None = None
    recent_restarts: int = 0
    counts_as_restart: bool = False


def desired_of(obj: Object) -> Desired:
    """The `Desired` of a Process object in wire form."""
    return ChildDesired.of(obj, ProcessSpecSchema)


def plan(desired: Desired, observed: Observed, now: float) -> Plan:
    """The next step for one Process: the child action, the new status and the events.
    Pure: no I/O; `now` in seconds, as `finished_at`."""
    return plan_child(_decide, _finish, desired, observed, now)


def _finish(
    desired: Desired, observed: Observed, step: Plan, events: list[PlannedEvent], now: float
) -> Plan:
    """`step` with its whole status and its events (after `events`)."""
    if step.action in (Action.STOP, Action.RESTART):
        events.append(PlannedEvent("Killing", f"stopping: {step.reason}"))
        status = _status(desired, observed, step, now)
        keep_observed_generation(status, observed.status)
        stopping = stopping_reason(step.action, desired.deleting)
        set_condition(status, READY, False, reason=stopping, message=step.reason, now=now,
                      observed_generation=desired.generation)  # fmt: skip
        return dataclasses.replace(step, status=status, events=tuple(events))
    if (
        step.phase == "CrashLoopBackOff"
        and step.action is Action.WAIT
        and (observed.exit_is_new or observed.status.get("phase") != "CrashLoopBackOff")
    ):
        events.append(PlannedEvent("BackOff", step.reason, warning=True))
    return dataclasses.replace(
        step, status=_status(desired, observed, step, now), events=tuple(events)
    )


_RESTART_REQUESTED = "a restart was requested (setpoint restart)"
SUSPENDED = "suspended (spec.suspend; setpoint start resumes it)"


def _decide(desired: Desired, observed: Observed, now: float) -> Plan:
    """The child action, phase and back-off of the next step."""
    recent = observed.recent_restarts
    if desired.deleting:
        if observed.running:
            return Plan(
                Action.STOP, "the object is being deleted", phase="Running", recent_restarts=recent
            )
        return Plan(Action.NOTHING, "stopped; the object can go", recent_restarts=recent)
    if desired.spec.suspend:
        if observed.running:
            return Plan(Action.STOP, SUSPENDED, phase="Running", recent_restarts=recent)
        return Plan(Action.NOTHING, SUSPENDED, phase="Suspended", recent_restarts=recent)
    if observed.refused is not None:
        return _refused(desired, observed)
    restart = desired.restart_requested(observed.status)
    if observed.running:
        if observed.generation is not None and observed.generation != desired.generation:
            return Plan(
                Action.RESTART,
                f"the spec changed (generation {observed.generation} -> {desired.generation})",
                phase="Running",
            )
        if restart:
            return Plan(Action.RESTART, _RESTART_REQUESTED, phase="Running")
        if observed.unhealthy is not None:
            # Stopped like a crash: whether and when it starts again is the restart
            # policy's and the back-off's to say, on the next look.
            return Plan(Action.STOP, observed.unhealthy, phase="Running", recent_restarts=recent)
        return Plan(Action.NOTHING, "running", phase="Running", recent_restarts=recent)
    failure = observed.start_failure
    if failure is not None and failure.generation == desired.generation:
        if failure.secret_reason is not None:
            stall = (failure.secret_reason, failure.message)
            return Plan(
                Action.NOTHING,
                failure.message,
                phase="Pending",
                recent_restarts=recent,
                stall=stall,
            )
        if not failure.transient:
            stall = ("StartFailed", failure.message)
            return Plan(
                Action.NOTHING, failure.message, phase="Failed", recent_restarts=recent, stall=stall
            )
        remaining = failure.at + backoff_delay(failure.count, ENVIRONMENT_BACKOFF) - now
        if remaining > 0:
            return Plan(
                Action.WAIT,
                failure.message,
                wait_seconds=remaining,
                phase="Pending",
                recent_restarts=recent,
            )
    spec_changed = observed.generation is not None and observed.generation != desired.generation
    exit_ = observed.last_exit
    if exit_ is None or spec_changed or restart:
        if observed.unmet is not None:
            return Plan(Action.WAIT, observed.unmet, phase="Waiting")
        why = "not running"
        if exit_ is not None:
            why = "the spec changed" if spec_changed else _RESTART_REQUESTED
        return Plan(Action.START, why, phase="Running")
    policy = desired.spec.restart_policy
    if policy == "Never" or (policy == "OnFailure" and exit_.succeeded):
        return Plan(
            Action.NOTHING,
            f"{exit_.reason}; restartPolicy is {policy}",
            phase="Succeeded" if exit_.succeeded else "Failed",
            recent_restarts=recent,
        )
    backoff = desired.spec.backoff
    if exit_.ran_for is not None and exit_.ran_for >= backoff.reset_after_seconds:
        recent = 0
    if observed.unmet is not None:
        return Plan(Action.WAIT, observed.unmet, phase="Waiting", recent_restarts=recent)
    delay = backoff_delay(recent, backoff)
    remaining = exit_.finished_at + delay - now
    if remaining > 0:
        return Plan(
            Action.WAIT,
            f"back-off {delay:g}s restarting failed process ({exit_.reason})",
            wait_seconds=remaining,
            phase="CrashLoopBackOff",
            recent_restarts=recent,
        )
    return Plan(
        Action.START,
        f"restarting: {exit_.reason}",
        phase="Running",
        recent_restarts=recent + 1,
        counts_as_restart=True,
    )


def _refused(desired: Desired, observed: Observed) -> Plan:
    """The step when this engine may not run the spec's command as its `user:`: nothing
    is started, and the Process is `Stalled` with the refusal's reason until its spec (or
    the engine's allow-list) changes. A child of an earlier spec keeps running (the refused
    change is not carried out); a child of this very spec (adopted by an engine that
    allows fewer users than the one that started it) is stopped."""
    assert observed.refused is not None
    message = observed.refused[1]
    recent = observed.recent_restarts
    if observed.running and observed.generation == desired.generation:
        return Plan(Action.STOP, message, phase="Running", recent_restarts=recent)
    phase: Phase | None = None if observed.running else "Pending"
    return Plan(Action.NOTHING, message, phase=phase, recent_restarts=recent,
                stall=observed.refused)  # fmt: skip


def _status(desired: Desired, observed: Observed, step: Plan, now: float) -> dict[str, Any]:
    """The whole new status once `step` is carried out. A child it starts gets its `pid`
    and `startTime` from the lifecycle, which alone learns them."""
    status = copy.deepcopy(dict(observed.status))
    generation = desired.generation
    if observed.exit_is_new and observed.last_exit is not None:
        status["lastExit"] = observed.last_exit.wire()
    spec = desired.spec
    starting = step.action is Action.START
    started, readiness, probe_message = observed.started, observed.readiness, observed.probe_message
    record_env_files(status, observed.env_files if observed.running else None)
    if observed.running:
        status["pid"] = observed.pid
        if observed.started_at is not None:
            status["startTime"] = timestamp(observed.started_at)
        status["startedGeneration"] = observed.generation
    else:
        status.pop("pid", None)
    if starting:
        status.pop("startTime", None)
        status["startedGeneration"] = generation
        desired.record_start(status)
        started = spec.startup_probe is None
        readiness = "Unknown" if started and spec.readiness_probe is not None else None
        probe_message = ""
    running = observed.running or starting
    phase = step.phase or status.get("phase") or "Pending"
    if running and not started:
        phase = "Starting"
    status["phase"] = phase
    status["observedGeneration"] = generation
    status["recentRestarts"] = step.recent_restarts
    status["restarts"] = observed.restarts + (1 if step.counts_as_restart else 0)
    if step.wait_seconds > 0 and not running:
        status["nextStartAt"] = timestamp(now + step.wait_seconds)
    else:
        status.pop("nextStartAt", None)
    conditions = _conditions(
        phase, running, started, readiness, probe_message, observed.unmet, step.reason
    )
    log_line = spec.readiness_probe.log_line if spec.readiness_probe is not None else None
    if log_line is not None and conditions.ready[1] == "ReadinessProbePending":
        waiting = f"waiting for a line of its output to match: {log_line.pattern}"
        conditions = _Conditions(conditions.started, (False, "ReadinessProbePending", waiting))
    failure = observed.start_failure
    if not running and failure is not None and failure.generation == generation:
        failed = (False, failure.reason, failure.message)
        conditions = _Conditions(failed, failed)
    if not running and observed.refused is not None and phase != "Suspended":
        refused = (False, *observed.refused)
        conditions = _Conditions(refused, refused)
    for type_, (value, reason, message) in (
        (STARTED, conditions.started),
        (READY, conditions.ready),
    ):
        set_condition(
            status,
            type_,
            value,
            reason=reason,
            message=message,
            now=now,
            observed_generation=generation,
        )
    return status


@dataclass(frozen=True, slots=True)
class _Conditions:
    started: tuple[bool, str, str]
    ready: tuple[bool, str, str]


def _conditions(
    phase: str,
    running: bool,
    started: bool,
    readiness: ProbeResult | None,
    probe_message: str,
    unmet_message: str | None,
    reason: str,
) -> _Conditions:
    """`Started` and `Ready` as (status, reason, message). Pure."""
    if not running:
        not_started = (False, "NotRunning", reason)
        if phase == "Waiting":
            return _Conditions(not_started, (False, "WaitingForDependency", reason))
        if phase == "CrashLoopBackOff":
            return _Conditions(not_started, (False, "CrashLoopBackOff", reason))
        if phase == "Succeeded":
            return _Conditions(not_started, (False, "Completed", reason))
        if phase == "Failed":
            return _Conditions(not_started, (False, "Failed", reason))
        if phase == "Suspended":
            return _Conditions(not_started, (False, "Suspended", reason))
        return _Conditions(not_started, (False, "NotRunning", reason))
    if not started:
        pending = "the startup probe has not succeeded yet"
        return _Conditions((False, "StartupProbePending", pending), (False, "NotStarted", pending))
    up = (True, "Started", "running")
    if unmet_message is not None:
        return _Conditions(up, (False, "DependencyNotReady", unmet_message))
    if readiness is None:
        return _Conditions(up, (True, "Running", "running; no readiness probe"))
    if readiness == "Success":
        return _Conditions(up, (True, "ReadinessProbeSucceeded", probe_message))
    if readiness == "Failure":
        return _Conditions(up, (False, "ReadinessProbeFailed", probe_message))
    return _Conditions(up, (False, "ReadinessProbePending", "waiting for the readiness probe"))


@dataclass(frozen=True, slots=True)
class RecordedProbes:
    """What a stored status says of a running child's probes: whether its startup probe
    has succeeded (`started`), and its readiness with the probe's message."""

    started: bool
    readiness: ProbeResult
    message: str


_READINESS_OF_REASON: Mapping[str, ProbeResult] = {
    "ReadinessProbeSucceeded": "Success",
    "ReadinessProbeFailed": "Failure",
}


def recorded_probes(status: Mapping[str, Any]) -> RecordedProbes:
    """What `status` (as `_conditions` wrote it) records of its child's probes; `Unknown`
    readiness where the `Ready` condition says nothing of the probe. Pure."""
    started = get_condition(status, STARTED) or {}
    ready = get_condition(status, READY) or {}
    readiness = _READINESS_OF_REASON.get(str(ready.get("reason")), "Unknown")
    message = str(ready.get("message") or "") if readiness != "Unknown" else ""
    return RecordedProbes(started.get("status") == "True", readiness, message)
