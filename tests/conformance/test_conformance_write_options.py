"""Write options (`setpoint.store.base.WriteOptions`): a dry run decides as a real write and
writes nothing; the actor and verb of a write reach the watch event of its revision."""

from __future__ import annotations

import pytest
from conformance_kit import API, close_watch, take, widget

from setpoint.errors import AlreadyExists, Conflict, Invalid
from setpoint.store.base import Actor, WriteOptions

ALICE = Actor("alice", "kubectl-edit", "kubectl/v1.31.0 (linux/amd64)")
DRY = WriteOptions(dry_run=True)


async def test_the_actor_of_each_write_arrives_on_its_watch_event(store) -> None:
    start = await store.revision()
    events = store.watch(API, "Widget", since=start)
    try:
        by = {
            verb: WriteOptions(actor=Actor(f"{verb}-user", "m", "a"))
            for verb in ("create", "update", "update_status", "patch", "delete")
        }
        made = await store.create(widget("w1", 1, finalizers=["keep"]), options=by["create"])
        made = await store.update(dict(made, spec={"size": 2}), options=by["update"])
        made = await store.update_status(
            dict(made, status={"phase": "Ready"}), options=by["update_status"]
        )
        await store.patch(API, "Widget", "w1", {"spec": {"size": 3}}, options=by["patch"])
        await store.delete(API, "Widget", "w1", options=by["delete"])  # marked: a finalizer
        unnamed = await store.get(API, "Widget", "w1")
        unnamed["metadata"]["labels"] = {"by": "nobody"}
        await store.update(unnamed)  # no actor named

        got = await take(events, 6)
        assert [(e.verb, e.actor) for e in got] == [
            *((verb, options.actor) for verb, options in by.items()),
            ("update", None),
        ]
    finally:
        await close_watch(events)


async def test_the_actor_of_a_delete_that_removes_arrives_on_its_watch_event(store) -> None:
    await store.create(widget("w1"))
    start = await store.revision()
    events = store.watch(API, "Widget", since=start)
    try:
        await store.delete(API, "Widget", "w1", options=WriteOptions(actor=ALICE))
        (event,) = await take(events, 1)
        assert (event.type, event.verb, event.actor) == ("DELETED", "delete", ALICE)
    finally:
        await close_watch(events)


async def test_a_dry_run_decides_as_a_write_and_writes_nothing(store) -> None:
    live = await store.create(widget("w1", 1, finalizers=["keep"]))
    start = await store.revision()

    created = await store.create(widget("w2", 5), options=DRY)
    assert created["spec"]["size"] == 5
    assert created["metadata"]["uid"]
    updated = await store.update(dict(live, spec={"size": 2}), options=DRY)
    assert updated["spec"]["size"] == 2
    assert updated["metadata"]["generation"] == 2
    status = await store.update_status(dict(live, status={"phase": "Ready"}), options=DRY)
    assert status["status"]["phase"] == "Ready"
    patched = await store.patch(API, "Widget", "w1", {"spec": {"size": 7}}, options=DRY)
    assert patched["spec"]["size"] == 7
    marked = await store.delete(API, "Widget", "w1", options=DRY)
    assert marked["metadata"]["deletionTimestamp"]

    # Refused as the real write would be.
    with pytest.raises(AlreadyExists):
        await store.create(widget("w1"), options=DRY)
    with pytest.raises(Conflict):
        await store.update(
            dict(updated, metadata={**live["metadata"], "resourceVersion": "12345"}), options=DRY
        )
    with pytest.raises(Invalid):
        await store.patch(API, "Widget", "w1", {"spec": {"size": "big"}}, options=DRY)

    assert await store.revision() == start  # no revision used
    assert await store.get(API, "Widget", "w1") == live
    items, _ = await store.list(API, "Widget")
    assert [o["metadata"]["name"] for o in items] == ["w1"]
