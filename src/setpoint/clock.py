"""Time, injected: the `Clock` protocol and the wall clock.

Code that needs the time takes a `Clock`; tests pass `setpoint.testing.ManualClock`.
`now()` is wall-clock seconds since the epoch (for timestamps users read);
`monotonic()` measures intervals and schedules; `sleep()` waits on that same
time line, so a manual clock can make waiting code run without waiting.
"""

from __future__ import annotations

import functools
import time
from datetime import UTC, datetime
from typing import Protocol


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


@functools.lru_cache(maxsize=64)
def _rfc3339(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339(ts: float) -> str:
    """`2026-11-29T22:02:27Z`: the timestamp format of Kubernetes metadata (whole seconds)."""
    return _rfc3339(int(ts))


def parse_rfc3339(text: str) -> float:
    """Inverse of `rfc3339` (accepts fractional seconds and offsets too)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
