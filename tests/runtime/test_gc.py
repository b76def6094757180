"""The garbage collector, checked by what is left in the store: Background cascades (through
levels, across scopes, with several owners, for owners deleted while it was not running),
Foreground (the owner waits for its dependents), Orphan (dependents stay, unowned), and
recovery from an expired watch."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from setpoint.errors import Conflict, Gone, NotFound
from setpoint.model import Kind, Object, Registry
from setpoint.runtime.gc import GarbageCollector
from setpoint.runtime.lifecycle import is_deleting, owner_reference, remove_finalizer
from setpoint.runtime.manager import Manager
from setpoint.store import Store, WatchEvent, open_store
from setpoint.testing import ManualClock

API = "test.setpoint.dev/v1"
TIMEOUT = 10.0
"""Seconds any single wait may take before the test fails (never spent when all is well)."""
HOLD = "test.setpoint.dev/hold"

WIDGET = Kind(API, "Widget", "widgets", namespaced=True)
GADGET = Kind(API, "Gadget", "gadgets", namespaced=False)


def make_registry() -> Registry:
    registry = Registry()
    registry.register(WIDGET)
    registry.register(GADGET)
    return registry


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    s = await open_store("memory://", make_registry())
    yield s
    await s.close()


@pytest.fixture(params=["memory", "sqlite"])
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'state.db'}"
    s = await open_store(url, make_registry())
    yield s
    await s.close()


# -- helpers ---------------------------------------------------------------------------


def widget(
    name: str,
    *owners: Object,
    namespace: str = "default",
    finalizers: list[str] | None = None,
    block: bool = True,
) -> Object:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owners:
        meta["ownerReferences"] = [
            owner_reference(o, controller=i == 0, block_owner_deletion=block)
            for i, o in enumerate(owners)
        ]
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": API, "kind": "Widget", "metadata": meta, "spec": {}}


def gadget(name: str, *refs: dict[str, Any]) -> Object:
    meta: dict[str, Any] = {"name": name}
    if refs:
        meta["ownerReferences"] = list(refs)
    return {"apiVersion": API, "kind": "Gadget", "metadata": meta, "spec": {}}


async def get(store: Store, obj: Object) -> Object | None:
    """`obj` as stored now (the same uid), or None."""
    meta = obj["metadata"]
    try:
        now = await store.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
    except NotFound:
        return None
    return now if now["metadata"]["uid"] == meta["uid"] else None


async def gone(store: Store, *objs: Object) -> bool:
    return all([await get(store, o) is None for o in objs])


def owner_uids(obj: Object | None) -> list[str]:
    assert obj is not None
    return [ref["uid"] for ref in obj["metadata"].get("ownerReferences") or ()]


async def wait_until(store: Store, check: Callable[[], Awaitable[bool]]) -> None:
    """Return once `check()` holds, re-checking after every change in the store (fail
    after `TIMEOUT` seconds)."""

    async def loop() -> None:
        since = await store.revision()
        if await check():
            return
        async for _ in store.watch(None, None, since=since):
            if await check():
                return

    await asyncio.wait_for(loop(), TIMEOUT)


@contextlib.asynccontextmanager
async def collecting(store: Store) -> AsyncIterator[GarbageCollector]:
    """A garbage collector running on `store` (with a clock that never moves: nothing here
    may wait on a backoff) until the block ends."""
    gc = GarbageCollector(store, clock=ManualClock())
    task = asyncio.create_task(gc.run())
    try:
        await asyncio.wait_for(gc.wait_synced(), TIMEOUT)
        yield gc
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert gc.queue.is_shut_down


async def edit(store: Store, obj: Object, change: Callable[[Object], object]) -> Object:
    """Read `obj`, apply `change`, write it back; retry on Conflict."""
    for _ in range(10):
        current = await get(store, obj)
        assert current is not None
        change(current)
        try:
            return await store.update(current)
        except Conflict:
            continue
    raise AssertionError("kept conflicting")


# -- Background ------------------------------------------------------------------------


async def test_background_deletion_cascades_through_two_levels(any_store: Store) -> None:
    store = any_store
    grandparent = await store.create(widget("grandparent"))
    parent = await store.create(widget("parent", grandparent))
    child = await store.create(widget("child", parent))
    bystander = await store.create(widget("bystander"))

    async with collecting(store):
        await store.delete(API, "Widget", "grandparent")
        await wait_until(store, lambda: gone(store, parent, child))

    assert await gone(store, grandparent)
    assert await get(store, bystander) is not None


async def test_an_object_with_two_owners_survives_the_deletion_of_one(store: Store) -> None:
    first = await store.create(widget("first"))
    second = await store.create(widget("second"))
    shared = await store.create(widget("shared", first, second))
    only_first = await store.create(widget("only-first", first))

    async with collecting(store):
        await store.delete(API, "Widget", "first")

        async def shared_lost_first() -> bool:
            return owner_uids(await get(store, shared)) == [second["metadata"]["uid"]]

        # The survivor's reference to the deleted owner is removed, as Kubernetes does.
        await wait_until(store, shared_lost_first)
        await wait_until(store, lambda: gone(store, only_first))
        assert await get(store, shared) is not None

        await store.delete(API, "Widget", "second")
        await wait_until(store, lambda: gone(store, shared))


async def test_dependents_of_owners_deleted_while_it_was_not_running_go_when_it_starts(
    store: Store,
) -> None:
    owner = await store.create(widget("owner"))
    children = [await store.create(widget(f"child-{i}", owner)) for i in range(3)]
    grandchild = await store.create(widget("grandchild", children[0]))
    kept = await store.create(widget("kept"))
    await store.delete(API, "Widget", "owner")

    async with collecting(store):
        await wait_until(store, lambda: gone(store, *children, grandchild))
    assert await get(store, kept) is not None


async def test_a_cluster_scoped_owner_takes_its_dependents_in_every_namespace(
    store: Store,
) -> None:
    pool = await store.create(gadget("pool"))
    a = await store.create(widget("member", pool, namespace="a"))
    b = await store.create(widget("member", pool, namespace="b"))
    namesake = await store.create(widget("pool", namespace="a"))  # a namespaced "pool"

    async with collecting(store):
        await store.delete(API, "Gadget", "pool", None)
        await wait_until(store, lambda: gone(store, a, b))
    assert await get(store, namesake) is not None


async def test_an_owner_recreated_under_the_same_name_does_not_keep_old_dependents(
    store: Store,
) -> None:
    owner = await store.create(widget("owner"))
    dependent = await store.create(widget("dependent", owner))
    await store.delete(API, "Widget", "owner")
    await store.create(widget("owner"))  # the same name, another uid

    async with collecting(store):
        await wait_until(store, lambda: gone(store, dependent))


@pytest.mark.parametrize(
    "unresolvable",
    [
        {"apiVersion": "other.example.com/v1", "kind": "Thing", "name": "t", "uid": "u-thing"},
        {"apiVersion": API, "kind": "Widget", "name": "w", "uid": "u-widget"},
    ],
    ids=["unregistered-kind", "namespaced-owner-of-cluster-scoped-object"],
)
async def test_an_owner_that_cannot_be_looked_up_is_taken_to_exist(
    store: Store, unresolvable: dict[str, Any]
) -> None:
    owner = await store.create(gadget("owner"))
    dependent = await store.create(gadget("dependent", owner_reference(owner), unresolvable))

    async with collecting(store):
        await store.delete(API, "Gadget", "owner", None)

        async def lost_owner() -> bool:
            return owner_uids(await get(store, dependent)) == [unresolvable["uid"]]

        await wait_until(store, lost_owner)
    assert await get(store, dependent) is not None


# -- Foreground ------------------------------------------------------------------------


async def test_foreground_owner_stays_until_its_dependents_are_gone(store: Store) -> None:
    owner = await store.create(widget("owner"))
    held = await store.create(widget("held", owner, finalizers=[HOLD]))
    parent = await store.create(widget("parent", owner))
    grandchild = await store.create(widget("grandchild", parent))

    async with collecting(store):
        await store.delete(API, "Widget", "owner", propagation_policy="Foreground")

        async def dependents_going() -> bool:
            now = await get(store, held)
            return (
                await gone(store, parent, grandchild)
                and now is not None
                and is_deleting(now)
                and now["metadata"]["finalizers"] == [HOLD]
            )

        await wait_until(store, dependents_going)
        # `held` still exists (its own finalizer holds it), so the owner waits.
        waiting = await get(store, owner)
        assert waiting is not None
        assert is_deleting(waiting)
        assert waiting["metadata"]["finalizers"] == ["foregroundDeletion"]

        await edit(store, held, lambda o: remove_finalizer(o, HOLD))
        await wait_until(store, lambda: gone(store, owner))
    assert await gone(store, held)


async def test_foreground_keeps_a_dependent_that_has_another_owner(store: Store) -> None:
    owner = await store.create(widget("owner"))
    other = await store.create(widget("other"))
    shared = await store.create(widget("shared", owner, other))

    async with collecting(store):
        await store.delete(API, "Widget", "owner", propagation_policy="Foreground")
        await wait_until(store, lambda: gone(store, owner))
    assert owner_uids(await get(store, shared)) == [other["metadata"]["uid"]]


async def test_foreground_owner_does_not_wait_for_dependents_that_do_not_block(
    store: Store,
) -> None:
    owner = await store.create(widget("owner"))
    loose = await store.create(widget("loose", owner, finalizers=[HOLD], block=False))

    async with collecting(store):
        await store.delete(API, "Widget", "owner", propagation_policy="Foreground")
        await wait_until(store, lambda: gone(store, owner))
        now = await get(store, loose)
        assert now is not None
        assert is_deleting(now)  # deleted too, and held only by its own finalizer

        await edit(store, loose, lambda o: remove_finalizer(o, HOLD))
        await wait_until(store, lambda: gone(store, loose))


async def test_foreground_deletion_of_an_ownership_cycle_finishes(store: Store) -> None:
    first = await store.create(widget("first"))
    second = await store.create(widget("second", first))

    def owned_by_second(obj: Object) -> None:
        obj["metadata"]["ownerReferences"] = [owner_reference(second)]

    first = await edit(store, first, owned_by_second)

    async with collecting(store):
        await store.delete(API, "Widget", "first", propagation_policy="Foreground")
        # Each waits for the other unless one reference stops blocking (as Kubernetes does).
        await wait_until(store, lambda: gone(store, first, second))


# -- Orphan ----------------------------------------------------------------------------


async def test_orphan_keeps_dependents_without_the_reference(store: Store) -> None:
    owner = await store.create(widget("owner"))
    other = await store.create(widget("other"))
    only = await store.create(widget("only", owner))
    shared = await store.create(widget("shared", owner, other))
    grandchild = await store.create(widget("grandchild", only))

    async with collecting(store):
        await store.delete(API, "Widget", "owner", propagation_policy="Orphan")
        await wait_until(store, lambda: gone(store, owner))

    assert owner_uids(await get(store, only)) == []
    assert owner_uids(await get(store, shared)) == [other["metadata"]["uid"]]
    assert owner_uids(await get(store, grandchild)) == [only["metadata"]["uid"]]


# -- running -----------------------------------------------------------------------------


class GoneAfterFirstEvent:
    """A store whose first watch yields one event and then fails with `Gone`, as when
    history is compacted under a slow watcher; later watches are the real ones."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.registry = store.registry
        self.watches = 0
        self.expired = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def watch(self, *args: Any, **kwargs: Any) -> AsyncIterator[WatchEvent]:
        self.watches += 1
        if self.watches > 1:
            return self._store.watch(*args, **kwargs)
        return self._expiring(self._store.watch(*args, **kwargs))

    async def _expiring(self, events: AsyncIterator[WatchEvent]) -> AsyncIterator[WatchEvent]:
        async for event in events:
            yield event
            self.expired += 1
            raise Gone("too old resource version")


