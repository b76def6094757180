"""Watch fan-out shared by the backends: filters, per-watcher buffers, history-then-live.

A backend publishes every committed change, in revision order, exactly once
(`Watchers.publish`). `Watchers.watch` joins history and the live stream without
a gap or a duplicate: it subscribes first (buffering live changes), then reads
the history after `since` from the backend, then drains the buffer, skipping
revisions it has already yielded.

Each watcher's buffer is a deque, woken once per published batch that holds a change of
its kind: watchers are indexed by kind, so a write wakes and costs only the watches of
its kind and those of every kind (with hundreds of kinds watched, handing every change to
every watch cost more than the writes). A watcher that falls more than `max_buffered`
changes of its kind behind is ended with `Gone`, as the Kubernetes API server ends slow
watchers: the client relists.

`Watchers.watch` yields `WatchEvent`s (each watcher decodes its own copy of the object);
`Watchers.watch_encoded` yields `EncodedEvent`s, the object as the log keeps it (JSON
bytes), for a consumer that only forwards it (the API server's watch streams): one
decode and one encode less per event and watcher.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeVar, runtime_checkable

from setpoint.errors import Gone, StoreClosed
from setpoint.model import Selector, codec
from setpoint.store.base import Actor, EventType, Verb, WatchEvent


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One committed change as the revision log keeps it, with the verb and actor of its
    write (None for history written before they were kept)."""

    revision: int
    type: EventType
    api_version: str
    kind: str
    namespace: str
    data: bytes | str  # the object, JSON-encoded (setpoint.model.codec)
    labels: dict[str, str] | None
    prev_labels: dict[str, str] | None
    verb: Verb | None = None
    actor: Actor | None = None

    @classmethod
    def of_row(cls, row: Sequence[Any]) -> LogEntry:
        """The entry of a SQL log row: (revision, type, apiVersion, kind, namespace, data,
        labels, previous labels, writer), the labels as `encoded_labels` stored them and the
        writer as `encoded_writer` did."""
        rev, type_, api_version, kind, namespace, data, labels, prev, writer = row
        verb, actor = decoded_writer(writer)
        return cls(
            rev,
            type_,
            api_version,
            kind,
            namespace,
            data,
            codec.decode(labels) if labels else None,
            codec.decode(prev) if prev else None,
            verb,
            actor,
        )


def encoded_labels(labels: dict[str, str] | None) -> str | None:
    """Labels as a SQL log row keeps them (JSON, or NULL for none)."""
    return codec.encode(labels).decode() if labels else None


_VERBS: tuple[Verb, ...] = ("create", "update", "update_status", "patch", "delete")
_VERB_ONLY = {verb: codec.encode({"verb": verb}).decode() for verb in _VERBS}


def encoded_writer(verb: Verb, actor: Actor | None) -> str:
    """The verb and actor of a write as its log row keeps them: JSON, `{"verb": ...}` with
    the actor's `user`, `manager` and `agent` that are known."""
    if actor is None:
        return _VERB_ONLY[verb]
    fields = {"user": actor.user, "manager": actor.manager, "agent": actor.agent}
    return codec.encode({"verb": verb, **{k: v for k, v in fields.items() if v}}).decode()


def decoded_writer(text: str | bytes | None) -> tuple[Verb | None, Actor | None]:
    """(verb, actor) of `encoded_writer`'s text; (None, None) for none (older history)."""
    if not text:
        return None, None
    writer = codec.decode(text)
    if not isinstance(writer, dict):
        return None, None
    verb = writer.get("verb")
    user, manager, agent = (writer.get(k) for k in ("user", "manager", "agent"))
    actor = Actor(user, manager, agent) if user or manager or agent else None
    return (verb if verb in _VERBS else None), actor


class EncodedEvent(NamedTuple):
    """A `WatchEvent` whose object is left encoded: `data` is its JSON (setpoint.model.codec)
    as the revision left it (for DELETED, its last state). A tuple: one is made per event
    and watcher."""

    type: EventType
    data: bytes
    revision: int


@runtime_checkable
class EncodedWatches(Protocol):
    """A store that can stream `EncodedEvent`s (`Store.watch`'s arguments)."""

    def watch_encoded(
        self,
        api_version: str | None,
        kind: str | None,
        namespace: str | None = None,
        since: int | None = None,
        label_selector: str | Selector | None = None,
    ) -> AsyncIterator[EncodedEvent]: ...


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
        """The event this watch sees for `entry`, if any."""
        type_ = self.type_of(entry)
        return None if type_ is None else _decoded(type_, entry)

    def type_of(self, entry: LogEntry) -> EventType | None:
        """The type of the event this watch sees for `entry`, None for none (selectors turn
        moves into ADDED/DELETED, as the Kubernetes API server does)."""
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
        return type_


def _decoded(type_: EventType, entry: LogEntry) -> WatchEvent:
    return WatchEvent(type_, codec.decode(entry.data), entry.revision, entry.verb, entry.actor)


def _encoded(type_: EventType, entry: LogEntry) -> EncodedEvent:
    data = entry.data
    return EncodedEvent(type_, data.encode() if isinstance(data, str) else data, entry.revision)


