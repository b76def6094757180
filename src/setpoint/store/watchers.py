"""Watch fan-out shared by the backends: filters, per-watcher buffers, history-then-live.

A backend publishes every committed change, in revision order, exactly once
(`Watchers.publish`). `Watchers.watch` joins history and the live stream without
a gap or a duplicate: it subscribes first (buffering live changes), then reads
the history after `since` from the backend, then drains the buffer, skipping
revisions it has already yielded.

A watcher that falls more than `max_buffered` changes behind is ended with
`Gone`, as the Kubernetes API server ends slow watchers: the client relists.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from setpoint.errors import Gone, StoreClosed
from setpoint.model import Selector, codec
from setpoint.store.base import EventType, WatchEvent


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One committed change as the revision log keeps it."""

    revision: int
    type: EventType
    api_version: str
    kind: str
    namespace: str
    data: bytes | str  # the object, JSON-encoded (setpoint.model.codec)
    labels: dict[str, str] | None
    prev_labels: dict[str, str] | None

    @classmethod
    def of_row(cls, row: Sequence[Any]) -> LogEntry:
        """The entry of a SQL log row: (revision, type, apiVersion, kind, namespace, data,
        labels, previous labels), the labels as `encoded_labels` stored them."""
        rev, type_, api_version, kind, namespace, data, labels, prev = row
        return cls(
            rev,
            type_,
            api_version,
            kind,
            namespace,
            data,
            codec.decode(labels) if labels else None,
            codec.decode(prev) if prev else None,
        )


def encoded_labels(labels: dict[str, str] | None) -> str | None:
    """Labels as a SQL log row keeps them (JSON, or NULL for none)."""
    return codec.encode(labels).decode() if labels else None


HistoryReader = Callable[[int], Awaitable[list[LogEntry]]]
"""`read(after)` -> the retained entries with revision > after, in order; raises Gone."""


@dataclass(frozen=True, slots=True)
class WatchFilter:
    """What one watch wants: a kind (None: every kind), a namespace (None: all), labels."""

    api_version: str | None
    kind: str | None
    namespace: str | None = None
    selector: Selector = field(default_factory=Selector)

    def event(self, entry: LogEntry) -> WatchEvent | None:
        """The event this watch sees for `entry`, if any (selectors turn moves into
        ADDED/DELETED, as the Kubernetes API server does)."""
        if self.kind is not None and (
            entry.kind != self.kind or entry.api_version != self.api_version
        ):
            return None
        if self.namespace is not None and entry.namespace != self.namespace:
            return None
        type_ = entry.type
        if self.selector.requirements:
            now = self.selector.matches(entry.labels)
            before = entry.type != "ADDED" and self.selector.matches(entry.prev_labels)
            if entry.type == "MODIFIED" and now != before:
                type_ = "ADDED" if now else "DELETED"
            elif not (now or (before and entry.type == "DELETED")):
                return None
        return WatchEvent(type_, codec.decode(entry.data), entry.revision)


@dataclass(eq=False)
class _Subscriber:
    filter: WatchFilter
    buffer: asyncio.Queue[LogEntry | None] = field(default_factory=asyncio.Queue)
    overflowed: bool = False


class Watchers:
    """The set of live watches of one store."""

    def __init__(self, max_buffered: int = 100_000) -> None:
        self._subscribers: set[_Subscriber] = set()
        self._max_buffered = max_buffered
        self._closed = False

    def has_subscribers(self) -> bool:
        """Whether any watch is running (a backend need not read changes nobody wants)."""
        return bool(self._subscribers)

    def publish(self, entries: Sequence[LogEntry]) -> None:
        """Hand committed changes, in revision order, to every subscriber. Loop thread only."""
        for sub in self._subscribers:
            if sub.overflowed:
                continue
            for entry in entries:
                if sub.buffer.qsize() >= self._max_buffered:
                    sub.overflowed = True
                    sub.buffer.put_nowait(None)
                    break
                sub.buffer.put_nowait(entry)

    def expire(self) -> None:
        """End every current watch with `Gone` (their next changes are no longer known)."""
        for sub in self._subscribers:
            sub.overflowed = True
            sub.buffer.put_nowait(None)

    def close(self) -> None:
        self._closed = True
        for sub in self._subscribers:
            sub.buffer.put_nowait(None)

    async def watch(
        self,
        history: HistoryReader,
        current_revision: Callable[[], Awaitable[int]],
        wanted: WatchFilter,
        since: int | None,
    ) -> AsyncIterator[WatchEvent]:
        """History after `since` (read with `history`), then live changes; `since=None`
        starts at `current_revision()`."""
        if self._closed:
            raise StoreClosed("the store is closed")
        sub = _Subscriber(wanted)
        self._subscribers.add(sub)
        try:
            last = await current_revision() if since is None else since
            for entry in await history(last) if since is not None else ():
                event = wanted.event(entry)
                last = entry.revision
                if event is not None:
                    yield event
            while True:
                live = await sub.buffer.get()
                if live is None:
                    if sub.overflowed:
                        raise Gone("the watch fell behind the store's history; relist")
                    return
                if live.revision <= last:
                    continue
                last = live.revision
                event = wanted.event(live)
                if event is not None:
                    yield event
        finally:
            self._subscribers.discard(sub)


def matcher(label_selector: str | Selector | None) -> Callable[[dict[str, str] | None], bool]:
    """The `matches(labels)` function of a selector given in either form."""
    return Selector.of(label_selector).matches
