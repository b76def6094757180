"""The event recorder: writes Kubernetes-style `Event` objects about other objects, and
expires them.

`EventRecorder.record(obj, type_, reason, message)` stores an `Event` (apiVersion
`v1`, in the involved object's namespace; `default` for cluster-scoped objects)
the way client-go's recorder and EventCorrelator do:

* Identical events (same involved object, type, reason, message and source)
  aggregate into one `Event`: its `count` goes up and `lastTimestamp` moves.
  A small in-memory LRU remembers the last `Event` written for each such key,
  so aggregating needs no list; the update is compare-and-swap, retried on
  `Conflict`; an `Event` deleted meanwhile (expired, say) is created anew.
* A token bucket per involved object (`burst` new `Event`s, one more every
  `refill_every` seconds; 25 and 5 minutes, as client-go's spam filter) limits
  how many `Event` objects an object makes, so a crash-looping object cannot
  flood the store. Over it, an event is not lost when the same reason happened
  to the same object within `window` seconds (10 minutes, client-go's
  aggregation window): it is counted on that reason's latest `Event` (`count`
  up, `lastTimestamp` moved, the message now `(combined from similar events):
  <this one's>`), as client-go's aggregator combines similar events. Only a
  reason new to the object (or not seen for `window`) is dropped over the limit.
  A repeat of an `Event` already written takes no token: it is one count more.
* Recording never raises into the caller: a refused or failed write is logged
  on the `setpoint.events` logger and the event is dropped.

`expire_events` is a runnable that deletes `Event`s whose `lastTimestamp` is
older than a TTL (one hour by default), as the Kubernetes API server does.

The `Event` kind is `EVENT`; a recorder adds it to its store's registry. The recorder reads
the injected clock and nothing else for time; it keeps no state outside the
store but its caches, and never lists the store to record.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, field_validator

from setpoint.clock import SYSTEM_CLOCK, Clock, parse_rfc3339, rfc3339
from setpoint.errors import AlreadyExists, Conflict, Error, Invalid, NotFound, StoreClosed
from setpoint.model import Object, Schema
from setpoint.runtime.kinds import EVENT
from setpoint.store import Store

__all__ = [
    "COMBINED",
    "EVENT",
    "MAX_MESSAGE_LENGTH",
    "NORMAL",
    "WARNING",
    "EventBody",
    "EventRecorder",
    "EventSeries",
    "EventSource",
    "ObjectReference",
    "delete_expired_events",
    "expire_events",
]

log = logging.getLogger("setpoint.events")

NORMAL = "Normal"
"""Event type: information, nothing is wrong."""
WARNING = "Warning"
"""Event type: something may be wrong and a person may need to look."""


COMBINED = "(combined from similar events): "
"""How the message of an `Event` that counts similar events begins (client-go's words)."""
MAX_MESSAGE_LENGTH = 1024
"""Longer messages are cut to this many characters (Kubernetes' limit on an event note)."""


def _check_timestamp(value: str | None) -> str | None:
    if value is not None:
        try:
            parse_rfc3339(value)
        except ValueError:
            raise ValueError(
                f"{value!r}: want an RFC 3339 time, e.g. 2026-01-02T15:04:05Z"
            ) from None
    return value


class ObjectReference(Schema):
    """Which object an event is about (Kubernetes' `ObjectReference`)."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class EventSource(Schema):
    """Who reported the event: a component, and the host it runs on if that matters."""

    component: str
    host: str | None = None


class EventSeries(Schema):
    """Kubernetes' `EventSeries`; setpoint's recorder aggregates with `count` instead."""

    count: int
    last_observed_time: str

    _time = field_validator("last_observed_time")(_check_timestamp)


class EventBody(Schema):
    """The top-level fields of an `Event` (camelCase on the wire).

    The optional fields after `reporting_component` are written by Kubernetes
    client libraries; setpoint's recorder leaves them out.
    """

    involved_object: ObjectReference
    reason: str
    message: str
    type: Literal["Normal", "Warning"]
    count: int = Field(default=1, ge=1)
    first_timestamp: str
    last_timestamp: str
    source: EventSource
    reporting_component: str | None = None
    reporting_instance: str | None = None
    action: str | None = None
    event_time: str | None = None
    related: ObjectReference | None = None
    series: EventSeries | None = None

    _times = field_validator("first_timestamp", "last_timestamp", "event_time")(_check_timestamp)


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


@dataclass(frozen=True, slots=True)
class _Latest:
    """The latest `Event` of a reason on an object (its aggregation key), and when that
    reason last happened."""

    key: Hashable
    at: float


@dataclass(slots=True)
class _KeyLock:
    """Serialises recording of one aggregation key; dropped when nobody holds or awaits it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


_NOT_NAME = re.compile(r"[^a-z0-9.-]")
# Suffixes are a per-process strictly increasing nanosecond clock, so names made in one
# process never repeat even when the (manual) clock stands still.
_last_suffix = 0
_UPDATE_ATTEMPTS = 5
_CREATE_ATTEMPTS = 3


def _next_suffix(now: float) -> int:
    global _last_suffix
    _last_suffix = max(int(now * 1e9), _last_suffix + 1)
    return _last_suffix


def _event_name(involved_name: str, suffix: int) -> str:
    """`<involved name>.<hex>`, cut so the whole stays a DNS-1123 subdomain (<= 253)."""
    tail = f".{suffix:x}"
    base = _NOT_NAME.sub("-", involved_name.lower())[: 253 - len(tail)]
    labels = (label.strip("-") for label in base.split("."))
    return (".".join(label for label in labels if label) or "event") + tail


class EventRecorder:
    """Records events about objects as `Event`s in `store`, reported by `component`.

    `burst` and `refill_every` size the per-object spam filter: each involved
    object may make `burst` new `Event`s at once, then one every `refill_every`
    seconds of `clock` time; over it, an event whose reason the object had within
    `window` seconds is counted on that reason's latest `Event`. `dropped` counts
    events the filter refused; `failed` counts events lost because the store
    refused or failed the write.
    """

    CACHE_SIZE = 4096
    """How many aggregation keys (and spam-filter buckets) are remembered."""

    def __init__(
        self,
        store: Store,
        component: str,
        *,
        clock: Clock = SYSTEM_CLOCK,
        burst: int = 25,
        refill_every: float = 300.0,
        window: float = 600.0,
    ) -> None:
        if burst < 1 or not refill_every > 0 or not window >= 0:
            raise ValueError(
                "want burst >= 1, refill_every > 0 and window >= 0, got "
                f"{burst!r}, {refill_every!r} and {window!r}"
            )
        self.store = store
        store.registry.register(EVENT)
        self.component = component
        self.clock = clock
        self.burst = burst
        self.refill_every = refill_every
        self.window = window
        self.dropped = 0
        self.failed = 0
        self._events: OrderedDict[Hashable, Object] = OrderedDict()
        self._latest: OrderedDict[Hashable, _Latest] = OrderedDict()
        """(involved object, field path, type, reason) -> its latest `Event`'s key, and when
        that reason last happened (`clock.monotonic()`)."""
        self._buckets: OrderedDict[Hashable, _Bucket] = OrderedDict()
        self._locks: dict[Hashable, _KeyLock] = {}

    async def normal(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        """`record(obj, "Normal", reason, message)`."""
        await self.record(obj, NORMAL, reason, message)

    async def warning(self, obj: Mapping[str, Any], reason: str, message: str) -> None:
        """`record(obj, "Warning", reason, message)`."""
        await self.record(obj, WARNING, reason, message)

    async def record(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Record that `reason` (a CamelCase word) happened to `obj`, with a message for people.

        Never raises (but for cancellation): whatever goes wrong is logged and
        the event is dropped.
        """
        try:
            ref = _reference(obj)
            if type_ not in (NORMAL, WARNING):
                raise Invalid(f"{type_!r}: want Normal or Warning", field="type")
        except Exception as exc:
            self.failed += 1
            log.error("event %s dropped: %s", reason, exc)
            return
        message = message[:MAX_MESSAGE_LENGTH]
        involved = (
            ref["apiVersion"],
            ref["kind"],
            ref.get("namespace", ""),
            ref["name"],
            ref.get("uid", ""),
        )
        similar = (*involved, ref.get("fieldPath", ""), type_, reason)
        key = (*similar, message)
        entry = self._locks.setdefault(key, _KeyLock())
        entry.users += 1
        try:
            async with entry.lock:
                if key in self._events or self._allow(involved):
                    await self._write(key, ref, type_, reason, message)
                    self._remember(similar, key)
                elif not await self._combine(similar, message):
                    self.dropped += 1
                    log.debug(
                        "event %s about %s %r dropped: over the rate limit",
                        reason,
                        ref["kind"],
                        ref["name"],
                    )
        except Exception as exc:
            self.failed += 1
            log.warning("event %s about %s %r dropped: %s", reason, ref["kind"], ref["name"], exc)
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._locks[key]

    def _allow(self, involved: Hashable) -> bool:
        """Take a token from `involved`'s bucket if there is one (client-go's spam filter)."""
        now = self.clock.monotonic()
        bucket = self._buckets.pop(involved, None)
        if bucket is None:
            bucket = _Bucket(float(self.burst), now)
        else:
            refill = (now - bucket.at) / self.refill_every
            bucket.tokens = min(float(self.burst), bucket.tokens + refill)
            bucket.at = now
        self._buckets[involved] = bucket
        if len(self._buckets) > self.CACHE_SIZE:
            self._buckets.popitem(last=False)
        if bucket.tokens < 1.0 - 1e-9:  # forgive float dust from the refill division
            return False
        bucket.tokens = max(0.0, bucket.tokens - 1.0)
        return True

    def _remember(self, similar: Hashable, key: Hashable) -> None:
        """`key`'s `Event` is now the latest of its reason on its object, which happened now."""
        self._latest.pop(similar, None)
        self._latest[similar] = _Latest(key, self.clock.monotonic())
        if len(self._latest) > self.CACHE_SIZE:
            self._latest.popitem(last=False)

    async def _combine(self, similar: Hashable, message: str) -> bool:
        """Count an event the spam filter refused on the latest `Event` of its reason on its
        object, if that reason happened within `window`; False if there is none (or it was
        deleted meanwhile)."""
        latest = self._latest.get(similar)
        if latest is None or self.clock.monotonic() - latest.at > self.window:
            return False
        cached = self._events.get(latest.key)
        if cached is None:
            return False
        now = rfc3339(self.clock.now())
        combined = f"{COMBINED}{message}"[:MAX_MESSAGE_LENGTH]
        written = await self._increment(cached, now, combined)
        if written is None:
            return False
        self._events[latest.key] = written
        self._events.move_to_end(latest.key)
        self._remember(similar, latest.key)
        return True

    async def _write(
        self, key: Hashable, ref: dict[str, str], type_: str, reason: str, message: str
    ) -> None:
        now = rfc3339(self.clock.now())
        cached = self._events.get(key)
        written = None if cached is None else await self._increment(cached, now)
        if written is None:
            written = await self._create(ref, type_, reason, message, now)
        self._events[key] = written
        self._events.move_to_end(key)
        if len(self._events) > self.CACHE_SIZE:
            self._events.popitem(last=False)

    async def _increment(
        self, current: Object, now: str, message: str | None = None
    ) -> Object | None:
        """Count one more occurrence on `current` (its message now `message`, if given);
        None if it no longer exists."""
        for _ in range(_UPDATE_ATTEMPTS):
            new = dict(current)
            new["count"] = int(current.get("count") or 1) + 1
            new["lastTimestamp"] = now
            if message is not None:
                new["message"] = message
            try:
                return await self.store.update(new)
            except NotFound:
                return None
            except Conflict:
                meta = current["metadata"]
                try:
                    current = await self.store.get(
                        EVENT.api_version, EVENT.kind, meta["name"], meta.get("namespace")
                    )
                except NotFound:
                    return None
        raise Conflict(f"Event {current['metadata']['name']!r} kept changing; gave up")

    async def _create(
        self, ref: dict[str, str], type_: str, reason: str, message: str, now: str
    ) -> Object:
        for attempt in range(1, _CREATE_ATTEMPTS + 1):
            event: Object = {
                "apiVersion": EVENT.api_version,
                "kind": EVENT.kind,
                "metadata": {
                    "name": _event_name(ref["name"], _next_suffix(self.clock.now())),
                    "namespace": ref.get("namespace") or "default",
                },
                "involvedObject": ref,
                "reason": reason,
                "message": message,
                "type": type_,
                "count": 1,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "source": {"component": self.component},
                "reportingComponent": self.component,
            }
            try:
                return await self.store.create(event)
            except AlreadyExists:  # another process chose the same nanosecond
                if attempt == _CREATE_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # the last attempt returns or raises


def _reference(obj: Mapping[str, Any]) -> dict[str, str]:
    """The `involvedObject` of an event about `obj`."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("name"):
        raise Invalid("the involved object needs a name", field="metadata.name")
    if not obj.get("apiVersion") or not obj.get("kind"):
        raise Invalid("the involved object needs apiVersion and kind", field="apiVersion")
    ref = {
        "apiVersion": str(obj["apiVersion"]),
        "kind": str(obj["kind"]),
        "name": str(meta["name"]),
    }
    for name in ("namespace", "uid", "resourceVersion"):
        if meta.get(name):
            ref[name] = str(meta[name])
    return ref


def _last_seen(event: Object) -> float | None:
    """When `event` last happened: lastTimestamp, else eventTime, firstTimestamp, creation."""
    candidates = (
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        event.get("metadata", {}).get("creationTimestamp"),
    )
    for value in candidates:
        if isinstance(value, str) and value:
            try:
                return parse_rfc3339(value)
            except ValueError:
                continue
    return None


async def delete_expired_events(store: Store, *, ttl: float, now: float) -> int:
    """Delete every `Event` that last happened more than `ttl` seconds before `now`;
    return how many were deleted."""
    events, _ = await store.list(EVENT.api_version, EVENT.kind)
    deleted = 0
    for event in events:
        seen = _last_seen(event)
        if seen is None or now - seen <= ttl:
            continue
        meta = event["metadata"]
        try:
            await store.delete(
                EVENT.api_version,
                EVENT.kind,
                meta["name"],
                meta.get("namespace"),
                resource_version=meta["resourceVersion"],  # spare an event counted again since
            )
        except (NotFound, Conflict):
            continue
        deleted += 1
    return deleted


async def expire_events(
    store: Store, *, ttl: float = 3600.0, clock: Clock = SYSTEM_CLOCK, every: float = 60.0
) -> None:
    """Runnable: every `every` seconds, delete `Event`s older than `ttl` seconds.

    Runs until cancelled, or until the store is closed. A failed pass is logged
    and tried again next time.
    """
    while True:
        try:
            deleted = await delete_expired_events(store, ttl=ttl, now=clock.now())
        except StoreClosed:
            log.info("event expiry stopped: the store is closed")
            return
        except Error as exc:
            log.warning("event expiry failed, trying again in %gs: %s", every, exc)
        else:
            if deleted:
                log.debug("expired %d events", deleted)
        await clock.sleep(every)
