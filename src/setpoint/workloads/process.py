"""The `Process` kind (setpoint.dev/v1alpha1, namespaced, short name `proc`) and its controller:
one supervised local command, kept running as its spec says.

`spec`: `args` (argv, required), `env`, `cwd`, `user`, `ports` (informational),
`restartPolicy` (Always | OnFailure | Never), `backoff` (`initialSeconds` 10,
`maxSeconds` 300, `resetAfterSeconds` 600), `terminationGracePeriodSeconds` 30, `stopSignal`
(SIGTERM; e.g. SIGINT for PostgreSQL's fast shutdown),
`startupProbe` / `readinessProbe` / `livenessProbe` (see `setpoint.workloads.probes`)
and `dependsOn` (see `setpoint.workloads.dependencies`).

`status`: `phase` (Pending, Waiting, Starting, Running, Succeeded, Failed,
CrashLoopBackOff), `pid`, `startTime`, `restarts`, `lastExit` {code, signal, reason,
finishedAt}, `nextStartAt` while backing off, `observedGeneration`, conditions
`Started` and `Ready` (plus `Stalled` when the command cannot be started at all:
reason `StartFailed`), and two fields the controller keeps for itself:
`startedGeneration` (the spec generation the child runs) and `recentRestarts`
(restarts since the child last ran `resetAfterSeconds`; it sets the back-off).

Decisions, made by the pure `plan(desired, observed, now)`:

* restart policy: Always restarts after any exit; OnFailure after a non-zero (or
  unknown) exit; Never does not. A finished process runs again when its spec changes.
* crash-loop back-off: the first restart is immediate; each further one within
  `resetAfterSeconds` of the previous start waits `initialSeconds`, doubling up
  to `maxSeconds` (phase CrashLoopBackOff, `nextStartAt`).
* a spec change (a new generation) restarts the child with the new spec.
* deletion (the finalizer `setpoint.dev/process`) stops the child, then lets the
  object go.
* dependencies: a process whose `dependsOn` does not hold is not started (phase
  Waiting, `Ready=False`, reason `WaitingForDependency` naming it). A process
  already running when a dependency stops holding is *kept running* (stopping it
  would turn one failure into many, and it heals by itself when the dependency
  does) but reports `Ready=False`, reason `DependencyNotReady`, naming it.
* a liveness (or startup) probe failure stops the child, which then restarts as
  after a crash (restart policy and back-off apply); readiness only moves `Ready`.

The controller (`ProcessController`, wired by `setup`) observes an in-memory table
of the children it supervises plus the object's status, plans, and applies through
`setpoint.workloads.supervisor`. A child's exit is learnt from the supervisor's exit
notification and enqueues the object at once. On startup it re-adopts children an
earlier engine left running (`find_adoptable`) instead of starting them again, stops
children whose objects are gone, and removes stray state files.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Conflict, Error, Invalid, NotFound, TerminalError, UnknownKind
from setpoint.model import READY, Object, PrinterColumn, Schema, register_kind, set_condition
from setpoint.model.fields import EnvName, OsString
from setpoint.runtime.controller import Controller
from setpoint.runtime.events import EventRecorder
from setpoint.runtime.lifecycle import add_finalizer, is_deleting, remove_finalizer
from setpoint.runtime.manager import Manager
from setpoint.runtime.predicates import generation_changed
from setpoint.runtime.reconciler import Request, Result
from setpoint.store import Store
from setpoint.workloads import supervisor
from setpoint.workloads.children import (
    ChildTable,
    Key,
    StopSignal,
    Supervised,
    parse_time,
    record_exit,
    stop_settings,
    timestamp,
)
from setpoint.workloads.dependencies import (
    DEPENDS_ON_INDEX,
    Dependency,
    dependency_keys,
    dependents_of,
    unmet_in_store,
)
from setpoint.workloads.probes import (
    Probe,
    Prober,
    ProbeResult,
    ProbeRole,
    check_probe_role,
    load_probe,
    run_probe,
)

__all__ = [
    "FINALIZER",
    "PROCESS",
    "STARTED",
    "Action",
    "BackoffSchema",
    "BackoffSettings",
    "Desired",
    "LastExit",
    "LastExitSchema",
    "Observed",
    "Plan",
    "ProcessController",
    "ProcessSettings",
    "ProcessSpecSchema",
    "ProcessStatusSchema",
    "backoff_delay",
    "desired_of",
    "plan",
    "setup",
    "supervisor_name",
]

log = logging.getLogger("setpoint.process")

FINALIZER = "setpoint.dev/process"
MAX_CONCURRENT = 16
"""Processes reconciled at once (one key is never reconciled by two workers)."""
STARTED = "Started"

RestartPolicy = Literal["Always", "OnFailure", "Never"]
Phase = Literal[
    "Pending", "Waiting", "Starting", "Running", "Succeeded", "Failed", "CrashLoopBackOff"
]

# -- the kind ------------------------------------------------------------------------


class BackoffSchema(Schema):
    """Crash-loop back-off: `initialSeconds` doubling to `maxSeconds`; a run of
    `resetAfterSeconds` forgets earlier crashes."""

    initial_seconds: float = Field(default=10.0, gt=0)
    max_seconds: float = Field(default=300.0, gt=0)
    reset_after_seconds: float = Field(default=600.0, ge=0)


class ProcessSpecSchema(Schema):
    """What to run, how to restart it, how to tell it is healthy, and what it waits for."""

    args: list[OsString] = Field(min_length=1)
    env: dict[EnvName, OsString] = Field(default_factory=dict)
    cwd: OsString | None = None
    user: OsString | None = None
    ports: list[int] = Field(default_factory=list)
    restart_policy: RestartPolicy = "Always"
    backoff: BackoffSchema = Field(default_factory=BackoffSchema)
    termination_grace_period_seconds: float = Field(default=30.0, ge=0)
    stop_signal: StopSignal = "SIGTERM"
    startup_probe: Probe | None = None
    readiness_probe: Probe | None = None
    liveness_probe: Probe | None = None
    depends_on: list[Dependency] = Field(default_factory=list)

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


class LastExitSchema(Schema):
    """How the last child ended: `code` if it exited, `signal` if a signal killed it."""

    code: int | None = None
    signal: int | None = None
    reason: str = ""
    finished_at: str | None = None


class ProcessStatusSchema(Schema):
    """What the controller observed (see the module docstring)."""

    phase: Phase | None = None
    pid: int | None = None
    start_time: str | None = None
    restarts: int = 0
    last_exit: LastExitSchema | None = None
    next_start_at: str | None = None
    observed_generation: int | None = None
    started_generation: int | None = None
    recent_restarts: int = 0
    conditions: list[dict[str, Any]] = Field(default_factory=list)


PROCESS = register_kind(
    "setpoint.dev/v1alpha1",
    "Process",
    spec=ProcessSpecSchema,
    status=ProcessStatusSchema,
    namespaced=True,
    plural="processes",
    short_names=("proc",),
    columns=(
        PrinterColumn("PHASE", "status.phase"),
        PrinterColumn("RESTARTS", "status.restarts"),
        PrinterColumn("PID", "status.pid"),
    ),
)
"""The `Process` kind."""


# -- plan (pure) ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BackoffSettings:
    """Crash-loop back-off, in seconds (`spec.backoff`)."""

    initial: float = 10.0
    maximum: float = 300.0
    reset_after: float = 600.0


def backoff_delay(recent_restarts: int, settings: BackoffSettings) -> float:
    """Seconds to wait before the next restart, after `recent_restarts` restarts in a row:
    0 for the first, then `initial`, doubling, capped at `maximum`."""
    if recent_restarts <= 0:
        return 0.0
    return float(min(settings.maximum, settings.initial * 2.0 ** min(recent_restarts - 1, 60)))


@dataclass(frozen=True, slots=True)
class Desired:
    """What the object asks for, as far as the plan cares."""

    generation: int
    restart_policy: RestartPolicy = "Always"
    backoff: BackoffSettings = BackoffSettings()
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class LastExit:
    """How the last child ended. `ran_for` is None when its start time is unknown."""

    code: int | None
    signal: int | None
    reason: str
    finished_at: float
    ran_for: float | None = None

    @property
    def succeeded(self) -> bool:
        return self.code == 0


@dataclass(frozen=True, slots=True)
class Observed:
    """What is, as far as the plan cares.

    `generation` is the spec generation of the running child (or of the last one, when
    none runs); `last_exit` how the last child ended (None when none ran, or one runs);
    `unhealthy` why a liveness or startup probe says to restart; `unmet` the message of
    the first dependency that does not hold.
    """

    running: bool = False
    generation: int | None = None
    last_exit: LastExit | None = None
    recent_restarts: int = 0
    unhealthy: str | None = None
    unmet: str | None = None


class Action(StrEnum):
    START = "start"
    STOP = "stop"
    RESTART = "restart"
    WAIT = "wait"
    NOTHING = "nothing"


@dataclass(frozen=True, slots=True)
class Plan:
    """One step: `action` for `reason`. `wait_seconds` > 0: look again then (back-off).
    `phase` is the phase once applied (None: unchanged); `recent_restarts` the count to
    record; `counts_as_restart` whether `status.restarts` goes up."""

    action: Action
    reason: str
    wait_seconds: float = 0.0
    phase: Phase | None = None
    recent_restarts: int = 0
    counts_as_restart: bool = False


def plan(desired: Desired, observed: Observed, now: float) -> Plan:
    """The next step for one Process. Pure: no I/O; `now` in seconds, as `finished_at`."""
    recent = observed.recent_restarts
    if desired.deleting:
        if observed.running:
            return Plan(Action.STOP, "the object is being deleted", recent_restarts=recent)
        return Plan(Action.NOTHING, "stopped; the object can go", recent_restarts=recent)
    if observed.running:
        if observed.generation is not None and observed.generation != desired.generation:
            return Plan(
                Action.RESTART,
                f"the spec changed (generation {observed.generation} -> {desired.generation})",
                phase="Running",
            )
        if observed.unhealthy is not None:
            # Stopped like a crash: whether and when it starts again is the restart
            # policy's and the back-off's to say, on the next look.
            return Plan(Action.STOP, observed.unhealthy, phase="Running", recent_restarts=recent)
        return Plan(Action.NOTHING, "running", phase="Running", recent_restarts=recent)
    spec_changed = observed.generation is not None and observed.generation != desired.generation
    exit_ = observed.last_exit
    if exit_ is None or spec_changed:
        if observed.unmet is not None:
            return Plan(Action.WAIT, observed.unmet, phase="Waiting")
        why = "the spec changed" if exit_ is not None else "not running"
        return Plan(Action.START, why, phase="Running")
    policy = desired.restart_policy
    if policy == "Never" or (policy == "OnFailure" and exit_.succeeded):
        return Plan(
            Action.NOTHING,
            f"{exit_.reason}; restartPolicy is {policy}",
            phase="Succeeded" if exit_.succeeded else "Failed",
            recent_restarts=recent,
        )
    if exit_.ran_for is not None and exit_.ran_for >= desired.backoff.reset_after:
        recent = 0
    if observed.unmet is not None:
        return Plan(Action.WAIT, observed.unmet, phase="Waiting", recent_restarts=recent)
    delay = backoff_delay(recent, desired.backoff)
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


def desired_of(obj: Object) -> Desired:
    """The `Desired` of a Process object in wire form."""
    spec = obj["spec"]
    backoff = spec.get("backoff") or {}
    return Desired(
        generation=int(obj["metadata"].get("generation", 1)),
        restart_policy=spec.get("restartPolicy", "Always"),
        backoff=BackoffSettings(
            float(backoff.get("initialSeconds", 10.0)),
            float(backoff.get("maxSeconds", 300.0)),
            float(backoff.get("resetAfterSeconds", 600.0)),
        ),
        deleting=is_deleting(obj),
    )


@dataclass(frozen=True, slots=True)
class _Conditions:
    started: tuple[bool, str, str]
    ready: tuple[bool, str, str]


def _conditions(
    phase: Phase | None,
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


# -- the controller -------------------------------------------------------------------


def supervisor_name(namespace: str, name: str) -> str:
    """The name a Process's child goes by in the supervisor's state and log directories
    (`_` cannot occur in a namespace or name, so the pair is unambiguous)."""
    return f"{namespace or 'default'}_{name}"


def _reference(obj: Object) -> Object:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid") if meta.get(k)},
    }


@dataclass(frozen=True, slots=True)
class ProcessSettings:
    """Where children's state files (`state_dir`) and logs (`log_dir`) live."""

    state_dir: Path
    log_dir: Path


