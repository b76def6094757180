"""Rate limiters for the work queue: how long a key waits before it is retried.

The shapes are client-go's workqueue limiters. Each limiter answers three
questions about an item:

* `when(item)`: how many seconds to wait before the item goes back in line.
  Asking counts as a retry (the per-item limiter's failure count goes up; the
  token bucket reserves a token).
* `forget(item)`: the item succeeded; start its count again.
* `retries(item)`: how many times `when` was asked since the last `forget`.

`default_controller_limiter` is what controllers use: per-item exponential
backoff (5 ms doubling to 1000 s) combined with an overall token bucket
(10 per second, bursts of 100); the longer delay wins.

Limiters do no I/O and never sleep; the token bucket reads the injected clock's
`monotonic()` and nothing else. Every call is O(1) (O(number of limiters) for
`MaxOfLimiter`).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol

from setpoint.clock import SYSTEM_CLOCK, Clock

# 2.0 ** 1024 overflows a float; beyond this exponent every sane delay is capped.
_MAX_EXPONENT = 1000


class RateLimiter(Protocol):
    """Decides how long an item waits before it is retried."""

    def when(self, item: Hashable) -> float:
        """Seconds to wait before `item` is retried; asking counts as a retry."""
        ...

    def forget(self, item: Hashable) -> None:
        """`item` succeeded: drop what is remembered about it."""
        ...

    def retries(self, item: Hashable) -> int:
        """How many times `when(item)` was asked since the last `forget(item)`."""
        ...


class ItemExponentialLimiter:
    """Per-item exponential backoff: `base * 2**failures` seconds, at most `cap`.

    The first `when` of an item answers `base`, the next `2 * base`, and so on.
    Memory grows with the number of items that failed and were not forgotten.
    """

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        if base < 0 or cap < 0:
            raise ValueError(f"base and cap must be >= 0 seconds, got base={base!r}, cap={cap!r}")
        self.base = base
        self.cap = cap
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        failures = self._failures.get(item, 0)
        self._failures[item] = failures + 1
        return min(self.base * 2.0 ** min(failures, _MAX_EXPONENT), self.cap)

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def retries(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class BucketLimiter:
    """An overall token bucket: `rate` tokens per second, holding at most `burst`.

    The bucket starts full. Each `when` takes a token, borrowing against the
    future when the bucket is empty, and answers how long until that token
    exists (0.0 when one was there). It does not track items: `forget` does
    nothing and `retries` is always 0.
    """

    def __init__(
        self, rate: float = 10.0, burst: int = 100, *, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        if rate <= 0:
            raise ValueError(f"rate must be > 0 tokens per second, got {rate!r}")
        if burst < 1:
            raise ValueError(f"burst must be >= 1 token, got {burst!r}")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._updated = clock.monotonic()

    def when(self, item: Hashable) -> float:
        now = self._clock.monotonic()
        elapsed = max(0.0, now - self._updated)
        self._updated = now
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.rate) - 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.rate

    def forget(self, item: Hashable) -> None:
        return None

    def retries(self, item: Hashable) -> int:
        return 0


class MaxOfLimiter:
    """Asks every limiter and answers the longest delay (and the most retries)."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        # Every limiter is asked, so each one counts the retry or reserves its token.
        return max([limiter.when(item) for limiter in self.limiters])

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def retries(self, item: Hashable) -> int:
        return max(limiter.retries(item) for limiter in self.limiters)


def default_controller_limiter(clock: Clock = SYSTEM_CLOCK) -> MaxOfLimiter:
    """Per-item backoff from 5 ms doubling to 1000 s, and at most 10 retries a second overall
    (bursts of 100): the longer of the two delays wins."""
    return MaxOfLimiter(
        ItemExponentialLimiter(base=0.005, cap=1000.0),
        BucketLimiter(rate=10.0, burst=100, clock=clock),
    )
