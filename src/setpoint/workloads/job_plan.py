"""The Job's plan, pure: its schemas, what it observes and `plan(desired, observed, now)`,
which says what to do with its current attempt (start, stop, wait, nothing), the whole new
status and the events. No I/O, no clock (`setpoint.workloads.job` is the controller that
carries it out).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from pydantic import Field

from setpoint.model import (
    READY,
    Object,
    Schema,
    get_condition,
    remove_condition,
    set_condition,
)
from setpoint.runtime.plan import PlannedEvent, timestamp
from setpoint.workloads.child_plan import (
    ENVIRONMENT_BACKOFF,
    Action,
    BackoffSchema,
    ChildDesired,
    ChildExit,
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

COMPLETE = "Complete"
FAILED = "Failed"
SUSPENDED = "Suspended"
"""The condition Kubernetes' Job reports its suspension with (`JobSuspended`, `JobResumed`)."""
SUSPENDED_MESSAGE = "suspended (spec.suspend; setpoint start resumes it)"
"""Why a suspended Job runs nothing; also the `stopReason` of the attempt it stopped."""
Phase = Literal["Pending", "Waiting", "Running", "Suspended", "Succeeded", "Failed"]
Outcome = Literal["Complete", "BackoffLimitExceeded", "DeadlineExceeded"]
"""How a run ended: `Complete`, or the reason it Failed."""

# -- the kind ------------------------------------------------------------------------


class JobSpecSchema(CommandSchema):
    """What to run, how often to retry it, for how long, and what it waits for."""

    backoff_limit: int = Field(default=6, ge=0)
    active_deadline_seconds: float | None = Field(default=None, gt=0)
    backoff: BackoffSchema = Field(default_factory=BackoffSchema)
    depends_on: DependsOn = Field(default_factory=list)
    suspend: bool = False


class JobStatusSchema(Schema):
    """What the controller observed (see the module docstring)."""

    phase: Phase | None = None
    pid: int | None = None
    start_time: str | None = None
    completion_time: str | None = None
    attempts: int = 0
    failed: int = 0
    last_exit: ExitSchema | None = None
    observed_generation: int | None = None
    started_generation: int | None = None
    started_spec_hash: str | None = None
    restarted_at: str | None = None
    env_files: list[EnvFileStatusSchema] | None = None
    conditions: list[dict[str, Any]] = Field(default_factory=list)


# -- plan (pure) ----------------------------------------------------------------------


JobDesired: TypeAlias = ChildDesired[JobSpecSchema]
"""What a Job asks for: a `ChildDesired` (generation, spec, deleting) of its spec."""


@dataclass(frozen=True, slots=True)
class JobObserved(ChildObserved):
    """What is, as far as the plan cares (`ChildObserved`; `generation` is the spec
    generation of the current run, None when none has started), and of that run:
    `started_at`, when its first attempt started; `attempts`; `failed`, its attempts
    that failed (the last one included, once it has ended); `finished`, the outcome
    already recorded for it."""

    started_at: float | None = None
    attempts: int = 0
    failed: int = 0
    finished: Outcome | None = None


@dataclass(frozen=True, slots=True)
class JobPlan(ChildPlan):
    """One step: `action` for `reason`, leaving the Job in `phase`.

    `wait_seconds` > 0: look again then (a retry's back-off, or the deadline).
    `outcome`: the run has ended so (`Complete`, or why it Failed). `fresh`: the
    start begins a new run (counts start over). `status` is the whole new status (for a
    stop: the status while the attempt stops, `stopping_reason`; the next look records
    the exit), `events` what to emit, `stall`
    (reason, message) when the Job cannot progress until its spec changes."""

    phase: Phase
    outcome: Outcome | None = None
    fresh: bool = False


_FINISHED_PHASE: dict[Outcome, Phase] = {
    "Complete": "Succeeded",
    "BackoffLimitExceeded": "Failed",
    "DeadlineExceeded": "Failed",
}


def desired_of(obj: Object) -> JobDesired:
    """The `JobDesired` of a Job object in wire form."""
    return ChildDesired.of(obj, JobSpecSchema)


