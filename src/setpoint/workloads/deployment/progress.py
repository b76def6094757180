"""A Deployment's progress and status, decided purely: the replica counts, whether the
rollout progressed or missed `progressDeadlineSeconds` (and what `spec.remediation` does
then), and the conditions `Available`, `Progressing`, `ReplicaFailure`, `Stalled` and
`Ready`. The Deployment's reconciler owns all of them, `Stalled` included. A template
whose `user:` the engine may not use makes `Progressing` and `Ready` False and `Stalled`
True, with the refusal's reason and message, and no deadline runs.

A look that finds nothing new changes nothing: `lastProgressTime` moves only when the
rollout progresses (or a wait for dependencies ends, which starts the deadline), and the
deadline's event and remediation happen once, when it is first missed. No I/O, no clock:
`now` is an argument.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from setpoint.model import READY, STALLED, get_condition, remove_condition, set_condition
from setpoint.runtime.plan import PlannedEvent, parse_time, timestamp
from setpoint.workloads.deployment.inputs import Desired, Observed, ReplicaSets
from setpoint.workloads.deployment.kind import AVAILABLE, PROGRESSING, REPLICA_FAILURE

DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
WAITING = "WaitingForDependency"


@dataclass(frozen=True, slots=True)
class Rollback:
    """Put the template of revision `revision` back into the spec (remediation)."""

    revision: int
    template: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Progress:
    """The status to record, events, a remediation (a `rollback`, or replicas to
    `restart`), and when to look again."""

    status: Mapping[str, Any]
    events: tuple[PlannedEvent, ...] = ()
    rollback: Rollback | None = None
    restart: tuple[str, ...] = ()
    requeue_after: float | None = None


def progress(
    desired: Desired,
    observed: Observed,
    sets: ReplicaSets,
    *,
    revision: int,
    waiting: bool,
    failures: Sequence[str],
    now: float,
) -> Progress:
    """The status of a Deployment whose current template is revision `revision`, which is
    `waiting` for its dependencies (no replica runs yet) or not, and whose replicas cannot
    be created for the reasons in `failures`."""
    spec = desired.spec
    min_ready = spec.min_ready_seconds
    previous = observed.status
    was = get_condition(previous, PROGRESSING) or {}
    available = [r for r in sets.live if r.available(now, min_ready)]
    updated_available = [r for r in sets.new if r.available(now, min_ready)]
    counts = {
        "replicas": len(sets.live),
        "updatedReplicas": len(sets.new),
        "readyReplicas": sum(r.ready for r in sets.live),
        "availableReplicas": len(available),
        "unavailableReplicas": max(0, spec.replicas - len(available)),
        "terminatingReplicas": len(sets.terminating),
    }
    complete = (
        len(sets.new) == spec.replicas
        and len(sets.live) == spec.replicas
        and len(updated_available) == spec.replicas
    )
    status: dict[str, Any] = copy.deepcopy(dict(previous))
    status.update(counts)
    status["currentRevision"] = revision
    status["selector"] = desired.selector
    refused = observed.refused
    progressed = (
        not waiting
        and refused is None
        and (
            previous.get("observedGeneration") != desired.generation
            or was.get("reason") == WAITING
            or any(
                counts[k] > int(previous.get(k, 0))
                for k in ("updatedReplicas", "readyReplicas", "availableReplicas")
            )
            or len(sets.old) < int(previous.get("oldReplicas", len(sets.old)))
        )
    )
    status["oldReplicas"] = len(sets.old)
    if progressed or "lastProgressTime" not in status:
        status["lastProgressTime"] = timestamp(now)
    last_progress = parse_time(status["lastProgressTime"])
    if last_progress is None:
        last_progress = now
    gen = desired.generation
    status["observedGeneration"] = gen

    def cond(type_: str, value: bool, reason: str, message: str) -> None:
        set_condition(status, type_, value, reason=reason, message=message, now=now,
                      observed_generation=gen)  # fmt: skip

    min_available = max(0, spec.replicas - spec.max_unavailable)
    if len(available) >= min_available:
        cond(AVAILABLE, True, "MinimumReplicasAvailable",
             f"{len(available)} of {spec.replicas} available")  # fmt: skip
    else:
        cond(AVAILABLE, False, "MinimumReplicasUnavailable",
             f"{len(available)} available, {min_available} needed")  # fmt: skip

    remedy = _Remedy()
    requeue_after: float | None = None
    exceeded = False
    if refused is not None:
        cond(PROGRESSING, False, *refused)
    elif complete:
        status["lastCompleteRevision"] = revision
        cond(PROGRESSING, True, "NewReplicaSetAvailable", f"revision {revision} is rolled out")
    elif waiting:
        cond(PROGRESSING, True, WAITING, observed.unmet or "")
    elif now - last_progress > spec.progress_deadline_seconds:
        exceeded = True
        message = (
            f"revision {revision} made no progress for {spec.progress_deadline_seconds:g}s "
            f"({len(updated_available)} of {spec.replicas} updated replicas available)"
        )
        first = was.get("reason") != DEADLINE_EXCEEDED
        remedy = _remediate(desired, observed, sets, revision, message, first=first)
        if first and spec.remediation == "restart":
            status["lastProgressTime"] = timestamp(now)  # the restarted replicas get a new deadline
        cond(PROGRESSING, False, DEADLINE_EXCEEDED, message)
    else:
        done = f"{len(updated_available)} of {spec.replicas} updated replicas available"
        cond(PROGRESSING, True, "ReplicaSetUpdated", done)
        remaining = spec.progress_deadline_seconds - (now - last_progress)
        requeue_after = max(0.001, remaining + 0.001)

    failures = [*failures, *(f"{r.name}: {r.failure}" for r in sets.live if r.failure)]
    if failures:
        cond(REPLICA_FAILURE, True, "ReplicaFailure", "; ".join(failures))
    else:
        remove_condition(status, REPLICA_FAILURE)
    if refused is not None:
        cond(STALLED, True, *refused)
    elif exceeded and remedy.rollback is None and spec.remediation != "restart":
        cond(STALLED, True, DEADLINE_EXCEEDED, _stall_message(desired, status))
    else:
        remove_condition(status, STALLED)
    # Only surplus replicas of the current revision left (a scale-down): as ready as complete.
    serving = len(updated_available) >= spec.replicas and len(sets.live) == len(sets.new)
    ready, reason, message = _readiness(desired, observed, status, complete or serving, exceeded)
    cond(READY, ready, reason, message)

    # a replica is Ready but waits out minReadySeconds to be available: look again then
    pending = [
        r.ready_since + min_ready - now
        for r in sets.live
        if min_ready and r.ready and r.ready_since is not None and not r.available(now, min_ready)
    ]
    if pending:
        wake = max(0.001, min(pending) + 0.001)
        requeue_after = wake if requeue_after is None else min(requeue_after, wake)
    return Progress(status, remedy.events, remedy.rollback, remedy.restart, requeue_after)


def with_failed_create(
    status: Mapping[str, Any], message: str, *, generation: int, now: float
) -> dict[str, Any]:
    """`status` with `ReplicaFailure` saying a replica could not be created (`message`)."""
    failed = copy.deepcopy(dict(status))
    set_condition(failed, REPLICA_FAILURE, True, reason="FailedCreate", message=message,
                  now=now, observed_generation=generation)  # fmt: skip
    return failed


class _Remedy(NamedTuple):
    """What a missed deadline calls for: events, and a remediation."""

    events: tuple[PlannedEvent, ...] = ()
    rollback: Rollback | None = None
    restart: tuple[str, ...] = ()


def _remediate(
    desired: Desired,
    observed: Observed,
    sets: ReplicaSets,
    revision: int,
    message: str,
    *,
    first: bool,
) -> _Remedy:
    """What `spec.remediation` does about a missed deadline. A rollback is asked for at
    every look until the spec has gone back (it is idempotent, and a write that lost a
    race is tried again); the events, and a restart, only when the deadline is `first`
    missed."""
    rollback = None
    if desired.spec.remediation == "rollback":
        good = observed.status.get("lastCompleteRevision")
        target = next((r for r in observed.revisions if r.number == good), None)
        if target is not None and good != revision:
            rollback = Rollback(target.number, target.template)
    if not first:
        return _Remedy(rollback=rollback)
    events = [PlannedEvent(DEADLINE_EXCEEDED, message, warning=True)]
    restart: tuple[str, ...] = ()
    if rollback is not None:
        back = f"rolling back to revision {rollback.revision}: {message}"
        events.append(PlannedEvent("RolledBack", back, warning=True))
    elif desired.spec.remediation == "restart":
        restart = tuple(r.name for r in sets.new if not r.ready)
        restarting = f"restarting {len(restart)} replica(s) not ready: {message}"
        events.append(PlannedEvent("Restarted", restarting, warning=True))
    return _Remedy(tuple(events), rollback, restart)


def _stall_message(desired: Desired, status: Mapping[str, Any]) -> str:
    message = (get_condition(status, PROGRESSING) or {}).get("message") or (
        f"no progress for {desired.spec.progress_deadline_seconds:g}s"
    )
    if desired.spec.remediation == "rollback":
        return f"{message}; no earlier revision completed, nothing to roll back to"
    return f"{message}; remediation is none: fix the template or roll back"


def _readiness(
    desired: Desired,
    observed: Observed,
    status: Mapping[str, Any],
    complete: bool,
    exceeded: bool,
) -> tuple[bool, str, str]:
    if observed.refused is not None:
        return False, *observed.refused
    if observed.unmet is not None:
        running = any(not r.deleting for r in observed.replicas)
        reason = "DependencyNotReady" if running else WAITING
        return False, reason, observed.unmet
    if exceeded:
        message = (get_condition(status, PROGRESSING) or {}).get("message") or ""
        return False, DEADLINE_EXCEEDED, message
    available = get_condition(status, AVAILABLE) or {}
    if available.get("status") != "True":
        return False, "ReplicasUnavailable", str(available.get("message") or "")
    if not complete:
        return (
            False,
            "RollingUpdate",
            str((get_condition(status, PROGRESSING) or {}).get("message") or "rolling out"),
        )
    return True, "Available", f"{desired.spec.replicas} replicas available"
