"""The informer: list one kind, then watch it from the list's revision, keeping a `Cache`
and telling handlers what changed.

On `Gone` (history compacted past where it was) it relists and delivers the
differences as events, so handlers never miss a final state. Handlers are plain
functions of an `InformerEvent`, called on the event loop; they should only
enqueue work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Error, Gone, StoreClosed
from setpoint.model import Kind, Object, Selector
from setpoint.runtime.cache import Cache, IndexFunc, Key, key_of
from setpoint.store import EventType, Store

log = logging.getLogger("setpoint.informer")


@dataclass(frozen=True, slots=True)
class InformerEvent:
    """A change seen by an informer. `old` is the cached state before it (None for ADDED)."""

    type: EventType
    object: Object
    old: Object | None = None


Handler = Callable[[InformerEvent], None]


class Informer:
    def __init__(
        self,
        store: Store,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
        indexes: Mapping[str, IndexFunc] | None = None,
        clock: Clock = SYSTEM_CLOCK,
        retry_delay: float = 1.0,
    ) -> None:
        self.store = store
        self.kind = kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.cache = Cache(indexes)
        self._handlers: list[Handler] = []
        self._synced = asyncio.Event()
        self._clock = clock
        self._retry_delay = retry_delay

    def add_handler(self, handler: Handler) -> None:
        """Call `handler` for every later change; it first gets ADDED for what is cached."""
        self._handlers.append(handler)
        for key in self.cache:
            obj = self.cache.get(key[1], key[0])
            if obj is not None:
                self._call(handler, InformerEvent("ADDED", obj))

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        """Return once the first list is in the cache."""
        await self._synced.wait()

    async def run(self) -> None:
        """List and watch until cancelled or the store closes."""
        kind = self.kind
        while True:
            try:
                revision = await self._list()
                self._synced.set()
                async for event in self.store.watch(
                    kind.api_version, kind.kind, self.namespace, revision, self.label_selector
                ):
                    self._apply(event.type, event.object, event.revision)
            except Gone:
                log.info("%s: watch history expired; relisting", kind.kind)
            except StoreClosed:
                return
            except Error as exc:
                log.warning("%s: list/watch failed (%s); retrying", kind.kind, exc)
                await self._clock.sleep(self._retry_delay)

    async def _list(self) -> int:
        """Make the cache equal to a fresh list, delivering the differences; return the
        list's revision. Pages are cached as they come, so the decoded objects of the whole
        list are never held at once."""
        kind = self.kind
        listed: set[Key] = set()
        revision = 0
        async for page, page_revision in self.store.list_pages(
            kind.api_version, kind.kind, self.namespace, self.label_selector
        ):
            revision = page_revision
            for obj in page:
                key = key_of(obj)
                listed.add(key)
                old = self.cache.get(key[1], key[0])
                if old is None:
                    self.cache.put(obj)
                    self._emit(InformerEvent("ADDED", obj))
                elif old["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
                    self.cache.put(obj)
                    self._emit(InformerEvent("MODIFIED", obj, old))
        for key in self.cache:
            if key not in listed:
                old = self.cache.remove(key)
                assert old is not None
                self._emit(InformerEvent("DELETED", old, old))
        self.cache.revision = revision
        return revision

    def _apply(self, type_: EventType, obj: Object, revision: int) -> None:
        if type_ == "DELETED":
            old = self.cache.remove(key_of(obj))
            self._emit(InformerEvent("DELETED", obj, old))
        else:
            old = self.cache.put(obj)
            self._emit(InformerEvent("MODIFIED" if old is not None else "ADDED", obj, old))
        self.cache.revision = revision

    def _emit(self, event: InformerEvent) -> None:
        for handler in self._handlers:
            self._call(handler, event)

    def _call(self, handler: Handler, event: InformerEvent) -> None:
        try:
            handler(event)
        except Exception:
            log.exception("%s: event handler failed", self.kind.kind)
