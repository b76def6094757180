"""Status conditions as Kubernetes API conventions and kstatus define them. Pure.

A condition is `{type, status: "True"|"False"|"Unknown", reason, message,
lastTransitionTime, observedGeneration}`. `set_condition` keeps
`lastTransitionTime` unless `status` changes: a condition says since when it
has been what it is. Every condition is the object's reconciler's: the runtime writes
none. (`owner`, which an earlier runtime set on the conditions it wrote, is accepted and
dropped by the reconciler kit on its next write.) Time is an argument; nothing here reads
a clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from setpoint.times import rfc3339

ConditionStatus = Literal["True", "False", "Unknown"]

READY = "Ready"
RECONCILING = "Reconciling"
STALLED = "Stalled"


def get_condition(status: Mapping[str, Any] | None, type_: str) -> dict[str, Any] | None:
    """The condition of this type in `status`, or None."""
    for cond in (status or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def is_true(status: dict[str, Any] | None, type_: str) -> bool:
    cond = get_condition(status, type_)
    return cond is not None and cond.get("status") == "True"


def set_condition(
    status: dict[str, Any],
    type_: str,
    value: ConditionStatus | bool,
    *,
    reason: str,
    message: str = "",
    now: float,
    observed_generation: int | None = None,
) -> bool:
    """Set condition `type_` in `status` (in place); return True when anything changed.

    `lastTransitionTime` moves to `now` only when `status` changes (or the
    condition is new); reason, message and observedGeneration are replaced as given (an
    `owner` an earlier runtime wrote goes).
    """
    if isinstance(value, bool):
        value = "True" if value else "False"
    conditions: list[dict[str, Any]] = status.setdefault("conditions", [])
    new: dict[str, Any] = {"type": type_, "status": value, "reason": reason, "message": message}
    if observed_generation is not None:
        new["observedGeneration"] = observed_generation
    for i, old in enumerate(conditions):
        if old.get("type") != type_:
            continue
        same_status = old.get("status") == value
        new["lastTransitionTime"] = old.get("lastTransitionTime") if same_status else rfc3339(now)
        if new["lastTransitionTime"] is None:
            new["lastTransitionTime"] = rfc3339(now)
        if old == new:
            return False
        conditions[i] = new
        return True
    new["lastTransitionTime"] = rfc3339(now)
    conditions.append(new)
    return True


def remove_condition(status: dict[str, Any], type_: str) -> bool:
    """Drop condition `type_`; return True when it was there."""
    conditions = status.get("conditions") or []
    kept = [c for c in conditions if c.get("type") != type_]
    status["conditions"] = kept
    return len(kept) != len(conditions)


def set_ready_summary(
    status: dict[str, Any],
    parts: Sequence[str],
    *,
    now: float,
    observed_generation: int | None = None,
    reason: str = "AllReady",
) -> bool:
    """Set `Ready` from the conditions named in `parts`: True when all of them are True;
    otherwise False with the reason and message of the first that is not (reason
    `<Type>Missing` when it is absent). Returns True when anything changed."""
    for type_ in parts:
        cond = get_condition(status, type_)
        if cond is None:
            return set_condition(status, READY, False, reason=f"{type_}Missing",
                                 message=f"no {type_} condition yet", now=now,
                                 observed_generation=observed_generation)  # fmt: skip
        if cond.get("status") != "True":
            return set_condition(status, READY, False, reason=cond.get("reason") or type_,
                                 message=cond.get("message") or "", now=now,
                                 observed_generation=observed_generation)  # fmt: skip
    return set_condition(status, READY, True, reason=reason, message="", now=now,
                         observed_generation=observed_generation)  # fmt: skip