_Event = TypeVar("_Event", WatchEvent, EncodedEvent)


@dataclass(eq=False)
class _Subscriber:
    """One watch's changes not yet taken, then maybe its end (`ended`; `overflowed`: it
    ends with `Gone`). `publish` wakes it once per batch, not once per change."""

    filter: WatchFilter
    pending: deque[LogEntry] = field(default_factory=deque)
    ended: bool = False
    overflowed: bool = False
    waiter: asyncio.Future[None] | None = None

    def end(self, *, overflowed: bool) -> None:
        self.ended = True
        self.overflowed = self.overflowed or overflowed
        self.wake()

    def wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


class Watchers:
    """The set of live watches of one store."""

    def __init__(self, max_buffered: int = 100_000) -> None:
        self._subscribers: set[_Subscriber] = set()
        self._every_kind: set[_Subscriber] = set()
        self._by_kind: dict[tuple[str | None, str], set[_Subscriber]] = {}
        self._max_buffered = max_buffered
        self._closed = False

    def has_subscribers(self) -> bool:
        """Whether any watch is running (a backend need not read changes nobody wants)."""
        return bool(self._subscribers)

    def publish(self, entries: Sequence[LogEntry]) -> None:
        """Hand committed changes, in revision order, to every subscriber of their kind and
        to those of every kind. Loop thread only."""
        if self._every_kind:
            self._hand(self._every_kind, entries)
        if not self._by_kind:
            return
        by_kind: dict[tuple[str | None, str], list[LogEntry]] = {}
        for entry in entries:
            key: tuple[str | None, str] = (entry.api_version, entry.kind)
            if key in self._by_kind:
                by_kind.setdefault(key, []).append(entry)
        for wanted, of_kind in by_kind.items():
            self._hand(self._by_kind[wanted], of_kind)

    def _hand(self, subscribers: set[_Subscriber], entries: Sequence[LogEntry]) -> None:
        for sub in subscribers:
            if sub.ended:
                continue
            room = self._max_buffered - len(sub.pending)
            sub.pending.extend(entries[:room] if len(entries) > room else entries)
            if len(entries) > room:
                sub.end(overflowed=True)
            else:
                sub.wake()

    def expire(self) -> None:
        """End every current watch with `Gone` (their next changes are no longer known)."""
        for sub in self._subscribers:
            sub.end(overflowed=True)

    def close(self) -> None:
        self._closed = True
        for sub in self._subscribers:
            sub.end(overflowed=False)

    def watch(
        self,
        history: HistoryReader,
        current_revision: Callable[[], Awaitable[int]],
        wanted: WatchFilter,
        since: int | None,
    ) -> AsyncIterator[WatchEvent]:
        """History after `since` (read with `history`), then live changes; `since=None`
        starts at `current_revision()`."""
        return self._stream(history, current_revision, wanted, since, _decoded)

    def watch_encoded(
        self,
        history: HistoryReader,
        current_revision: Callable[[], Awaitable[int]],
        wanted: WatchFilter,
        since: int | None,
    ) -> AsyncIterator[EncodedEvent]:
        """`watch`, the objects left encoded."""
        return self._stream(history, current_revision, wanted, since, _encoded)

    async def _stream(
        self,
        history: HistoryReader,
        current_revision: Callable[[], Awaitable[int]],
        wanted: WatchFilter,
        since: int | None,
        make: Callable[[EventType, LogEntry], _Event],
    ) -> AsyncIterator[_Event]:
        if self._closed:
            raise StoreClosed("the store is closed")
        sub = _Subscriber(wanted)
        self._subscribers.add(sub)
        if wanted.kind is None:
            self._every_kind.add(sub)
        else:
            self._by_kind.setdefault((wanted.api_version, wanted.kind), set()).add(sub)
        try:
            last = await current_revision() if since is None else since
            entry: LogEntry | None = None
            for entry in await history(last) if since is not None else ():
                type_ = wanted.type_of(entry)
                last = entry.revision
                if type_ is not None:
                    yield make(type_, entry)
            entry = None  # an idle watch holds no entry (an object of 1 MB, per watch)
            pending = sub.pending
            while True:
                while pending:
                    entry = pending.popleft()
                    if entry.revision <= last:
                        continue
                    last = entry.revision
                    type_ = wanted.type_of(entry)
                    if type_ is not None:
                        yield make(type_, entry)
                entry = None
                if sub.ended:
                    if sub.overflowed:
                        raise Gone("the watch fell behind the store's history; relist")
                    return
                sub.waiter = asyncio.get_running_loop().create_future()
                await sub.waiter
        finally:
            self._subscribers.discard(sub)
            if wanted.kind is None:
                self._every_kind.discard(sub)
            else:
                key = (wanted.api_version, wanted.kind)
                of_kind = self._by_kind.get(key)
                if of_kind is not None:
                    of_kind.discard(sub)
                    if not of_kind:
                        del self._by_kind[key]


def matcher(label_selector: str | Selector | None) -> Callable[[dict[str, str] | None], bool]:
    """The `matches(labels)` function of a selector given in either form."""
    return Selector.of(label_selector).matches