async def test_it_relists_after_an_expired_watch(store: Store) -> None:
    flaky = GoneAfterFirstEvent(store)
    first = await store.create(widget("first"))
    first_child = await store.create(widget("first-child", first))
    second = await store.create(widget("second"))
    second_child = await store.create(widget("second-child", second))

    gc = GarbageCollector(flaky, clock=ManualClock())  # type: ignore[arg-type]
    task = asyncio.create_task(gc.run())
    try:
        await asyncio.wait_for(gc.wait_synced(), TIMEOUT)
        await store.delete(API, "Widget", "first")
        await wait_until(store, lambda: gone(store, first_child))
        assert flaky.expired == 1  # the first watch failed right after its first event

        await store.delete(API, "Widget", "second")
        await wait_until(store, lambda: gone(store, second_child))
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class WritesWhileListing:
    """A store that creates `obj` just before it lists `kind`: a write between the
    collector's lists of two kinds."""

    def __init__(self, store: Store, kind: str, obj: Object) -> None:
        self._store = store
        self.registry = store.registry
        self._kind = kind
        self._obj: Object | None = obj
        self.created: Object | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def list(self, api_version: str, kind: str, *args: Any) -> Any:
        if kind == self._kind and self._obj is not None:
            self.created, self._obj = await self._store.create(self._obj), None
        return await self._store.list(api_version, kind, *args)


