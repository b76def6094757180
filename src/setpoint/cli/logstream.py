"""Children's log lines as the CLI shows them: read with the time each was written, merged
across objects in time order, and printed behind a coloured name and an optional timestamp.

`LogFollower` reads one object's log: its rotated files and its current one, oldest first
(`backlog`), then what is appended, across rotations and truncations (`poll`). A line's
time is the one the log holder stamped in the file's time index
(`setpoint.workloads.log_holder`); a line an older holder wrote (no index) gets the
earliest time recorded after it in the same file, else the file's modification time: an
upper bound, so `--since` keeps a line when in doubt. A line is given out once complete
(its newline read); `final=True` gives out an unfinished last line too.

`LineStyle.render` is what a printed line looks like (`setpoint logs`, and `up --logs`):
`NAME | ` padded to the widest name, in a colour chosen by the name alone (the same
name has the same colour in every run: a CRC of the name picks it from `PALETTE`), then
an RFC 3339 timestamp with nanoseconds when asked, then the child's bytes as written.
`use_colour` says whether a stream gets colours (a terminal, and no `NO_COLOR`).

Reads files only: no store, no processes, no clock.
"""

from __future__ import annotations

import heapq
import os
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, TextIO

from setpoint.model.wellknown import child_log_file
from setpoint.workloads.log_holder import LogTimes, times_path

PALETTE = (36, 33, 32, 35, 34, 96, 93, 92, 95, 94)
"""SGR foreground colours for names: cyan, yellow, green, magenta, blue and their bright
forms (as docker compose; red is left to errors)."""
_RESET = b"\x1b[0m"


@dataclass(frozen=True)
class LogLine:
    """One line of an object's log, without its line end; `at` in ns since the epoch."""

    at: int
    name: str
    text: bytes


def colour_of(name: str) -> int:
    """The SGR colour of `name`: the same in every run and on every machine."""
    return PALETTE[zlib.crc32(name.encode()) % len(PALETTE)]


