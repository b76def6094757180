"""Compaction: history older than the mark answers `Gone`; a relist and a watch from the
list's revision recover, and objects themselves are never compacted away."""

from __future__ import annotations

import pytest
from conformance_kit import (
    API,
    by_key,
    close_watch,
    first_event,
    next_event,
    replay,
    rv,
    take,
    widget,
)

from setpoint.errors import Gone


async def expect_gone(store, since: int) -> None:
    """`watch(since)` raises Gone when iteration starts (or already when called)."""
    with pytest.raises(Gone):
        await first_event(store, API, "Widget", since=since)


async def test_watch_before_the_compaction_mark_is_gone(store) -> None:
    start = await store.revision()
    for i in range(10):
        await store.create(widget(f"w{i}", i))
    mark = start + 6
    await store.compact(mark)

    await expect_gone(store, start)
    await expect_gone(store, mark - 1)

    # The mark itself is fine: every change after it is still there.
    events = store.watch(API, "Widget", since=mark)
    try:
        got = await take(events, 4)
        assert [e.revision for e in got] == [mark + 1, mark + 2, mark + 3, mark + 4]
    finally:
        await close_watch(events)


async def test_compaction_keeps_every_object(store) -> None:
    for i in range(5):
        obj = await store.create(widget(f"w{i}", i))
        obj["spec"]["size"] += 10
        await store.update(obj)
    await store.delete(API, "Widget", "w0")
    before, revision = await store.list(API, "Widget")
    await store.compact(await store.revision())
    after, revision_after = await store.list(API, "Widget")
    assert by_key(after) == by_key(before)
    assert revision_after == revision == await store.revision()
    assert (await store.get(API, "Widget", "w3"))["spec"]["size"] == 13


async def test_relist_and_watch_from_the_list_revision_recovers(store) -> None:
    start = await store.revision()
    for i in range(8):
        await store.create(widget(f"w{i}", i))
    await store.delete(API, "Widget", "w1")
    await store.compact(await store.revision() - 2)
    await expect_gone(store, start)

    # What an informer does on Gone: relist, then watch from the list's revision.
    items, revision = await store.list(API, "Widget")
    state = by_key(items)
    events = store.watch(API, "Widget", since=revision)
    try:
        later = await store.create(widget("later", 100))
        obj = await store.get(API, "Widget", "w2")
        obj["spec"]["size"] = 200
        changed = await store.update(obj)
        await store.delete(API, "Widget", "w3")
        got = await take(events, 3)
        assert [e.revision for e in got] == [revision + 1, revision + 2, revision + 3]
        assert [e.type for e in got] == ["ADDED", "MODIFIED", "DELETED"]
        assert got[0].object == later
        assert got[1].object == changed
    finally:
        await close_watch(events)

    # The relisted state plus the events is exactly what the store now holds.
    now, _ = await store.list(API, "Widget")
    assert replay(got, state) == by_key(now)


async def test_a_live_watcher_keeps_streaming_across_compaction(store) -> None:
    for i in range(3):
        await store.create(widget(f"w{i}"))
    since = await store.revision()
    events = store.watch(API, "Widget", since=since)
    try:
        first = await store.create(widget("a"))
        assert (await next_event(events)).revision == rv(first)
        await store.compact(await store.revision())
        second = await store.create(widget("b"))
        assert (await next_event(events)).revision == rv(second)
    finally:
        await close_watch(events)


async def test_history_parameter_bounds_the_retained_history(stores) -> None:
    keep = 5
    store = await stores.open(stores.new_url(history=keep))
    for i in range(10 * keep):
        await store.create(widget(f"w{i}", i))
    now = await store.revision()
    await expect_gone(store, 0)
    await expect_gone(store, now - 4 * keep)

    events = store.watch(API, "Widget", since=now - keep)
    try:
        got = await take(events, keep)
        assert [e.revision for e in got] == list(range(now - keep + 1, now + 1))
    finally:
        await close_watch(events)
    items, _ = await store.list(API, "Widget")
    assert len(items) == 10 * keep
