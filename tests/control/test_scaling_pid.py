"""The pid algorithm of setpoint.control.scaling against a plant where the metric is
load / replicas, through the same behaviour layer as the HPA rules."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.control.autoscaler import PidSpecSchema
from setpoint.control.scaling import (
    DEFAULT_BEHAVIOR,
    PID_BEHAVIOR,
    PID_SCALE_DOWN,
    Behavior,
    History,
    PidAlgorithm,
    ScalingPolicy,
    ScalingRules,
    decide,
)

TARGET = 10.0


def run(
    loads: list[float],
    *,
    start: int = 2,
    low: int = 1,
    high: int = 50,
    behavior: Behavior = PID_BEHAVIOR,
) -> list[int]:
    """Replicas after each 15 s period; the metric is load / replicas (per replica)."""
    algorithm = PidAlgorithm(TARGET, low, high, PidSpecSchema().gains())
    history, replicas, out = History(), start, []
    for i, load in enumerate(loads):
        now = 15.0 * i
        recommendation = algorithm.recommend(replicas, load / replicas, now)
        decision = decide(
            history,
            current=replicas,
            recommendation=recommendation,
            min_replicas=low,
            max_replicas=high,
            behavior=behavior,
            now=now,
        )
        history = decision.history
        replicas = decision.replicas
        out.append(replicas)
    return out


def test_settles_within_the_deadband_of_the_count_that_holds_the_target() -> None:
    trace = run([100.0] * 80)  # 10 replicas hold 10 per replica
    assert 9 <= trace[-1] <= 11
    assert len(set(trace[-40:])) == 1  # and stays there: no scale events


def test_follows_a_step_up_within_minutes() -> None:
    trace = run([40.0] * 40 + [200.0] * 30, start=4)
    assert trace[39] == 4
    assert max(trace[40:52]) >= 16  # within 3 minutes
    assert 18 <= trace[-1] <= 22


def test_no_windup_while_a_stabilization_window_holds_it() -> None:
    # 20 needed, then 5 for 20 minutes behind the HPA's 300 s scale-down window
    trace = run([200.0] * 20 + [50.0] * 80, start=20, behavior=DEFAULT_BEHAVIOR)
    assert trace[19] == 20
    assert trace[-1] < 20
    assert min(trace[20:]) >= 5  # released, it does not dive below what is needed


def test_no_windup_while_a_rate_policy_holds_it() -> None:
    # 30 needed but one more replica a minute at most; after 15 minutes 6 are needed
    slow_up = Behavior(ScalingRules(0, (ScalingPolicy("Pods", 1, 60),)), PID_SCALE_DOWN)
    trace = run([300.0] * 60 + [60.0] * 60, start=2, behavior=slow_up)
    at_drop = trace[59]
    assert at_drop < 30
    assert max(trace[60:]) <= at_drop + 1  # it does not keep climbing on a stale error
    assert trace[-1] < at_drop


def test_a_zero_metric_goes_to_min() -> None:
    trace = run([0.0] * 60, start=10, low=2)
    assert trace[-1] == 2


@given(
    loads=st.lists(st.floats(min_value=0, max_value=1e4), min_size=1, max_size=50),
    low=st.integers(min_value=1, max_value=5),
    span=st.integers(min_value=0, max_value=40),
)
@settings(max_examples=100, deadline=None)
def test_recommendations_stay_within_bounds(loads: list[float], low: int, span: int) -> None:
    high = low + span
    algorithm = PidAlgorithm(TARGET, low, high, PidSpecSchema().gains())
    replicas = low
    for i, load in enumerate(loads):
        recommendation = algorithm.recommend(replicas, load / replicas, 15.0 * i)
        assert low <= recommendation <= high
        replicas = recommendation
