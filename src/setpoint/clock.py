"""Time, injected: the `Clock` protocol and the wall clock.

Code that needs the time takes a `Clock`; tests pass `setpoint.testing.ManualClock`.
`now()` is wall-clock seconds since the epoch (for timestamps users read);
`monotonic()` measures intervals and schedules; `sleep()` waits on that same
time line, so a manual clock can make waiting code run without waiting. The time text
functions (`rfc3339`, `parse_rfc3339`) are `setpoint.times`', re-exported here.
"""

from __future__ import annotations

import time
from typing import Protocol

from setpoint.times import parse_rfc3339, rfc3339

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock", "parse_rfc3339", "rfc3339"]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch, for timestamps."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin that never goes back, for intervals."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once `monotonic()` has advanced by `seconds`."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        import asyncio  # here: reading the clock must not import asyncio

        await asyncio.sleep(max(0.0, seconds))


SYSTEM_CLOCK = SystemClock()
