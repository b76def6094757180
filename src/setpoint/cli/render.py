"""Objects as text: kubectl-style tables (kubectl's own columns for `Event`s; the columns
themselves, and the age and event helpers re-exported here, are `setpoint.model.columns`,
shared with the API's Table answers), YAML, JSON and `kind.group/name` references; and
`escape`, the one function that makes any text safe for a terminal (defined in
`setpoint.cli.escaping`, which `main` imports before anything else, and re-exported here).

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
from setpoint.model import Kind, Object
from setpoint.model.columns import EVENT_COLUMNS as EVENT_COLUMNS
from setpoint.model.columns import Column, columns_for, object_columns
from setpoint.model.columns import age as age
from setpoint.model.columns import event_first_seen as event_first_seen
from setpoint.model.columns import event_interval as event_interval
from setpoint.model.columns import event_last_seen as event_last_seen
from setpoint.model.columns import event_object as event_object
from setpoint.model.columns import event_source as event_source
from setpoint.model.columns import human_duration as human_duration
from setpoint.model.columns import timestamp_age as timestamp_age

GAP = "   "
"""Space between table columns (kubectl's tabwriter padding)."""


def resource_name(kind: Kind) -> str:
    """`greeting.example.com`: the singular, qualified by group (kubectl's resource name)."""
    return f"{kind.singular}.{kind.group}" if kind.group else kind.singular


def object_ref(kind: Kind, name: str) -> str:
    """`greeting.example.com/hello`: how `apply` and `get -o name` name an object."""
    return f"{resource_name(kind)}/{name}"


class Table:
    """The columns `get` prints for objects of one kind (`setpoint.model.columns`, which the
    API's Table answers share): those not `wide`, or all with `wide`; `namespaces` puts
    NAMESPACE first; `events` puts the watch EVENT type first."""

    def __init__(
        self,
        columns: Sequence[Column] = object_columns(),
        *,
        wide: bool = False,
        namespaces: bool = False,
        events: bool = False,
    ):
        self.columns = tuple(c for c in columns if wide or not c.wide)
        self.namespaces = namespaces
        self.events = events

    def header(self) -> list[str]:
        cols = [c.name for c in self.columns]
        if self.namespaces:
            cols.insert(0, "NAMESPACE")
        if self.events:
            cols.insert(0, "EVENT")
        return cols

    def row(self, obj: Object, now: float, event: str = "") -> list[str]:
        cells = [c.cell(obj, now) for c in self.columns]
        if self.namespaces:
            cells.insert(0, str((obj.get("metadata") or {}).get("namespace") or "-"))
        if self.events:
            cells.insert(0, event)
        return cells


class EventTable(Table):
    """The columns of `get events` and `events`, as kubectl prints `Event`s
    (`setpoint.model.columns.EVENT_COLUMNS`)."""

    def __init__(self, *, wide: bool = False, namespaces: bool = False, events: bool = False):
        super().__init__(EVENT_COLUMNS, wide=wide, namespaces=namespaces, events=events)


def event_sort_key(event: Object) -> tuple[float, int, str, str]:
    """Oldest first, as kubectl sorts events: by last time; within a second (timestamps are
    whole seconds), in the order they were last written (resourceVersion)."""
    seen = event_last_seen(event)
    version = str((event.get("metadata") or {}).get("resourceVersion") or "")
    written = int(version) if version.isdigit() else 0
    return (seen if seen is not None else float("-inf"), written, *sort_key(event))


def table_for(
    kind: Kind, *, wide: bool = False, namespaces: bool = False, events: bool = False
) -> Table:
    """The columns `get` prints for `kind` (`setpoint.model.columns.columns_for`)."""
    return Table(columns_for(kind), wide=wide, namespaces=namespaces, events=events)


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
