"""The `Job` kind (setpoint.dev/v1alpha1, namespaced, plural `jobs`) and its controller:
run one local command to completion, retrying failures (database migrations, say).

`spec`: `args` (argv, required), `env`, `cwd`, `user` (as for a Process),
`backoffLimit` (6: retries after failures), `activeDeadlineSeconds` (optional),
`backoff` (`initialSeconds` 10, `maxSeconds` 300: the wait before each retry),
`terminationGracePeriodSeconds` 30 and `dependsOn` (see
`setpoint.workloads.dependencies`).

`status`: `phase` (Pending, Waiting, Running, Succeeded, Failed), `startTime` (when
the first attempt of the current run started), `completionTime` (when it succeeded),
`attempts`, `failed` (attempts that failed), `lastExit` {code, signal, reason,
finishedAt}, `pid` while an attempt runs, `observedGeneration`, conditions `Complete`
(True once it succeeded), `Failed` (present only when True: reason
`BackoffLimitExceeded` or `DeadlineExceeded`) and `Ready`, which mirrors `Complete`
(so a `dependsOn` entry may name either condition). A failed Job is also `Stalled`
(the reconciler raises `TerminalError`, as Process does when it cannot start); it
cannot progress until its spec changes. The controller keeps `startedGeneration`
for itself: the spec generation the current run belongs to.

Decisions, made by the pure `plan(desired, observed, now)`:

* a Job whose `dependsOn` does not hold is not started (phase Waiting, `Ready=False`,
  reason `WaitingForDependency` naming it); nor is a retry. A dependency that stops
  holding while an attempt runs does not stop it.
* an attempt that exits 0 completes the Job (phase Succeeded): it is not run again.
* an attempt that fails (a non-zero exit, a signal, or an exit code that cannot be
  known because the attempt ended while no engine watched it) is retried after
  `initialSeconds`, doubling up to `maxSeconds`, until `failed` exceeds `backoffLimit`
  (so at most `backoffLimit + 1` attempts): then the Job has Failed,
  reason `BackoffLimitExceeded`.
* `activeDeadlineSeconds` counts wall time from `startTime` (time spent waiting for a
  dependency before the first attempt does not count; back-off waits do): once
  exceeded, the running attempt is stopped (and counts as failed) and the Job has
  Failed, reason `DeadlineExceeded`.
* a spec change (a new generation) runs the Job again from scratch: `attempts`,
  `failed`, `startTime` and `completionTime` start over, and a running attempt is
  stopped (not counted as failed) and replaced. Kubernetes Jobs are immutable; setpoint
  users re-apply a changed migration Job and expect it to run, so a finished Job with
  a new spec runs again, while an unchanged one is never re-run.
* deletion (the finalizer `setpoint.dev/job`) stops a running attempt, then lets the
  object go.

The controller (`JobController`, wired by `setup`) observes the attempts it
supervises plus the object's status, plans, and applies through
`setpoint.workloads.supervisor`: an attempt's exit enqueues the Job at once, output
goes to `<log_dir>/<namespace>_<name>.log`, and a state file per running attempt in
`state_dir` lets a restarted engine re-adopt it rather than start it twice. Give the
Job controller a `state_dir` of its own: the Process controller treats every state
file in its directory as one of its own children. Changes to Processes and Jobs wake
the Jobs that depend on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Error, Invalid, NotFound, TerminalError
from setpoint.model import (
    READY,
    Object,
    PrinterColumn,
    Schema,
    get_condition,
    register_kind,
    remove_condition,
    set_condition,
)
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
from setpoint.workloads.process import PROCESS, Action, supervisor_name

__all__ = [
    "COMPLETE",
    "FAILED",
    "FINALIZER",
    "JOB",
    "Action",
    "AttemptExit",
    "JobBackoffSchema",
    "JobController",
    "JobDesired",
    "JobObserved",
    "JobPlan",
    "JobSettings",
    "JobSpecSchema",
    "JobStatusSchema",
    "RetryBackoff",
    "desired_of",
    "plan",
    "retry_delay",
    "setup",
]

log = logging.getLogger("setpoint.job")

FINALIZER = "setpoint.dev/job"
COMPLETE = "Complete"
FAILED = "Failed"
MAX_CONCURRENT = 16
"""Jobs reconciled at once (one key is never reconciled by two workers)."""

Phase = Literal["Pending", "Waiting", "Running", "Succeeded", "Failed"]
Outcome = Literal["Complete", "BackoffLimitExceeded", "DeadlineExceeded"]
"""How a run ended: `Complete`, or the reason it Failed."""

# -- the kind ------------------------------------------------------------------------


class JobBackoffSchema(Schema):
    """The wait before each retry: `initialSeconds`, doubling up to `maxSeconds`."""

    initial_seconds: float = Field(default=10.0, gt=0)
    max_seconds: float = Field(default=300.0, gt=0)


class JobSpecSchema(Schema):
    """What to run, how often to retry it, for how long, and what it waits for."""

    args: list[OsString] = Field(min_length=1)
    env: dict[EnvName, OsString] = Field(default_factory=dict)
    cwd: OsString | None = None
    user: OsString | None = None
    backoff_limit: int = Field(default=6, ge=0)
    active_deadline_seconds: float | None = Field(default=None, gt=0)
    backoff: JobBackoffSchema = Field(default_factory=JobBackoffSchema)
    termination_grace_period_seconds: float = Field(default=30.0, ge=0)
    stop_signal: StopSignal = "SIGTERM"
    depends_on: list[Dependency] = Field(default_factory=list)


class JobLastExitSchema(Schema):
    """How the last attempt ended: `code` if it exited, `signal` if a signal killed it."""

    code: int | None = None
    signal: int | None = None
    reason: str = ""
    finished_at: str | None = None


class JobStatusSchema(Schema):
    """What the controller observed (see the module docstring)."""

    phase: Phase | None = None
    pid: int | None = None
    start_time: str | None = None
    completion_time: str | None = None
    attempts: int = 0
    failed: int = 0
    last_exit: JobLastExitSchema | None = None
    observed_generation: int | None = None
    started_generation: int | None = None
    conditions: list[dict[str, Any]] = Field(default_factory=list)


JOB = register_kind(
    "setpoint.dev/v1alpha1",
    "Job",
    spec=JobSpecSchema,
    status=JobStatusSchema,
    namespaced=True,
    plural="jobs",
    columns=(
        PrinterColumn("PHASE", "status.phase"),
        PrinterColumn("ATTEMPTS", "status.attempts"),
    ),
)
"""The `Job` kind."""


# -- plan (pure) ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryBackoff:
    """The wait before a retry, in seconds (`spec.backoff`)."""

    initial: float = 10.0
    maximum: float = 300.0


def retry_delay(failed: int, backoff: RetryBackoff) -> float:
    """Seconds to wait before the retry that follows `failed` failures: 0 before the
    first attempt, then `initial`, doubling, capped at `maximum`."""
    if failed <= 0:
        return 0.0
    return float(min(backoff.maximum, backoff.initial * 2.0 ** min(failed - 1, 60)))


@dataclass(frozen=True, slots=True)
class JobDesired:
    """What the object asks for, as far as the plan cares. `active_deadline` None: none."""

    generation: int
    backoff_limit: int = 6
    active_deadline: float | None = None
    backoff: RetryBackoff = RetryBackoff()
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class AttemptExit:
    """How the last attempt ended (`code` None: killed, or unknown), at `finished_at`."""

    code: int | None
    reason: str
    finished_at: float

    @property
    def succeeded(self) -> bool:
        return self.code == 0


@dataclass(frozen=True, slots=True)
class JobObserved:
    """What is, as far as the plan cares, for the run of spec `generation` (None: none
    has started).

    `started_at` is when its first attempt started; `failed` its attempts that failed
    (the last one included, once it has ended); `last_exit` how its last attempt ended
    (None while one runs, or before any ended); `finished` the outcome already recorded
    for it; `unmet` the message of the first dependency that does not hold.
    """

    running: bool = False
    generation: int | None = None
    started_at: float | None = None
    attempts: int = 0
    failed: int = 0
    last_exit: AttemptExit | None = None
    finished: Outcome | None = None
    unmet: str | None = None


@dataclass(frozen=True, slots=True)
class JobPlan:
    """One step: `action` for `reason`, leaving the Job in `phase`.

    `wait_seconds` > 0: look again then (a retry's back-off, or the deadline).
    `outcome`: the run has ended so (`Complete`, or why it Failed). `fresh`: the
    start begins a new run (counts start over)."""

    action: Action
    reason: str
    phase: Phase
    wait_seconds: float = 0.0
    outcome: Outcome | None = None
    fresh: bool = False


_FINISHED_PHASE: dict[Outcome, Phase] = {
    "Complete": "Succeeded",
    "BackoffLimitExceeded": "Failed",
    "DeadlineExceeded": "Failed",
}


def _deadline_left(desired: JobDesired, observed: JobObserved, now: float) -> float | None:
    """Seconds until the deadline (<= 0: exceeded), or None when there is none."""
    if desired.active_deadline is None or observed.started_at is None:
        return None
    return observed.started_at + desired.active_deadline - now


def plan(desired: JobDesired, observed: JobObserved, now: float) -> JobPlan:
    """The next step for one Job. Pure: no I/O; `now` in seconds, as `finished_at`."""
    if desired.deleting:
        if observed.running:
            return JobPlan(Action.STOP, "the object is being deleted", "Running")
        return JobPlan(Action.NOTHING, "stopped; the object can go", "Pending")
    new_run = observed.generation is None or observed.generation != desired.generation
    if observed.running:
        if new_run:
            return JobPlan(
                Action.RESTART,
                f"the spec changed (generation {observed.generation} -> {desired.generation})",
                "Running",
                wait_seconds=desired.active_deadline or 0.0,
                fresh=True,
            )
        left = _deadline_left(desired, observed, now)
        if left is not None and left <= 0:
            return JobPlan(
                Action.STOP,
                f"activeDeadlineSeconds ({desired.active_deadline:g}s) exceeded",
                "Failed",
                outcome="DeadlineExceeded",
            )
        return JobPlan(
            Action.NOTHING,
            f"attempt {observed.attempts} running",
            "Running",
            wait_seconds=left or 0,
        )
    if new_run:
        if observed.unmet is not None:
            return JobPlan(Action.WAIT, observed.unmet, "Waiting")
        why = "not run yet" if observed.generation is None else "the spec changed: running again"
        deadline = desired.active_deadline or 0.0  # look again at the deadline
        return JobPlan(Action.START, why, "Running", wait_seconds=deadline, fresh=True)
    if observed.finished is not None:
        return JobPlan(
            Action.NOTHING,
            f"finished: {observed.finished}",
            _FINISHED_PHASE[observed.finished],
            outcome=observed.finished,
        )
    exit_ = observed.last_exit
    if exit_ is not None and exit_.succeeded:
        return JobPlan(Action.NOTHING, "completed", "Succeeded", outcome="Complete")
    if observed.failed > desired.backoff_limit:
        return JobPlan(
            Action.NOTHING,
            f"failed {observed.failed} times, more than backoffLimit ({desired.backoff_limit})"
            + (f"; last: {exit_.reason}" if exit_ is not None else ""),
            "Failed",
            outcome="BackoffLimitExceeded",
        )
    left = _deadline_left(desired, observed, now)
    if left is not None and left <= 0:
        return JobPlan(
            Action.NOTHING,
            f"activeDeadlineSeconds ({desired.active_deadline:g}s) exceeded",
            "Failed",
            outcome="DeadlineExceeded",
        )
    if observed.unmet is not None:
        return JobPlan(Action.WAIT, observed.unmet, "Waiting", wait_seconds=left or 0)
    delay = retry_delay(observed.failed, desired.backoff)
    finished_at = exit_.finished_at if exit_ is not None else now
    remaining = finished_at + delay - now
    if remaining > 0:
        last = exit_.reason if exit_ is not None else "failed"
        return JobPlan(
            Action.WAIT,
            f"back-off {delay:g}s before retrying failed job ({last})",
            "Pending",
            wait_seconds=remaining if left is None else min(remaining, left),
        )
    return JobPlan(
        Action.START,
        f"retry {observed.failed} of {desired.backoff_limit}",
        "Running",
        wait_seconds=left or 0.0,
    )


def desired_of(obj: Object) -> JobDesired:
    """The `JobDesired` of a Job object in wire form."""
    spec = obj["spec"]
    backoff = spec.get("backoff") or {}
    deadline = spec.get("activeDeadlineSeconds")
    return JobDesired(
        generation=int(obj["metadata"].get("generation", 1)),
        backoff_limit=int(spec.get("backoffLimit", 6)),
        active_deadline=None if deadline is None else float(deadline),
        backoff=RetryBackoff(
            float(backoff.get("initialSeconds", 10.0)), float(backoff.get("maxSeconds", 300.0))
        ),
        deleting=is_deleting(obj),
    )


def _conditions(step: JobPlan) -> tuple[bool, str, str]:
    """`Complete` (and `Ready`, which mirrors it) as (status, reason, message). Pure."""
    if step.outcome == "Complete":
        return True, "Completed", "the job completed"
    if step.outcome is not None:
        return False, step.outcome, step.reason
    if step.phase == "Waiting":
        return False, "WaitingForDependency", step.reason
    if step.phase == "Running":
        return False, "Running", step.reason
    if step.action is Action.WAIT:
        return False, "BackOff", step.reason
    return False, "Pending", step.reason


# -- the controller -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobSettings:
    """Where attempts' state files (`state_dir`, not shared with the Process controller)
    and logs (`log_dir`) live."""

    state_dir: Path
    log_dir: Path


class JobController(ChildTable[Supervised]):
    """Runs each Job to completion as its spec says (see the module docstring).

    `reconcile(request)` is the one entry point. `controller` must be set (by `attach`)
    before the manager runs, so that exits enqueue the object.
    """

    kind_label = "Job"

    def __init__(
        self,
        store: Store,
        events: EventRecorder,
        settings: JobSettings,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        super().__init__(settings.state_dir, clock)
        self.store = store
        self.events = events
        self.settings = settings

    # -- the reconciler --------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        """Observe the Job and its attempt, plan, apply. A Job that has Failed raises
        `TerminalError` (recorded as `Stalled`) until its spec changes."""
        key = (request.namespace, request.name)
        try:
            obj = await self.store.get(
                JOB.api_version, JOB.kind, request.name, request.namespace or None
            )
        except NotFound:
            attempt = self._table.pop(key, None)
            if attempt is not None:  # deleted behind the finalizer's back
                await self._stop(attempt, 0.0)
            return None
        deleting = is_deleting(obj)
        if not deleting and add_finalizer(obj, FINALIZER):
            obj = await self.store.update(obj)
        status: dict[str, Any] = copy.deepcopy(obj.get("status") or {})
        before = copy.deepcopy(status)
        attempt = self._table.get(key) or self._adopt(key, obj, status)
        observed = await self._observe(key, obj, attempt, status)
        desired = desired_of(obj)
        now = self.clock.now()
        step = plan(desired, observed, now)
        if step.action is not Action.NOTHING:
            log.info("job %s: %s (%s)", request, step.action, step.reason)
        attempt = self._table.get(key)
        if step.action in (Action.STOP, Action.RESTART) and attempt is not None:
            if step.outcome == "DeadlineExceeded":
                await self.events.warning(obj, "DeadlineExceeded", step.reason)
            else:
                await self.events.normal(obj, "Killing", f"stopping: {step.reason}")
            self._table.pop(key, None)
            grace = float(obj["spec"].get("terminationGracePeriodSeconds", 30))
            await self._stop(attempt, grace)
            record_exit(status, attempt, self.clock.now(), because=step.reason)
            if step.outcome == "DeadlineExceeded":
                status["failed"] = int(status.get("failed", 0)) + 1
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
            if step.fresh:
                for name in ("startTime", "completionTime", "lastExit"):
                    status.pop(name, None)
                status.update(attempts=0, failed=0)
            await self._start(key, obj, status)
        elif (
            step.action is Action.WAIT
            and step.phase == "Pending"
            and (
                before.get("phase") != "Pending" or status.get("lastExit") != before.get("lastExit")
            )
        ):
            await self.events.warning(obj, "BackOff", step.reason)
        if step.outcome is not None and (
            before.get("phase") != step.phase
            or before.get("startedGeneration") != status.get("startedGeneration")
        ):
            if step.outcome == "Complete":
                status["completionTime"] = timestamp(now)
                await self.events.normal(obj, "Completed", f"completed after {_attempts(status)}")
            else:
                await self.events.warning(obj, "Failed", f"{step.outcome}: {step.reason}")
        failure = None
        if step.outcome in ("BackoffLimitExceeded", "DeadlineExceeded"):
            recorded = get_condition(before, FAILED)
            if observed.finished == step.outcome and recorded is not None:
                failure = str(recorded.get("message", ""))  # keep the first, fuller, words
            else:
                failure = _failure_message(obj, step)
        await self._write_status(obj, status, before, step, failure)
        attempt = self._table.get(key)
        started = step.action in (Action.START, Action.RESTART)
        if not started and attempt is not None and attempt.exit is not None:
            # The exit is now in the stored status; the table need not remember it. (An
            # attempt started just now may have ended already: the next look records it.)
            self._table.pop(key, None)
            await self._cleanup(attempt)
        if failure is not None:
            raise TerminalError(failure, reason=str(step.outcome))
        if step.wait_seconds > 0:
            return Result(requeue_after=step.wait_seconds)
        return None

    # -- observe ---------------------------------------------------------------------

    async def _observe(
        self, key: Key, obj: Object, attempt: Supervised | None, status: dict[str, Any]
    ) -> JobObserved:
        """Fold what the table knows into `status` (an ended attempt's exit, counted as
        failed unless it exited 0), then describe the world for `plan`."""
        unmet_message = await unmet_in_store(self.store, obj)
        generation = status.get("startedGeneration")
        running = attempt is not None and attempt.exit is None
        if attempt is not None and running:
            generation = attempt.generation
        if attempt is not None and attempt.exit is not None:
            await self._cleanup(attempt)
            record_exit(status, attempt, self.clock.now(), log_dir=self.settings.log_dir)
            code = attempt.exit.code
            if code != 0:
                status["failed"] = int(status.get("failed", 0)) + 1
            level = self.events.normal if code == 0 else self.events.warning
            await level(obj, "Exited", f"pid {attempt.handle.pid} {status['lastExit']['reason']}")
        elif attempt is None and status.get("pid") is not None:
            # Recorded as running, but neither in the table nor adoptable: it ended
            # while no engine watched it. Its exit code cannot be known: a failure.
            status["lastExit"] = {
                "reason": "ended while the engine was not running (exit code unknown)",
                "finishedAt": timestamp(self.clock.now()),
            }
            status.pop("pid", None)
            status["failed"] = int(status.get("failed", 0)) + 1
        last = status.get("lastExit")
        last_exit = None
        if not running and isinstance(last, Mapping):
            finished = parse_time(last.get("finishedAt")) or self.clock.now()
            last_exit = AttemptExit(last.get("code"), str(last.get("reason", "exited")), finished)
        return JobObserved(
            running=running,
            generation=None if generation is None else int(generation),
            started_at=parse_time(status.get("startTime")),
            attempts=int(status.get("attempts", 0)),
            failed=int(status.get("failed", 0)),
            last_exit=last_exit,
            finished=_finished(status),
            unmet=unmet_message,
        )

    # -- apply -----------------------------------------------------------------------

    def _adopt(self, key: Key, obj: Object, status: dict[str, Any]) -> Supervised | None:
        """The attempt an earlier engine left running for this Job, if provably ours."""
        name = supervisor_name(*key)
        state_dir = self.settings.state_dir
        handle = supervisor.find_adoptable(name, state_dir)
        if handle is None:
            supervisor.stray(name, state_dir)
            return None
        generation = int(status.get("startedGeneration") or obj["metadata"].get("generation", 1))
        attempt = Supervised(handle, generation, **stop_settings(obj["spec"]))
        self._table[key] = attempt
        attempt.tasks.append(asyncio.create_task(self._wait_exit(key, attempt)))
        log.info("job %s/%s: adopted pid %d", key[0], key[1], handle.pid)
        return attempt

    async def _start(self, key: Key, obj: Object, status: dict[str, Any]) -> None:
        spec = obj["spec"]
        name = supervisor_name(*key)
        generation = int(obj["metadata"].get("generation", 1))
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
            status["startedGeneration"] = generation
            status.pop("pid", None)
            obj["status"] = status
            with contextlib.suppress(Error):
                await self.store.update_status(obj)
            raise TerminalError(message, reason="StartFailed") from None
        attempt = Supervised(handle, generation, **stop_settings(obj["spec"]))
        self._table[key] = attempt
        attempt.tasks.append(asyncio.create_task(self._wait_exit(key, attempt)))
        status.setdefault("startTime", timestamp(handle.started_at))
        status.update(
            pid=handle.pid,
            startedGeneration=generation,
            attempts=int(status.get("attempts", 0)) + 1,
        )
        status.setdefault("failed", 0)
        await self.events.normal(
            obj, "Started", f"attempt {status['attempts']}: started pid {handle.pid}"
        )

    async def _wait_exit(self, key: Key, attempt: Supervised) -> None:
        exit_ = await attempt.handle.wait()
        attempt.exit = exit_
        attempt.finished_at = self.clock.now()
        if self._table.get(key) is attempt:
            self._wake(key)

    async def _write_status(
        self,
        obj: Object,
        status: dict[str, Any],
        before: dict[str, Any],
        step: JobPlan,
        failure: str | None,
    ) -> None:
        """Write phase and conditions; `failure` is the message of a Job that has Failed."""
        generation = int(obj["metadata"].get("generation", 1))
        now = self.clock.now()
        status["phase"] = step.phase
        status["observedGeneration"] = generation
        status.setdefault("attempts", 0)
        status.setdefault("failed", 0)
        complete, reason, message = _conditions(step)
        if failure is not None:
            message = failure
        for type_ in (COMPLETE, READY):
            set_condition(
                status,
                type_,
                complete,
                reason=reason,
                message=message,
                now=now,
                observed_generation=generation,
            )
        if failure is not None:
            set_condition(
                status,
                FAILED,
                True,
                reason=str(step.outcome),
                message=message,
                now=now,
                observed_generation=generation,
            )
        else:
            remove_condition(status, FAILED)
        if status != before:
            obj["status"] = status
            await self.store.update_status(obj)

    # -- whole-table operations ----------------------------------------------------------

    def attach(self, manager: Manager) -> Controller:
        """Wire this reconciler into `manager` (what `setup` does): its controller, the
        `dependsOn` index and the watches of Processes and Jobs it may depend on, and the
        orphan collector; return the controller."""
        cache = manager.cache(JOB)
        cache.add_index(DEPENDS_ON_INDEX, dependency_keys)
        controller = (
            manager.controller("job")
            .for_(JOB, predicates=[generation_changed])
            .watches(PROCESS, dependents_of(cache))
            .watches(JOB, dependents_of(cache))
            .max_concurrent(MAX_CONCURRENT)
            .complete(self)
        )
        self.controller = controller
        manager.add_runnable(self.collect_orphans)
        return controller

    async def stop_all(self, grace: float | None = None) -> None:
        """Stop every attempt this controller supervises (for a full shutdown)."""
        await self._stop_children(grace)


def _finished(status: Mapping[str, Any]) -> Outcome | None:
    """The outcome recorded in `status` for its run, if it has ended."""
    phase = status.get("phase")
    if phase == "Succeeded":
        return "Complete"
    if phase == "Failed":
        for cond in status.get("conditions") or ():
            if cond.get("type") == FAILED and cond.get("reason") in (
                "BackoffLimitExceeded",
                "DeadlineExceeded",
            ):
                reason: Outcome = cond["reason"]
                return reason
    return None


def _attempts(status: Mapping[str, Any]) -> str:
    count = int(status.get("attempts", 0))
    return f"{count} attempt" + ("" if count == 1 else "s")


def _failure_message(obj: Object, step: JobPlan) -> str:
    """The message of a failed Job's `Ready`, `Failed` and `Stalled`: one text, so that
    the controller's `Stalled` write and ours agree."""
    return f"job {obj['metadata']['name']} failed: {step.reason}; change its spec to run it again"


def setup(manager: Manager, *, state_dir: Path, log_dir: Path) -> Controller:
    """Add the Job controller to `manager`; return the controller.

    `state_dir` keeps one state file per running attempt (for re-adoption after a
    restart); give it a directory of its own, not the Process controller's. `log_dir`
    takes the attempts' output. To keep hold of the `JobController` (to stop every
    attempt on shutdown, say), build one and call its `attach(manager)` instead.
    """
    reconciler = JobController(
        manager.store,
        manager.event_recorder("job-controller"),
        JobSettings(Path(state_dir), Path(log_dir)),
        clock=manager.clock,
    )
    return reconciler.attach(manager)
