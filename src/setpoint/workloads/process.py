"""The `Process` kind (setpoint.dev/v1alpha1, namespaced, short name `proc`) and its controller:
one supervised local command, kept running as its spec says.

`spec`: `args` (argv, required), `env` and `envFrom` (values may come from Secrets: see
`setpoint.workloads.secret`), `envFile` (see `setpoint.workloads.env_files`), `cwd`, `user`,
`ports` (informational),
`restartPolicy` (Always | OnFailure | Never), `backoff` (`initialSeconds`, `maxSeconds`,
`resetAfterSeconds`), `terminationGracePeriodSeconds`, `stopSignal` (e.g. SIGINT for
PostgreSQL's fast shutdown), `startupProbe` / `readinessProbe` / `livenessProbe` (see
`setpoint.workloads.probes`), `dependsOn` (see `setpoint.workloads.dependencies`) and
`suspend`.
Every default is the schema's (`ProcessSpecSchema`); the controller reads the spec
through it.

`status`: `phase` (Pending, Waiting, Starting, Running, Succeeded, Failed,
CrashLoopBackOff, Suspended), `pid`, `startTime`, `restarts`, `lastExit` (`ExitSchema`:
code, signal, reason, finishedAt, and `stoppedOnRequest` / `stopReason` when the controller
stopped it), `nextStartAt` while backing off, `observedGeneration`, `envFiles` (each env file
the running child read, as last seen: `path`, `digest`, and `changedKeys`, what its last edit
changed; the controller looks at them every `ENV_FILE_LOOK_SECONDS`, says an edit in an
`EnvFileChanged` event, and does not restart the child for it: it reads them at its next
start; see `setpoint.workloads.env_file_watch`), conditions `Started` and `Ready`
(plus `Stalled` when the command cannot be started at all: reason `StartFailed`, or
`SecretMissing` while a Secret it needs is missing), and two fields the controller keeps
for itself: `startedGeneration` (the spec generation the child
runs) and `recentRestarts` (restarts since the child last ran `resetAfterSeconds`; it sets
the back-off).

Decisions, made by the pure `plan(desired, observed, now)`, which returns the child action,
the whole new status and the events to emit:

* restart policy: Always restarts after any exit; OnFailure after a non-zero (or
  unknown) exit; Never does not. A finished process runs again when its spec changes.
* crash-loop back-off: the first restart is immediate; each further one within
  `resetAfterSeconds` of the previous start waits `initialSeconds`, doubling up
  to `maxSeconds` (phase CrashLoopBackOff, `nextStartAt`).
* a spec change (a new generation) restarts the child with the new spec.
* a restart request (the annotation `setpoint.dev/restartedAt`, set by `setpoint restart`,
  differs from `status.restartedAt`, the request the child was started under) stops a
  running child and starts it again, or starts a finished one, whatever the restart policy
  and the back-off: once per new value (the start records it). Not counted in `restarts`.
* deletion (the finalizer `setpoint.dev/process`) stops the child, then lets the
  object go.
* `suspend: true` (as a Kubernetes Job's; `setpoint stop` sets it, `setpoint start`
  clears it) stops a running child and starts none, whatever the restart policy, the
  dependencies or a restart request: phase Suspended, `Ready=False` reason `Suspended`.
  Clearing it is a spec change: the child starts again (once its dependencies hold).
* a child the plan stops (deletion, a spec change, a failed liveness probe) is
  `Ready=False` *before* its stop signal is sent (reason `Terminating`, `Restarting` or
  `Stopping`, the stop's reason as message; its phase, pid and `observedGeneration`
  unchanged until it has exited), as
  Kubernetes takes a terminating pod out of its endpoints first: dependents and
  Services stop counting on a process that is shutting down.
* dependencies: a process whose `dependsOn` does not hold is not started (phase
  Waiting, `Ready=False`, reason `WaitingForDependency` naming it). A process
  already running when a dependency stops holding is *kept running* (stopping it
  would turn one failure into many, and it heals by itself when the dependency
  does) but reports `Ready=False`, reason `DependencyNotReady`, naming it.
* a liveness (or startup) probe failure stops the child, which then restarts as
  after a crash (restart policy and back-off apply); readiness only moves `Ready`.
* a start that fails: for a reason of the spec (no such command, no such directory) the
  Process is Failed and `Stalled` (reason `StartFailed`) until its spec changes; for a
  reason of the machine (an OS error: no space, no file descriptors, an unwritable state
  or log directory) or of an `envFile` (missing, unreadable, malformed) it stays Pending,
  `Ready=False` with reason `StartFailed` and the error, and is retried with back-off;
  for want of a Secret (one it refers to, or a key of it, is missing: `SecretMissing`; a
  value holds a NUL byte: `SecretInvalid`) it stays Pending and `Stalled` with that
  reason until the Secret changes, and is tried again then.
* a `user:` this engine may not run commands as (`setpoint.runtime.run_as.UserPolicy`: an
  engine that is not root cannot switch users; a root engine started with an allow-list
  runs only the users on it) starts nothing: the Process is Pending and `Stalled` (reason
  `UserNotAllowed`, or `UserUnknown` for no such user), reported once, until its spec or
  the engine's allow-list changes. A child of an earlier spec keeps running: a refused
  change of `user:` is not carried out (a child of the refused spec itself, adopted by an
  engine that allows fewer users, is stopped).

`ProcessController` (wired by `setup`) is a `ChildLifecycle` (`setpoint.workloads.children`,
shared with the Job controller): it observes the child (exits are learnt from the
supervisor and enqueue the object at once; children an earlier engine left running are
re-adopted, keeping the startup and readiness their status records until a probe says
otherwise; children whose objects are gone are stopped), runs the child's probes (an
exec probe as the child runs: as its user, with its environment and working directory; a
`logLine` readiness probe reads the child's log from where its run began, every
`LOG_LINE_LOOK_SECONDS`, until a line matches: then it is Ready for the rest of the run,
and an adopted child recorded Ready is not read again), and carries out the plan.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from setpoint.errors import Conflict, Error, Invalid
from setpoint.model import Object, Schema
from setpoint.model.conditions import READY, get_condition, set_condition
from setpoint.model.crd import list_set
from setpoint.model.redaction import redact
from setpoint.model.wellknown import PROCESS_FINALIZER
from setpoint.runtime.run_as import UserRefused, command_environment
from setpoint.workloads import children, supervisor
from setpoint.workloads.children import (
    ENVIRONMENT_BACKOFF,
    LAST_LINE_CHARS,
    Action,
    ChildDesired,
    ChildFacts,
    ChildKind,
    ChildLifecycle,
    ChildObserved,
    ChildSettings,
    CommandSchema,
    ExitSchema,
    Key,
    PlannedEvent,
    StopTurns,
    Supervised,
    backoff_delay,
    keep_observed_generation,
    stopping_reason,
    timestamp,
)
from setpoint.workloads.dependencies import DependsOn
from setpoint.workloads.env_file_watch import EnvFileSeen, EnvFileWatch, recorded_digests
from setpoint.workloads.kinds import PROCESS
from setpoint.workloads.probes import (
    LogLineScanner,
    Probe,
    Prober,
    ProbeResult,
    ProbeRole,
    ProbeRunner,
    check_probe_role,
    run_probe,
)
from setpoint.workloads.secret import ResolvedEnv

__all__ = [
    "FINALIZER",
    "PROCESS",
    "STARTED",
    "Action",
    "CrashLoopBackoffSchema",
    "Desired",
    "Observed",
    "Plan",
    "ProcessController",
    "ProcessSettings",
    "ProcessSpecSchema",
    "ProcessStatusSchema",
    "RecordedProbes",
    "desired_of",
    "observe",
    "plan",
    "recorded_probes",
    "setup",
]

FINALIZER = PROCESS_FINALIZER
MAX_CONCURRENT = 16
"""Processes reconciled at once (one key is never reconciled by two workers)."""
STARTED = "Started"
LOG_LINE_LOOK_SECONDS = 0.25
"""How often a `logLine` readiness probe reads the child's new output."""
ENV_FILE_LOOK_SECONDS = 1.0
"""How often a running child's env files are looked at for edits."""

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


