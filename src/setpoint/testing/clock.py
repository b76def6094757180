"""A manual clock for tests: time moves only when the test calls `advance`.

`ManualClock` keeps the `setpoint.clock.Clock` protocol, so code under test
takes it wherever it would take the system clock. Sleepers park until the test
advances time past their deadline; nothing here reads the real clock or waits
on it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools


class ManualClock:
    """A `Clock` whose time stands still until `advance` moves it.

    `monotonic()` is the time advanced so far (it starts at 0.0); `now()` is
    `start` plus that. `sleep(seconds)` parks the caller until `advance` carries
    `monotonic()` to or past its deadline; `sleep` of zero or less yields to the
    event loop once and returns.

    A test that must know the code under test is parked before it advances
    time awaits `wait_sleepers(count)` (under `asyncio.wait_for`), or reads
    `waiting()`.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._start = start
        self._elapsed = 0.0
        # (deadline, arrival order, future): a heap, so the earliest deadline is first.
        # Futures of cancelled sleepers stay in it until their deadline passes.
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()
        self._pending = 0
        # (count, future) for each `wait_sleepers` call still waiting.
        self._sleeper_waiters: list[tuple[int, asyncio.Future[None]]] = []

    def now(self) -> float:
        """Seconds since the epoch: `start` plus the time advanced so far."""
        return self._start + self._elapsed

    def monotonic(self) -> float:
        """The time advanced so far, in seconds."""
        return self._elapsed

    async def sleep(self, seconds: float) -> None:
        """Return once `advance` has moved `monotonic()` forward by `seconds`."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        wakeup: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._elapsed + seconds, next(self._arrivals), wakeup))
        self._pending += 1
        self._notify_sleeper_waiters()
        try:
            await wakeup
        finally:
            if not wakeup.done():
                wakeup.cancel()
            if wakeup.cancelled():
                # Woken sleepers were already uncounted by `advance`.
                self._pending -= 1

    def advance(self, seconds: float) -> None:
        """Move time forward by `seconds` and wake every sleeper whose deadline it reaches.

        Sleepers are woken in deadline order (ties in the order they went to
        sleep); they run when the caller next yields to the event loop.
        """
        if seconds < 0:
            raise ValueError(f"cannot move time backwards (advance({seconds!r})): use seconds >= 0")
        self._elapsed += seconds
        while self._sleepers and self._sleepers[0][0] <= self._elapsed:
            _, _, wakeup = heapq.heappop(self._sleepers)
            if not wakeup.done():
                self._pending -= 1
                wakeup.set_result(None)

    def waiting(self) -> int:
        """How many sleepers are parked, waiting for time to advance."""
        return self._pending

    async def wait_sleepers(self, count: int = 1) -> None:
        """Return once at least `count` sleepers are parked. Bound it with `asyncio.wait_for`."""
        if self._pending >= count:
            return
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleeper_waiters.append((count, ready))
        try:
            await ready
        finally:
            self._sleeper_waiters = [w for w in self._sleeper_waiters if w[1] is not ready]

    def _notify_sleeper_waiters(self) -> None:
        for count, ready in self._sleeper_waiters:
            if self._pending >= count and not ready.done():
                ready.set_result(None)
