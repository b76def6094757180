"""The event recorder: Events stored with Kubernetes semantics, aggregated, rate-limited per
object, expired after a TTL, and never an exception for the caller."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from setpoint import runtime
from setpoint.clock import rfc3339
from setpoint.errors import Invalid
from setpoint.model import Object, Registry
from setpoint.model.schema import model_of
from setpoint.runtime.events import (
    EVENT,
    EventBody,
    EventRecorder,
    delete_expired_events,
    expire_events,
)
from setpoint.store import Store, open_store
from setpoint.testing import ManualClock

TIMEOUT = 5.0

PROCESS: Object = {
    "apiVersion": "setpoint.dev/v1alpha1",
    "kind": "Process",
    "metadata": {"name": "web-0", "namespace": "shop", "uid": "1234-abcd", "resourceVersion": "7"},
}


def process(name: str, uid: str = "") -> Object:
    return {
        "apiVersion": PROCESS["apiVersion"],
        "kind": "Process",
        "metadata": {"name": name, "namespace": "shop", "uid": uid or f"uid-{name}"},
    }


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def kinds() -> Registry:
    """A registry with the runtime's kinds (Event and Lease)."""
    registry = Registry()
    runtime.register(registry)
    return registry


@pytest.fixture
async def store(clock: ManualClock) -> AsyncIterator[Store]:
    s = await open_store("memory://", kinds(), clock=clock)
    yield s
    await s.close()


async def events(store: Store, namespace: str | None = None) -> list[Object]:
    items, _ = await store.list(EVENT.api_version, EVENT.kind, namespace)
    return sorted(items, key=lambda e: e["metadata"]["name"])


def test_event_is_a_core_kind_found_by_its_names() -> None:
    assert (EVENT.api_version, EVENT.group, EVENT.kind, EVENT.plural) == (
        "v1",
        "",
        "Event",
        "events",
    )
    assert EVENT.namespaced
    assert kinds().resolve("ev") is EVENT
    assert kinds().resolve("events") is EVENT
    assert model_of(EVENT.body) is EventBody


async def test_an_event_is_stored_with_every_field(store: Store, clock: ManualClock) -> None:
    await EventRecorder(store, "process-controller", clock=clock).warning(
        PROCESS, "BackOff", "Back-off restarting failed process"
    )

    [event] = await events(store)
    now = rfc3339(clock.now())
    assert event["metadata"]["namespace"] == "shop"
    assert event["metadata"]["name"].startswith("web-0.")
    assert {k: v for k, v in event.items() if k not in ("metadata",)} == {
        "apiVersion": "v1",
        "kind": "Event",
        "involvedObject": {
            "apiVersion": "setpoint.dev/v1alpha1",
            "kind": "Process",
            "name": "web-0",
            "namespace": "shop",
            "uid": "1234-abcd",
            "resourceVersion": "7",
        },
        "reason": "BackOff",
        "message": "Back-off restarting failed process",
        "type": "Warning",
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "source": {"component": "process-controller"},
        "reportingComponent": "process-controller",
    }


async def test_identical_events_aggregate_into_one_with_a_count(
    store: Store, clock: ManualClock
) -> None:
    recorder = EventRecorder(store, "process-controller", clock=clock)
    first = rfc3339(clock.now())
    for _ in range(10):
        await recorder.normal(PROCESS, "Started", "Started process web-0")
        clock.advance(7)

    [event] = await events(store)
    assert event["count"] == 10
    assert event["firstTimestamp"] == first
    assert event["lastTimestamp"] == rfc3339(clock.now() - 7)


