"""Controllers through the manager: level-triggered reconciles, outcomes, owns, predicates,
sync reconcilers, and graceful shutdown. Assertions are about the store's state."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest
from runtime_support import eventually, widget

from setpoint.model import set_condition
from setpoint.runtime.manager import Manager
from setpoint.runtime.predicates import generation_changed
from setpoint.runtime.reconciler import Request, Result
from setpoint.store import NotFound, Store

API = "test.setpoint.dev/v1"


RUNNING: dict[int, asyncio.Task[None]] = {}


@pytest.fixture
async def manager(store: Store) -> AsyncIterator[Manager]:
    """A manager; whatever a test left running is stopped and awaited."""
    mgr = Manager(store)
    yield mgr
    mgr.stop()
    task = RUNNING.pop(id(mgr), None)
    if task is not None:
        await asyncio.wait_for(task, 10)


async def start(mgr: Manager) -> asyncio.Task[None]:
    task = asyncio.create_task(mgr.run())
    RUNNING[id(mgr)] = task
    await asyncio.wait_for(mgr.wait_started(), 5)
    return task


async def status_of(store: Store, name: str) -> dict[str, object]:
    obj = await store.get(API, "Widget", name)
    return obj.get("status") or {}


async def test_reconciler_brings_status_to_spec(store: Store, manager: Manager) -> None:
    async def reconcile(request: Request) -> Result:
        obj = await store.get(API, "Widget", request.name, request.namespace)
        if (obj.get("status") or {}).get("seen") != obj["spec"]["size"]:
            obj["status"] = {"seen": obj["spec"]["size"]}
            await store.update_status(obj)
        return Result()

    manager.controller("widgets").for_("widgets").complete(reconcile)
    task = await start(manager)
    for i in range(20):
        await store.create(widget(f"w{i}", i))

    async def all_seen() -> bool:
        items, _ = await store.list(API, "Widget")
        return len(items) == 20 and all(
            (o.get("status") or {}).get("seen") == o["spec"]["size"] for o in items
        )

    await eventually(all_seen)
    obj = await store.get(API, "Widget", "w3")
    obj["spec"]["size"] = 300
    await store.update(obj)

    async def updated() -> bool:
        return (await status_of(store, "w3")).get("seen") == 300

    await eventually(updated)
    manager.stop()
    await task


async def test_errors_are_retried_until_success(store: Store, manager: Manager) -> None:
    failures_left = {"flaky": 3}

    async def reconcile(request: Request) -> None:
        if failures_left[request.name] > 0:
            failures_left[request.name] -= 1
            raise RuntimeError("not yet")
        obj = await store.get(API, "Widget", request.name, request.namespace)
        obj["status"] = {"seen": 1}
        await store.update_status(obj)

    manager.controller("widgets").for_("widgets").complete(reconcile)
    task = await start(manager)
    await store.create(widget("flaky"))

    async def done() -> bool:
        return (await status_of(store, "flaky")).get("seen") == 1

    await eventually(done)
    assert failures_left["flaky"] == 0
    manager.stop()
    await task


async def test_owned_objects_enqueue_their_owner(store: Store, manager: Manager) -> None:
    """The parent counts its children; a child change wakes the parent, not the child."""

    async def reconcile(request: Request) -> None:
        children, _ = await store.list(API, "Gadget")
        mine = [c for c in children if any(
            r["name"] == request.name for r in c["metadata"].get("ownerReferences") or ()
        )]  # fmt: skip
        obj = await store.get(API, "Widget", request.name, request.namespace)
        if (obj.get("status") or {}).get("seen") != len(mine):
            obj["status"] = {"seen": len(mine)}
            await store.update_status(obj)

    manager.controller("widgets").for_("widgets").owns("gadgets").complete(reconcile)
    task = await start(manager)
    parent = await store.create(widget("parent"))
    ref = {"apiVersion": API, "kind": "Widget", "name": "parent",
           "uid": parent["metadata"]["uid"], "controller": True}  # fmt: skip
    for i in range(3):
        await store.create({"apiVersion": API, "kind": "Gadget",
                            "metadata": {"name": f"g{i}", "ownerReferences": [ref]},
                            "spec": {"size": 0}})  # fmt: skip

    async def counted() -> bool:
        return (await status_of(store, "parent")).get("seen") == 3

    await eventually(counted)
    await store.delete(API, "Gadget", "g0")

    async def recounted() -> bool:
        return (await status_of(store, "parent")).get("seen") == 2

    await eventually(recounted)
    manager.stop()
    await task


async def test_generation_predicate_skips_status_writes(store: Store, manager: Manager) -> None:
    """With generation_changed, the reconciler's own status write does not wake it again."""
    calls: list[int] = []

    async def reconcile(request: Request) -> None:
        obj = await store.get(API, "Widget", request.name, request.namespace)
        calls.append(obj["metadata"]["generation"])
        status = dict(obj.get("status") or {})
        status["seen"] = len(calls)
        set_condition(status, "Ready", True, reason="Seen", now=0.0)
        obj["status"] = status
        await store.update_status(obj)

    manager.controller("widgets").for_("widgets", predicates=[generation_changed]).complete(
        reconcile
    )
    task = await start(manager)
    await store.create(widget("once"))
    obj = await store.get(API, "Widget", "once")

    async def reconciled() -> bool:
        return (await status_of(store, "once")).get("seen") == 1

    await eventually(reconciled)
    obj = await store.get(API, "Widget", "once")
    obj["spec"]["size"] = 5
    await store.update(obj)

    async def twice() -> bool:
        return (await status_of(store, "once")).get("seen") == 2

    await eventually(twice)
    manager.stop()
    await task
    # One reconcile per generation: the status writes woke nothing.
    assert calls == [1, 2]


