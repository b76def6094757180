"""Leader election on a Lease: acquire, hold, take over after expiry, release, and the
manager running its work only while it leads (in one process with a manual clock, and
across real processes sharing one SQLite file)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from setpoint.errors import Invalid, LeadershipLost
from setpoint.model import Object, Registry
from setpoint.runtime.leases import (
    LEASE,
    LeaderElector,
    LeaseSettings,
    micro_time,
    parse_micro_time,
)
from setpoint.runtime.manager import Manager, ManagerOptions
from setpoint.store import Store, open_store
from setpoint.testing import ManualClock

TIMEOUT = 5.0
SETTINGS = LeaseSettings()  # lease 15 s, renew deadline 10 s, retry 2 s
RETRY = SETTINGS.retry_period


async def lease_of(store: Store, name: str = "lock") -> Object:
    return await store.get(LEASE.api_version, LEASE.kind, name, "default")


async def settle(clock: ManualClock, sleepers: int, *tasks: asyncio.Task[Any]) -> None:
    """Return once `sleepers` sleepers are parked on `clock`, or one of `tasks` has ended."""
    parked = asyncio.ensure_future(clock.wait_sleepers(sleepers))
    try:
        done, _ = await asyncio.wait(
            {parked, *tasks}, timeout=TIMEOUT, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        parked.cancel()
    assert done, f"nothing settled: {clock.waiting()} sleepers parked, want {sleepers}"


async def step(
    clock: ManualClock, seconds: float, sleepers: int, *tasks: asyncio.Task[Any]
) -> None:
    clock.advance(seconds)
    await settle(clock, sleepers, *tasks)


def monotonic_of(clock: ManualClock, stamp: str) -> float:
    """The manual clock's monotonic time at which a lease timestamp was written."""
    return parse_micro_time(stamp) - (clock.now() - clock.monotonic())


def lease_kind() -> Registry:
    registry = Registry()
    registry.register(LEASE)
    return registry


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def store(clock: ManualClock) -> Store:
    return await open_store("memory://", lease_kind(), clock=clock)


def elector(store: Store, clock: ManualClock, identity: str) -> LeaderElector:
    return LeaderElector(store, "lock", identity=identity, clock=clock, settings=SETTINGS)


# -- micro-time, the Lease kind, settings --------------------------------------------


def test_micro_time_round_trips_with_microseconds() -> None:
    assert micro_time(1_700_000_000.123456) == "2023-11-14T22:13:20.123456Z"
    assert parse_micro_time("2023-11-14T22:13:20.123456Z") == pytest.approx(1_700_000_000.123456)
    assert parse_micro_time("2023-11-14T23:13:20+01:00") == 1_700_000_000.0
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_micro_time("yesterday")


async def test_lease_times_are_normalised_and_bad_ones_refused(store: Store) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "manual"},
        "spec": {"holderIdentity": "me", "renewTime": "2023-11-14T22:13:20Z"},
    }
    created = await store.create(lease)
    assert created["spec"] == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "renewTime": "2023-11-14T22:13:20.000000Z",
        "leaseTransitions": 0,
    }
    lease["metadata"]["name"] = "bad"
    lease["spec"]["acquireTime"] = "noon"
    with pytest.raises(Invalid) as refused:
        await store.create(lease)
    assert refused.value.field == "spec.acquireTime"
    assert store.registry.resolve("leases") is LEASE


@pytest.mark.parametrize(
    ("lease", "renew", "retry", "field"),
    [
        (15.0, 10.0, 0.0, "retry_period"),
        (15.0, 2.0, 2.0, "renew_deadline"),
        (10.0, 10.0, 2.0, "lease_duration"),
    ],
)
def test_settings_want_lease_over_renew_over_retry(
    lease: float, renew: float, retry: float, field: str
) -> None:
    with pytest.raises(Invalid) as refused:
        LeaseSettings(lease, renew, retry)
    assert refused.value.field == field


# -- electors --------------------------------------------------------------------------


