"""The shared watch fan-out (`setpoint.store.watchers`): `watch_encoded` streams what
`watch` streams with each object left as the log keeps it, a watcher more than
`max_buffered` changes behind gets what it had then `Gone`, changes of other kinds never
count against a watch (watches are indexed by kind: the scale run's 2,600 watches of 500
kinds were each handed every change), and closing ends streams."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from setpoint.errors import Gone
from setpoint.model import Kind, Registry, codec
from setpoint.store import open_store
from setpoint.store.watchers import EncodedWatches, LogEntry, Watchers, WatchFilter

API = "test.setpoint.dev/v1"


def registry() -> Registry:
    reg = Registry()
    reg.register(Kind(API, "Thing", "things"))
    return reg


def thing(name: str, **labels: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": "default", "labels": labels}
    return {"apiVersion": API, "kind": "Thing", "metadata": meta, "spec": {}}


def entry(revision: int, kind: str = "Thing") -> LogEntry:
    obj = {**thing(f"t{revision}"), "kind": kind}
    return LogEntry(revision, "ADDED", API, kind, "default", codec.encode(obj), {}, None)


async def test_encoded_events_are_the_events_with_the_object_as_stored(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'state.db'}", registry())
    try:
        web = await store.create(thing("web", tier="front"))
        await store.create(thing("db", tier="back"))
        web["metadata"]["labels"] = {"tier": "back"}  # moves out of the selector: DELETED
        web = await store.update(web)
        web["metadata"]["labels"] = {"tier": "front"}  # and back in: ADDED
        await store.update(web)
        await store.delete(API, "Thing", "web")
        last = await store.revision()

        async def take(events: Any) -> list[tuple[str, int, Any]]:
            out = []
            async for event in events:
                data = getattr(event, "data", None)
                out.append((event.type, event.revision, event.object if data is None else data))
                if event.revision == last:
                    await events.aclose()
                    return out
            raise AssertionError("the stream ended")

        assert isinstance(store, EncodedWatches)
        front = {"since": 0, "label_selector": "tier=front"}
        decoded = await take(store.watch(API, "Thing", **front))
        encoded = await take(store.watch_encoded(API, "Thing", **front))
    finally:
        await store.close()
    assert [t for t, _, _ in decoded] == ["ADDED", "DELETED", "ADDED", "DELETED"]
    assert [(t, r) for t, r, _ in encoded] == [(t, r) for t, r, _ in decoded]
    assert all(isinstance(data, bytes) for _, _, data in encoded)
    assert [codec.decode(data) for _, _, data in encoded] == [obj for _, _, obj in decoded]


async def test_a_watcher_too_far_behind_gets_what_it_had_then_gone() -> None:
    watchers = Watchers(max_buffered=3)

    async def history(after: int) -> list[LogEntry]:
        # Five changes are committed while the history is read: two more than fit.
        watchers.publish([entry(r) for r in range(1, 6)])
        return []

    async def revision() -> int:
        return 0

    events = watchers.watch(history, revision, WatchFilter(API, "Thing"), since=0)
    seen = []

    async def read() -> None:
        async for event in events:
            seen.append(event.revision)

    with pytest.raises(Gone):
        await read()
    assert seen == [1, 2, 3]
    assert not watchers.has_subscribers()


async def test_closing_ends_every_stream_after_what_it_had() -> None:
    watchers = Watchers()

    async def history(after: int) -> list[LogEntry]:
        watchers.publish([entry(1), entry(2)])
        watchers.close()
        return []

    async def revision() -> int:
        return 0

    wanted = WatchFilter(API, "Thing")
    events = watchers.watch_encoded(history, revision, wanted, since=0)
    assert [event.revision async for event in events] == [1, 2]


async def test_changes_of_other_kinds_neither_reach_nor_overflow_a_watch() -> None:
    """A watch of a quiet kind: ten changes of another kind, more than its buffer holds,
    arrive before it reads; it is not ended with `Gone` and gets the one change of its kind."""
    watchers = Watchers(max_buffered=3)

    async def history(after: int) -> list[LogEntry]:
        watchers.publish([entry(r, "Busy") for r in range(1, 11)])
        watchers.publish([entry(11, "Quiet")])
        watchers.close()
        return []

    async def revision() -> int:
        return 0

    events = watchers.watch(history, revision, WatchFilter(API, "Quiet"), since=0)
    assert [(event.object["kind"], event.revision) async for event in events] == [("Quiet", 11)]
    assert not watchers.has_subscribers()


async def test_a_watch_of_every_kind_gets_every_change_in_order() -> None:
    watchers = Watchers()
    kinds = ["Busy", "Quiet", "Thing"]

    async def history(after: int) -> list[LogEntry]:
        watchers.publish([entry(r, kinds[r % 3]) for r in range(1, 5)])
        watchers.publish([entry(r, kinds[r % 3]) for r in range(5, 8)])
        watchers.close()
        return []

    async def revision() -> int:
        return 0

    events = watchers.watch_encoded(history, revision, WatchFilter(None, None), since=0)
    assert [event.revision async for event in events] == list(range(1, 8))
