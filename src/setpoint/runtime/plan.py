"""The plan vocabulary: what every built-in controller's pure `plan` returns. No I/O, no clock.

A kind's `plan(desired, observed, now) -> Plan` decides; the reconciler kit
(`setpoint.runtime.kit`) carries the decision out. `Plan` is the part every kind shares:
the whole new `status` (None: write nothing), the `events` to record, a `stall` (reason,
message: the object cannot progress without a change from outside, shown as its
`Stalled` condition, with `Ready` False for the same reason) and `requeue_after` (look
again in that many seconds). A kind's plan subclasses it with its own actions.

Times in a status are text: `timestamp` writes one (milliseconds: back-off needs better
than whole seconds), `parse_time` reads one back. Nothing here may import the clock, the
store or anything that does I/O (an import-linter contract holds every plan module to it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from setpoint.times import parse_rfc3339

__all__ = ["Plan", "PlannedEvent", "parse_time", "timestamp"]


@dataclass(frozen=True, slots=True)
class PlannedEvent:
    """An event a plan emits: Normal (or Warning), its reason and message."""

    reason: str
    message: str
    warning: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """What every kind's plan says (see the module docstring); kinds subclass it."""

    status: Mapping[str, Any] | None = None
    events: tuple[PlannedEvent, ...] = ()
    stall: tuple[str, str] | None = None
    requeue_after: float | None = None


def timestamp(ts: float) -> str:
    """RFC 3339 with milliseconds (back-off needs better than whole seconds)."""
    text = datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def parse_time(value: Any) -> float | None:
    """The epoch seconds of an RFC 3339 status time; None if absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError:
        return None