async def test_a_dependent_created_between_two_lists_holds_its_foreground_owner(
    any_store: Store,
) -> None:
    store = any_store
    held = gadget("owner")
    held["metadata"]["finalizers"] = [HOLD]
    owner = await store.create(held)
    await store.delete(API, "Gadget", "owner", None, propagation_policy="Foreground")
    owner = await edit(store, owner, lambda o: remove_finalizer(o, HOLD))
    assert owner["metadata"]["finalizers"] == ["foregroundDeletion"]
    # Gadgets are listed before Widgets: made while Widgets are listed, this one is in no
    # list, only in the watch. (On sqlite, reads yield to the event loop, so a worker could
    # act on the owner before the watch has brought the graph up to date.)
    late = gadget("late", owner_reference(owner))
    late["metadata"]["finalizers"] = [HOLD]
    racing = WritesWhileListing(store, "Widget", late)

    gc = GarbageCollector(racing, clock=ManualClock())  # type: ignore[arg-type]
    task = asyncio.create_task(gc.run())
    try:
        await asyncio.wait_for(gc.wait_synced(), TIMEOUT)
        late = racing.created
        assert late is not None

        async def late_deleting() -> bool:
            now = await get(store, late)
            return now is not None and is_deleting(now) and now["metadata"]["finalizers"] == [HOLD]

        await wait_until(store, late_deleting)
        assert await get(store, owner) is not None  # waiting for `late`

        await edit(store, late, lambda o: remove_finalizer(o, HOLD))
        await wait_until(store, lambda: gone(store, owner, late))
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_it_runs_as_a_manager_runnable(store: Store) -> None:
    owner = await store.create(widget("owner"))
    dependent = await store.create(widget("dependent", owner))
    manager = Manager(store, clock=ManualClock())
    manager.add_runnable(GarbageCollector(store, clock=ManualClock()).run)
    running = asyncio.create_task(manager.run())
    try:
        await asyncio.wait_for(manager.wait_started(), TIMEOUT)
        await store.delete(API, "Widget", "owner")
        await wait_until(store, lambda: gone(store, dependent))
    finally:
        manager.stop()
        await asyncio.wait_for(running, TIMEOUT)
