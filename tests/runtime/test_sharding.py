"""Sharding and leader election per controller, in one process on a manual clock: the ring
moves only the keys a membership change must move; members of a group never both may start
one key, settle on one view, hand a crashed member's keys over once its lease expires (and
not before), and a leaving member's at once; with coordination leader, one controller runs
in one manager while the other stands by."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from runtime_support import widget

from setpoint.model import Registry
from setpoint.model.wellknown import SHARD_GROUP_LABEL, SHARD_INCARNATION, SHARD_MEMBERS
from setpoint.runtime.coordination import Coordination
from setpoint.runtime.leases import LeaseSettings
from setpoint.runtime.manager import Manager, ManagerOptions
from setpoint.runtime.reconciler import Request
from setpoint.runtime.sharding import (
    HashRing,
    Liveness,
    ShardMember,
    View,
    member_lease_name,
    shard_key,
)
from setpoint.store import Store, open_store
from setpoint.testing import ManualClock

LEASE = LeaseSettings(lease_duration=15.0, renew_deadline=10.0, retry_period=2.0)
KEYS = [f"default/widget-{i}" for i in range(2000)]
TIMEOUT = 10.0

identities = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=16)


# -- the ring -------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(members=st.sets(identities, min_size=1, max_size=8), joining=identities)
def test_a_joining_member_takes_about_one_nth_of_the_keys_and_only_takes(
    members: set[str], joining: str
) -> None:
    assume(joining not in members)
    before, after = HashRing(members), HashRing(members | {joining})
    moved = [key for key in KEYS if before.owner(key) != after.owner(key)]
    assert all(after.owner(key) == joining for key in moved)
    n = len(members) + 1
    assert 0.4 / n <= len(moved) / len(KEYS) <= 2.0 / n


@settings(max_examples=60, deadline=None)
@given(members=st.sets(identities, min_size=2, max_size=8), data=st.data())
def test_a_leaving_member_gives_its_keys_and_only_its_keys_away(
    members: set[str], data: st.DataObject
) -> None:
    leaving = data.draw(st.sampled_from(sorted(members)))
    before, after = HashRing(members), HashRing(members - {leaving})
    moved = {key for key in KEYS if before.owner(key) != after.owner(key)}
    assert moved == {key for key in KEYS if before.owner(key) == leaving}
    assert 0.4 / len(members) <= len(moved) / len(KEYS) <= 2.0 / len(members)


@settings(max_examples=30, deadline=None)
@given(members=st.sets(identities, min_size=1, max_size=8))
def test_every_key_has_one_owner_among_the_members_the_same_in_every_ring(
    members: set[str],
) -> None:
    ring, again = HashRing(members), HashRing(sorted(members, reverse=True))
    for key in KEYS[:200]:
        assert ring.owner(key) in members
        assert ring.owner(key) == again.owner(key)
    assert HashRing(()).owner("default/x") is None


def test_views_differ_by_incarnation_and_ring_parameters() -> None:
    view = View(frozenset({("a", "1"), ("b", "1")}))
    assert view.digest == View(frozenset({("b", "1"), ("a", "1")})).digest
    assert view.digest != View(frozenset({("a", "1"), ("b", "2")})).digest
    assert view.digest != View(view.members, vnodes=64).digest
    assert view.ring() == HashRing({"a", "b"})


def test_member_lease_names_are_object_names_for_any_identity() -> None:
    name = member_lease_name("setpoint-manager", "Host_7f3a.example:pid 12")
    assert name.startswith("setpoint-manager-host-7f3a-example-pid-12-")
    assert name != member_lease_name("setpoint-manager", "host-7f3a-example-pid-12")


# -- liveness (pure) -----------------------------------------------------------------


def lease(name: str, rv: int, holder: str | None = "x") -> dict[str, object]:
    spec = {"holderIdentity": holder} if holder else {}
    return {"metadata": {"name": name, "resourceVersion": str(rv)}, "spec": spec}


def test_a_lease_expires_only_once_lists_issued_a_lease_duration_later_still_show_it() -> None:
    liveness = Liveness(lease_duration=15.0)
    liveness.observe([lease("a", 1)], issued_at=0.0, returned_at=1.0)
    liveness.observe([lease("a", 1)], issued_at=15.5, returned_at=15.6)
    assert liveness.is_live(lease("a", 1))  # first seen at 1.0 (when the list returned)
    assert liveness.next_expiry() == 16.0
    liveness.observe([lease("a", 1)], issued_at=16.0, returned_at=16.1)
    assert not liveness.is_live(lease("a", 1))
    liveness.observe([lease("a", 2)], issued_at=17.0, returned_at=17.1)
    assert liveness.is_live(lease("a", 2))  # renewed: live again, timed anew
    liveness.observe([lease("a", 3, holder=None)], issued_at=18.0, returned_at=18.1)
    assert not liveness.is_live(lease("a", 3, holder=None))  # released


# -- members of a group, on a manual clock ---------------------------------------------


@dataclass
class Recorder:
    """What every reconcile did: who reconciled which key, and any overlap."""

    running: dict[Request, str] = field(default_factory=dict)
    reconciled: dict[Request, list[str]] = field(default_factory=dict)
    overlaps: list[tuple[Request, str, str]] = field(default_factory=list)

    def reconciler(self, identity: str) -> Callable[[Request], object]:
        async def reconcile(request: Request) -> None:
            other = self.running.get(request)
            if other is not None:
                self.overlaps.append((request, identity, other))
            self.running[request] = identity
            try:
                for _ in range(3):
                    await asyncio.sleep(0)  # let other reconciles interleave
            finally:
                del self.running[request]
            self.reconciled.setdefault(request, []).append(identity)

        return reconcile


@dataclass
class Group:
    clock: ManualClock
    store: Store
    recorder: Recorder
    managers: dict[str, Manager] = field(default_factory=dict)
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    def start(self, identity: str, mode: Coordination = Coordination.SHARD) -> Manager:
        options = ManagerOptions(
            coordination=mode, identity=identity, lease=LEASE, grace_period=1.0
        )
        manager = Manager(self.store, clock=self.clock, options=options)
        manager.controller("widgets").for_("Widget").max_concurrent(4).complete(
            self.recorder.reconciler(identity)
        )
        self.managers[identity] = manager
        self.tasks[identity] = asyncio.create_task(manager.run())
        return manager

    def member(self, identity: str) -> ShardMember:
        member = self.managers[identity].shard
        assert member is not None
        return member

    def crash(self, identity: str) -> None:
        """Stop `identity`'s membership as a crash would: no renewal, no leaving (its
        manager stays up, its gate closed, so its lease simply stops changing)."""
        for task in asyncio.all_tasks():
            if task.get_name() == f"shard-member-{identity}":
                task.cancel()

    def check_one_owner(self) -> None:
        """Never may two members start the same key."""
        members = [self.member(i) for i in self.managers if self.managers[i].shard]
        for key in KEYS[:300]:
            namespace, name = key.split("/")
            request = Request(name, namespace)
            starters = [m.identity for m in members if m.may_start(request)]
            assert len(starters) <= 1, f"{key} may be started by {starters}"
        assert not self.recorder.overlaps

    async def until(self, condition: Callable[[], bool], *, advance: float = 0.0) -> None:
        """Let the group run (advancing the clock by `advance` a step) until `condition`."""
        async with asyncio.timeout(TIMEOUT):
            while not condition():
                self.check_one_owner()
                self.clock.advance(advance)
                await asyncio.sleep(0.002)  # real I/O (the store's watch) gets its turn
        self.check_one_owner()

    def settled_on(self, *identities: str) -> bool:
        return all(
            (view := self.member(i).settled) is not None and view.identities == set(identities)
            for i in identities
        )

    async def stop(self) -> None:
        for manager in self.managers.values():
            manager.stop()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)


@pytest.fixture
async def group(registry: Registry) -> AsyncIterator[Group]:
    clock = ManualClock()
    store = await open_store("memory://", registry, clock=clock)
    group = Group(clock, store, Recorder())
    try:
        yield group
    finally:
        await group.stop()
        await store.close()


async def create_widgets(store: Store, count: int) -> list[Request]:
    for i in range(count):
        await store.create(widget(f"widget-{i}"))
    return [Request(f"widget-{i}", "default") for i in range(count)]


async def test_members_settle_on_one_view_and_split_the_keys_by_the_ring(group: Group) -> None:
    for identity in ("a", "b", "c"):
        group.start(identity)
    await group.until(lambda: group.settled_on("a", "b", "c"))
    requests = await create_widgets(group.store, 90)
    await group.until(lambda: len(group.recorder.reconciled) == 90)
    ring = HashRing({"a", "b", "c"})
    for request in requests:
        assert group.recorder.reconciled[request] == [ring.owner(shard_key(request))]
    assert {owner for owners in group.recorder.reconciled.values() for owner in owners} == {
        "a",
        "b",
        "c",
    }


async def test_a_crashed_members_keys_move_once_its_lease_expires_and_not_before(
    group: Group,
) -> None:
    for identity in ("a", "b", "c"):
        group.start(identity)
    await group.until(lambda: group.settled_on("a", "b", "c"))
    requests = await create_widgets(group.store, 90)
    await group.until(lambda: len(group.recorder.reconciled) == 90)
    ring = HashRing({"a", "b", "c"})
    of_b = [r for r in requests if ring.owner(shard_key(r)) == "b"]
    group.recorder.reconciled.clear()

    group.crash("b")
    crashed_at = group.clock.monotonic()
    await group.until(
        lambda: group.clock.monotonic() >= crashed_at + LEASE.lease_duration - LEASE.retry_period,
        advance=0.5,
    )
    assert group.settled_on("a", "c") is False  # b's lease has not expired yet
    await group.until(lambda: group.settled_on("a", "c"), advance=0.5)
    took = group.clock.monotonic() - crashed_at
    assert took <= LEASE.lease_duration + LEASE.retry_period
    await group.until(lambda: all(r in group.recorder.reconciled for r in of_b))
    survivors = HashRing({"a", "c"})
    for request in of_b:
        assert group.recorder.reconciled[request] == [survivors.owner(shard_key(request))]
    # Keys that stayed put were not reconciled again: only b's keys moved.
    assert set(group.recorder.reconciled) == set(of_b)


async def test_a_leaving_member_hands_its_keys_over_without_waiting_for_expiry(
    group: Group,
) -> None:
    for identity in ("a", "b"):
        group.start(identity)
    await group.until(lambda: group.settled_on("a", "b"))
    requests = await create_widgets(group.store, 40)
    await group.until(lambda: len(group.recorder.reconciled) == 40)
    group.recorder.reconciled.clear()
    group.managers["b"].stop()
    await asyncio.wait_for(group.tasks["b"], TIMEOUT)
    del group.managers["b"]
    await group.until(lambda: group.settled_on("a"))  # the clock stands still
    ring = HashRing({"a", "b"})
    of_b = {r for r in requests if ring.owner(shard_key(r)) == "b"}
    await group.until(lambda: set(group.recorder.reconciled) == of_b)


async def test_a_joining_member_takes_its_keys_only_after_the_others_let_them_go(
    group: Group,
) -> None:
    group.start("a")
    await group.until(lambda: group.settled_on("a"))
    requests = await create_widgets(group.store, 60)
    await group.until(lambda: len(group.recorder.reconciled) == 60)
    group.recorder.reconciled.clear()
    group.start("b")
    await group.until(lambda: group.settled_on("a", "b"))
    ring = HashRing({"a", "b"})
    of_b = {r for r in requests if ring.owner(shard_key(r)) == "b"}
    await group.until(lambda: set(group.recorder.reconciled) == of_b)
    assert all(owners == ["b"] for owners in group.recorder.reconciled.values())


async def test_with_leader_coordination_one_manager_runs_the_controller_and_the_other_stands_by(
    group: Group,
) -> None:
    a = group.start("a", Coordination.LEADER)
    await asyncio.wait_for(a.wait_started(), TIMEOUT)
    await create_widgets(group.store, 20)
    await group.until(lambda: len(group.recorder.reconciled) == 20)
    b = group.start("b", Coordination.LEADER)
    await asyncio.wait_for(b.wait_started(), TIMEOUT)
    await group.store.patch("test.setpoint.dev/v1", "Widget", "widget-0", {"spec": {"size": 1}})
    await group.until(lambda: len(group.recorder.reconciled[Request("widget-0", "default")]) == 2)
    assert {o for owners in group.recorder.reconciled.values() for o in owners} == {"a"}

    group.recorder.reconciled.clear()
    a.stop()  # graceful: releases the lease; b takes over at its next try
    await asyncio.wait_for(group.tasks["a"], TIMEOUT)
    await group.until(lambda: len(group.recorder.reconciled) == 20, advance=0.5)
    assert {o for owners in group.recorder.reconciled.values() for o in owners} == {"b"}


async def test_a_member_that_cannot_renew_stops_its_reconciles_before_its_lease_expires(
    registry: Registry,
) -> None:
    clock = ManualClock()
    store = await open_store("memory://", registry, clock=clock)
    options = ManagerOptions(
        coordination=Coordination.SHARD, identity="b", lease=LEASE, grace_period=0.0
    )
    manager = Manager(store, clock=clock, options=options)
    started: list[Request] = []
    cancelled: list[Request] = []

    async def reconcile(request: Request) -> None:
        started.append(request)
        try:
            await asyncio.Event().wait()  # an endless reconcile: only cancelling ends it
        except asyncio.CancelledError:
            cancelled.append(request)
            raise

    manager.controller("widgets").for_("Widget").complete(reconcile)
    running = asyncio.create_task(manager.run())
    member = manager.shard
    assert member is not None
    group = Group(clock, store, Recorder(), {"b": manager}, {"b": running})
    try:
        await group.until(lambda: group.settled_on("b"))
        await create_widgets(store, 1)
        await group.until(lambda: bool(started))
        renewed = clock.monotonic()
        await store.close()  # from now on no renewal succeeds
        await group.until(lambda: bool(cancelled), advance=0.25)
        assert member.settled is None
        assert not member.may_start(started[0])
        assert clock.monotonic() - renewed <= LEASE.renew_deadline + 0.25
        assert clock.monotonic() - renewed < LEASE.lease_duration
    finally:
        manager.stop()
        await asyncio.gather(running, return_exceptions=True)


async def test_members_settle_again_on_a_view_they_left_and_came_back_to(group: Group) -> None:
    for identity in ("a", "b"):
        group.start(identity)
    await group.until(lambda: group.settled_on("a", "b"))
    requests = await create_widgets(group.store, 40)
    await group.until(lambda: len(group.recorder.reconciled) == 40)
    settlements = {i: group.member(i).settlements for i in ("a", "b")}
    # A member c that joined and died before it acknowledged any view: a and b adopt
    # {a, b, c}, cannot settle on it, and once c's lease expires come back to {a, b}.
    await group.store.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": member_lease_name("setpoint-manager", "c"),
                "namespace": "default",
                "labels": {SHARD_GROUP_LABEL: "setpoint-manager"},
                "annotations": {SHARD_INCARNATION: "gone"},
            },
            "spec": {"holderIdentity": "c", "leaseDurationSeconds": 15},
        }
    )

    async def published(identity: str) -> str:
        lease = await group.store.get(
            "coordination.k8s.io/v1", "Lease", member_lease_name("setpoint-manager", identity)
        )
        return str(lease["metadata"]["annotations"].get(SHARD_MEMBERS))

    async with asyncio.timeout(TIMEOUT):
        while {await published("a"), await published("b")} != {"a,b,c"}:  # noqa: ASYNC110 - in the store
            await asyncio.sleep(0.002)
    group.recorder.reconciled.clear()
    for request in requests:
        await group.store.patch(
            "test.setpoint.dev/v1", "Widget", request.name, {"spec": {"size": 1}}
        )
    await group.until(
        lambda: all(group.member(i).settlements > settlements[i] for i in ("a", "b")),
        advance=0.5,
    )
    assert group.settled_on("a", "b")
    await group.until(lambda: set(group.recorder.reconciled) == set(requests))
