"""The view `setpoint up` shows while workloads converge: a rich Live view on a terminal,
one plain line per status change otherwise (pipes, log files, tests); with `up --logs`,
the children's output too (under the live view, the newest lines; as lines of their own
in plain mode), each line prefixed with its object's name.

What the view says is decided by `cli.status_table` (pure): rows, health, detail lines,
the fit to the width. Here: `StatusBoard` collects the objects an informer reports;
`LogTail` follows the children's log files and keeps the newest lines; `PlainView` and
`LiveView` draw them until cancelled, the colours picked here from each piece's `Health`
(green Ready, yellow progressing, red failed). The live view escapes everything it shows
and writes to the raw terminal. Nothing here writes to the store or touches processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from setpoint.cli.logstream import colour_of
from setpoint.cli.render import cut, escape
from setpoint.cli.status_table import (
    Key,
    Line,
    Role,
    StatusRow,
    key_of,
    kind_aliases,
    plain_line,
    status_row,
    view_lines,
)
from setpoint.insight.health import Health
from setpoint.model import Kind, Object
from setpoint.runtime.informer import InformerEvent

REFRESH_SECONDS = 0.5
"""How often the live view is redrawn when nothing changes (the AGE column moves)."""
LOG_POLL_SECONDS = 0.25
"""How often `--logs` reads the children's log files."""
LOG_LINES = 12
"""Lines of children's output the live view shows at most (fewer on a short terminal)."""
LOG_LINES_MIN = 3

HEALTH_STYLE = {
    Health.READY: "green",
    Health.PROGRESSING: "yellow",
    Health.FAILED: "red",
    Health.UNKNOWN: "",
}


class StatusBoard:
    """The objects informers report, by (kind, namespace, name); `changed` is set whenever
    one is added, changed or deleted (or, with `--logs`, a child wrote a line)."""

    def __init__(self, kinds: Iterable[Kind] = ()) -> None:
        self.objects: dict[Key, Object] = {}
        self.aliases = kind_aliases(kinds)
        self.changed = asyncio.Event()

    def on_change(self, event: InformerEvent) -> None:
        """An informer handler (`Informer.add_handler`)."""
        key = key_of(event.object)
        if event.type == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = event.object
        self.changed.set()


# -- children's output (`up --logs`) -------------------------------------------------------


def log_source(stem: str) -> str:
    """The object a log file belongs to, from its stem (`default_web` -> `web`,
    `other_web` -> `other/web`; `model.wellknown.child_name`)."""
    namespace, _, name = stem.partition("_")
    return name if namespace == "default" else f"{namespace}/{name}"


def log_colour(source: str) -> str:
    """The colour of `source`'s name, as rich writes it: `logstream.colour_of`'s, so that
    `up --logs` and `logs` give a name the same colour, in every run."""
    sgr = colour_of(source)  # 30-37, or 90-97 for the bright ones
    return f"color({sgr - 30 if sgr < 90 else sgr - 90 + 8})"


class LogTail:
    """The newest lines the children wrote to their log files in `log_dir`, as (object,
    line), at most `LOG_LINES`; with `keep_unread` (a plain view), `unread` holds every
    line not yet `take`n. Files present when it is made are read from their end (an earlier
    run's output is not shown again); files that appear later, from their start. Lines are
    escaped, their tabs expanded."""

    def __init__(self, log_dir: Path, *, keep_unread: bool = False) -> None:
        from setpoint.insight.recorder import LogTailer  # where `up --logs` runs only

        self.tailer = LogTailer(log_dir)
        self.keep_unread = keep_unread
        self.lines: deque[tuple[str, str]] = deque(maxlen=LOG_LINES)
        self.unread: list[tuple[str, str]] = []

    async def run(self, board: StatusBoard) -> None:
        """Read new lines every `LOG_POLL_SECONDS` until cancelled; set `board.changed`."""
        try:
            while True:
                new = [
                    (log_source(stem), escape(line).expandtabs())
                    for stem, line in await asyncio.to_thread(self.tailer.poll)
                ]
                if new:
                    self.lines.extend(new)
                    if self.keep_unread:
                        self.unread += new
                    board.changed.set()
                await asyncio.sleep(LOG_POLL_SECONDS)
        finally:
            self.tailer.close()

    def take(self) -> list[tuple[str, str]]:
        """The lines read since the last call."""
        taken, self.unread = self.unread, []
        return taken


def log_text(source: str, line: str, name_width: int, width: int) -> Text:
    """`web-1 | the line`, the name padded to `name_width` in its colour, all in `width`."""
    prefix = f"{source:<{name_width}} | "
    text = Text(prefix, style=log_colour(source))
    text.append(cut(line, max(0, width - len(prefix))))
    return text


