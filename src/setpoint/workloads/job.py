"""The `Job` kind (setpoint.dev/v1alpha1, namespaced, plural `jobs`) and its controller:
run one local command to completion, retrying failures (database migrations, say).

`spec`: `args` (argv, required), `env`, `envFrom` and `envFile`, `cwd`, `user` (as for a
Process), `backoffLimit` (retries after failures), `activeDeadlineSeconds` (optional),
`backoff` (`initialSeconds`, `maxSeconds`: the wait before each retry),
`terminationGracePeriodSeconds`, `stopSignal`, `dependsOn` (see
`setpoint.workloads.dependencies`) and `suspend`. Every default is the schema's
(`JobSpecSchema`); the controller reads the spec through it.

`status`: `phase` (Pending, Waiting, Running, Suspended, Succeeded, Failed), `startTime`
(when the first attempt of the current run started, or first after it was last resumed),
`completionTime` (when it succeeded),
`attempts`, `failed` (attempts that failed), `lastExit` (`ExitSchema`: code, signal,
reason, finishedAt, and `stoppedOnRequest` / `stopReason` when the controller stopped it),
`pid` while an attempt runs, `observedGeneration`, `envFiles` (the env files the running
attempt read, as a Process's: edits noticed, said in an `EnvFileChanged` event, read by
the next attempt; see `setpoint.workloads.env_file_watch`), conditions `Complete`
(True once it succeeded), `Failed` (present only when True: reason
`BackoffLimitExceeded` or `DeadlineExceeded`) and `Ready`, which mirrors `Complete`
(so a `dependsOn` entry may name either condition), and `Suspended` once it has been
suspended (True, reason `JobSuspended`; False, reason `JobResumed`, once resumed), as
Kubernetes' Job. A failed Job is also `Stalled`
(its plan stalls, as a Process's does when it cannot start); it
cannot progress until its spec changes. The controller keeps `startedGeneration` and
`startedSpecHash` for itself: the latest spec generation the current run belongs to, and
a hash of that spec, `suspend` left out (`spec_hash`): a generation that changed only
`suspend` belongs to the same run, so stopping and starting a Job is no change of its spec
(and its `Started` and `Completed` dependencies still hold).

Decisions, made by the pure `plan(desired, observed, now)`, which returns the child
action, the whole new status and the events to emit:

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
* `suspend: true` (as a Kubernetes Job's; `setpoint stop` sets it, `setpoint start`
  clears it) stops a running attempt (its stop signal, its grace period), which counts
  neither as failed nor as completed whatever it exits with, and starts none: phase
  Suspended, `Complete` and `Ready` False with reason `Suspended`, `Suspended` True
  (reason `JobSuspended`), `startTime` cleared (the deadline counts from the first
  attempt after it resumes, as Kubernetes resets it on resume). A Job that has finished
  is not suspended: it stays Succeeded (or Failed). Clearing `suspend` resumes the run:
  the next attempt starts at once (once its dependencies hold), its counts kept.
* a spec change (a new spec hash, `suspend` aside) runs the Job again from scratch: `attempts`,
  `failed`, `startTime` and `completionTime` start over, and a running attempt is
  stopped (not counted as failed) and replaced. Kubernetes Jobs are immutable; setpoint
  users re-apply a changed migration Job and expect it to run, so a finished Job with
  a new spec runs again, while an unchanged one is never re-run, unless asked:
* a restart request (the annotation `setpoint.dev/restartedAt`, set by `setpoint restart`,
  differs from `status.restartedAt`, the request the run was started under) runs the Job
  again from scratch, as a spec change does; once per new value (the start records it).
* deletion (the finalizer `setpoint.dev/job`) stops a running attempt, then lets the
  object go.
* an attempt the plan stops (deletion, a spec change, the deadline) is recorded as
  stopping before its stop signal is sent: `Complete` and `Ready` False with reason
  `Terminating`, `Restarting` or `Stopping` (the stop's reason as message), phase Running
  (and `observedGeneration` unchanged) until it has exited. (A suspension says
  `Suspended` True at once.)
* a start that fails for a reason of the spec fails the Job (`Stalled`, reason
  `StartFailed`) until its spec changes; an OS failure is retried with back-off (phase
  Pending, `Ready=False` with reason `StartFailed` and the error), and is no attempt; a
  missing Secret (or key) keeps it Pending and `Stalled`, reason `SecretMissing`
  (`SecretInvalid`: a value holds a NUL byte), until the Secret changes.
* a `user:` this engine may not run commands as (`setpoint.runtime.run_as.UserPolicy`: an
  engine that is not root cannot switch users; a root engine started with an allow-list
  runs only the users on it) starts nothing: the Job is Pending and `Stalled` (reason
  `UserNotAllowed`, or `UserUnknown` for no such user), once, until its spec or the
  engine's allow-list changes. An attempt of an earlier spec runs on: a refused change
  is not carried out.

`JobController` (wired by `setup`) is a `ChildLifecycle` (`setpoint.workloads.children`,
shared with the Process controller): an attempt's exit enqueues the Job at once, output
goes to `<log_dir>/<namespace>_<name>.log`, and a state file per running attempt in
`state_dir` lets a restarted engine re-adopt it rather than start it twice. Give the
Job controller a `state_dir` of its own: the Process controller treats every state
file in its directory as one of its own children. Changes to Processes and Jobs wake
the Jobs that depend on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

from setpoint.model.wellknown import JOB_FINALIZER
from setpoint.runtime.controller import Controller
from setpoint.runtime.manager import Manager
from setpoint.runtime.plan import parse_time
from setpoint.workloads.child_facts import ChildFacts, ChildKind, observed_fields
from setpoint.workloads.child_plan import Action
from setpoint.workloads.children import ChildLifecycle, ChildSettings, StopTurns, controller_of
from setpoint.workloads.job_plan import (
    COMPLETE,
    FAILED,
    SUSPENDED,
    SUSPENDED_MESSAGE,
    JobDesired,
    JobObserved,
    JobPlan,
    JobSpecSchema,
    JobStatusSchema,
    desired_of,
    finished_outcome,
    interrupted,
    plan,
    spec_hash,
)
from setpoint.workloads.kinds import JOB

__all__ = [
    "COMPLETE",
    "FAILED",
    "FINALIZER",
    "JOB",
    "SUSPENDED",
    "SUSPENDED_MESSAGE",
    "Action",
    "JobController",
    "JobDesired",
    "JobObserved",
    "JobPlan",
    "JobSettings",
    "JobSpecSchema",
    "JobStatusSchema",
    "desired_of",
    "observe",
    "plan",
    "setup",
    "spec_hash",
]

FINALIZER = JOB_FINALIZER
MAX_CONCURRENT = 16
"""Jobs reconciled at once (one key is never reconciled by two workers)."""


def observe(
    status: Mapping[str, Any], facts: ChildFacts, unmet: str | None, now: float
) -> JobObserved:
    """The `JobObserved` of a Job from its stored status, what the lifecycle knows of its
    attempt, and its first unmet dependency. An attempt that ended and did not exit 0
    (an exit code that cannot be known included) counts as failed, unless a suspension
    stopped it. Pure."""
    counts = JobStatusSchema.model_validate(status)
    failed = counts.failed
    if facts.ended is not None and not facts.ended.succeeded and not interrupted(facts.ended):
        failed += 1
    return JobObserved(
        **observed_fields(status, facts, unmet, now),
        started_at=parse_time(counts.start_time),
        attempts=counts.attempts,
        failed=failed,
        finished=finished_outcome(status),
    )


# -- the controller -------------------------------------------------------------------


JobSettings: TypeAlias = ChildSettings
"""Where attempts' state files (`state_dir`, not shared with the Process controller) and
logs (`log_dir`) live."""


class JobController(ChildLifecycle[JobSpecSchema, JobPlan]):
    """Runs each Job to completion as its spec says (see the module docstring).

    `reconcile(request)` is the one entry point; `setup` wires it, so that exits enqueue
    the object. A Job that has Failed stalls (the kit records `Stalled`) until its spec
    changes.
    """

    child_kind = ChildKind(JOB, FINALIZER, JobSpecSchema, observe, plan)

    async def stop_all(self, grace: float | None = None, turns: StopTurns | None = None) -> None:
        """Stop every attempt this controller supervises (for a full shutdown; each when
        `turns` says)."""
        await self._stop_children(grace, turns)


def setup(manager: Manager, settings: JobSettings) -> Controller:
    """Add the Job controller to `manager`; return the controller (its `reconciler` is the
    `JobController`). `settings.state_dir` must not be the Process controller's."""
    return controller_of(manager, JobController, settings)