def spec_hash(spec: JobSpecSchema) -> str:
    """A hash of what `spec` says, `suspend` left out (stopping and starting a Job does not
    change what it runs). Only the fields the spec was given count, so that a default a
    later release changes does not run finished Jobs again. Pure."""
    given = spec.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude={"suspend"})
    text = json.dumps(given, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def interrupted(exit_: ChildExit | None) -> bool:
    """Whether `exit_` is that of an attempt a suspension stopped: it counts neither as
    failed nor as completed (whatever its exit code), and the run goes on when resumed."""
    return exit_ is not None and exit_.stop_reason == SUSPENDED_MESSAGE


def plan(desired: JobDesired, observed: JobObserved, now: float) -> JobPlan:
    """The next step for one Job: the child action, the new status and the events.
    Pure: no I/O; `now` in seconds, as `finished_at`."""
    return plan_child(_decide, _finish, desired, observed, now)


def _finish(
    desired: JobDesired,
    observed: JobObserved,
    step: JobPlan,
    events: list[PlannedEvent],
    now: float,
) -> JobPlan:
    """`step` with its whole status and its events (after `events`)."""
    if step.action in (Action.STOP, Action.RESTART):
        if step.outcome == "DeadlineExceeded":
            events.append(PlannedEvent("DeadlineExceeded", step.reason, warning=True))
        else:
            events.append(PlannedEvent("Killing", f"stopping: {step.reason}"))
        status = _stopping_status(desired, observed, step, now)
        events.extend(_suspension_events(observed.status, status))
        return dataclasses.replace(step, status=status, events=tuple(events))
    before = observed.status
    if (
        step.action is Action.WAIT
        and step.phase == "Pending"
        and (before.get("phase") != "Pending" or observed.exit_is_new)
    ):
        events.append(PlannedEvent("BackOff", step.reason, warning=True))
    status = _status(desired, observed, step, now)
    events.extend(_suspension_events(before, status))
    # Every run is recorded Running before it ends (its start writes so): a run ends now
    # when its phase moves to a finished one. (`startedGeneration` is no measure: it follows
    # a change of `suspend` alone.)
    ended_now = step.outcome is not None and before.get("phase") != step.phase
    if ended_now and step.outcome == "Complete":
        status["completionTime"] = timestamp(now)
        attempts = status["attempts"]
        done = f"completed after {attempts} attempt" + ("" if attempts == 1 else "s")
        events.append(PlannedEvent("Completed", done))
    elif ended_now:
        events.append(PlannedEvent("Failed", f"{step.outcome}: {step.reason}", warning=True))
    stall = step.stall
    if step.outcome in ("BackoffLimitExceeded", "DeadlineExceeded"):
        failure = get_condition(status, FAILED)
        assert failure is not None
        stall = (str(step.outcome), str(failure["message"]))
    return dataclasses.replace(step, status=status, events=tuple(events), stall=stall)


def _deadline_left(desired: JobDesired, observed: JobObserved, now: float) -> float | None:
    """Seconds until the deadline (<= 0: exceeded), or None when there is none."""
    deadline = desired.spec.active_deadline_seconds
    if deadline is None or observed.started_at is None:
        return None
    return observed.started_at + deadline - now


def _past_deadline(desired: JobDesired, action: Action) -> JobPlan:
    """The run has Failed: its deadline has passed (`action`: stop the running attempt)."""
    deadline = desired.spec.active_deadline_seconds or 0.0
    reason = f"activeDeadlineSeconds ({deadline:g}s) exceeded"
    return JobPlan(action, reason, "Failed", outcome="DeadlineExceeded")


_RESTART_REQUESTED = "a restart was requested (setpoint restart)"


def _spec_changed(desired: JobDesired, observed: JobObserved) -> bool:
    """Whether `desired` is not the spec the current run belongs to (or no run has
    started): by the `startedSpecHash` the run recorded, `suspend` aside; by generation for
    a run recorded before there was one."""
    if observed.generation is None:
        return True
    recorded = observed.status.get("startedSpecHash")
    if recorded is None:
        return observed.generation != desired.generation
    return str(recorded) != spec_hash(desired.spec)


def _decide(desired: JobDesired, observed: JobObserved, now: float) -> JobPlan:
    """The child action, phase and outcome of the next step."""
    if desired.deleting:
        if observed.running:
            return JobPlan(Action.STOP, "the object is being deleted", "Running")
        return JobPlan(Action.NOTHING, "stopped; the object can go", "Pending")
    if not desired.spec.suspend:
        return _carry_on(desired, observed, now)
    if observed.running:
        return JobPlan(Action.STOP, SUSPENDED_MESSAGE, "Running")
    step = _carry_on(desired, observed, now)
    if step.outcome is not None and step.action is Action.NOTHING:
        return step  # a finished run stays as it ended, as Kubernetes' Job
    return JobPlan(Action.NOTHING, SUSPENDED_MESSAGE, "Suspended")


def _carry_on(desired: JobDesired, observed: JobObserved, now: float) -> JobPlan:
    """The next step of a Job that is not suspended (nor being deleted)."""
    spec = desired.spec
    if observed.refused is not None:
        return _refused(desired, observed)
    spec_changed = _spec_changed(desired, observed)
    restart = desired.restart_requested(observed.status)
    new_run = spec_changed or restart
    if observed.running:
        if new_run:
            return JobPlan(
                Action.RESTART,
                f"the spec changed (generation {observed.generation} -> {desired.generation})"
                if spec_changed
                else _RESTART_REQUESTED,
                "Running",
                fresh=True,
            )
        left = _deadline_left(desired, observed, now)
        if left is not None and left <= 0:
            return _past_deadline(desired, Action.STOP)
        return JobPlan(
            Action.NOTHING,
            f"attempt {observed.attempts} running",
            "Running",
            wait_seconds=left or 0,
        )
    failure = observed.start_failure
    if failure is not None and failure.generation == desired.generation:
        if failure.secret_reason is not None:
            stall = (failure.secret_reason, failure.message)
            return JobPlan(Action.NOTHING, failure.message, "Pending", stall=stall)
        if not failure.transient:
            stall = ("StartFailed", failure.message)
            return JobPlan(Action.NOTHING, failure.message, "Failed", stall=stall)
        remaining = failure.at + backoff_delay(failure.count, ENVIRONMENT_BACKOFF) - now
        if remaining > 0:
            return JobPlan(Action.WAIT, failure.message, "Pending", wait_seconds=remaining)
    if new_run:
        if observed.unmet is not None:
            return JobPlan(Action.WAIT, observed.unmet, "Waiting")
        why = (
            "starting its first attempt"
            if observed.generation is None
            else "the spec changed: running again"
        )
        if not spec_changed:
            why = f"{_RESTART_REQUESTED}: running again"
        deadline = spec.active_deadline_seconds or 0.0  # look again at the deadline
        return JobPlan(Action.START, why, "Running", wait_seconds=deadline, fresh=True)
    if observed.finished is not None:
        return JobPlan(
            Action.NOTHING,
            f"finished: {observed.finished}",
            _FINISHED_PHASE[observed.finished],
            outcome=observed.finished,
        )
    exit_ = observed.last_exit
    if exit_ is not None and exit_.succeeded and not interrupted(exit_):
        return JobPlan(Action.NOTHING, "completed", "Succeeded", outcome="Complete")
    if observed.failed > spec.backoff_limit:
        return JobPlan(
            Action.NOTHING,
            f"failed {observed.failed} times, more than backoffLimit ({spec.backoff_limit})"
            + (f"; last: {exit_.reason}" if exit_ is not None else ""),
            "Failed",
            outcome="BackoffLimitExceeded",
        )
    left = _deadline_left(desired, observed, now)
    if left is not None and left <= 0:
        return _past_deadline(desired, Action.NOTHING)
    if observed.unmet is not None:
        return JobPlan(Action.WAIT, observed.unmet, "Waiting", wait_seconds=left or 0)
    # A start whose run has no startTime (cleared by a suspension) starts the deadline.
    deadline_in = (spec.active_deadline_seconds or 0.0) if left is None else left
    if interrupted(exit_):
        return JobPlan(Action.START, "resumed", "Running", wait_seconds=deadline_in)
    delay = backoff_delay(observed.failed, spec.backoff)
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
        f"retry {observed.failed} of {spec.backoff_limit}",
        "Running",
        wait_seconds=deadline_in,
    )