async def test_different_messages_reasons_types_and_objects_make_different_events(
    store: Store, clock: ManualClock
) -> None:
    recorder = EventRecorder(store, "process-controller", clock=clock)
    await recorder.normal(PROCESS, "Started", "Started process web-0")
    await recorder.normal(PROCESS, "Started", "Started process web-0 (again)")
    await recorder.normal(PROCESS, "Killing", "Started process web-0")
    await recorder.warning(PROCESS, "Started", "Started process web-0")
    await recorder.normal(process("web-1"), "Started", "Started process web-0")
    await recorder.normal(PROCESS, "Started", "Started process web-0")

    stored = await events(store)
    assert len(stored) == 5
    assert len({e["metadata"]["name"] for e in stored}) == 5
    assert sorted(e["count"] for e in stored) == [1, 1, 1, 1, 2]


async def test_names_are_unique_dns_subdomains_even_when_the_clock_stands_still(
    store: Store, clock: ManualClock
) -> None:
    long_name = ("a" * 62 + ".") * 4  # 252 characters: a valid name, no room for a suffix
    involved = {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": long_name.rstrip(".")},
    }
    one = EventRecorder(store, "one", clock=clock)
    two = EventRecorder(store, "two", clock=clock)
    for i in range(3):
        await one.normal(involved, "Tick", f"tick {i}")
        await two.normal(involved, "Tick", f"tick {i}")

    stored = await events(store)
    assert len(stored) == 6  # had a name been refused or reused, fewer would be stored
    assert all(len(e["metadata"]["name"]) <= 253 for e in stored)


async def test_events_about_cluster_scoped_objects_go_to_default(
    store: Store, clock: ManualClock
) -> None:
    node = {"apiVersion": "example.com/v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u"}}
    await EventRecorder(store, "node-agent", clock=clock).normal(node, "Ready", "node is ready")

    [event] = await events(store, "default")
    assert "namespace" not in event["involvedObject"]


async def test_a_deleted_event_is_created_anew(store: Store, clock: ManualClock) -> None:
    recorder = EventRecorder(store, "c", clock=clock)
    await recorder.normal(PROCESS, "Started", "started")
    await recorder.normal(PROCESS, "Started", "started")
    [old] = await events(store)
    await store.delete("v1", "Event", old["metadata"]["name"], "shop")

    clock.advance(1)
    await recorder.normal(PROCESS, "Started", "started")

    [new] = await events(store)
    assert new["metadata"]["name"] != old["metadata"]["name"]
    assert new["count"] == 1
    assert new["firstTimestamp"] == rfc3339(clock.now())


async def test_aggregation_survives_a_concurrent_writer(store: Store, clock: ManualClock) -> None:
    recorder = EventRecorder(store, "c", clock=clock)
    await recorder.normal(PROCESS, "Started", "started")
    [event] = await events(store)
    event["count"] = 5  # someone else counted meanwhile: the recorder's copy is stale
    await store.update(event)

    await recorder.normal(PROCESS, "Started", "started")

    [event] = await events(store)
    assert event["count"] == 6


async def test_concurrent_identical_events_make_one_event(store: Store, clock: ManualClock) -> None:
    recorder = EventRecorder(store, "c", clock=clock)
    await asyncio.wait_for(
        asyncio.gather(*(recorder.normal(PROCESS, "Started", "started") for _ in range(20))),
        TIMEOUT,
    )

    [event] = await events(store)
    assert event["count"] == 20
    assert (recorder.dropped, recorder.failed) == (0, 0)


async def test_spam_filter_drops_the_26th_new_reason_and_refills_one_every_5_minutes(
    store: Store, clock: ManualClock
) -> None:
    recorder = EventRecorder(store, "c", clock=clock)
    for i in range(26):
        await recorder.warning(PROCESS, f"Crashed{i}", "exit 1")  # a new reason: one Event each
    assert len(await events(store)) == 25
    assert recorder.dropped == 1

    await recorder.normal(process("web-1"), "Started", "another object has its own bucket")
    assert len(await events(store)) == 26

    clock.advance(299)
    await recorder.warning(PROCESS, "StillTooSoon", "no token yet")
    assert recorder.dropped == 2

    clock.advance(1)
    await recorder.warning(PROCESS, "OneTokenBack", "one token back")
    await recorder.warning(PROCESS, "AndOnlyOne", "and only one")
    reasons = {e["reason"] for e in await events(store)}
    assert "OneTokenBack" in reasons
    assert "AndOnlyOne" not in reasons
    assert recorder.dropped == 3


