"""The test kit's harness: a store and manager per test, `reconcile_until_stable` and
`capture_events`. Assertions are about the store's state right after the wait returns."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import setpoint.testing
from setpoint.errors import StoreClosed
from setpoint.model import Kind, Registry, Schema
from setpoint.runtime.reconciler import Request, Result
from setpoint.testing import (
    Harness,
    ManualClock,
    capture_events,
    reconcile_until_stable,
)

API = "test.setpoint.dev/v1"


class SizeSpec(Schema):
    size: int = 0


class SeenStatus(Schema):
    seen: int = 0


@pytest.fixture
def registry() -> Registry:
    reg = Registry()
    reg.register(Kind(API, "Widget", "widgets", spec=SizeSpec, status=SeenStatus))
    reg.register(Kind(API, "Gadget", "gadgets", spec=SizeSpec, status=SeenStatus))
    return reg


def widget(name: str, size: int = 0, kind: str = "Widget") -> dict[str, Any]:
    return {"apiVersion": API, "kind": kind, "metadata": {"name": name}, "spec": {"size": size}}


def copy_size_to_status(harness: Harness, kind: str = "Widget") -> Any:
    """A reconciler that makes status.seen equal spec.size, writing only when they differ."""

    async def reconcile(request: Request) -> None:
        obj = await harness.store.get(API, kind, request.name, request.namespace)
        if (obj.get("status") or {}).get("seen") != obj["spec"]["size"]:
            obj["status"] = {"seen": obj["spec"]["size"]}
            await harness.store.update_status(obj)

    return reconcile


def test_exports_are_pinned() -> None:
    assert setpoint.testing.__all__ == sorted(setpoint.testing.__all__)
    assert set(setpoint.testing.__all__) == {
        "ApiServer", "CapturedEvent", "EventCapture", "Harness", "ManualClock",
        "capture_events", "free_port_range", "reconcile_until_stable", "wait_for",
    }  # fmt: skip


async def test_harness_starts_on_request_and_cleans_up(registry: Registry) -> None:
    async with Harness(registry=registry) as harness:
        assert not harness.started
        assert not harness.manager.is_leader
        harness.manager.controller("widgets").for_("widgets").complete(copy_size_to_status(harness))
        await harness.start()
        assert harness.started
        assert harness.manager.is_leader
        for i in range(20):
            await harness.store.create(widget(f"w{i}", i))
        await reconcile_until_stable(harness)
        items, _ = await harness.store.list(API, "Widget")
        assert [o["status"]["seen"] for o in items] == [o["spec"]["size"] for o in items]
        assert len(items) == 20
        store = harness.store
    assert not harness.started
    with pytest.raises(StoreClosed):
        await store.create(widget("late"))


async def test_stable_means_every_controller_downstream_is_done_too(registry: Registry) -> None:
    """A Widget makes a Gadget of its size; the Gadget controller copies size to status."""
    async with Harness(registry=registry) as harness:
        store = harness.store

        async def make_gadget(request: Request) -> None:
            parent = await store.get(API, "Widget", request.name, request.namespace)
            try:
                child = await store.get(API, "Gadget", request.name, request.namespace)
            except Exception:
                await store.create(widget(request.name, parent["spec"]["size"], kind="Gadget"))
                return
            if child["spec"]["size"] != parent["spec"]["size"]:
                child["spec"]["size"] = parent["spec"]["size"]
                await store.update(child)

        harness.manager.controller("widgets").for_("widgets").complete(make_gadget)
        harness.manager.controller("gadgets").for_("gadgets").max_concurrent(3).complete(
            copy_size_to_status(harness, "Gadget")
        )
        await harness.start()
        for i in range(10):
            await store.create(widget(f"w{i}", i))
        await reconcile_until_stable(harness)
        gadgets, _ = await store.list(API, "Gadget")
        assert {g["metadata"]["name"]: g["status"]["seen"] for g in gadgets} == {
            f"w{i}": i for i in range(10)
        }

        w3 = await store.get(API, "Widget", "w3")
        w3["spec"]["size"] = 33
        await store.update(w3)
        await reconcile_until_stable(harness.manager)  # a Manager works as well
        assert (await store.get(API, "Gadget", "w3"))["status"]["seen"] == 33


async def test_keys_scheduled_for_later_wait_for_the_manual_clock(registry: Registry) -> None:
    clock = ManualClock()
    calls: dict[str, int] = {}

    async def reconcile(request: Request) -> Result:
        calls[request.name] = calls.get(request.name, 0) + 1
        return Result(requeue_after=60)

    async with Harness(registry=registry, clock=clock) as harness:
        assert harness.clock is clock
        harness.manager.controller("widgets").for_("widgets").complete(reconcile)
        await harness.start()
        await harness.store.create(widget("a"))
        await reconcile_until_stable(harness)
        assert calls == {"a": 1}
        assert harness.manager.controllers[0].queue.statistics().delayed == 1

        clock.advance(59)
        await reconcile_until_stable(harness)
        assert calls == {"a": 1}

        clock.advance(1)  # now due: stable only once it has been reconciled again
        await reconcile_until_stable(harness)
        assert calls == {"a": 2}


async def test_writes_to_kinds_nobody_watches_do_not_hold_it_up(registry: Registry) -> None:
    """The widget informer's revision stays behind the store's; its cache is still current."""
    async with Harness(registry=registry) as harness:
        harness.manager.controller("widgets").for_("widgets").complete(copy_size_to_status(harness))
        await harness.start()
        await harness.store.create(widget("a", 1))
        await reconcile_until_stable(harness)
        for i in range(5):
            await harness.store.create(widget(f"g{i}", kind="Gadget"))
        await reconcile_until_stable(harness)
        assert harness.manager.cache("widgets").revision < await harness.store.revision()
        assert (await harness.store.get(API, "Widget", "a"))["status"]["seen"] == 1


async def test_timeout_says_what_is_still_busy(registry: Registry) -> None:
    release = asyncio.Event()

    async def stuck(request: Request) -> None:
        await release.wait()

    async with Harness(registry=registry) as harness:
        harness.manager.controller("widgets").for_("widgets").complete(stuck)
        with pytest.raises(TimeoutError, match="has not started"):
            await reconcile_until_stable(harness, timeout=0.05)
        await harness.start()
        await harness.store.create(widget("a"))
        with pytest.raises(TimeoutError, match=r"controller 'widgets': 0 in line, 1 processing"):
            await reconcile_until_stable(harness, timeout=0.2)
        release.set()
        await reconcile_until_stable(harness)


async def test_a_controller_that_never_settles_times_out(registry: Registry) -> None:
    async with Harness(registry=registry) as harness:

        async def always_write(request: Request) -> None:
            obj = await harness.store.get(API, "Widget", request.name)
            obj["status"] = {"seen": (obj.get("status") or {}).get("seen", 0) + 1}
            await harness.store.update_status(obj)

        harness.manager.controller("widgets").for_("widgets").complete(always_write)
        await harness.start()
        await harness.store.create(widget("a"))
        with pytest.raises(TimeoutError, match=r"not stable after 0.2s: .*(widgets|Widget)"):
            await reconcile_until_stable(harness, timeout=0.2)


async def test_a_stopped_manager_is_not_called_stable(registry: Registry) -> None:
    def broken(request: Request) -> Any:
        return "not a Result"  # the controller crashes on it, and the manager stops

    async with Harness(registry=registry) as harness:
        harness.manager.controller("widgets").for_("widgets").complete(broken)
        await harness.start()
        await harness.store.create(widget("a"))
        # The crash takes a few loop turns to stop the manager, so a check may see the
        # queue empty just before; once it has stopped, every wait refuses.
        with pytest.raises(RuntimeError, match="the manager has stopped"):  # noqa: PT012
            async with asyncio.timeout(5):
                while True:
                    await reconcile_until_stable(harness)


async def test_capture_events_collects_recorded_events(registry: Registry) -> None:
    events = pytest.importorskip("setpoint.runtime.events")
    async with Harness(registry=registry) as harness:
        recorder = events.EventRecorder(harness.store, "widget-controller")
        await harness.store.create(widget("before"))

        async def reconcile(request: Request) -> None:
            obj = await harness.store.get(API, "Widget", request.name)
            await recorder.normal(obj, "Seen", f"size is {obj['spec']['size']}")
            if obj["spec"]["size"] < 0:
                await recorder.warning(obj, "Negative", "size must not be negative")

        harness.manager.controller("widgets").for_("widgets").complete(reconcile)
        async with capture_events(harness.store) as captured:
            await harness.start()  # "before" is reconciled now, inside the capture
            await harness.store.create(widget("neg", -1))
            first = await captured.wait_event("Negative", involved_name="neg")
            assert (first.type, first.message, first.count) == (
                "Warning",
                "size must not be negative",
                1,
            )
            again = await harness.store.get(API, "Widget", "neg")
            again["metadata"].setdefault("labels", {})["touched"] = "yes"
            await harness.store.update(again)  # same spec: the same events, aggregated
            await captured.wait_event("Negative", involved_name="neg", count=2)
            await reconcile_until_stable(harness)
        assert recorder.failed == 0
        seen = sorted((e.reason, e.involved_name, e.count) for e in captured.events)
        assert seen == [("Negative", "neg", 2), ("Seen", "before", 1), ("Seen", "neg", 2)]
        assert {e.involved_kind for e in captured.events} == {"Widget"}
        by_name = {(e.reason, e.involved_name): e for e in captured.events}
        assert by_name[("Seen", "neg")].message == "size is -1"
        assert by_name[("Seen", "neg")].type == "Normal"


async def test_capture_starts_at_enter(registry: Registry) -> None:
    events = pytest.importorskip("setpoint.runtime.events")
    async with Harness(registry=registry) as harness:
        async with capture_events(harness.store):  # registers Event in the test's registry
            pass
        recorder = events.EventRecorder(harness.store, "test")
        old = await harness.store.create(widget("old"))
        await recorder.normal(old, "Old", "before the capture")
        async with capture_events(harness.store) as captured:
            await recorder.normal(old, "New", "during the capture")
            with pytest.raises(TimeoutError, match=r"no event 'Old' .*; seen: New\(old\)x1"):
                await captured.wait_event("Old", timeout=0.05)
        assert [(e.reason, e.message) for e in captured.events] == [("New", "during the capture")]