async def test_first_candidate_creates_the_lease_and_holds_it(
    store: Store, clock: ManualClock
) -> None:
    a = elector(store, clock, "a")
    await asyncio.wait_for(a.acquire(), TIMEOUT)

    assert a.is_leader
    spec = (await lease_of(store))["spec"]
    now = micro_time(clock.now())
    assert spec == {
        "holderIdentity": "a",
        "leaseDurationSeconds": 15,
        "acquireTime": now,
        "renewTime": now,
        "leaseTransitions": 0,
    }

    holding = asyncio.create_task(a.hold())
    await settle(clock, 2)
    await step(clock, RETRY, 2)
    spec = (await lease_of(store))["spec"]
    assert spec["renewTime"] == micro_time(clock.now())
    assert spec["acquireTime"] == now
    assert a.is_leader
    holding.cancel()


async def test_second_waits_while_the_first_renews_and_takes_over_once_it_stops(
    store: Store, clock: ManualClock
) -> None:
    a, b = elector(store, clock, "a"), elector(store, clock, "b")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    waiting = asyncio.create_task(b.acquire())
    await settle(clock, 3)

    for _ in range(20):  # 40 s: far past lease_duration, but the first keeps renewing
        await step(clock, RETRY, 3)
    assert not waiting.done()
    assert a.is_leader
    assert not b.is_leader
    assert (await lease_of(store))["spec"]["holderIdentity"] == "a"

    holding.cancel()  # the first stops renewing, as if its process were frozen
    with pytest.raises(asyncio.CancelledError):
        await holding
    last_renewal = monotonic_of(clock, (await lease_of(store))["spec"]["renewTime"])
    while not waiting.done():
        assert clock.monotonic() < last_renewal + 2 * SETTINGS.lease_duration
        await step(clock, RETRY, 1, waiting)
    await waiting

    assert b.is_leader
    took = clock.monotonic() - last_renewal
    # Not before lease_duration without a change; at most two retries after (one to see
    # the last renewal, one to find it expired).
    assert SETTINGS.lease_duration <= took <= SETTINGS.lease_duration + 2 * RETRY
    spec = (await lease_of(store))["spec"]
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1
    assert spec["acquireTime"] == spec["renewTime"] == micro_time(clock.now())