def _refused(desired: JobDesired, observed: JobObserved) -> JobPlan:
    """The step when this engine may not run the spec's command as its `user:`: nothing
    is started, and the Job is `Stalled` with the refusal's reason until its spec (or the
    engine's allow-list) changes. An attempt of an earlier spec runs on (the refused change
    is not carried out); one of this very spec (adopted by an engine that allows fewer
    users than the one that started it) is stopped."""
    assert observed.refused is not None
    message = observed.refused[1]
    if observed.running and observed.generation == desired.generation:
        return JobPlan(Action.STOP, message, "Running")
    if observed.running:
        return JobPlan(Action.NOTHING, message, "Running", stall=observed.refused)
    return JobPlan(Action.NOTHING, message, "Pending", stall=observed.refused)


def _status(
    desired: JobDesired, observed: JobObserved, step: JobPlan, now: float
) -> dict[str, Any]:
    """The whole new status once `step` is carried out. An attempt it starts gets its
    `pid` (and, first of its run, `startTime`) from the lifecycle, which alone learns them."""
    status = copy.deepcopy(dict(observed.status))
    generation = desired.generation
    if observed.exit_is_new and observed.last_exit is not None:
        status["lastExit"] = observed.last_exit.wire()
    status["failed"] = observed.failed
    status["attempts"] = observed.attempts
    record_env_files(status, observed.env_files if observed.running else None)
    if observed.running:
        status["pid"] = observed.pid
    else:
        status.pop("pid", None)
    if step.action is Action.START:
        if step.fresh:
            for name in ("startTime", "completionTime", "lastExit"):
                status.pop(name, None)
            status.update(attempts=0, failed=0)
        status["attempts"] += 1
        status["startedGeneration"] = generation
        desired.record_start(status)
    if "startedGeneration" in status and not _spec_changed(desired, observed):
        status["startedGeneration"] = generation  # a change of `suspend` alone: the same run
    if status.get("startedGeneration") == generation:
        status["startedSpecHash"] = spec_hash(desired.spec)
    status["phase"] = step.phase
    status["observedGeneration"] = generation
    if desired.spec.suspend and step.outcome is None:
        set_condition(status, SUSPENDED, True, reason="JobSuspended", message="Job suspended",
                      now=now, observed_generation=generation)  # fmt: skip
        if not observed.running:
            status.pop("startTime", None)  # the deadline counts again from the next attempt
    elif not desired.spec.suspend and get_condition(status, SUSPENDED) is not None:
        set_condition(status, SUSPENDED, False, reason="JobResumed", message="Job resumed",
                      now=now, observed_generation=generation)  # fmt: skip
    complete, reason, message = _conditions(step)
    failure = observed.start_failure
    holding = not observed.running and step.phase != "Suspended"  # suspended: says so
    if (
        step.action is not Action.START
        and failure is not None
        and failure.generation == generation
        and holding
    ):
        reason, message = failure.reason, failure.message
    if observed.refused is not None and holding:
        reason, message = observed.refused
    if step.outcome in ("BackoffLimitExceeded", "DeadlineExceeded"):
        recorded = get_condition(observed.status, FAILED)
        if observed.finished == step.outcome and recorded is not None:
            message = str(recorded.get("message", ""))  # keep the first, fuller, words
        else:
            message = f"the job failed: {step.reason}; change its spec to run it again"
    for type_ in (COMPLETE, READY):
        set_condition(status, type_, complete, reason=reason, message=message, now=now,
                      observed_generation=generation)  # fmt: skip
    if step.outcome in ("BackoffLimitExceeded", "DeadlineExceeded"):
        set_condition(status, FAILED, True, reason=str(step.outcome), message=message, now=now,
                      observed_generation=generation)  # fmt: skip
    else:
        remove_condition(status, FAILED)
    return status


