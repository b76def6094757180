"""Watch: every change after `since`, in revision order, no gaps, no duplicates, then live."""

from __future__ import annotations

import asyncio

import pytest
from conformance_kit import (
    API,
    TIMEOUT,
    close_watch,
    gadget,
    next_event,
    rv,
    take,
    take_until,
    widget,
)

from setpoint.model import codec
from setpoint.store.watchers import EncodedWatches


async def test_event_types_and_objects(store) -> None:
    start = await store.revision()
    events = store.watch(API, "Widget", since=start)
    try:
        created = await store.create(widget("w1", 1))
        updated = await store.update(dict(created, spec={"size": 2}))
        deleted = await store.delete(API, "Widget", "w1")

        got = await take(events, 3)
        assert [e.type for e in got] == ["ADDED", "MODIFIED", "DELETED"]
        assert [e.revision for e in got] == [start + 1, start + 2, start + 3]
        assert got[0].object == created
        assert got[1].object == updated
        assert got[2].object["metadata"]["uid"] == deleted["metadata"]["uid"]
        assert got[2].object["spec"] == updated["spec"]
    finally:
        await close_watch(events)


async def test_watch_encoded_streams_what_watch_streams(store) -> None:
    if not isinstance(store, EncodedWatches):
        pytest.skip(f"{type(store).__name__} streams decoded events only (no watch_encoded)")
    start = await store.revision()
    plain = store.watch(API, "Widget", since=start)
    encoded = store.watch_encoded(API, "Widget", since=start)
    try:
        created = await store.create(widget("w1", 1))
        await store.update(dict(created, spec={"size": 2}))
        await store.delete(API, "Widget", "w1")
        want = await take(plain, 3)
        got = [await next_event(encoded) for _ in range(3)]
        assert [(e.type, codec.decode(e.data), e.revision) for e in got] == [
            (e.type, e.object, e.revision) for e in want
        ]
    finally:
        await close_watch(plain)
        await close_watch(encoded)


async def test_watch_since_replays_history_then_streams_live(store) -> None:
    start = await store.revision()
    for i in range(5):
        await store.create(widget(f"w{i}", i))
    events = store.watch(API, "Widget", since=start + 2)
    try:
        history = await take(events, 3)
        assert [e.revision for e in history] == [start + 3, start + 4, start + 5]
        assert [e.object["metadata"]["name"] for e in history] == ["w2", "w3", "w4"]
        live = await store.create(widget("w5", 5))
        (event,) = await take(events, 1)
        assert event.type == "ADDED"
        assert event.object == live
    finally:
        await close_watch(events)


async def test_watch_since_current_revision_sees_only_later_writes(store) -> None:
    for i in range(3):
        await store.create(widget(f"old{i}"))
    now = await store.revision()
    events = store.watch(API, "Widget", since=now)
    try:
        new = await store.create(widget("new"))
        event = await next_event(events)
        assert event.revision == now + 1 == rv(new)
        assert event.object["metadata"]["name"] == "new"
    finally:
        await close_watch(events)


async def test_watch_from_now_skips_earlier_writes(store) -> None:
    """since=None: the first event is a write made after the watch began."""
    earlier = await store.create(widget("earlier"))
    events = store.watch(API, "Widget")
    first = asyncio.ensure_future(next_event(events))
    try:
        # The watch starts at some moment we cannot observe; keep writing until it sees one.
        written = []
        for i in range(1000):
            written.append(rv(await store.create(widget(f"later{i}"))))
            await asyncio.sleep(0)
            if first.done():
                break
        event = await asyncio.wait_for(first, TIMEOUT)
        assert event.revision > rv(earlier)
        assert event.revision in written
        # ...and from there on, nothing is skipped (the first event may be the last write:
        # then there is nothing more to wait for).
        rest = await take_until(events, written[-1]) if event.revision < written[-1] else []
        assert [e.revision for e in rest] == list(range(event.revision + 1, written[-1] + 1))
    finally:
        first.cancel()
        await close_watch(events)


async def test_k_watchers_from_different_revisions_see_exactly_what_follows(store) -> None:
    start = await store.revision()
    for i in range(30):
        if i % 3 == 2:
            obj = await store.get(API, "Widget", f"w{i - 1}")
            obj["spec"]["size"] += 100
            await store.update(obj)
        else:
            await store.create(widget(f"w{i}", i))
    mid = await store.revision()
    starts = [start, start + 1, start + 7, start + 15, start + 22, mid]
    streams = [store.watch(API, "Widget", since=s) for s in starts]
    live_writes = 40

    async def consume(events, since):
        return [e.revision for e in await take(events, mid + live_writes - since)]

    async def write_live() -> None:
        for i in range(live_writes):
            if i % 4 == 3:
                await store.delete(API, "Widget", f"live{i - 1}")
            else:
                await store.create(widget(f"live{i}", i))

    try:
        consumers = [
            asyncio.ensure_future(consume(events, since))
            for events, since in zip(streams, starts, strict=True)
        ]
        await asyncio.wait_for(write_live(), TIMEOUT)
        seen = await asyncio.wait_for(asyncio.gather(*consumers), TIMEOUT)
    finally:
        for events in streams:
            await close_watch(events)
    end = await store.revision()
    assert end == mid + live_writes
    for since, revisions in zip(starts, seen, strict=True):
        assert revisions == list(range(since + 1, end + 1)), f"watcher since={since}"