class CrashLoopBackoffSchema(children.BackoffSchema):
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


class EnvFileStatusSchema(Schema):
    """One env file a running child read, as last seen (`setpoint.workloads.env_file_watch`)."""

    path: str
    digest: str
    changed_keys: list[str] = Field(default_factory=list)


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
    env_files: tuple[EnvFileSeen, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    """One step: `action` for `reason`. `wait_seconds` > 0: look again then (back-off).
    `phase` is the phase once applied (None: unchanged); `recent_restarts` the count to
    record; `counts_as_restart` whether `status.restarts` goes up. `status` is the whole
    new status (for a stop: the status while the child stops, `Ready=False`; the next
    look records the exit), `events` what to emit, `stall` (reason, message) when the
    Process cannot progress until its spec changes."""

    action: Action
    reason: str
    wait_seconds: float = 0.0
    phase: Phase | None = None
    recent_restarts: int = 0
    counts_as_restart: bool = False
    status: Mapping[str, Any] | None = None
    events: tuple[PlannedEvent, ...] = ()
    stall: tuple[str, str] | None = None


def desired_of(obj: Object) -> Desired:
    """The `Desired` of a Process object in wire form."""
    return ChildDesired.of(obj, ProcessSpecSchema)


def observe(
    status: Mapping[str, Any], facts: ChildFacts, unmet: str | None, now: float
) -> Observed:
    """The `Observed` of a Process from its stored status, what the lifecycle knows of its
    child, and its first unmet dependency. Pure."""
    child = facts.child
    counts = ProcessStatusSchema.model_validate(status)
    common = ChildObserved.common(status, facts, unmet, now)
    common.update(restarts=counts.restarts, recent_restarts=counts.recent_restarts)
    if not facts.running or child is None:
        return Observed(**common)
    return Observed(
        **common,
        started_at=child.handle.started_at,
        started=child.started,
        readiness=child.readiness,
        probe_message=child.probe_message,
        unhealthy=child.unhealthy,
        env_files=tuple(child.env_files.items()) if child.env_files is not None else (),
    )


def plan(desired: Desired, observed: Observed, now: float) -> Plan:
    """The next step for one Process: the child action, the new status and the events.
    Pure: no I/O; `now` in seconds, as `finished_at`."""
    step = _decide(desired, observed, now)
    events = list(observed.exit_events())
    if observed.refused is not None and step.action is Action.NOTHING and observed.running:
        return step  # the stored status describes the child that runs: it stays as it is
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
    if observed.running:
        status["pid"] = observed.pid
        if observed.env_files:
            status["envFiles"] = [seen.wire() for seen in observed.env_files]
        else:
            status.pop("envFiles", None)
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


# -- the controller -------------------------------------------------------------------


ProcessSettings: TypeAlias = ChildSettings
"""Where children's state files (`state_dir`) and logs (`log_dir`) live."""


class ProcessController(ChildLifecycle[ProcessSpecSchema, Plan]):
    """Keeps each Process's child running as its spec says (see the module docstring).

    `reconcile(request)` is the one entry point. `controller` must be set (by `attach`)
    before the manager runs, so that exits and probe results enqueue the object.
    """

    child_kind = ChildKind(PROCESS, FINALIZER, ProcessSpecSchema, observe, plan)

    # -- env files -------------------------------------------------------------------

    def _new_child(
        self,
        key: Key,
        obj: Object,
        spec: ProcessSpecSchema,
        handle: supervisor.Running | supervisor.Adopted,
        resolved: ResolvedEnv,
    ) -> Supervised:
        """The lifecycle's child, and for one with `envFile`s a watch of those files, from
        what the stored status last saw of them (an edit made while the child was down, or
        no engine ran, is noticed at once)."""
        child = super()._new_child(key, obj, spec, handle, resolved)
        if spec.env_file:
            recorded = recorded_digests(obj.get("status") or {})
            watch = EnvFileWatch(spec.env_file, os.environ, recorded)
            watch.look()
            child.env_files = watch
            self._wake(key)  # the status says what it read
            task = self._watch_env_files(key, child, watch)
            child.tasks.append(asyncio.create_task(task, name=f"envFile watch of {key}"))
        return child

    async def _watch_env_files(self, key: Key, child: Supervised, watch: EnvFileWatch) -> None:
        """Look at the child's env files every `ENV_FILE_LOOK_SECONDS`; an edit is written
        to the status (the recorder makes it a change of this Process) and said in an
        event. The child runs on as it is: it reads the files at its next start."""
        while True:
            await self.clock.sleep(ENV_FILE_LOOK_SECONDS)
            before = dict(watch.seen)
            if not watch.look():
                continue
            for seen in watch.items():
                was = before.get(seen.path)
                if was is not None and was.digest != seen.digest:
                    keys = ", ".join(seen.changed_keys) or "content"
                    message = f"envFile {seen.path} changed ({keys}); read at the next start"
                    await self.events.normal(child.ref, "EnvFileChanged", message)
            self._wake(key)

    # -- probes ----------------------------------------------------------------------

    def follow(
        self,
        key: Key,
        child: Supervised,
        spec: ProcessSpecSchema,
        recorded: Mapping[str, Any] | None,
    ) -> None:
        """Run the child's probes: the startup probe first, if there is one. An adopted child
        keeps what its stored status says of its probes (`recorded_probes`) until a probe
        says otherwise, as the kubelet keeps a running container's across its restart:
        an engine restart neither makes it unready nor re-runs a startup probe it passed."""
        recorded_state = None if recorded is None else recorded_probes(recorded)
        child.started = spec.startup_probe is None or (
            recorded_state is not None and recorded_state.started
        )
        if not child.started:
            assert spec.startup_probe is not None
            self._probe(key, child, spec, "startup", spec.startup_probe)
        else:
            self._probe_health(key, child, spec, recorded_state)

    def _probe_health(
        self,
        key: Key,
        child: Supervised,
        spec: ProcessSpecSchema,
        recorded: RecordedProbes | None = None,
    ) -> None:
        probe = spec.readiness_probe
        if probe is not None:
            child.readiness, child.probe_message = "Unknown", ""
            if recorded is not None:
                child.readiness, child.probe_message = recorded.readiness, recorded.message
            if probe.log_line is None:
                self._probe(key, child, spec, "readiness", probe)
            elif child.readiness != "Success":  # once matched, Ready for the rest of the run
                task = self._follow_log_line(key, child, spec, probe.log_line.pattern)
                child.tasks.append(asyncio.create_task(task, name=f"logLine probe of {key}"))
        if spec.liveness_probe is not None:
            self._probe(key, child, spec, "liveness", spec.liveness_probe)

    def _probe(
        self, key: Key, child: Supervised, spec: ProcessSpecSchema, role: ProbeRole, probe: Probe
    ) -> None:
        on_change = functools.partial(self._on_probe, key, child, spec, role)
        # An exec probe runs as the child does: as its user, with its environment (the
        # same base, its env, envFrom and envFile resolved) and its working directory; and
        # never as a user this engine may not use (a spec changed while no engine ran).
        runner: ProbeRunner
        try:
            account = self.settings.users.account(spec.user)
        except UserRefused as exc:
            runner = functools.partial(_cannot_run, str(exc))
        else:
            env = command_environment(account, child.env)
            runner = functools.partial(run_probe, env=env, cwd=spec.cwd, account=account)
        prober = Prober(probe, self.clock, on_change, runner=runner)
        child.tasks.append(asyncio.create_task(prober.run(), name=f"{role} probe of {key}"))

    async def _follow_log_line(
        self, key: Key, child: Supervised, spec: ProcessSpecSchema, pattern: str
    ) -> None:
        """Look at the child's output every `LOG_LINE_LOOK_SECONDS`, from where its run
        began (also for a child adopted from an earlier engine), until a line matches
        `pattern`: then it is Ready (`ReadinessProbeSucceeded`, the line as message) until
        it next starts."""
        start = child.handle.log_start
        if start is not None:
            scanner = LogLineScanner(pattern, start.path, start.backups, start.inode, start.offset)
        else:  # an earlier version's child: from its output to come
            path = self.log_dir / f"{child.handle.name}.log"
            scanner = LogLineScanner(pattern, path, supervisor.DEFAULT_LOG_BACKUPS, None)
        while (line := scanner.look()) is None:
            await self.clock.sleep(LOG_LINE_LOOK_SECONDS)
        message = f"matched: {line.strip()[:LAST_LINE_CHARS]}"
        await self._on_probe(key, child, spec, "readiness", "Success", message)

    async def _on_probe(
        self,
        key: Key,
        child: Supervised,
        spec: ProcessSpecSchema,
        role: ProbeRole,
        result: ProbeResult,
        message: str,
    ) -> None:
        if self._table.get(key) is not child or not child.running:
            return
        message = redact(message, child.secret_values)  # an exec probe's output, quoted
        if role == "startup":
            if result == "Success":
                child.started = True
                self._probe_health(key, child, spec)
            elif result == "Failure":
                child.unhealthy = f"startup probe failed: {message}"
        elif role == "liveness" and result == "Failure":
            child.unhealthy = f"liveness probe failed: {message}"
        elif role == "readiness":
            child.readiness = result
            child.probe_message = message
        if result == "Failure":
            await self.events.warning(child.ref, "Unhealthy", f"{role} probe failed: {message}")
        self._wake(key)

    # -- whole-table operations ----------------------------------------------------------

    async def stop_all(self, grace: float | None = None, turns: StopTurns | None = None) -> None:
        """Stop every child this controller supervises (for a full shutdown; each when
        `turns` says), and record in each status that it was stopped with the engine, so the
        next engine starts it afresh (no restart counted, no back-off) rather than as a child
        that died unseen."""
        for namespace, name in await self._stop_children(grace, turns):
            with contextlib.suppress(Error):
                await self._mark_stopped(namespace, name)

    async def _mark_stopped(self, namespace: str, name: str) -> None:
        for _ in range(3):
            obj = await self.store.get(PROCESS.api_version, PROCESS.kind, name, namespace)
            status = dict(obj.get("status") or {})
            for field_ in ("pid", "startTime", "startedGeneration", "lastExit", "nextStartAt"):
                status.pop(field_, None)
            status["phase"] = "Pending"
            status["recentRestarts"] = 0
            now = self.clock.now()
            for type_ in (STARTED, READY):
                set_condition(status, type_, False, reason="EngineStopped",
                              message="stopped with the engine", now=now)  # fmt: skip
            obj["status"] = status
            try:
                await self.store.update_status(obj)
                return
            except Conflict:
                continue


async def _cannot_run(message: str, probe: Probe) -> tuple[bool, str]:
    """A probe runner for a probe that cannot be run (`message` says why): it fails."""
    return False, message


setup = ProcessController.setup
"""Add the Process controller to `manager`; return the controller (`ChildLifecycle.setup`)."""