async def test_release_hands_over_without_waiting_and_transitions_are_counted(
    store: Store, clock: ManualClock
) -> None:
    a, b = elector(store, clock, "a"), elector(store, clock, "b")
    await a.acquire()
    waiting = asyncio.create_task(b.acquire())
    await settle(clock, 1)

    assert await a.release()
    assert not a.is_leader
    spec = (await lease_of(store))["spec"]
    assert "holderIdentity" not in spec
    assert spec["leaseTransitions"] == 0

    await step(clock, RETRY, 1, waiting)  # the next retry takes it: no wait for expiry
    assert waiting.done()
    assert b.is_leader
    assert (await lease_of(store))["spec"]["leaseTransitions"] == 1

    assert not await a.release()  # not ours any more: left alone
    assert (await lease_of(store))["spec"]["holderIdentity"] == "b"

    assert await b.release()
    await asyncio.wait_for(a.acquire(), TIMEOUT)
    spec = (await lease_of(store))["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("a", 2)


async def test_hold_returns_when_someone_else_holds_the_lease(
    store: Store, clock: ManualClock
) -> None:
    a = elector(store, clock, "a")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    await settle(clock, 2)

    lease = await lease_of(store)
    lease["spec"]["holderIdentity"] = "intruder"
    await store.update(lease)

    await step(clock, RETRY, 99, holding)
    assert holding.done()
    await holding
    assert not a.is_leader
    assert (await lease_of(store))["spec"]["holderIdentity"] == "intruder"  # not overwritten


async def test_hold_gives_up_after_renew_deadline_without_a_renewal(
    store: Store, clock: ManualClock
) -> None:
    a = elector(store, clock, "a")
    await a.acquire()
    holding = asyncio.create_task(a.hold())
    await settle(clock, 2)
    await step(clock, RETRY, 2)
    renewed = monotonic_of(clock, (await lease_of(store))["spec"]["renewTime"])

    await store.close()  # every write now fails
    while not holding.done():
        assert clock.monotonic() < renewed + SETTINGS.lease_duration
        await step(clock, RETRY / 2, 2, holding)
    await holding

    assert not a.is_leader
    # It gave up after renew_deadline, before anyone else could take over.
    assert clock.monotonic() - renewed == pytest.approx(SETTINGS.renew_deadline)


async def test_a_restarted_candidate_with_the_same_identity_renews_its_own_lease(
    store: Store, clock: ManualClock
) -> None:
    await elector(store, clock, "a").acquire()
    await step(clock, RETRY, 0)
    again = elector(store, clock, "a")
    await asyncio.wait_for(again.acquire(), TIMEOUT)
    spec = (await lease_of(store))["spec"]
    assert spec["leaseTransitions"] == 0
    assert spec["renewTime"] == micro_time(clock.now())
    assert spec["acquireTime"] == micro_time(clock.now() - RETRY)


# -- the manager ----------------------------------------------------------------------


def leading_manager(store: Store, clock: ManualClock, identity: str, started: list[str]) -> Manager:
    options = ManagerOptions(
        leader_election=True, leader_election_id="lock", identity=identity, lease=SETTINGS
    )
    manager = Manager(store, clock=clock, options=options)

    async def work() -> None:
        started.append(identity)
        await asyncio.Event().wait()

    manager.add_runnable(work)
    return manager


async def test_manager_runs_its_work_only_while_it_leads_and_releases_on_stop(
    store: Store, clock: ManualClock
) -> None:
    started: list[str] = []
    first = leading_manager(store, clock, "first", started)
    second = leading_manager(store, clock, "second", started)
    running_first = asyncio.create_task(first.run())
    await asyncio.wait_for(first.wait_started(), TIMEOUT)
    running_second = asyncio.create_task(second.run())
    await settle(clock, 3)  # first: renew + deadline; second: retry
    await step(clock, RETRY, 3)

    assert started == ["first"]
    assert first.is_leader
    assert not second.is_leader

    first.stop()
    await asyncio.wait_for(running_first, TIMEOUT)
    assert not first.is_leader
    assert "holderIdentity" not in (await lease_of(store))["spec"]

    await step(clock, RETRY, 2)
    await asyncio.wait_for(second.wait_started(), TIMEOUT)
    assert started == ["first", "second"]
    assert second.is_leader
    assert (await lease_of(store))["spec"]["holderIdentity"] == "second"

    second.stop()
    await asyncio.wait_for(running_second, TIMEOUT)


async def test_manager_stopped_before_it_leads_never_starts_its_work(
    store: Store, clock: ManualClock
) -> None:
    started: list[str] = []
    await elector(store, clock, "other").acquire()
    manager = leading_manager(store, clock, "me", started)
    running = asyncio.create_task(manager.run())
    await settle(clock, 1)

    manager.stop()
    await asyncio.wait_for(running, TIMEOUT)
    assert started == []
    assert (await lease_of(store))["spec"]["holderIdentity"] == "other"


async def test_manager_that_loses_the_lease_stops_and_says_so(
    store: Store, clock: ManualClock
) -> None:
    started: list[str] = []
    manager = leading_manager(store, clock, "me", started)
    running = asyncio.create_task(manager.run())
    await asyncio.wait_for(manager.wait_started(), TIMEOUT)
    await settle(clock, 2)

    lease = await lease_of(store)
    lease["spec"]["holderIdentity"] = "usurper"
    await store.update(lease)
    clock.advance(RETRY)

    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(running, TIMEOUT)
    assert not manager.is_leader
    assert (await lease_of(store))["spec"]["holderIdentity"] == "usurper"


async def test_manager_without_leader_election_leads_once_started(store: Store) -> None:
    manager = Manager(store)
    assert not manager.is_leader
    running = asyncio.create_task(manager.run())
    await asyncio.wait_for(manager.wait_started(), TIMEOUT)
    assert manager.is_leader
    manager.stop()
    await asyncio.wait_for(running, TIMEOUT)


# -- real processes ----------------------------------------------------------------------

CHILD = """
    import asyncio, sys

    from setpoint.runtime.leases import LeaseSettings
    from setpoint.runtime.manager import Manager, ManagerOptions
    from setpoint.store import open_store


    async def main(url: str, identity: str) -> None:
        store = await open_store(url)
        options = ManagerOptions(
            leader_election=True,
            identity=identity,
            lease=LeaseSettings(lease_duration=1.0, renew_deadline=0.7, retry_period=0.2),
            handle_signals=True,
            grace_period=1.0,
        )
        manager = Manager(store, options=options)

        async def announce() -> None:
            print("LEADER", identity, flush=True)
            await asyncio.Event().wait()

        manager.add_runnable(announce)
        print("READY", identity, flush=True)
        try:
            await manager.run()
        finally:
            await store.close()


    asyncio.run(main(sys.argv[1], sys.argv[2]))
"""
LEASE_DURATION = 1.0
DEADLINE = 30.0  # for anything that should take well under a second or two


def stderr_of(logs: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(logs.glob("*.err")))


def log_file(path: Path) -> BinaryIO:
    return path.open("wb")


async def next_line(
    lines: asyncio.Queue[tuple[str, str]], deadline: float, logs: Path
) -> tuple[str, str]:
    try:
        return await asyncio.wait_for(lines.get(), max(0.0, deadline - time.monotonic()))
    except TimeoutError:
        raise AssertionError(
            f"no output from the managers in time; stderr:\n{stderr_of(logs)}"
        ) from None


@pytest.mark.slow
@pytest.mark.xdist_group("wall-clock")  # not beside the hammer: tests/conftest.py
async def test_leadership_moves_to_a_second_process_after_the_first_is_killed(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    store = await open_store(url, lease_kind())  # creates the schema before the managers race to
    script = tmp_path / "manager.py"
    script.write_text(textwrap.dedent(CHILD))
    lines: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    children: dict[str, asyncio.subprocess.Process] = {}
    readers: list[asyncio.Task[None]] = []

    async def read(identity: str, out: asyncio.StreamReader) -> None:
        while line := await out.readline():
            await lines.put((identity, line.decode().strip()))

    try:
        for identity in ("one", "two"):
            with log_file(tmp_path / f"{identity}.err") as err:
                child = await asyncio.create_subprocess_exec(
                    sys.executable,
                    str(script),
                    url,
                    identity,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=err,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )
            children[identity] = child
            assert child.stdout is not None
            readers.append(asyncio.create_task(read(identity, child.stdout)))

        deadline = time.monotonic() + DEADLINE
        leader = ""
        while not leader:
            identity, line = await next_line(lines, deadline, tmp_path)
            if line == f"LEADER {identity}":
                leader = identity
        follower = "two" if leader == "one" else "one"
        assert (await lease_of(store, "setpoint-manager"))["spec"]["holderIdentity"] == leader

        children[leader].kill()  # SIGKILL: no release, the lease must expire
        killed_at = time.monotonic()
        assert await asyncio.wait_for(children[leader].wait(), DEADLINE) == -signal.SIGKILL

        deadline = killed_at + DEADLINE
        while True:
            identity, line = await next_line(lines, deadline, tmp_path)
            assert identity == follower, f"the killed manager spoke: {line!r}"
            if line == f"LEADER {follower}":
                break
        # Within DEADLINE, a hang's safety net: how soon is a timing (the lease and a retry
        # on a quiet machine), which tests with an injected clock check exactly.
        spec = (await lease_of(store, "setpoint-manager"))["spec"]
        assert spec["holderIdentity"] == follower
        assert spec["leaseTransitions"] == 1

        children[follower].send_signal(signal.SIGTERM)  # graceful: releases the lease
        assert await asyncio.wait_for(children[follower].wait(), DEADLINE) == 0
        assert "holderIdentity" not in (await lease_of(store, "setpoint-manager"))["spec"]
    finally:
        for child in children.values():
            if child.returncode is None:
                child.kill()
            with contextlib.suppress(ProcessLookupError):
                await asyncio.wait_for(child.wait(), DEADLINE)
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        await store.close()
