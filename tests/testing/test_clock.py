"""ManualClock: time stands still until the test advances it; sleepers wake in deadline order."""

from __future__ import annotations

import asyncio

import pytest

from setpoint.clock import Clock
from setpoint.testing import ManualClock

TIMEOUT = 5.0


def test_it_is_a_clock() -> None:
    clock: Clock = ManualClock()
    assert clock.monotonic() == 0.0


def test_time_moves_only_on_advance() -> None:
    clock = ManualClock(start=1000.0)
    assert (clock.now(), clock.monotonic()) == (1000.0, 0.0)
    clock.advance(2.5)
    assert (clock.now(), clock.monotonic()) == (1002.5, 2.5)
    clock.advance(0)
    assert clock.monotonic() == 2.5


def test_default_start_is_a_plausible_epoch_time() -> None:
    assert ManualClock().now() == 1_700_000_000.0


def test_advance_refuses_to_go_backwards() -> None:
    clock = ManualClock()
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)
    assert clock.monotonic() == 0.0


async def test_sleeper_wakes_once_its_deadline_is_reached() -> None:
    clock = ManualClock()
    sleeper = asyncio.create_task(clock.sleep(5))
    await asyncio.wait_for(clock.wait_sleepers(1), TIMEOUT)

    clock.advance(4.9)
    assert clock.waiting() == 1
    await asyncio.sleep(0)
    assert not sleeper.done()

    clock.advance(0.1)
    assert clock.waiting() == 0
    await asyncio.wait_for(sleeper, TIMEOUT)


async def test_sleepers_wake_in_deadline_order() -> None:
    clock = ManualClock()
    woke: list[float] = []

    async def sleep_then_record(seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(seconds)

    tasks = [asyncio.create_task(sleep_then_record(s)) for s in (3.0, 1.0, 2.0, 10.0)]
    await asyncio.wait_for(clock.wait_sleepers(4), TIMEOUT)

    clock.advance(5)
    await asyncio.wait_for(asyncio.gather(*tasks[:3]), TIMEOUT)
    assert woke == [1.0, 2.0, 3.0]
    assert clock.waiting() == 1

    clock.advance(5)
    await asyncio.wait_for(tasks[3], TIMEOUT)
    assert woke == [1.0, 2.0, 3.0, 10.0]


@pytest.mark.parametrize("seconds", [0, -1.0])
async def test_sleep_of_zero_or_less_returns_without_advancing(seconds: float) -> None:
    clock = ManualClock()
    await asyncio.wait_for(clock.sleep(seconds), TIMEOUT)
    assert clock.waiting() == 0
    assert clock.monotonic() == 0.0


async def test_cancelled_sleeper_is_no_longer_waiting() -> None:
    clock = ManualClock()
    sleeper = asyncio.create_task(clock.sleep(1))
    await asyncio.wait_for(clock.wait_sleepers(1), TIMEOUT)

    sleeper.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sleeper
    assert clock.waiting() == 0
    clock.advance(2)  # waking nobody is fine
    assert clock.waiting() == 0


async def test_wait_sleepers_waits_for_enough_sleepers() -> None:
    clock = ManualClock()
    waiter = asyncio.create_task(clock.wait_sleepers(2))
    first = asyncio.create_task(clock.sleep(1))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not waiter.done()

    second = asyncio.create_task(clock.sleep(1))
    await asyncio.wait_for(waiter, TIMEOUT)
    assert clock.waiting() == 2

    clock.advance(1)
    await asyncio.wait_for(asyncio.gather(first, second), TIMEOUT)
