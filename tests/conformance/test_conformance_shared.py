"""One store, several openers: for backends that several processes (or hosts) share, two
stores opened on one URL keep one revision sequence, one compare-and-swap, one watch stream."""

from __future__ import annotations

import asyncio

import pytest
from conformance_kit import API, TIMEOUT, close_watch, rv, take, take_until, widget

from setpoint.errors import AlreadyExists, Conflict


@pytest.fixture
async def pair(shared_stores):
    url = shared_stores.new_url()
    return await shared_stores.open(url), await shared_stores.open(url)


async def test_a_write_through_one_is_read_through_the_other(pair) -> None:
    a, b = pair
    created = await a.create(widget("w1", 1))
    assert await b.get(API, "Widget", "w1") == created
    items, revision = await b.list(API, "Widget")
    assert items == [created]
    assert revision == rv(created) == await b.revision() == await a.revision()
    with pytest.raises(AlreadyExists):
        await b.create(widget("w1", 2))


async def test_compare_and_swap_holds_across_openers(pair) -> None:
    a, b = pair
    seen_by_a = await a.create(widget("w1", 1))
    seen_by_b = await b.get(API, "Widget", "w1")
    seen_by_a["spec"]["size"] = 2
    written = await a.update(seen_by_a)
    seen_by_b["spec"]["size"] = 3
    with pytest.raises(Conflict):
        await b.update(seen_by_b)
    assert await b.get(API, "Widget", "w1") == written


async def test_concurrent_increments_through_both_lose_nothing(pair) -> None:
    a, b = pair
    created = await a.create(widget("counter", 0))
    per_writer = 5

    async def increment(store) -> None:
        for _ in range(per_writer):
            while True:
                obj = await store.get(API, "Widget", "counter")
                obj["spec"]["size"] += 1
                try:
                    await store.update(obj)
                except Conflict:
                    continue
                break

    writers = [increment(s) for s in (a, b) for _ in range(5)]
    await asyncio.wait_for(asyncio.gather(*writers), TIMEOUT * 3)
    final = await b.get(API, "Widget", "counter")
    assert final["spec"]["size"] == 10 * per_writer
    assert rv(final) == rv(created) + 10 * per_writer


async def test_each_watches_every_write_of_both_in_order(pair) -> None:
    a, b = pair
    start = await a.revision()
    on_a = a.watch(API, "Widget", since=start)
    on_b = b.watch(API, "Widget", since=start)
    try:

        async def write(store, prefix: str) -> None:
            for i in range(20):
                await store.create(widget(f"{prefix}{i}", i))

        await asyncio.wait_for(asyncio.gather(write(a, "a"), write(b, "b")), TIMEOUT)
        end = await a.revision()
        assert end == start + 40
        seen_a = await take_until(on_a, end)
        seen_b = await take_until(on_b, end)
        assert [e.revision for e in seen_a] == list(range(start + 1, end + 1))
        assert [(e.revision, e.object) for e in seen_b] == [(e.revision, e.object) for e in seen_a]

        # Live too: a write through one reaches a watcher on the other.
        later = await b.create(widget("later"))
        (event,) = await take(on_a, 1)
        assert event.object == later
    finally:
        await close_watch(on_a)
        await close_watch(on_b)