# -- views ---------------------------------------------------------------------------------


class PlainView:
    """Prints one line each time an object's row changes (and `Kind/name deleted`); with
    `logs`, each line a child writes as `name | line`."""

    def __init__(
        self, board: StatusBoard, out: TextIO | None = None, logs: LogTail | None = None
    ) -> None:
        self.board = board
        self.out = out or sys.stdout  # read now, not at import: the CLI's escaped stdout
        self.logs = logs
        self._printed: dict[str, tuple[str, ...]] = {}
        self._rows: dict[Key, tuple[Object, StatusRow]] = {}  # by the object it was made of

    async def run(self) -> None:
        """Print changes until cancelled."""
        async with _reading(self.logs, self.board):
            while True:
                await self.board.changed.wait()
                self.board.changed.clear()
                self.flush()

    def flush(self) -> None:
        """Print what changed since the last call."""
        current = {}
        rows: dict[Key, tuple[Object, StatusRow]] = {}
        for key in sorted(self.board.objects):
            obj = self.board.objects[key]
            made = self._rows.get(key)
            # A changed object is a new one: only its row is made again (a thousand
            # Processes starting are not a million rows).
            row = made[1] if made is not None and made[0] is obj else status_row(obj)
            rows[key] = (obj, row)
            current[row.ref] = row
        self._rows = rows
        for ref in [r for r in self._printed if r not in current]:
            del self._printed[ref]
            print(f"{ref} deleted", file=self.out, flush=True)
        for ref, row in current.items():
            if self._printed.get(ref) != row.state():
                self._printed[ref] = row.state()
                print(plain_line(row), file=self.out, flush=True)
        for source, line in self.logs.take() if self.logs is not None else ():
            print(f"{source} | {line}", file=self.out, flush=True)


class LiveView:
    """A rich Live view of the board (and of `logs`' newest lines under it), redrawn on
    every change and every `REFRESH_SECONDS`, fitted to the terminal's width each time."""

    def __init__(
        self,
        board: StatusBoard,
        console: Console | None = None,
        logs: LogTail | None = None,
    ) -> None:
        self.board = board
        self.console = console or Console(file=getattr(sys.stdout, "raw", sys.stdout))
        self.logs = logs

    def render(self, now: float) -> Group:
        """What the screen shows at `now`, in the console's width."""
        width = self.console.width
        lines = view_lines(self.board.objects, width, now, aliases=self.board.aliases)
        texts = [_styled(line) for line in lines]
        if self.logs is not None:
            room = self.console.height - len(texts) - 2
            shown = list(self.logs.lines)[-max(LOG_LINES_MIN, room) :]
            texts.append(Text(("── logs " + "─" * width)[:width], style="dim"))
            name_width = max((len(source) for source, _ in shown), default=0)
            texts += [log_text(source, line, name_width, width) for source, line in shown]
        for text in texts:
            text.no_wrap = True
            text.overflow = "ellipsis"
        return Group(*texts)

    async def run(self) -> None:
        """Draw until cancelled; the last view stays on the screen."""
        async with _reading(self.logs, self.board):
            with Live(self.render(time.time()), console=self.console, auto_refresh=False) as live:
                try:
                    while True:
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self.board.changed.wait(), REFRESH_SECONDS)
                        self.board.changed.clear()
                        live.update(self.render(time.time()), refresh=True)
                finally:
                    live.update(self.render(time.time()), refresh=True)


def _styled(line: Line) -> Text:
    text = Text()
    for piece in line:
        if piece.role is Role.HEADER:
            style = "bold"
        elif piece.role is Role.HINT:
            style = "bold " + HEALTH_STYLE[piece.health]
        else:
            style = HEALTH_STYLE[piece.health]
        text.append(piece.text, style=style.strip())
    return text


@contextlib.asynccontextmanager
async def _reading(logs: LogTail | None, board: StatusBoard) -> AsyncIterator[None]:
    """Follow `logs` (if any) while the body runs."""
    task = asyncio.create_task(logs.run(board)) if logs is not None else None
    try:
        yield
    finally:
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def view_for(
    board: StatusBoard, out: TextIO | None = None, *, log_dir: Path | None = None
) -> PlainView | LiveView:
    """A live view when `out` (default: stdout) is a terminal, plain lines otherwise; with
    `log_dir`, the children's output from there too (`up --logs`)."""
    out = out or sys.stdout
    live = out.isatty()
    logs = LogTail(log_dir, keep_unread=not live) if log_dir is not None else None
    return LiveView(board, logs=logs) if live else PlainView(board, out, logs)