async def test_concurrent_writers_are_seen_in_revision_order(store) -> None:
    start = await store.revision()
    events = store.watch(API, "Widget", since=start)
    try:

        async def writer(w: int) -> None:
            for i in range(10):
                await store.create(widget(f"w{w}-{i}", i))

        await asyncio.wait_for(asyncio.gather(*(writer(w) for w in range(10))), TIMEOUT)
        got = await take(events, 100)
        assert [e.revision for e in got] == list(range(start + 1, start + 101))
        items, revision = await store.list(API, "Widget")
        assert revision == start + 100
        assert {o["metadata"]["name"]: rv(o) for o in items} == {
            e.object["metadata"]["name"]: e.revision for e in got
        }
    finally:
        await close_watch(events)


async def test_watch_of_one_kind_skips_other_kinds(store) -> None:
    start = await store.revision()
    await store.create(gadget("g1"))
    w = await store.create(widget("w1"))
    await store.create(gadget("g2"))
    w2 = await store.create(widget("w2"))
    events = store.watch(API, "Widget", since=start)
    gadgets = store.watch(API, "Gadget", since=start)
    try:
        assert [e.revision for e in await take(events, 2)] == [rv(w), rv(w2)]
        assert [e.object["metadata"]["name"] for e in await take(gadgets, 2)] == ["g1", "g2"]
    finally:
        await close_watch(events)
        await close_watch(gadgets)


async def test_watch_every_kind(store) -> None:
    start = await store.revision()
    events = store.watch(None, None, since=start)
    try:
        await store.create(gadget("g1"))
        await store.create(widget("w1"))
        await store.create(widget("w2", namespace="other"))
        await store.delete(API, "Gadget", "g1", namespace=None)
        got = await take(events, 4)
        assert [(e.type, e.object["kind"]) for e in got] == [
            ("ADDED", "Gadget"),
            ("ADDED", "Widget"),
            ("ADDED", "Widget"),
            ("DELETED", "Gadget"),
        ]
        assert [e.revision for e in got] == list(range(start + 1, start + 5))
    finally:
        await close_watch(events)


async def test_status_updates_and_patches_are_modified_events(store) -> None:
    obj = await store.create(widget("w1"))
    events = store.watch(API, "Widget", since=rv(obj))
    try:
        status = await store.update_status(dict(obj, status={"phase": "Running"}))
        patched = await store.patch(API, "Widget", "w1", {"spec": {"size": 9}})
        got = await take(events, 2)
        assert [e.type for e in got] == ["MODIFIED", "MODIFIED"]
        assert got[0].object == status
        assert got[1].object == patched
    finally:
        await close_watch(events)


async def test_a_watcher_that_does_not_read_does_not_hold_up_writers(store) -> None:
    start = await store.revision()
    idle = store.watch(API, "Widget", since=start)
    first = asyncio.ensure_future(next_event(idle))  # the watch has begun, then nobody reads
    try:
        for i in range(300):
            await asyncio.wait_for(store.create(widget(f"w{i}")), TIMEOUT)
        assert (await asyncio.wait_for(first, TIMEOUT)).revision == start + 1
        rest = await take(idle, 299)
        assert [e.revision for e in rest] == list(range(start + 2, start + 301))
    finally:
        first.cancel()
        await close_watch(idle)


async def test_several_watchers_at_once_get_the_same_events(store) -> None:
    start = await store.revision()
    streams = [store.watch(API, "Widget", since=start) for _ in range(5)]
    try:
        for i in range(10):
            await store.create(widget(f"w{i}", i))
        results = [await take(events, 10) for events in streams]
        for got in results[1:]:
            assert [(e.type, e.revision, e.object) for e in got] == [
                (e.type, e.revision, e.object) for e in results[0]
            ]
    finally:
        for events in streams:
            await close_watch(events)


async def test_closing_a_watch_leaves_the_store_working(store) -> None:
    start = await store.revision()
    events = store.watch(API, "Widget", since=start)
    await store.create(widget("w1"))
    await take(events, 1)
    await close_watch(events)
    for i in range(5):
        await store.create(widget(f"after{i}"))
    again = store.watch(API, "Widget", since=start)
    try:
        assert [e.revision for e in await take(again, 6)] == list(range(start + 1, start + 7))
    finally:
        await close_watch(again)


async def test_watches_started_during_a_stream_of_writes_have_no_gap_or_duplicate(store) -> None:
    """A watch joining history to the live stream while writes keep landing: the seam is
    where a change goes missing or comes twice."""
    start = await store.revision()
    total, writers, joiners = 240, 4, 40
    end = start + total

    async def write(w: int) -> None:
        for i in range(total // writers):
            await store.create(widget(f"w{w}-{i}", i))

    async def follow(since: int) -> list[int]:
        events = store.watch(API, "Widget", since=since)
        try:
            return [e.revision for e in await take_until(events, end)]
        finally:
            await close_watch(events)

    writing = asyncio.ensure_future(asyncio.gather(*(write(w) for w in range(writers))))
    pacer = store.watch(API, "Widget", since=start)
    followers: list[tuple[int, asyncio.Future[list[int]]]] = []
    try:
        # Each change the pacer sees starts another watch a few revisions back, while the
        # writers go on writing.
        for _ in range(joiners):
            seen = (await next_event(pacer)).revision
            since = max(start, seen - 3)
            followers.append((since, asyncio.ensure_future(follow(since))))
        await asyncio.wait_for(writing, TIMEOUT * 3)
        results = await asyncio.wait_for(asyncio.gather(*(f for _, f in followers)), TIMEOUT)
    finally:
        writing.cancel()
        for _, follower in followers:
            follower.cancel()
        await close_watch(pacer)
    for (since, _), revisions in zip(followers, results, strict=True):
        assert revisions == list(range(since + 1, end + 1)), f"watch since={since}"
