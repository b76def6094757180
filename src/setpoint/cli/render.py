"""Objects as text: kubectl-style tables (kubectl's own columns for `Event`s), YAML, JSON and
`kind.group/name` references; and `escape`, the one function that makes any text safe
for a terminal (defined in `setpoint.cli.escaping`, which `main` imports before anything
else, and re-exported here).

Every line the CLI prints goes through `escape`: `main` wraps stdout and stderr in
`EscapedOutput` for the whole command, so a name, message or reason holding an ANSI
escape or another control character is shown as `\\x1b[31m`, never obeyed by the
terminal. Only what must be raw bypasses it: `logs` copies a child's output byte for
byte (as `kubectl logs` does), and the live view hands rich the raw stream after
escaping each cell itself.

Pure: no I/O (`EscapedOutput` writes only where it is told), and the time a table is
drawn at (`now`) is an argument.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from typing import Any

from setpoint.cli.escaping import EscapedOutput as EscapedOutput
from setpoint.cli.escaping import escape as escape
from setpoint.clock import parse_rfc3339
from setpoint.model import READY, Kind, Object, PrinterColumn, get_condition
from setpoint.runtime import EVENT

GAP = "   "
"""Space between table columns (kubectl's tabwriter padding)."""


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


def resource_name(kind: Kind) -> str:
    """`greeting.example.com`: the singular, qualified by group (kubectl's resource name)."""
    return f"{kind.singular}.{kind.group}" if kind.group else kind.singular


def object_ref(kind: Kind, name: str) -> str:
    """`greeting.example.com/hello`: how `apply` and `get -o name` name an object."""
    return f"{resource_name(kind)}/{name}"


def _name(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _labels(obj: Object) -> str:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "<none>"


class Table:
    """The columns `get` prints for objects of one kind.

    NAME, READY (the `Ready` condition's status, `-` when there is none), the kind's own
    columns (`Kind.columns`), AGE; `wide` adds the Ready reason, generation,
    resourceVersion and labels;
    `namespaces` puts NAMESPACE first; `events` puts the watch EVENT type first.
    """

    def __init__(
        self,
        *,
        wide: bool = False,
        namespaces: bool = False,
        events: bool = False,
        columns: Sequence[PrinterColumn] = (),
    ):
        self.wide = wide
        self.namespaces = namespaces
        self.events = events
        self.columns = tuple(columns)

    def header(self) -> list[str]:
        cols = ["NAME", "READY", *(c.name for c in self.columns), "AGE"]
        if self.wide:
            cols += ["REASON", "GENERATION", "RESOURCEVERSION", "LABELS"]
        if self.namespaces:
            cols.insert(0, "NAMESPACE")
        if self.events:
            cols.insert(0, "EVENT")
        return cols

    def row(self, obj: Object, now: float, event: str = "") -> list[str]:
        meta = obj.get("metadata") or {}
        ready = get_condition(obj.get("status"), READY)
        cells = [
            _name(obj),
            str(ready["status"]) if ready else "-",
            *(c.value(obj) for c in self.columns),
            age(obj, now),
        ]
        if self.wide:
            cells += [
                str(ready.get("reason") or "-") if ready else "-",
                str(meta.get("generation", "-")),
                str(meta.get("resourceVersion", "-")),
                _labels(obj),
            ]
        if self.namespaces:
            cells.insert(0, str(meta.get("namespace") or "-"))
        if self.events:
            cells.insert(0, event)
        return cells


def _timestamp(value: Any) -> float | None:
    if isinstance(value, str) and value:
        try:
            return parse_rfc3339(value)
        except ValueError:
            return None
    return None


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


def event_sort_key(event: Object) -> tuple[float, int, str, str]:
    """Oldest first, as kubectl sorts events: by last time; within a second (timestamps are
    whole seconds), in the order they were last written (resourceVersion)."""
    seen = event_last_seen(event)
    version = str((event.get("metadata") or {}).get("resourceVersion") or "")
    written = int(version) if version.isdigit() else 0
    return (seen if seen is not None else float("-inf"), written, *sort_key(event))


def _since(at: float | None, now: float) -> str:
    return "<unknown>" if at is None else human_duration(now - at)


def event_interval(event: Object, now: float) -> str:
    """`5s`, or `5s (x3 over 2m)` for an event seen `count` > 1 times (kubectl's LAST SEEN)."""
    last = _since(event_last_seen(event), now)
    count = event.get("count")
    if isinstance(count, int) and count > 1:
        return f"{last} (x{count} over {_since(event_first_seen(event), now)})"
    return last


def event_object(event: Object) -> str:
    """`greeting/hello`: the involved object, its kind in lower case (as kubectl)."""
    ref = event.get("involvedObject") or {}
    kind = str(ref.get("kind") or "").lower()
    return f"{kind}/{ref['name']}" if ref.get("name") else kind


def event_source(event: Object) -> str:
    """`component, host`: who reported the event (the reporting component if no source)."""
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    host = source.get("host") or event.get("reportingInstance") or ""
    return f"{component}, {host}" if host else str(component)


class EventTable:
    """The columns of `get events` and `events`, as kubectl prints `Event`s.

    LAST SEEN, TYPE, REASON, OBJECT, MESSAGE; `wide` adds SUBOBJECT, SOURCE,
    FIRST SEEN, COUNT and NAME; `namespaces` and `events` as `Table`.
    """

    def __init__(self, *, wide: bool = False, namespaces: bool = False, events: bool = False):
        self.wide = wide
        self.namespaces = namespaces
        self.events = events

    def header(self) -> list[str]:
        cols = ["LAST SEEN", "TYPE", "REASON", "OBJECT"]
        if self.wide:
            cols += ["SUBOBJECT", "SOURCE"]
        cols.append("MESSAGE")
        if self.wide:
            cols += ["FIRST SEEN", "COUNT", "NAME"]
        if self.namespaces:
            cols.insert(0, "NAMESPACE")
        if self.events:
            cols.insert(0, "EVENT")
        return cols

    def row(self, obj: Object, now: float, event: str = "") -> list[str]:
        meta = obj.get("metadata") or {}
        cells = [
            event_interval(obj, now),
            str(obj.get("type") or ""),
            str(obj.get("reason") or ""),
            event_object(obj),
        ]
        if self.wide:
            cells += [
                str((obj.get("involvedObject") or {}).get("fieldPath") or ""),
                event_source(obj),
            ]
        cells.append(" ".join(str(obj.get("message") or "").split()))
        if self.wide:
            cells += [
                _since(event_first_seen(obj), now),
                str(obj.get("count") or 1),
                _name(obj),
            ]
        if self.namespaces:
            cells.insert(0, str(meta.get("namespace") or "-"))
        if self.events:
            cells.insert(0, event)
        return cells


def table_for(
    kind: Kind, *, wide: bool = False, namespaces: bool = False, events: bool = False
) -> Table | EventTable:
    """The columns `get` prints for `kind`: kubectl's event columns for `Event`, else `Table`'s."""
    if (kind.api_version, kind.kind) == (EVENT.api_version, EVENT.kind):
        return EventTable(wide=wide, namespaces=namespaces, events=events)
    return Table(wide=wide, namespaces=namespaces, events=events, columns=kind.columns)


def column_widths(rows: Sequence[Sequence[str]]) -> list[int]:
    widths: list[int] = []
    for row in rows:
        for i, cell in enumerate(row):
            if i == len(widths):
                widths.append(0)
            widths[i] = max(widths[i], len(cell))
    return widths


def format_row(row: Sequence[str], widths: Sequence[int]) -> str:
    """One line, each cell padded to its column's width (a longer cell just pushes on)."""
    cells = [cell.ljust(widths[i]) if i < len(widths) else cell for i, cell in enumerate(row)]
    return GAP.join(cells).rstrip()


def format_table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows (the header first) as aligned lines."""
    widths = column_widths(rows)
    return [format_row(row, widths) for row in rows]


ELLIPSIS = "…"


def _cells(char: str) -> int:
    """Terminal columns of one character: 0 for a combining mark, 2 for a wide one."""
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def text_width(text: str) -> int:
    """Terminal columns `text` takes (one line, escaped)."""
    return sum(_cells(char) for char in text)


def cut(text: str, width: int) -> str:
    """`text` in at most `width` terminal columns, ending in `…` when cut."""
    if text_width(text) <= width:
        return text
    kept, used = [], 0
    for char in text:
        used += _cells(char)
        if used > width - 1:
            break
        kept.append(char)
    return "".join(kept) + ELLIPSIS if width > 0 else ""


def fit_table(
    rows: Sequence[Sequence[str]], width: int, give_way: Sequence[tuple[int, int]]
) -> list[list[str]]:
    """`rows` (the header first) with cells cut so that `format_table`'s lines fit in `width`
    columns: each (column, least) of `give_way` in turn is narrowed, down to `least`
    columns, until they fit (or all have given what they can; then lines stay longer)."""
    widths = column_widths(rows)
    excess = sum(widths) + len(GAP) * (len(widths) - 1) - width
    for column, least in give_way:
        given = min(max(0, excess), max(0, widths[column] - least))
        widths[column] -= given
        excess -= given
    return [[cut(cell, widths[i]) for i, cell in enumerate(row)] for row in rows]


def sort_key(obj: Object) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def as_list(items: Sequence[Object], revision: int | None = None) -> Object:
    """Several objects as one document, the way kubectl prints them (`kind: List`)."""
    meta = {"resourceVersion": str(revision) if revision is not None else ""}
    return {"apiVersion": "v1", "kind": "List", "metadata": meta, "items": list(items)}


def to_yaml(doc: Any) -> str:
    import yaml  # here: only -o yaml pays for it

    return yaml.safe_dump(doc, sort_keys=True, default_flow_style=False, allow_unicode=True)


def to_json(doc: Any, *, compact: bool = False) -> str:

    if compact:
        return json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(doc, sort_keys=True, ensure_ascii=False, indent=4)
