"""The columns objects of a kind are listed with, as data: what `setpoint get` prints
(`setpoint.cli.render`) and what the API's `meta.k8s.io/v1` Table answers
(`setpoint.api.tables`) are both made of `columns_for(kind)`, so the two never disagree.

Objects: NAME, READY (the `Ready` condition's status), the kind's own columns
(`Kind.columns`), AGE; wide only: REASON (the Ready reason), GENERATION, RESOURCEVERSION,
LABELS. Core `v1` Events, as kubectl prints them: LAST SEEN, TYPE, REASON, OBJECT,
MESSAGE; wide only: SUBOBJECT and SOURCE (before MESSAGE), FIRST SEEN, COUNT, NAME.

Also the time helpers the cells use (`human_duration` is kubectl's way of printing an
age). Pure: no I/O, and the time a cell is drawn at (`now`) is an argument.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from setpoint.model.conditions import READY, get_condition
from setpoint.model.kinds import Kind, PrinterColumn
from setpoint.model.meta import Object
from setpoint.times import parse_rfc3339


@dataclass(frozen=True)
class Column:
    """One column: its header (as printed), how a cell is drawn from an object at `now`,
    whether it shows only in the wide view (a Table's priority 1), and its Table type."""

    name: str
    cell: Callable[[Object, float], str]
    wide: bool = False
    type: str = "string"
    format: str = ""
    description: str = ""


def columns_for(kind: Kind) -> tuple[Column, ...]:
    """The columns of `kind`: kubectl's for core `v1` Events, else `object_columns`."""
    if (kind.api_version, kind.kind) == ("v1", "Event"):
        return EVENT_COLUMNS
    return object_columns(kind.columns)


def object_columns(columns: tuple[PrinterColumn, ...] = ()) -> tuple[Column, ...]:
    """NAME, READY, `columns`, AGE; wide: REASON, GENERATION, RESOURCEVERSION, LABELS."""
    return (
        Column("NAME", _name, format="name", description=_NAME_DOC),
        Column("READY", _ready, description="The status of the Ready condition."),
        *(Column(c.name, _printer_cell(c), description=f"The value of {c.path}.") for c in columns),
        Column("AGE", age, type="date", description="The time since the object was created."),
        Column("REASON", _ready_reason, wide=True, description="The reason of Ready."),
        Column("GENERATION", _meta("generation"), wide=True, type="integer"),
        Column("RESOURCEVERSION", _meta("resourceVersion"), wide=True),
        Column("LABELS", _labels, wide=True),
    )


_NAME_DOC = "Name must be unique within a namespace."


def _printer_cell(column: PrinterColumn) -> Callable[[Object, float], str]:
    return lambda obj, _now: column.value(obj)


def _name(obj: Object, _now: float = 0.0) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _ready(obj: Object, _now: float) -> str:
    ready = get_condition(obj.get("status"), READY)
    return str(ready["status"]) if ready else "-"


def _ready_reason(obj: Object, _now: float) -> str:
    ready = get_condition(obj.get("status"), READY)
    return str(ready.get("reason") or "-") if ready else "-"


def _meta(field: str) -> Callable[[Object, float], str]:
    return lambda obj, _now: str((obj.get("metadata") or {}).get(field, "-"))


def _labels(obj: Object, _now: float) -> str:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "<none>"


# -- time -----------------------------------------------------------------------------


def human_duration(seconds: float) -> str:
    """An age as kubectl prints it: `45s`, `5m30s`, `95m`, `7h12m`, `3d4h`, `400d`, `2y10d`."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 3 * 60:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    if days < 365 * 8:
        return f"{days // 365}y{days % 365}d" if days % 365 else f"{days // 365}y"
    return f"{days // 365}y"


def age(obj: Object, now: float) -> str:
    """How long ago the object was created, or `<unknown>`."""
    return timestamp_age((obj.get("metadata") or {}).get("creationTimestamp"), now)


def timestamp_age(timestamp: Any, now: float) -> str:
    """How long before `now` an RFC 3339 `timestamp` was: `<unknown>` if none, `<invalid>`."""
    if not isinstance(timestamp, str) or not timestamp:
        return "<unknown>"
    try:
        return human_duration(now - parse_rfc3339(timestamp))
    except ValueError:
        return "<invalid>"


def _timestamp(value: Any) -> float | None:
    if isinstance(value, str) and value:
        try:
            return parse_rfc3339(value)
        except ValueError:
            return None
    return None


# -- events -----------------------------------------------------------------------------


def event_last_seen(event: Object) -> float | None:
    """When an `Event` last happened: lastTimestamp, else eventTime, firstTimestamp, creation."""
    for value in (
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        seen = _timestamp(value)
        if seen is not None:
            return seen
    return None


def event_first_seen(event: Object) -> float | None:
    """When an `Event` first happened: firstTimestamp, else eventTime, else its last time."""
    for value in (event.get("firstTimestamp"), event.get("eventTime")):
        seen = _timestamp(value)
        if seen is not None:
            return seen
    return event_last_seen(event)


def _since(at: float | None, now: float) -> str:
    return "<unknown>" if at is None else human_duration(now - at)


def event_interval(event: Object, now: float) -> str:
    """`5s`, or `5s (x3 over 2m)` for an event seen `count` > 1 times (kubectl's LAST SEEN)."""
    last = _since(event_last_seen(event), now)
    count = event.get("count")
    if isinstance(count, int) and count > 1:
        return f"{last} (x{count} over {_since(event_first_seen(event), now)})"
    return last


def event_object(event: Object, _now: float = 0.0) -> str:
    """`greeting/hello`: the involved object, its kind in lower case (as kubectl)."""
    ref = event.get("involvedObject") or {}
    kind = str(ref.get("kind") or "").lower()
    return f"{kind}/{ref['name']}" if ref.get("name") else kind


def event_source(event: Object, _now: float = 0.0) -> str:
    """`component, host`: who reported the event (the reporting component if no source)."""
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    host = source.get("host") or event.get("reportingInstance") or ""
    return f"{component}, {host}" if host else str(component)


def _field(name: str) -> Callable[[Object, float], str]:
    return lambda obj, _now: str(obj.get(name) or "")


EVENT_COLUMNS = (
    Column("LAST SEEN", event_interval, description="When the event last happened."),
    Column("TYPE", _field("type"), description="Normal or Warning."),
    Column("REASON", _field("reason"), description="Why the event happened, in one word."),
    Column("OBJECT", event_object, description="The object the event is about."),
    Column(
        "SUBOBJECT",
        lambda obj, _now: str((obj.get("involvedObject") or {}).get("fieldPath") or ""),
        wide=True,
    ),
    Column("SOURCE", event_source, wide=True),
    Column(
        "MESSAGE",
        lambda obj, _now: " ".join(str(obj.get("message") or "").split()),
        description="What happened, for a person.",
    ),
    Column("FIRST SEEN", lambda obj, now: _since(event_first_seen(obj), now), wide=True),
    Column("COUNT", lambda obj, _now: str(obj.get("count") or 1), wide=True, type="integer"),
    Column("NAME", _name, wide=True, format="name"),
)
"""The columns of core `v1` Events, as kubectl prints them."""