async def test_a_repeated_event_is_counted_never_dropped(store: Store, clock: ManualClock) -> None:
    recorder = EventRecorder(store, "c", clock=clock, burst=3, refill_every=10.0)
    for _ in range(5):
        await recorder.warning(PROCESS, "Crashed", "exit 1")

    [event] = await events(store)
    assert event["count"] == 5
    assert recorder.dropped == 0


async def test_over_the_limit_a_reason_seen_within_the_window_is_counted_on_its_event(
    store: Store, clock: ManualClock
) -> None:
    """A child killed over its memory limit again and again while it crash-loops: each kill
    says other figures (a new message), and its restarts spend the object's tokens. The
    kills past the limit are not lost: they count on the latest `OOMKilling` Event, as long
    as each comes within the window of the one before; the latest figures are its message."""
    recorder = EventRecorder(store, "c", clock=clock, burst=4, refill_every=300.0, window=600.0)
    for i in range(4):  # one crash-loop turn each: a new start, a new kill
        await recorder.normal(PROCESS, "Started", f"started pid {100 + i}")
        await recorder.warning(PROCESS, "OOMKilling", f"memory {60 + i}Mi over its limit")
        clock.advance(240)  # within the window of the kill before, whatever the tokens

    kills = [e for e in await events(store) if e["reason"] == "OOMKilling"]
    assert [e["count"] for e in kills] == [1, 3]  # the two past the limit counted, not lost
    assert kills[-1]["message"] == "(combined from similar events): memory 63Mi over its limit"
    assert kills[-1]["lastTimestamp"] == rfc3339(clock.now() - 240)
    starts = [e for e in await events(store) if e["reason"] == "Started"]
    assert sum(e["count"] for e in starts) == 4
    assert recorder.dropped == 0


async def test_after_the_window_the_same_reason_is_recorded_again(
    store: Store, clock: ManualClock
) -> None:
    """Killed again later, after the window: a new `OOMKilling` Event (the object's tokens came
    back meanwhile); while its tokens are spent and the reason is older than the window,
    it is dropped."""
    recorder = EventRecorder(store, "c", clock=clock, burst=2, refill_every=300.0, window=600.0)
    await recorder.warning(PROCESS, "OOMKilling", "memory 61Mi over its limit")
    await recorder.normal(PROCESS, "Started", "started pid 101")
    clock.advance(601)  # past the window: the last kill is not combined with

    await recorder.normal(PROCESS, "Started", "started pid 102")  # the tokens that came back
    await recorder.normal(PROCESS, "Started", "started pid 103")
    await recorder.warning(PROCESS, "OOMKilling", "memory 62Mi over its limit")
    assert recorder.dropped == 1  # a kill past the window, with no token: lost, and counted

    clock.advance(1200)  # quiet for a while: tokens come back
    await recorder.warning(PROCESS, "OOMKilling", "memory 63Mi over its limit")
    kills = sorted(
        (e for e in await events(store) if e["reason"] == "OOMKilling"),
        key=lambda e: e["firstTimestamp"],
    )
    assert [(e["message"], e["count"]) for e in kills] == [
        ("memory 61Mi over its limit", 1),
        ("memory 63Mi over its limit", 1),
    ]
    assert recorder.dropped == 1


async def test_expiry_deletes_events_older_than_the_ttl(store: Store, clock: ManualClock) -> None:
    recorder = EventRecorder(store, "c", clock=clock)
    await recorder.normal(process("old"), "Started", "old news")
    await recorder.normal(process("refreshed"), "Started", "seen again")
    clock.advance(3000)
    await recorder.normal(process("refreshed"), "Started", "seen again")
    await recorder.normal(process("new"), "Started", "fresh")
    clock.advance(601)

    assert await delete_expired_events(store, ttl=3600, now=clock.now()) == 1

    names = sorted(e["involvedObject"]["name"] for e in await events(store))
    assert names == ["new", "refreshed"]


