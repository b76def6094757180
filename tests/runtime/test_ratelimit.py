"""Rate limiters: per-item exponential backoff, an overall token bucket, and the longer of both."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.runtime.ratelimit import (
    BucketLimiter,
    ItemExponentialLimiter,
    MaxOfLimiter,
    RateLimiter,
    default_controller_limiter,
)
from setpoint.testing import ManualClock


def test_exponential_doubles_per_failure_up_to_the_cap() -> None:
    limiter = ItemExponentialLimiter(base=1.0, cap=10.0)
    assert [limiter.when("a") for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert limiter.retries("a") == 6


def test_exponential_counts_each_item_separately_and_forget_resets() -> None:
    limiter = ItemExponentialLimiter(base=0.5, cap=100.0)
    limiter.when("a")
    limiter.when("a")
    assert limiter.when("b") == 0.5
    assert (limiter.retries("a"), limiter.retries("b"), limiter.retries("c")) == (2, 1, 0)

    limiter.forget("a")
    assert limiter.retries("a") == 0
    assert limiter.when("a") == 0.5
    limiter.forget("never-seen")  # forgetting an unknown item is fine


def test_exponential_stays_at_the_cap_after_very_many_failures() -> None:
    limiter = ItemExponentialLimiter(base=0.005, cap=1000.0)
    delays = [limiter.when("a") for _ in range(2000)]
    assert delays[-1] == 1000.0
    assert limiter.retries("a") == 2000


@given(
    base=st.floats(min_value=1e-6, max_value=10.0),
    cap=st.floats(min_value=0.0, max_value=1e6),
    calls=st.integers(min_value=1, max_value=80),
)
def test_exponential_delays_never_shrink_and_never_pass_the_cap(
    base: float, cap: float, calls: int
) -> None:
    limiter = ItemExponentialLimiter(base=base, cap=cap)
    delays = [limiter.when("key") for _ in range(calls)]
    assert delays == sorted(delays)
    assert all(0.0 <= d <= cap for d in delays)
    assert delays[0] == min(base, cap)


def test_bucket_allows_a_burst_then_spaces_by_rate() -> None:
    clock = ManualClock()
    limiter = BucketLimiter(rate=2.0, burst=3, clock=clock)
    assert [limiter.when(i) for i in range(5)] == [0.0, 0.0, 0.0, 0.5, 1.0]


def test_bucket_refills_with_time_but_never_past_burst() -> None:
    clock = ManualClock()
    limiter = BucketLimiter(rate=1.0, burst=2, clock=clock)
    assert [limiter.when("x") for _ in range(2)] == [0.0, 0.0]
    assert limiter.when("x") == 1.0  # borrowed: the token exists one second from now

    clock.advance(1.0)  # pays the debt back: still empty
    assert limiter.when("x") == 1.0

    clock.advance(1000.0)  # idle a long time: full, but only `burst` tokens
    assert [limiter.when("x") for _ in range(3)] == [0.0, 0.0, 1.0]


def test_bucket_tracks_no_items() -> None:
    limiter = BucketLimiter(rate=1.0, burst=1, clock=ManualClock())
    limiter.when("a")
    limiter.when("a")
    limiter.forget("a")
    assert limiter.retries("a") == 0


@given(
    rate=st.floats(min_value=0.01, max_value=1000.0),
    burst=st.integers(min_value=1, max_value=50),
    calls=st.integers(min_value=1, max_value=200),
)
def test_bucket_kth_call_at_one_instant_waits_for_its_token(
    rate: float, burst: int, calls: int
) -> None:
    limiter = BucketLimiter(rate=rate, burst=burst, clock=ManualClock())
    for k in range(1, calls + 1):
        assert limiter.when(k) == pytest.approx(max(0.0, (k - burst) / rate))


@pytest.mark.parametrize(("rate", "burst"), [(0.0, 1), (-1.0, 1), (1.0, 0)])
def test_bucket_refuses_nonsense_settings(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match=r"rate|burst"):
        BucketLimiter(rate=rate, burst=burst, clock=ManualClock())


def test_exponential_refuses_negative_settings() -> None:
    with pytest.raises(ValueError, match="base and cap"):
        ItemExponentialLimiter(base=-1.0)


def test_max_of_answers_the_longest_delay_and_the_most_retries() -> None:
    clock = ManualClock()
    slow_start = ItemExponentialLimiter(base=0.25, cap=100.0)
    bucket = BucketLimiter(rate=1.0, burst=2, clock=clock)
    limiter = MaxOfLimiter(slow_start, bucket)

    assert [limiter.when("a") for _ in range(4)] == [0.25, 0.5, 1.0, 2.0]
    assert limiter.when("b") == 3.0  # the bucket is 3 tokens in debt; b has failed once
    assert limiter.retries("a") == 4

    limiter.forget("a")
    assert limiter.retries("a") == 0
    assert slow_start.retries("a") == 0


def test_max_of_needs_a_limiter() -> None:
    with pytest.raises(ValueError, match="at least one"):
        MaxOfLimiter()


def test_default_controller_limiter_backs_off_per_item_and_overall() -> None:
    clock = ManualClock()
    limiter: RateLimiter = default_controller_limiter(clock)

    assert [limiter.when("a") for _ in range(3)] == [0.005, 0.01, 0.02]
    for i in range(97):  # 100 tokens in all
        assert limiter.when(i) == 0.005
    assert limiter.when("late") == pytest.approx(0.1)  # the bucket is empty: 10 per second

    for _ in range(30):
        limiter.when("a")
    assert limiter.when("a") == 1000.0
