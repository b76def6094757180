"""Compare-and-swap on resourceVersion: stale writes conflict, concurrent writers lose nothing."""

from __future__ import annotations

import asyncio

import pytest
from conformance_kit import API, TIMEOUT, rv, snapshot, widget

from setpoint.errors import AlreadyExists, Conflict, Invalid, NotFound


async def test_update_with_stale_resource_version_conflicts(store) -> None:
    old = await store.create(widget("w1", 1))
    fresh = dict(old, spec={"size": 2})
    await store.update(fresh)
    before = await snapshot(store)
    old["spec"]["size"] = 3
    with pytest.raises(Conflict):
        await store.update(old)
    assert await snapshot(store) == before
    assert (await store.get(API, "Widget", "w1"))["spec"]["size"] == 2


async def test_update_without_resource_version_is_invalid(store) -> None:
    obj = await store.create(widget("w1", 1))
    del obj["metadata"]["resourceVersion"]
    obj["spec"]["size"] = 2
    before = await snapshot(store)
    with pytest.raises(Invalid, match="resourceVersion"):
        await store.update(obj)
    with pytest.raises(Invalid, match="resourceVersion"):
        await store.update_status(dict(obj, status={"phase": "x"}))
    assert await snapshot(store) == before


async def test_update_of_missing_object_is_not_found(store) -> None:
    obj = await store.create(widget("w1", 1))
    await store.delete(API, "Widget", "w1")
    before = await snapshot(store)
    obj["spec"]["size"] = 2
    with pytest.raises(NotFound):
        await store.update(obj)
    with pytest.raises(NotFound):
        await store.update_status(dict(obj, status={"phase": "x"}))
    with pytest.raises(NotFound):
        await store.patch(API, "Widget", "w1", {"spec": {"size": 3}})
    assert await snapshot(store) == before


async def test_update_status_with_stale_resource_version_conflicts(store) -> None:
    old = await store.create(widget("w1", 1))
    await store.update(dict(old, spec={"size": 2}))
    before = await snapshot(store)
    with pytest.raises(Conflict):
        await store.update_status(dict(old, status={"phase": "Stale"}))
    assert await snapshot(store) == before


async def test_patch_carrying_resource_version_is_compare_and_swap(store) -> None:
    obj = await store.create(widget("w1", 1))
    current = await store.patch(API, "Widget", "w1", {"spec": {"size": 2}})
    before = await snapshot(store)
    stale = {
        "metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
        "spec": {"size": 9},
    }
    with pytest.raises(Conflict):
        await store.patch(API, "Widget", "w1", stale)
    with pytest.raises(Conflict):
        await store.patch(
            API,
            "Widget",
            "w1",
            [
                {"op": "replace", "path": "/metadata/resourceVersion", "value": str(rv(obj))},
                {"op": "replace", "path": "/spec/size", "value": 9},
            ],
            patch_type="json",
        )
    assert await snapshot(store) == before

    fresh = {
        "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
        "spec": {"size": 9},
    }
    done = await store.patch(API, "Widget", "w1", fresh)
    assert done["spec"]["size"] == 9
    assert rv(done) == rv(current) + 1


async def test_concurrent_cas_increments_lose_no_update(store) -> None:
    writers, increments = 20, 5
    created = await store.create(widget("counter", 0))
    conflicts = 0

    async def increment_repeatedly() -> None:
        nonlocal conflicts
        for _ in range(increments):
            while True:
                obj = await store.get(API, "Widget", "counter")
                obj["spec"]["size"] += 1
                try:
                    await store.update(obj)
                except Conflict:
                    conflicts += 1
                    continue
                break

    # A hang's safety net only: some thousand requests race here, which a loaded machine
    # (beside a CPU hog, other workers) takes far longer to answer than a quiet one.
    await asyncio.wait_for(
        asyncio.gather(*(increment_repeatedly() for _ in range(writers))), TIMEOUT * 24
    )
    final = await store.get(API, "Widget", "counter")
    assert final["spec"]["size"] == writers * increments
    assert final["metadata"]["generation"] == 1 + writers * increments
    # Conflicted attempts wrote nothing: one revision per successful increment.
    assert rv(final) == await store.revision() == rv(created) + writers * increments


async def test_concurrent_creates_of_one_name_let_exactly_one_win(store) -> None:
    async def attempt(i: int):
        try:
            return await store.create(widget("contested", i))
        except AlreadyExists:
            return None

    results = await asyncio.wait_for(asyncio.gather(*(attempt(i) for i in range(10))), TIMEOUT)
    winners = [r for r in results if r is not None]
    assert len(winners) == 1
    assert await store.get(API, "Widget", "contested") == winners[0]
    items, revision = await store.list(API, "Widget")
    assert len(items) == 1
    assert revision == rv(winners[0])


async def test_delete_preconditions(store) -> None:
    """Delete with a uid or resourceVersion precondition: a recreated or changed object is
    spared (Conflict) and nothing is written."""
    old = await store.create(widget("w1", 1))
    await store.delete(API, "Widget", "w1")
    new = await store.create(widget("w1", 2))
    before = await snapshot(store)
    with pytest.raises(Conflict, match="uid"):
        await store.delete(API, "Widget", "w1", uid=old["metadata"]["uid"])
    with pytest.raises(Conflict, match="resourceVersion"):
        await store.delete(API, "Widget", "w1", resource_version=old["metadata"]["resourceVersion"])
    assert await snapshot(store) == before
    await store.delete(
        API,
        "Widget",
        "w1",
        uid=new["metadata"]["uid"],
        resource_version=new["metadata"]["resourceVersion"],
    )
    items, _ = await store.list(API, "Widget")
    assert items == []
