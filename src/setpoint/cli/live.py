"""The view `setpoint up` shows while workloads converge: a rich Live table on a terminal,
one plain line per status change otherwise (pipes, log files, tests).

`status_row` and `plain_line` decide what is shown and are pure (the time a table is
drawn at is an argument); `StatusBoard` collects the objects an informer reports;
`PlainView` and `LiveView` draw the board until cancelled (the live table escapes each
cell with `render.escape` and writes to the raw terminal). Nothing here writes to the
store or touches processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from setpoint.cli.render import escape, timestamp_age
from setpoint.model import READY, Object, get_condition
from setpoint.runtime.informer import InformerEvent

REFRESH_SECONDS = 0.5
"""How often the live table is redrawn when nothing changes (the AGE column moves)."""
REASON_WIDTH = 60
"""Characters of `Reason: message` the live table shows."""

Key = tuple[str, str, str]
"""(kind, namespace, name) of a shown object."""


@dataclass(frozen=True, slots=True)
class StatusRow:
    """What is shown of one object. `ref` is `Kind/name` (`Kind/namespace/name` outside
    `default`); `reason` is the Ready condition's `reason: message`."""

    ref: str
    ready: str
    phase: str
    reason: str
    restarts: str
    pid: str
    created: str | None

    def state(self) -> tuple[str, ...]:
        """Everything but the age: a change here is news."""
        return (self.ref, self.ready, self.phase, self.reason, self.restarts, self.pid)


def status_row(obj: Object) -> StatusRow:
    """The row of `obj` (a Process, a Job or any kind with a `Ready` condition)."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    namespace = meta.get("namespace") or "default"
    where = "" if namespace == "default" else f"{namespace}/"
    ready = get_condition(status, READY)
    reason = ""
    if ready is not None:
        parts = (ready.get("reason"), ready.get("message"))
        reason = ": ".join(" ".join(str(p).split()) for p in parts if p)
    return StatusRow(
        ref=f"{obj.get('kind', '?')}/{where}{meta.get('name', '?')}",
        ready=str(ready["status"]) if ready else "-",
        phase=str(status.get("phase") or _replicas(obj) or "-"),
        reason=reason or "-",
        restarts=str(status.get("restarts", 0)),
        pid=str(status.get("pid") or "-"),
        created=meta.get("creationTimestamp"),
    )


def _replicas(obj: Object) -> str | None:
    """`2/3 available` for an object with replicas (a Deployment)."""
    status = obj.get("status") or {}
    if "availableReplicas" not in status:
        return None
    return f"{status['availableReplicas']}/{(obj.get('spec') or {}).get('replicas', 0)} available"


def plain_line(row: StatusRow) -> str:
    """`Process/a ready=True phase=Running restarts=0 pid=123 ReadinessProbeSucceeded: ...`"""
    return (
        f"{row.ref} ready={row.ready} phase={row.phase} restarts={row.restarts} "
        f"pid={row.pid} {row.reason}"
    )


def shorten(text: str, width: int) -> str:
    """`text` cut to `width` characters, ending in `...` when cut."""
    return text if len(text) <= width else text[: max(0, width - 3)] + "..."


HEADER = ("KIND/NAME", "READY", "PHASE", "REASON/MESSAGE", "RESTARTS", "PID", "AGE")


def table_rows(rows: list[StatusRow], now: float) -> list[tuple[str, ...]]:
    """The live table's cells, in `rows`' order, at time `now`."""
    return [
        (
            r.ref,
            r.ready,
            r.phase,
            shorten(r.reason, REASON_WIDTH),
            r.restarts,
            r.pid,
            timestamp_age(r.created, now),
        )
        for r in rows
    ]


class StatusBoard:
    """The rows of the objects informers report, by (kind, namespace, name);
    `changed` is set whenever one is added, changed or deleted."""

    def __init__(self) -> None:
        self.rows: dict[Key, StatusRow] = {}
        self.changed = asyncio.Event()

    def on_change(self, event: InformerEvent) -> None:
        """An informer handler (`Informer.add_handler`)."""
        obj = event.object
        meta = obj.get("metadata") or {}
        key = (str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name")))
        if event.type == "DELETED":
            self.rows.pop(key, None)
        else:
            self.rows[key] = status_row(obj)
        self.changed.set()

    def sorted_rows(self) -> list[StatusRow]:
        return [self.rows[k] for k in sorted(self.rows)]


class PlainView:
    """Prints one line each time an object's row changes (and `Kind/name deleted`)."""

    def __init__(self, board: StatusBoard, out: TextIO | None = None) -> None:
        self.board = board
        self.out = out or sys.stdout  # read now, not at import: the CLI's escaped stdout
        self._printed: dict[str, tuple[str, ...]] = {}

    async def run(self) -> None:
        """Print changes until cancelled."""
        while True:
            await self.board.changed.wait()
            self.board.changed.clear()
            self.flush()

    def flush(self) -> None:
        """Print what changed since the last call."""
        current = {row.ref: row for row in self.board.sorted_rows()}
        for ref in [r for r in self._printed if r not in current]:
            del self._printed[ref]
            print(f"{ref} deleted", file=self.out, flush=True)
        for ref, row in current.items():
            if self._printed.get(ref) != row.state():
                self._printed[ref] = row.state()
                print(plain_line(row), file=self.out, flush=True)


class LiveView:
    """A rich Live table of the board, redrawn on every change and every `REFRESH_SECONDS`."""

    def __init__(self, board: StatusBoard, console: Console | None = None) -> None:
        self.board = board
        self.console = console or Console(file=getattr(sys.stdout, "raw", sys.stdout))

    def table(self, now: float) -> Table:
        table = Table(box=None, header_style="bold", pad_edge=False)
        for name in HEADER:
            if name == "REASON/MESSAGE":  # the one column that gives way on a narrow terminal
                table.add_column(name, no_wrap=True, overflow="ellipsis", min_width=10)
            else:
                table.add_column(name, no_wrap=True, min_width=len(name))
        for cells in table_rows(self.board.sorted_rows(), now):
            style = "green" if cells[1] == "True" else ("red" if cells[1] == "False" else "")
            table.add_row(*(Text(escape(cell)) for cell in cells), style=style)
        return table

    async def run(self) -> None:
        """Draw until cancelled; the last table stays on the screen."""
        with Live(self.table(time.time()), console=self.console, auto_refresh=False) as live:
            try:
                while True:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.board.changed.wait(), REFRESH_SECONDS)
                    self.board.changed.clear()
                    live.update(self.table(time.time()), refresh=True)
            finally:
                live.update(self.table(time.time()), refresh=True)


def view_for(board: StatusBoard, out: TextIO | None = None) -> PlainView | LiveView:
    """A live table when `out` (default: stdout) is a terminal, plain lines otherwise."""
    out = out or sys.stdout
    return LiveView(board) if out.isatty() else PlainView(board, out)