async def test_expire_events_runs_every_interval_on_the_clock(
    store: Store, clock: ManualClock
) -> None:
    recorder = EventRecorder(store, "c", clock=clock)
    await recorder.normal(process("a"), "Started", "a")
    clock.advance(60)
    await recorder.normal(process("b"), "Started", "b")

    task = asyncio.create_task(expire_events(store, ttl=100, clock=clock, every=60))
    try:
        await asyncio.wait_for(clock.wait_sleepers(1), TIMEOUT)
        assert len(await events(store)) == 2  # first pass, t=60: nothing is old enough

        clock.advance(60)  # t=120: a (t=0) is past the TTL, b (t=60) is not
        await asyncio.wait_for(clock.wait_sleepers(1), TIMEOUT)
        assert [e["involvedObject"]["name"] for e in await events(store)] == ["b"]

        clock.advance(60)  # t=180: b goes too
        await asyncio.wait_for(clock.wait_sleepers(1), TIMEOUT)
        assert await events(store) == []
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_expire_events_stops_when_the_store_is_closed(clock: ManualClock) -> None:
    store = await open_store("memory://", clock=clock)
    await EventRecorder(store, "c", clock=clock).normal(PROCESS, "Started", "started")
    clock.advance(3601)  # so that expiry has a write to attempt, whether or not reads fail
    await store.close()
    await asyncio.wait_for(expire_events(store, clock=clock), TIMEOUT)


async def test_a_failing_store_never_raises_into_the_caller(
    clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = await open_store("memory://", clock=clock)
    recorder = EventRecorder(store, "c", clock=clock)
    await recorder.normal(PROCESS, "Started", "cached before the store closed")
    await store.close()

    with caplog.at_level(logging.WARNING, logger="setpoint.events"):
        await recorder.normal(PROCESS, "Started", "cached before the store closed")
        await recorder.warning(PROCESS, "Crashed", "not cached")

    assert recorder.failed == 2
    assert sum(r.name == "setpoint.events" for r in caplog.records) == 2


async def test_bad_input_is_logged_and_dropped(store: Store, clock: ManualClock) -> None:
    recorder = EventRecorder(store, "c", clock=clock)
    await recorder.record(PROCESS, "Info", "Started", "not a Kubernetes event type")
    await recorder.record({"kind": "Process"}, "Normal", "Started", "no name")

    assert await events(store) == []
    assert recorder.failed == 2


async def test_the_store_refuses_a_malformed_event(store: Store) -> None:
    now = "2026-01-02T03:04:05Z"
    event: Object = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "x.1", "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": "x"},
        "reason": "Started",
        "message": "m",
        "type": "Info",
        "count": 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "source": {"component": "c"},
    }
    with pytest.raises(Invalid) as refused:
        await store.create(event)
    assert refused.value.field == "type"
    assert await events(store) == []


async def test_long_messages_are_cut(store: Store, clock: ManualClock) -> None:
    await EventRecorder(store, "c", clock=clock).warning(PROCESS, "Crashed", "x" * 5000)
    [event] = await events(store)
    assert len(event["message"]) == 1024


async def test_recording_and_aggregating_on_sqlite(tmp_path: Path, clock: ManualClock) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    store = await open_store(url, clock=clock)
    try:
        recorder = EventRecorder(store, "c", clock=clock)
        for _ in range(3):
            await recorder.warning(PROCESS, "BackOff", "back-off")
            clock.advance(10)
    finally:
        await store.close()

    reopened = await open_store(url, kinds(), clock=clock)
    try:
        [event] = await events(reopened)
        assert (event["count"], event["lastTimestamp"]) == (3, rfc3339(clock.now() - 10))
        clock.advance(3600)
        assert await delete_expired_events(reopened, ttl=3600, now=clock.now()) == 1
        assert await events(reopened) == []
    finally:
        await reopened.close()
