"""The `memory://` backend: the whole store in one process's memory, for tests and demos.

Keeps the same contract as every backend (see `setpoint.store.base`): objects are
held encoded, so callers never share state with the store; every write takes the
next revision and is published to watchers before the call returns; its log entry keeps
the write's verb and actor. Not durable.
"""

from __future__ import annotations

import bisect
import builtins
from collections.abc import AsyncIterator

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Gone, StoreClosed
from setpoint.model import Object, Registry, Selector, codec
from setpoint.model.crd import CRD
from setpoint.store.backend import Backend, encoded_matching
from setpoint.store.rules import Key, Write, decide, encode, key_of, not_found, stamp
from setpoint.store.watchers import LogEntry, Watchers, matcher


class MemoryStore(Backend):
    def __init__(
        self,
        registry: Registry | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        history: int = 10_000,
    ) -> None:
        self.registry = registry if registry is not None else Registry()
        self.registry.register(CRD)  # a new store holds no CRDs yet: no kind to learn
        self._clock = clock
        self._history_size = history
        self._objects: dict[tuple[str, str], dict[tuple[str, str], bytes]] = {}
        self._log: list[LogEntry] = []
        self._revision = 0
        self._compacted = 0
        self._watchers = Watchers()
        self._closed = False

    # -- writes -----------------------------------------------------------------

    async def _execute(self, write: Write) -> Object:
        current = self._load(write.key)
        change = decide(write, current, self._clock.now())
        if change is None:
            assert current is not None
            return current
        stamp(change, self._revision + 1)
        data = encode(change.object)
        self._revision += 1
        api_version, kind, namespace, name = write.key
        objects = self._objects.setdefault((api_version, kind), {})
        if change.type == "DELETED":
            del objects[(namespace, name)]
        else:
            objects[(namespace, name)] = data
        entry = LogEntry(
            self._revision,
            change.type,
            api_version,
            kind,
            namespace,
            data,
            change.object["metadata"].get("labels"),
            change.prev_labels,
            write.op,
            write.options.actor,
        )
        self._log.append(entry)
        if len(self._log) > 2 * self._history_size:
            self._compact_to(self._log[-self._history_size - 1].revision)
        self._watchers.publish((entry,))
        self._learn_committed((entry,))
        written: Object = codec.decode(data)
        return written

    # -- reads ------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")

    def _load(self, key: Key) -> Object | None:
        self._check_open()
        data = self._objects.get(key[:2], {}).get(key[2:])
        return None if data is None else codec.decode(data)

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = "default"
    ) -> Object:
        key = key_of(self.registry.get(api_version, kind), name, namespace)
        obj = self._load(key)
        if obj is None:
            raise not_found(key)
        return obj

    def _snapshot(self, api_version: str, kind: str, namespace: str | None) -> builtins.list[bytes]:
        """The encoded objects of a kind (in one namespace, unless None), in list order."""
        self._check_open()
        self.registry.get(api_version, kind)
        return [
            data
            for (ns, _), data in sorted(self._objects.get((api_version, kind), {}).items())
            if namespace is None or ns == namespace
        ]

    async def list_encoded(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
    ) -> tuple[builtins.list[bytes], int]:
        snapshot = self._snapshot(api_version, kind, namespace)
        return encoded_matching(snapshot, label_selector), self._revision

    async def list_pages(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
        *,
        page_size: int = 500,
    ) -> AsyncIterator[tuple[builtins.list[Object], int]]:
        matches = matcher(label_selector)
        snapshot = self._snapshot(api_version, kind, namespace)
        revision = self._revision
        for start in range(0, max(len(snapshot), 1), page_size):
            page = [codec.decode(data) for data in snapshot[start : start + page_size]]
            yield [o for o in page if matches(o["metadata"].get("labels"))], revision

    async def _history(self, after: int) -> builtins.list[LogEntry]:
        if after < self._compacted:
            raise Gone(
                f"too old resource version: {after} (history starts after {self._compacted})"
            )
        start = bisect.bisect_right(self._log, after, key=lambda e: e.revision)
        return self._log[start:]

    async def revision(self) -> int:
        self._check_open()
        return self._revision

    async def compact(self, revision: int) -> None:
        self._check_open()
        self._compact_to(min(revision, self._revision))

    def _compact_to(self, revision: int) -> None:
        if revision <= self._compacted:
            return
        start = bisect.bisect_right(self._log, revision, key=lambda e: e.revision)
        del self._log[:start]
        self._compacted = revision

    async def close(self) -> None:
        self._closed = True
        self._watchers.close()
