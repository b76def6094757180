"""The reconciler kit on a small kind: a Widget whose plan stalls while its size is
negative. What the kit does with a plan is checked in the store (its status, conditions,
finalizers, revisions), never by the calls it made. Time is a manual clock."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from runtime_support import widget

from setpoint.model import Object, Registry, get_condition, set_condition
from setpoint.runtime.kit import LOOKS, Acted, KindRules, KitReconciler, status_with_stall
from setpoint.runtime.plan import Plan, PlannedEvent
from setpoint.runtime.reconciler import Request
from setpoint.testing import Harness, ManualClock, reconcile_until_stable

API = "test.setpoint.dev/v1"
FINALIZER = "test.setpoint.dev/held"


@dataclass(frozen=True, slots=True)
class Desired:
    size: int
    deleting: bool


@dataclass(frozen=True, slots=True)
class Observed:
    status: Any
    held: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class WidgetPlan(Plan):
    release: bool = False


def desired_of(obj: Object) -> Desired:
    return Desired(obj["spec"]["size"], bool(obj["metadata"].get("deletionTimestamp")))


def plan(desired: Desired, observed: Observed, now: float) -> WidgetPlan:
    """Pure: `seen` is the size; a negative size stalls; deletion releases what is held."""
    if desired.deleting:
        return WidgetPlan(status=observed.status, release=True)
    status = {**observed.status, "seen": desired.size}
    stall = ("NegativeSize", "size must not be negative") if desired.size < 0 else None
    events = (PlannedEvent("Seen", f"size {desired.size}"),) if desired.size != 0 else ()
    return WidgetPlan(status=status, stall=stall, events=events)


class Widgets(KitReconciler[Desired, Observed, WidgetPlan]):
    """Holds each widget (as a supervisor holds a child) until it is deleted."""

    def __init__(self, harness: Harness, *, finalizer: str | None = FINALIZER) -> None:
        self.held: set[str] = set()
        self.gone: list[str] = []
        self.looks = 0
        self.again = 0
        rules = KindRules(
            harness.manager.store.registry.get(API, "Widget"),
            desired_of,
            self.observe,
            plan,
            self.act,
            cleanup=self.cleanup,
            finalizer=finalizer,
            holds=lambda request: request.name in self.held,
        )
        recorder = harness.manager.event_recorder("widgets")
        super().__init__(harness.store, rules, recorder, clock=harness.clock)

    async def observe(self, obj: Object, desired: Desired) -> Observed:
        self.looks += 1
        return Observed(obj.get("status") or {}, obj["metadata"]["name"] in self.held)

    async def act(self, obj: Object, step: WidgetPlan) -> Acted[WidgetPlan]:
        name = obj["metadata"]["name"]
        if step.release:
            self.held.discard(name)
        else:
            self.held.add(name)
        if self.again:
            self.again -= 1
            return Acted(obj, step, again=True)
        return Acted(obj, step)

    async def cleanup(self, request: Request) -> None:
        self.gone.append(request.name)


@pytest.fixture
async def harness(registry: Registry) -> AsyncIterator[Harness]:
    async with Harness(registry=registry, clock=ManualClock()) as harness:
        yield harness


async def start(harness: Harness, **kwargs: Any) -> Widgets:
    widgets = Widgets(harness, **kwargs)
    harness.manager.controller("widgets").for_("widgets").complete(widgets)
    await harness.start()
    return widgets


async def get(harness: Harness, name: str) -> Object:
    return await harness.store.get(API, "Widget", name)


def cond(obj: Object, type_: str) -> dict[str, Any]:
    return get_condition(obj.get("status"), type_) or {}


async def quiet_for_ten_seconds(harness: Harness) -> None:
    assert isinstance(harness.clock, ManualClock)
    since = await harness.store.revision()
    for _ in range(10):
        harness.clock.advance(1)
        await reconcile_until_stable(harness)
    assert await harness.store.revision() == since


async def test_a_plan_that_stalls_is_stalled_then_not(harness: Harness) -> None:
    await start(harness)
    await harness.store.create(widget("w", -1))
    await reconcile_until_stable(harness)
    obj = await get(harness, "w")
    assert obj["status"]["seen"] == -1
    stalled, ready = cond(obj, "Stalled"), cond(obj, "Ready")
    assert (stalled["status"], stalled["reason"]) == ("True", "NegativeSize")
    assert (ready["status"], ready["reason"]) == ("False", "NegativeSize")
    assert "owner" not in stalled
    await quiet_for_ten_seconds(harness)  # reported once

    obj["spec"]["size"] = 2
    await harness.store.update(obj)
    await reconcile_until_stable(harness)
    obj = await get(harness, "w")
    assert obj["status"]["seen"] == 2
    assert cond(obj, "Stalled") == {}
    await quiet_for_ten_seconds(harness)


async def test_the_owner_mark_of_an_earlier_runtime_goes_at_the_next_write(
    harness: Harness,
) -> None:
    """An object stored by an earlier release, whose runtime wrote `Stalled` and `Ready`
    marked `owner: runtime/widgets`: the kit drops the mark (and the Stalled, which no
    plan says now) when it writes the object's status."""
    status: dict[str, Any] = {}
    for type_, value in (("Stalled", True), ("Ready", False)):
        set_condition(status, type_, value, reason="NegativeSize", now=harness.clock.now())
    for condition in status["conditions"]:
        condition["owner"] = "runtime/widgets"
    created = await harness.store.create(widget("old", 1))
    created["status"] = status
    await harness.store.update_status(created)
    await start(harness)
    await reconcile_until_stable(harness)
    obj = await get(harness, "old")
    assert cond(obj, "Stalled") == {}
    assert all("owner" not in c for c in obj["status"]["conditions"])
    await quiet_for_ten_seconds(harness)