async def test_sync_reconciler_runs_in_a_thread(store: Store, manager: Manager) -> None:
    threads: set[str] = set()
    loop_thread = threading.current_thread().name

    def reconcile(request: Request) -> None:
        threads.add(threading.current_thread().name)

    manager.controller("widgets").for_("widgets").complete(reconcile)
    task = await start(manager)
    await store.create(widget("a"))

    async def ran() -> bool:
        return bool(threads)

    await eventually(ran)
    manager.stop()
    await task
    assert loop_thread not in threads


async def test_a_key_is_never_reconciled_twice_at_once(store: Store, manager: Manager) -> None:
    """While a key's reconcile is held in flight, changes to it do not start a second one
    (four workers are idle); they collapse into exactly one more reconcile afterwards."""
    running: set[str] = set()
    overlaps: list[str] = []
    calls: list[str] = []
    held = asyncio.Event()
    release = asyncio.Event()

    async def reconcile(request: Request) -> None:
        if request.name in running:
            overlaps.append(request.name)
        running.add(request.name)
        calls.append(request.name)
        try:
            if len(calls) == 1:
                held.set()
                await release.wait()
        finally:
            running.discard(request.name)

    manager.controller("widgets").for_("widgets").max_concurrent(4).complete(reconcile)
    await start(manager)
    obj = await store.create(widget("w"))
    await asyncio.wait_for(held.wait(), 5)
    for size in range(1, 6):
        obj["spec"]["size"] = size
        obj = await store.update(obj)

    async def seen_all() -> bool:
        return manager.informer("widgets").cache.revision == await store.revision()

    await eventually(seen_all)
    assert calls == ["w"]  # the updates are known, yet no second reconcile started
    release.set()

    async def settled() -> bool:
        stats = manager.controllers[0].queue.statistics()
        return len(calls) == 2 and stats.depth == 0 and stats.processing == 0

    await eventually(settled)
    assert overlaps == []
    assert calls == ["w", "w"]


async def test_shutdown_waits_for_in_flight_reconcile(store: Store, manager: Manager) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    async def reconcile(request: Request) -> None:
        started.set()
        await release.wait()
        obj = await store.get(API, "Widget", request.name, request.namespace)
        obj["status"] = {"seen": 7}
        await store.update_status(obj)

    manager.controller("widgets").for_("widgets").complete(reconcile)
    task = await start(manager)
    await store.create(widget("slow"))
    await asyncio.wait_for(started.wait(), 5)
    manager.stop()
    await asyncio.sleep(0)
    release.set()
    await asyncio.wait_for(task, 5)
    assert (await status_of(store, "slow")).get("seen") == 7


async def test_deleted_objects_are_reconciled_as_missing(store: Store, manager: Manager) -> None:
    missing: list[str] = []

    async def reconcile(request: Request) -> None:
        try:
            await store.get(API, "Widget", request.name, request.namespace)
        except NotFound:
            missing.append(request.name)

    manager.controller("widgets").for_("widgets").complete(reconcile)
    task = await start(manager)
    await store.create(widget("gone"))
    await store.delete(API, "Widget", "gone")

    async def seen_missing() -> bool:
        return "gone" in missing

    await eventually(seen_missing)
    manager.stop()
    await task