@dataclass(eq=False, kw_only=True)
class _Child(Supervised):
    """One supervised child, in the controller's table, with its probe state."""

    started_at: float
    ref: Object
    started: bool = True
    readiness: ProbeResult | None = None
    probe_message: str = ""
    unhealthy: str | None = None
    spec: Mapping[str, Any] = field(default_factory=dict)


class ProcessController(ChildTable[_Child]):
    """Keeps each Process's child running as its spec says (see the module docstring).

    `reconcile(request)` is the one entry point. `controller` must be set (by `setup`)
    before the manager runs, so that exits and probe results enqueue the object.
    """

    kind_label = "Process"

    def __init__(
        self,
        store: Store,
        events: EventRecorder,
        settings: ProcessSettings,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(settings.state_dir, clock)
        self.store = store
        self.events = events
        self.settings = settings

    # -- the reconciler --------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        key = (request.namespace, request.name)
        try:
            obj = await self.store.get(
                PROCESS.api_version, PROCESS.kind, request.name, request.namespace or None
            )
        except NotFound:
            child = self._table.pop(key, None)
            if child is not None:  # deleted behind the finalizer's back
                await self._stop(child, 0.0)
            return None
        deleting = is_deleting(obj)
        if not deleting and add_finalizer(obj, FINALIZER):
            obj = await self.store.update(obj)
        status: dict[str, Any] = copy.deepcopy(obj.get("status") or {})
        before = copy.deepcopy(status)
        child = self._table.get(key) or self._adopt(key, obj, status)
        observed = await self._observe(key, obj, child, status)
        desired = desired_of(obj)
        step = plan(desired, observed, self.clock.now())
        if step.action is not Action.NOTHING:
            log.info("process %s: %s (%s)", request, step.action, step.reason)
        child = self._table.get(key)
        running = child is not None and child.exit is None
        if step.action in (Action.STOP, Action.RESTART) and child is not None:
            await self.events.normal(obj, "Killing", f"stopping: {step.reason}")
            self._table.pop(key, None)
            await self._stop(child, float(obj["spec"].get("terminationGracePeriodSeconds", 30)))
            record_exit(status, child, self.clock.now(), because=step.reason)
            running = False
            if step.action is Action.STOP and not desired.deleting:
                self._wake(key)  # an unhealthy child: the next look restarts it (or not)
        if desired.deleting:
            stale = self._table.pop(key, None)
            if stale is not None:
                await self._stop(stale, 0.0)
            if obj.get("status") != status:
                obj["status"] = status
                with contextlib.suppress(NotFound):
                    obj = await self.store.update_status(obj)
            if remove_finalizer(obj, FINALIZER):
                with contextlib.suppress(NotFound):
                    await self.store.update(obj)
            return None
        if step.action in (Action.START, Action.RESTART):
            stale = self._table.pop(key, None)
            if stale is not None:
                await self._cleanup(stale)
            await self._start(key, obj, status)
            running = True
            if step.counts_as_restart:
                status["restarts"] = int(status.get("restarts", 0)) + 1
        elif step.action is Action.WAIT and step.phase == "CrashLoopBackOff":
            await self.events.warning(obj, "BackOff", step.reason)
        await self._write_status(obj, status, before, step, observed, running)
        if not running and (stale := self._table.get(key)) is not None:
            # The exit is now in the stored status; the table need not remember it.
            self._table.pop(key, None)
            await self._cleanup(stale)
        if step.wait_seconds > 0:
            return Result(requeue_after=step.wait_seconds)
        return None

    # -- observe ---------------------------------------------------------------------

    async def _observe(
        self, key: Key, obj: Object, child: _Child | None, status: dict[str, Any]
    ) -> Observed:
        """Fold what the table knows into `status` (a finished child's exit), then
        describe the world for `plan`."""
        unmet_message = await unmet_in_store(self.store, obj)
        recent = int(status.get("recentRestarts", 0))
        if child is not None and child.exit is None:
            return Observed(
                running=True,
                generation=child.generation,
                recent_restarts=recent,
                unhealthy=child.unhealthy,
                unmet=unmet_message,
            )
        if child is not None:
            await self._cleanup(child)
            record_exit(status, child, self.clock.now(), log_dir=self.settings.log_dir)
            code = child.exit.code if child.exit else None
            level = self.events.normal if code == 0 else self.events.warning
            await level(obj, "Exited", f"pid {child.handle.pid} {status['lastExit']['reason']}")
        elif status.get("pid") is not None:
            # Recorded as running, but neither in the table nor adoptable: it ended
            # while no engine watched it.
            status["lastExit"] = {
                "reason": "ended while the engine was not running (exit code unknown)",
                "finishedAt": timestamp(self.clock.now()),
            }
            status.pop("pid", None)
        generation = status.get("startedGeneration")
        last = status.get("lastExit")
        last_exit = None
        if isinstance(last, Mapping):
            finished = parse_time(last.get("finishedAt")) or self.clock.now()
            started = parse_time(status.get("startTime"))
            last_exit = LastExit(
                last.get("code"),
                last.get("signal"),
                str(last.get("reason", "exited")),
                finished,
                None if started is None else max(0.0, finished - started),
            )
        return Observed(
            running=False,
            generation=None if generation is None else int(generation),
            last_exit=last_exit,
            recent_restarts=recent,
            unmet=unmet_message,
        )

    # -- apply -----------------------------------------------------------------------

    def _adopt(self, key: Key, obj: Object, status: dict[str, Any]) -> _Child | None:
        """The child an earlier engine left running for this object, if provably ours."""
        name = supervisor_name(*key)
        state_dir = self.settings.state_dir
        handle = supervisor.find_adoptable(name, state_dir)
        if handle is None:
            supervisor.stray(name, state_dir)
            return None
        generation = int(status.get("startedGeneration") or obj["metadata"].get("generation", 1))
        child = _Child(
            handle=handle, generation=generation, started_at=handle.started_at, ref=_reference(obj)
        )
        self._table[key] = child
        self._follow(key, child, obj["spec"])
        log.info("process %s/%s: adopted pid %d", key[0], key[1], handle.pid)
        return child

    async def _start(self, key: Key, obj: Object, status: dict[str, Any]) -> None:
        spec = obj["spec"]
        name = supervisor_name(*key)
        try:
            process_spec = supervisor.ProcessSpec(
                args=spec["args"],
                log_dir=self.settings.log_dir,
                marker=f"{FINALIZER}:{obj['metadata'].get('uid', '')}",
                env=spec.get("env") or {},
                cwd=None if spec.get("cwd") is None else Path(spec["cwd"]),
                user=spec.get("user"),
            )
            handle = await supervisor.start(
                name, process_spec, self.settings.state_dir, clock=self.clock
            )
        except Invalid as exc:
            message = str(exc)
            await self.events.warning(obj, "FailedStart", message)
            status["phase"] = "Failed"
            status.pop("pid", None)
            obj["status"] = status
            with contextlib.suppress(Error):
                await self.store.update_status(obj)
            raise TerminalError(message, reason="StartFailed") from None
        generation = int(obj["metadata"].get("generation", 1))
        child = _Child(
            handle=handle, generation=generation, started_at=handle.started_at, ref=_reference(obj)
        )
        self._table[key] = child
        self._follow(key, child, spec)
        status.update(
            pid=handle.pid,
            startTime=timestamp(handle.started_at),
            startedGeneration=generation,
        )
        await self.events.normal(obj, "Started", f"started pid {handle.pid}: {spec['args'][0]}")

    def _follow(self, key: Key, child: _Child, spec: Mapping[str, Any]) -> None:
        """Watch `child`'s exit, and run its probes."""
        child.spec = spec
        for setting, value in stop_settings(spec).items():
            setattr(child, setting, value)
        child.tasks.append(asyncio.create_task(self._wait_exit(key, child)))
        startup = spec.get("startupProbe")
        child.started = startup is None
        if startup is not None:
            self._probe(key, child, "startup", startup)
        else:
            self._probe_health(key, child, spec)

    def _probe_health(self, key: Key, child: _Child, spec: Mapping[str, Any]) -> None:
        if spec.get("readinessProbe") is not None:
            child.readiness = "Unknown"
            self._probe(key, child, "readiness", spec["readinessProbe"])
        if spec.get("livenessProbe") is not None:
            self._probe(key, child, "liveness", spec["livenessProbe"])

    def _probe(self, key: Key, child: _Child, role: ProbeRole, wire: Any) -> None:
        probe = load_probe(wire, f"spec.{role}Probe")
        on_change = functools.partial(self._on_probe, key, child, role)
        # An exec probe runs as the child does: with its environment and working directory.
        env = {**os.environ, **(child.spec.get("env") or {})}
        runner = functools.partial(run_probe, env=env, cwd=child.spec.get("cwd"))
        prober = Prober(probe, self.clock, on_change, runner=runner)
        child.tasks.append(asyncio.create_task(prober.run(), name=f"{role} probe of {key}"))

    async def _on_probe(
        self, key: Key, child: _Child, role: ProbeRole, result: ProbeResult, message: str
    ) -> None:
        if self._table.get(key) is not child or child.exit is not None:
            return
        if role == "startup":
            if result == "Success":
                child.started = True
                self._probe_health(key, child, child.spec)
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

    async def _wait_exit(self, key: Key, child: _Child) -> None:
        exit_ = await child.handle.wait()
        child.exit = exit_
        child.finished_at = self.clock.now()
        for task in child.tasks:
            if task is not asyncio.current_task():
                task.cancel()
        if self._table.get(key) is child:
            self._wake(key)

    async def _write_status(
        self,
        obj: Object,
        status: dict[str, Any],
        before: dict[str, Any],
        step: Plan,
        observed: Observed,
        running: bool,
    ) -> None:
        child = self._table.get((obj["metadata"].get("namespace") or "", obj["metadata"]["name"]))
        generation = int(obj["metadata"].get("generation", 1))
        phase = step.phase or status.get("phase") or "Pending"
        if running and child is not None and not child.started:
            phase = "Starting"
        status["phase"] = phase
        status["observedGeneration"] = generation
        status["recentRestarts"] = step.recent_restarts
        status.setdefault("restarts", 0)
        if step.phase == "CrashLoopBackOff":
            status["nextStartAt"] = timestamp(self.clock.now() + step.wait_seconds)
        else:
            status.pop("nextStartAt", None)
        conditions = _conditions(
            phase,
            running and child is not None,
            child.started if child is not None else False,
            child.readiness if child is not None else None,
            child.probe_message if child is not None else "",
            observed.unmet,
            step.reason,
        )
        now = self.clock.now()
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
        if status != before:
            obj["status"] = status
            await self.store.update_status(obj)

    # -- whole-table operations ----------------------------------------------------------

    def attach(self, manager: Manager) -> Controller:
        """Wire this reconciler into `manager` (what `setup` does): its controller, the
        `dependsOn` index and watch, and the orphan collector; return the controller."""
        cache = manager.cache(PROCESS)
        cache.add_index(DEPENDS_ON_INDEX, dependency_keys)
        builder = (
            manager.controller("process")
            .for_(PROCESS, predicates=[generation_changed])
            .watches(PROCESS, dependents_of(cache))
            .max_concurrent(MAX_CONCURRENT)  # one child's slow stop must not hold up the rest
        )
        with contextlib.suppress(UnknownKind):  # a Process may wait on a Job, when Jobs exist
            job = manager.store.registry.get(PROCESS.api_version, "Job")
            builder.watches(job, dependents_of(cache))
        controller = builder.complete(self)
        self.controller = controller
        manager.add_runnable(self.collect_orphans)
        return controller

    async def stop_all(self, grace: float | None = None) -> None:
        """Stop every child this controller supervises (for a full shutdown), and record in
        each status that it was stopped with the engine, so the next engine starts it afresh
        (no restart counted, no back-off) rather than as a child that died unseen."""
        for namespace, name in await self._stop_children(grace):
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


def setup(manager: Manager, *, state_dir: Path, log_dir: Path) -> Controller:
    """Add the Process controller to `manager`; return the controller.

    `state_dir` keeps one state file per child (for re-adoption after a restart);
    `log_dir` the children's output. To keep hold of the `ProcessController` (to stop
    every child on shutdown, say), build one and call its `attach(manager)` instead.
    """
    reconciler = ProcessController(
        manager.store,
        manager.event_recorder("process-controller"),
        ProcessSettings(Path(state_dir), Path(log_dir)),
        clock=manager.clock,
    )
    return reconciler.attach(manager)