async def test_the_finalizer_stays_until_the_kind_holds_nothing(harness: Harness) -> None:
    widgets = await start(harness)
    await harness.store.create(widget("w", 1))
    await reconcile_until_stable(harness)
    assert (await get(harness, "w"))["metadata"]["finalizers"] == [FINALIZER]
    assert widgets.held == {"w"}
    await harness.store.delete(API, "Widget", "w")
    await reconcile_until_stable(harness)
    assert widgets.held == set()
    items, _ = await harness.store.list(API, "Widget")
    assert items == []


async def test_a_kind_without_a_finalizer_lets_go_when_the_object_goes(
    harness: Harness,
) -> None:
    widgets = await start(harness, finalizer=None)
    await harness.store.create(widget("w", 1))
    await reconcile_until_stable(harness)
    assert "finalizers" not in (await get(harness, "w"))["metadata"]
    await harness.store.delete(API, "Widget", "w")
    await reconcile_until_stable(harness)
    assert widgets.gone == ["w"]


async def test_an_act_may_look_again_a_bounded_number_of_times(harness: Harness) -> None:
    widgets = Widgets(harness)  # called directly: one reconcile, its looks counted
    await harness.store.create(widget("w", 3))
    widgets.again = LOOKS - 1
    await widgets.reconcile(Request("w"))
    assert widgets.looks == LOOKS
    assert (await get(harness, "w"))["status"]["seen"] == 3
    events, _ = await harness.store.list("v1", "Event")
    assert {e["reason"] for e in events} == {"Seen"}
    widgets.again = LOOKS
    with pytest.raises(RuntimeError, match="no plan settled"):
        await widgets.reconcile(Request("w"))


def test_status_with_stall_leaves_a_ready_the_plan_wrote_false() -> None:
    status: dict[str, Any] = {}
    set_condition(status, "Ready", False, reason="Waiting", now=0.0)
    before = copy.deepcopy(status)
    out = status_with_stall(status, ("Refused", "no"), generation=2, now=10.0)
    assert cond({"status": out}, "Ready")["reason"] == "Waiting"
    assert cond({"status": out}, "Stalled")["reason"] == "Refused"
    assert status == before  # pure: its input is left as it was