def use_colour(stream: TextIO, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether to colour what goes to `stream`: a terminal, and `NO_COLOR` unset or empty."""
    return stream.isatty() and not environ.get("NO_COLOR")


def rfc3339_nano(ns: int) -> str:
    """`2026-12-01T17:31:22.123456789Z` (UTC, nanoseconds), as `kubectl logs --timestamps`."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{fraction:09d}Z"


@dataclass
class LineStyle:
    """How lines are printed: with their object's name (`prefix`, padded to `width`, in
    colour when `colour`) and their time (`timestamps`). `width` grows with the names seen."""

    prefix: bool = False
    colour: bool = False
    timestamps: bool = False
    width: int = 0

    def fit(self, names: Iterable[str]) -> None:
        """Pad names to the widest of `names` from now on (never narrower)."""
        self.width = max([self.width, *(len(n) for n in names)])

    def render(self, line: LogLine) -> bytes:
        """The bytes to print for `line`, line end included."""
        parts: list[bytes] = []
        if self.prefix:
            name = line.name.ljust(self.width).encode()
            if self.colour:
                name = b"\x1b[%dm%s%s" % (colour_of(line.name), name, _RESET)
            parts.append(name + b" | ")
        if self.timestamps:
            parts.append(rfc3339_nano(line.at).encode() + b" ")
        parts.append(line.text)
        parts.append(b"\n")
        return b"".join(parts)


def in_time_order(per_object: Iterable[list[LogLine]]) -> Iterator[LogLine]:
    """The lines of several objects merged by time; each object's lines keep their order."""
    return heapq.merge(*per_object, key=lambda line: line.at)


def rotated_files(current: Path) -> list[Path]:
    """The existing rotated files of the log `current` (`.log.N` ... `.log.1`), oldest
    first, matched by exact name (never a pattern)."""
    prefix = current.name + "."
    found: list[tuple[int, Path]] = []
    entries = sorted(current.parent.iterdir()) if current.parent.is_dir() else []
    for path in entries:
        suffix = path.name[len(prefix) :]
        if path.name.startswith(prefix) and suffix.isdigit():
            found.append((int(suffix), path))
    return [path for _, path in sorted(found, reverse=True)]


class LogFollower:
    """One Process's or Job's log in `log_dir`: what it holds (`backlog`), then what is
    appended (`poll`). `namespace` and `name` must be checked names: they make a file name."""

    def __init__(self, log_dir: Path, namespace: str, name: str) -> None:
        self.name = name
        self.path = log_dir / child_log_file(namespace, name)
        self._current: _TimedFile | None = None

    def exists(self) -> bool:
        return self.path.is_file() or bool(rotated_files(self.path))

    def backlog(
        self, *, tail: int | None = None, since: int | None = None, final: bool = True
    ) -> list[LogLine]:
        """The lines kept so far (the last `tail`, of those written at or after `since`),
        oldest first. Rotated files are read newest first only as far as needed. The
        current file stays open: `poll` goes on from where this stopped."""
        self.close()
        self._current = _TimedFile.open(self.path)
        newest = self._current.read(final=final) if self._current is not None else []
        chunks = [_since(newest, since)]
        count = len(chunks[0])
        current_inode = self._current.inode if self._current is not None else None
        for path in reversed(rotated_files(self.path)):
            if tail is not None and count >= tail:
                break
            older = _TimedFile.open(path)
            if older is None:
                continue
            try:
                if older.inode == current_inode:
                    continue  # rotated since the current file was opened: read already
                if since is not None and older.modified < since:
                    break  # this file and those before it are older than `since`
                lines = _since(older.read(final=True), since)
            finally:
                older.close()
            chunks.insert(0, lines)
            count += len(lines)
        kept = [line for chunk in chunks for line in chunk]
        if tail is not None:
            kept = kept[-tail:] if tail else []
        return [LogLine(at, self.name, text) for at, text in kept]

    def poll(self) -> list[LogLine]:
        """The complete lines appended since the last `backlog` or `poll`; when the file
        was rotated, the rest of the old one first."""
        found: list[tuple[int, bytes]] = []
        if self._current is not None:
            found += self._current.read(final=False)
            if self._current.replaced(self.path):
                found += self._current.read(final=True)
                self.close()
        if self._current is None:
            self._current = _TimedFile.open(self.path)
            if self._current is not None:
                found += self._current.read(final=False)
        return [LogLine(at, self.name, text) for at, text in found]

    def close(self) -> None:
        if self._current is not None:
            self._current.close()
            self._current = None


def _since(lines: list[tuple[int, bytes]], since: int | None) -> list[tuple[int, bytes]]:
    return lines if since is None else [line for line in lines if line[0] >= since]


class _TimedFile:
    """One log file read through an open handle, with its time index, line by line."""

    def __init__(self, handle: BinaryIO, path: Path) -> None:
        self.handle = handle
        self.inode = os.fstat(handle.fileno()).st_ino
        self.index_path = times_path(str(path))
        self.times = LogTimes(self.inode)
        self.offset = 0
        self.partial = b""
        self._index: BinaryIO | None = None

    @classmethod
    def open(cls, path: Path) -> _TimedFile | None:
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed by close()
        except FileNotFoundError:
            return None
        return cls(handle, path)

    @property
    def modified(self) -> int:
        """The file's modification time (ns): no line in it is newer."""
        return os.fstat(self.handle.fileno()).st_mtime_ns

    def read(self, *, final: bool) -> list[tuple[int, bytes]]:
        """(time, line) of every line completed since the last read; with `final`, an
        unfinished last line too."""
        if os.fstat(self.handle.fileno()).st_size < self.offset:  # truncated: start again
            self.handle.seek(0)
            self.offset = 0
            self.partial = b""
        data = self.handle.read()
        self._read_index()  # after the data: the holder stamps a write before making it
        start = self.offset - len(self.partial)
        self.offset += len(data)
        buffer = self.partial + data
        modified = self.modified
        lines: list[tuple[int, bytes]] = []
        begin = 0
        while (end := buffer.find(b"\n", begin)) >= 0:
            lines.append((self._time(start + begin, modified), buffer[begin:end]))
            begin = end + 1
        self.partial = buffer[begin:]
        if final and self.partial:
            lines.append((self._time(start + begin, modified), self.partial))
            self.partial = b""
        return lines

    def _time(self, offset: int, modified: int) -> int:
        at = self.times.at(offset)
        if at is None:
            at = self.times.first()
        return modified if at is None else at

    def _read_index(self) -> None:
        if self._index is None:
            try:
                self._index = open(self.index_path, "rb")  # noqa: SIM115 - closed by close()
            except FileNotFoundError:
                return
        self.times.feed(self._index.read())

    def replaced(self, path: Path) -> bool:
        """Whether `path` is no longer this file (rotated away, or removed)."""
        try:
            return os.stat(path).st_ino != self.inode
        except FileNotFoundError:
            return True

    def close(self) -> None:
        self.handle.close()
        if self._index is not None:
            self._index.close()
