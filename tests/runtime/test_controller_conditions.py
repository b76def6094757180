"""Who writes which condition: the reconciler, alone. The runtime writes nothing to an
object for any outcome, a `TerminalError` included (whose retry semantics it keeps). Two
writers of one condition would rewrite the object forever: the tests count the store's
revisions. Time is a manual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from runtime_support import widget

from setpoint.errors import TerminalError
from setpoint.model import Object, Registry, get_condition, set_condition
from setpoint.runtime.reconciler import Request, Result
from setpoint.store import Store
from setpoint.testing import Harness, ManualClock, reconcile_until_stable

API = "test.setpoint.dev/v1"
Reconcile = Callable[[Request], Any]


@pytest.fixture
async def harness(registry: Registry) -> AsyncIterator[Harness]:
    async with Harness(registry=registry, clock=ManualClock()) as harness:
        yield harness


async def start(harness: Harness, reconcile: Reconcile) -> None:
    harness.manager.controller("widgets").for_("widgets").complete(reconcile)
    await harness.start()


async def get(store: Store, name: str) -> Object:
    return await store.get(API, "Widget", name)


def cond(obj: Object, type_: str) -> dict[str, Any]:
    return get_condition(obj.get("status"), type_) or {}


async def write_status(store: Store, obj: Object, edit: Callable[[dict[str, Any]], bool]) -> None:
    """Apply `edit` to `obj`'s status and write it if anything changed."""
    status = dict(obj.get("status") or {})
    if edit(status):
        obj["status"] = status
        await store.update_status(obj)


async def quiet_for_ten_seconds(harness: Harness) -> None:
    """Let ten seconds go by, a second at a time; the store must get no write."""
    assert isinstance(harness.clock, ManualClock)
    since = await harness.store.revision()
    for _ in range(10):
        harness.clock.advance(1)
        await reconcile_until_stable(harness)
    assert await harness.store.revision() == since


async def test_a_stalled_condition_the_reconciler_writes_is_its_own(harness: Harness) -> None:
    store, clock = harness.store, harness.clock

    async def reconcile(request: Request) -> Result:
        obj = await get(store, request.name)
        stuck = obj["spec"]["size"] < 0

        def edit(status: dict[str, Any]) -> bool:
            return set_condition(status, "Stalled", stuck, reason="Negative" if stuck else "Ok",
                                 now=clock.now())  # fmt: skip

        await write_status(store, obj, edit)
        return Result()  # success: the runtime must not clear a Stalled it did not write

    await start(harness, reconcile)
    await store.create(widget("bad", -1))
    await reconcile_until_stable(harness)
    assert cond(await get(store, "bad"), "Stalled")["status"] == "True"
    await quiet_for_ten_seconds(harness)
    stalled = cond(await get(store, "bad"), "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "Negative")
    assert "owner" not in stalled


async def test_a_terminal_error_writes_nothing_and_is_not_retried(harness: Harness) -> None:
    """The runtime writes no condition for a `TerminalError` (the reconciler's status is its
    own) and does not retry it until the object changes."""
    store = harness.store
    calls: list[str] = []

    async def reconcile(request: Request) -> None:
        calls.append(request.name)
        obj = await get(store, request.name)
        if obj["spec"]["size"] < 0:
            raise TerminalError("size must not be negative", reason="NegativeSize")

    await start(harness, reconcile)
    obj = await store.create(widget("bad", -1))
    await reconcile_until_stable(harness)
    obj = await get(store, "bad")
    assert obj.get("status") in (None, {})
    looked = len(calls)
    await quiet_for_ten_seconds(harness)
    assert len(calls) == looked, "a terminal error is not retried by itself"

    obj["spec"]["size"] = 1
    await store.update(obj)
    await reconcile_until_stable(harness)
    assert len(calls) == looked + 1
    assert (await get(store, "bad")).get("status") in (None, {})


async def test_a_terminal_error_with_retry_after_is_looked_at_again_then(
    harness: Harness,
) -> None:
    store, clock = harness.store, harness.clock
    assert isinstance(clock, ManualClock)
    blocked = {"bad"}  # a cause outside the object, which goes away by itself
    calls: list[str] = []

    async def reconcile(request: Request) -> None:
        calls.append(request.name)
        if request.name in blocked:
            raise TerminalError("the port is taken", reason="PortTaken", retry_after=5)

    await start(harness, reconcile)
    await store.create(widget("bad"))
    await reconcile_until_stable(harness)
    assert calls == ["bad"]
    since = await store.revision()
    blocked.clear()
    clock.advance(4)
    await reconcile_until_stable(harness)
    assert calls == ["bad"]  # not looked at again yet
    clock.advance(1)
    await reconcile_until_stable(harness)
    assert calls == ["bad", "bad"]
    assert await store.revision() == since  # the runtime wrote nothing