def _stopping_status(
    desired: JobDesired, observed: JobObserved, step: JobPlan, now: float
) -> dict[str, Any]:
    """The status while a running attempt is stopped (`step` STOP or RESTART): phase
    Running and `observedGeneration` as they were, `Complete` and `Ready` False with the
    `stopping_reason`. How the run ends, the next look records, once the attempt exited."""
    status = _status(desired, observed, dataclasses.replace(step, outcome=None), now)
    status["phase"] = "Running"
    keep_observed_generation(status, observed.status)
    reason = stopping_reason(step.action, desired.deleting)
    for type_ in (COMPLETE, READY):
        set_condition(status, type_, False, reason=reason, message=step.reason, now=now,
                      observed_generation=desired.generation)  # fmt: skip
    return status


def _conditions(step: JobPlan) -> tuple[bool, str, str]:
    """`Complete` (and `Ready`, which mirrors it) as (status, reason, message). Pure."""
    if step.outcome == "Complete":
        return True, "Completed", "the job completed"
    if step.outcome is not None:
        return False, step.outcome, step.reason
    if step.phase == "Suspended":
        return False, "Suspended", step.reason
    if step.phase == "Waiting":
        return False, "WaitingForDependency", step.reason
    if step.phase == "Running":
        return False, "Running", step.reason
    if step.action is Action.WAIT:
        return False, "BackOff", step.reason
    return False, "Pending", step.reason


def _suspension_events(
    before: Mapping[str, Any], after: Mapping[str, Any]
) -> tuple[PlannedEvent, ...]:
    """`Suspended` or `Resumed` (Kubernetes' Job's events), when the `Suspended` condition
    changes status between the stored status and the new one. Pure."""
    now_ = get_condition(after, SUSPENDED)
    was = get_condition(before, SUSPENDED)
    if now_ is None or (was is not None and was.get("status") == now_.get("status")):
        return ()
    if now_.get("status") == "True":
        return (PlannedEvent("Suspended", "Job suspended"),)
    return (PlannedEvent("Resumed", "Job resumed"),)


def finished_outcome(status: Mapping[str, Any]) -> Outcome | None:
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
