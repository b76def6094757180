"""How an object is doing, decided in one place: ready, progressing, failed, or none (it
has no `Ready` condition). The CLI's live view (`setpoint.cli.status_table`), the
dashboard (the API sends the state of each object and of each timeline entry,
`setpoint.api.insight`) and the rules table the dashboard's page reads (`RULES`) all come
from here, so that a newcomer sees the same word in every door.

* **failed** (red): will not get Ready without a change from outside or a retry: a
  failure condition is True (`Stalled`, a Job's `Failed`, a Deployment's
  `ReplicaFailure`), or `Ready` is False for a reason of `FAILED_REASONS` (crash loop, a
  non-zero exit its policy does not restart, a failed start, ...), or a readiness probe
  fails on an object that had been Ready since it last started (`PROBE_FAILED_REASONS`).
* **progressing** (yellow): not Ready yet and nothing says it cannot get there: waiting
  for a dependency, a probe pending, starting, stopping. A readiness probe that fails
  before the object was ever Ready is still starting (a database that takes a few
  seconds to accept connections).
* **ready** (green): `Ready` is True, or it finished as it should (`DONE_REASONS`).
* **none** (`-`): no `Ready` condition at all (an Event, a CRD, a Secret, not yet
  reconciled).

Consistent with `setpoint explain` (`insight.ranking.target_state`): an object that is
ready is healthy there; one that is failed or progressing is not Ready, which explain
looks into; only failed is a failure to list.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

READY, STALLED = "Ready", "Stalled"
"""The condition types (`setpoint.model`'s; not imported: that package reads the clock)."""
Object = Mapping[str, Any]


def get_condition(status: Mapping[str, Any] | None, type_: str) -> Mapping[str, Any] | None:
    """The condition of `type_` in `status`, if any."""
    for condition in (status or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == type_:
            return condition
    return None


class Health(enum.Enum):
    """How an object is doing; see the module docstring."""

    READY = "ready"
    """Ready=True (or finished as it should: reason `Completed`)."""
    PROGRESSING = "progressing"
    """Not Ready yet, and nothing says it cannot get there: starting, waiting, stopping."""
    FAILED = "failed"
    """Stalled, failed, crash-looping: it will not get Ready without a change or a retry."""
    UNKNOWN = "none"
    """No Ready condition (yet): shown as `-`."""


FAILURE_CONDITIONS = (STALLED, "Failed", "ReplicaFailure")
"""Conditions that, when True, mean the object failed (Stalled: kstatus's; Failed: a Job's;
ReplicaFailure: a Deployment's)."""

FAILED_REASONS = frozenset(
    {
        "CrashLoopBackOff",  # Process: restarting after exits, with a back-off
        "Failed",  # Process: exited, and its restartPolicy starts it no more
        "StartFailed",  # Process, Job: the command could not be started
        "SecretMissing",  # Process, Job: a Secret (or key) it needs is missing
        "SecretInvalid",  # Process, Job: a Secret's value cannot be used
        "BackOff",  # Job: an attempt failed, the next waits out its back-off
        "BackoffLimitExceeded",  # Job
        "DeadlineExceeded",  # Job: activeDeadlineSeconds
        "ProgressDeadlineExceeded",  # Deployment
        "ListenFailed",  # Service: its port cannot be bound
    }
)
"""Reasons of a False `Ready` condition that mean failed. Any other reason of a False or
Unknown `Ready` (WaitingForDependency, DependencyNotReady, ReadinessProbePending,
Terminating, Running, a reason of a kind we do not know, ...) means progressing."""

PROBE_FAILED_REASONS = frozenset({"ReadinessProbeFailed"})
"""Reasons of a False `Ready` that mean failed once the object had been Ready since it
last started, and progressing before (it is still starting). An object says which by its
times (`ready_since_start`); the timeline by the entries before."""

DONE_REASONS = frozenset({"Completed"})
"""Reasons of a False `Ready` that mean finished as it should (a Process that exited 0)."""

FAILED_EVENT_REASONS = frozenset({"Unhealthy"})
"""Reasons of Warning events that, like `PROBE_FAILED_REASONS`, mean failed only once the
object had been Ready (a probe failing while it starts is not a failure yet). Every other
Warning event is a failure."""


def _failure(status: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The first condition of `FAILURE_CONDITIONS` that is True, if any."""
    for type_ in FAILURE_CONDITIONS:
        condition = get_condition(status, type_)
        if condition is not None and condition.get("status") == "True":
            return condition
    return None


def ready_health(ready: Mapping[str, Any] | None, *, was_ready: bool = True) -> Health:
    """The health a `Ready` condition alone says (None: `UNKNOWN`)."""
    if ready is None:
        return Health.UNKNOWN
    reason = ready.get("reason")
    if ready.get("status") == "True" or reason in DONE_REASONS:
        return Health.READY
    if reason in FAILED_REASONS or (was_ready and reason in PROBE_FAILED_REASONS):
        return Health.FAILED
    return Health.PROGRESSING


def health(obj: Object, *, was_ready: bool | None = None) -> Health:
    """`obj`'s health, from its conditions (see the module docstring); `was_ready`: whether
    it had been Ready since it last started (None: as `ready_since_start` reads it)."""
    status = obj.get("status") or {}
    if _failure(status) is not None:
        return Health.FAILED
    ready = get_condition(status, READY)
    if was_ready is None:
        was_ready = ready_since_start(status, ready)
    return ready_health(ready, was_ready=was_ready)


def ready_since_start(status: Mapping[str, Any], ready: Mapping[str, Any] | None) -> bool:
    """Whether a False `Ready` turned False after the child last started (`startTime`):
    then it had been Ready in this run (a False `Ready` keeps its `lastTransitionTime`
    through starting, waiting and probing, so one from before the start means it was
    never Ready since). True when either time is missing or not a time."""
    if ready is None:
        return True
    try:
        started = _time(status.get("startTime"))
        changed = _time(ready.get("lastTransitionTime"))
    except ValueError:
        return True
    return started is None or changed is None or changed > started


def _time(value: Any) -> datetime | None:
    """An RFC 3339 time (None when absent); `ValueError` when it is not one."""
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def headline(obj: Object) -> str:
    """`reason: message` of what says most about `obj`: a failure condition that is True,
    else `Ready`; empty when there is neither."""
    status = obj.get("status") or {}
    condition = _failure(status) or get_condition(status, READY)
    return condition_text(condition) if condition is not None else ""


def condition_text(condition: Mapping[str, Any]) -> str:
    """`reason: message`, whitespace folded to single spaces."""
    parts = (condition.get("reason"), condition.get("message"))
    return ": ".join(" ".join(str(p).split()) for p in parts if p)


# -- timeline entries ---------------------------------------------------------------------


def _ref_key(entry: Mapping[str, Any]) -> tuple[str, str, str] | None:
    ref = entry.get("object")
    if not isinstance(ref, Mapping):
        return None
    return (str(ref.get("kind")), str(ref.get("namespace") or "default"), str(ref.get("name")))


def entry_health(entries: Iterable[Mapping[str, Any]]) -> list[Health | None]:
    """The health each timeline entry (oldest first) says of its object, None for an
    entry that says none (a change, a log line, a write, an edge, a Normal event):

    * a condition: `FAILURE_CONDITIONS` True -> failed (False -> None); `Ready` as
      `ready_health`, with `was_ready` from the entries before it;
    * an exit: failed when it was not asked for (`stoppedOnRequest`) and its code is not
      0 or a signal ended it, else None;
    * a Warning event: failed (an `Unhealthy` one only once its object had been Ready).
    """
    was_ready: set[tuple[str, str, str]] = set()
    out: list[Health | None] = []
    for entry in entries:
        key = _ref_key(entry)
        found: Health | None = None
        kind = entry.get("type")
        if kind == "condition":
            condition = entry.get("condition") or {}
            type_ = condition.get("type")
            if type_ in FAILURE_CONDITIONS:
                found = Health.FAILED if condition.get("status") == "True" else None
            elif type_ == READY:
                found = ready_health(condition, was_ready=key in was_ready)
                if condition.get("status") == "True" and key is not None:
                    was_ready.add(key)
        elif kind == "exit":
            failed = entry.get("exitCode") not in (0, None) or bool(entry.get("signal"))
            found = Health.FAILED if failed and not entry.get("stoppedOnRequest") else None
        elif kind == "event" and entry.get("eventType") == "Warning":
            probe = entry.get("reason") in FAILED_EVENT_REASONS
            found = Health.FAILED if not probe or key in was_ready else Health.PROGRESSING
        out.append(found)
    return out


RULES: Mapping[str, Any] = {
    "readyCondition": READY,
    "failureConditions": list(FAILURE_CONDITIONS),
    "failedReasons": sorted(FAILED_REASONS),
    "probeFailedReasons": sorted(PROBE_FAILED_REASONS),
    "doneReasons": sorted(DONE_REASONS),
}
"""The rules above as data, for the dashboard's page to classify an object that came on
the watch with the same rules (`api/ui/util.js` reads them and follows `health`'s steps,
`ready_since_start` included; it holds no list of its own). A test runs that code in
Chromium against `health` on the same objects."""
