"""Deletion with finalizers: `delete` marks the object (deletionTimestamp, MODIFIED); it goes
(DELETED) when a write removes the last finalizer."""

from __future__ import annotations

import pytest
from conformance_kit import API, close_watch, rv, take, widget

from setpoint.clock import parse_rfc3339
from setpoint.errors import Invalid, NotFound

FIN = "test.setpoint.dev/cleanup"
OTHER = "test.setpoint.dev/other"


async def test_finalizer_delete_flow(store) -> None:
    created = await store.create(widget("w1", 1, finalizers=[FIN]))
    events = store.watch(API, "Widget", since=rv(created))
    try:
        marked = await store.delete(API, "Widget", "w1")
        assert marked["metadata"]["finalizers"] == [FIN]
        parse_rfc3339(marked["metadata"]["deletionTimestamp"])
        assert marked["metadata"]["generation"] == created["metadata"]["generation"] + 1
        assert rv(marked) == rv(created) + 1 == await store.revision()

        (event,) = await take(events, 1)
        assert event.type == "MODIFIED"
        assert event.object == marked

        # Still there, for the finalizer's owner to clean up after.
        got = await store.get(API, "Widget", "w1")
        assert got == marked
        items, _ = await store.list(API, "Widget")
        assert items == [marked]

        got["metadata"]["finalizers"] = []
        await store.update(got)
        (gone,) = await take(events, 1)
        assert gone.type == "DELETED"
        assert gone.revision == rv(marked) + 1 == await store.revision()
        assert gone.object["metadata"]["uid"] == created["metadata"]["uid"]
        assert (
            gone.object["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]
        )
    finally:
        await close_watch(events)

    with pytest.raises(NotFound):
        await store.get(API, "Widget", "w1")
    assert (await store.list(API, "Widget"))[0] == []


async def test_object_stays_until_the_last_finalizer_goes(store) -> None:
    created = await store.create(widget("w1", 1, finalizers=[FIN, OTHER]))
    events = store.watch(API, "Widget", since=rv(created))
    try:
        marked = await store.delete(API, "Widget", "w1")
        marked["metadata"]["finalizers"] = [OTHER]
        one_left = await store.update(marked)
        assert one_left["metadata"]["finalizers"] == [OTHER]
        assert one_left["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]
        assert await store.get(API, "Widget", "w1") == one_left

        one_left["metadata"].pop("finalizers")
        await store.update(one_left)
        got = await take(events, 3)
        assert [e.type for e in got] == ["MODIFIED", "MODIFIED", "DELETED"]
    finally:
        await close_watch(events)
    with pytest.raises(NotFound):
        await store.get(API, "Widget", "w1")


async def test_removing_the_last_finalizer_by_patch_deletes(store) -> None:
    await store.create(widget("w1", 1, finalizers=[FIN]))
    await store.delete(API, "Widget", "w1")
    before = await store.revision()
    await store.patch(API, "Widget", "w1", {"metadata": {"finalizers": None}})
    assert await store.revision() == before + 1
    with pytest.raises(NotFound):
        await store.get(API, "Widget", "w1")


async def test_status_can_be_written_while_terminating(store) -> None:
    await store.create(widget("w1", 1, finalizers=[FIN]))
    marked = await store.delete(API, "Widget", "w1")
    marked["status"] = {"phase": "Terminating"}
    written = await store.update_status(marked)
    assert written["status"] == {"phase": "Terminating"}
    assert written["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]
    assert written["metadata"]["finalizers"] == [FIN]


async def test_deleting_a_terminating_object_again_keeps_it_terminating(store) -> None:
    await store.create(widget("w1", 1, finalizers=[FIN]))
    marked = await store.delete(API, "Widget", "w1")
    again = await store.delete(API, "Widget", "w1")
    assert again["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]
    assert (await store.get(API, "Widget", "w1"))["metadata"]["finalizers"] == [FIN]


async def test_no_new_finalizer_on_a_terminating_object(store) -> None:
    await store.create(widget("w1", 1, finalizers=[FIN]))
    marked = await store.delete(API, "Widget", "w1")
    before = await store.revision()
    marked["metadata"]["finalizers"] = [FIN, OTHER]
    with pytest.raises(Invalid, match=r"metadata\.finalizers"):
        await store.update(marked)
    assert await store.revision() == before
