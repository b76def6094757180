"""The HPA rules of setpoint.control.scaling: the ratio recommendation, the stabilization
windows, the rate policies and min/max, example by example and as properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.control.scaling import (
    DEFAULT_BEHAVIOR,
    Behavior,
    History,
    Recommendation,
    ScaleEvent,
    ScalingPolicy,
    ScalingRules,
    average_value_replicas,
    decide,
    limit_rate,
    pods_replicas,
    stabilize,
    value_replicas,
)

# -- the ratio recommendation -----------------------------------------------------------


def test_value_ratio_is_ceil_of_current_times_ratio() -> None:
    assert value_replicas(4, 150.0, 100.0) == 6
    assert value_replicas(3, 50.0, 100.0) == 2  # ceil(1.5)
    assert value_replicas(10, 10.5, 10.0) == 10  # within the tolerance
    assert value_replicas(10, 11.01, 10.0) == 12
    assert value_replicas(10, 9.0, 10.0) == 10  # exactly 0.1 away: still within
    assert value_replicas(0, 25.0, 10.0) == 3  # no replicas: ceil(ratio)


def test_average_value_shares_the_total() -> None:
    assert average_value_replicas(2, 95.0, 10.0) == 10
    assert average_value_replicas(10, 104.0, 10.0) == 10  # within the tolerance
    assert average_value_replicas(5, 0.0, 10.0) == 0


def test_pods_with_unready_pods_count_them_as_zero_on_scale_up() -> None:
    # 4 ready at 2x the target, 4 starting: the load (8 target-units) fits the 8 pods.
    assert pods_replicas(8, ready_average=20.0, ready=4, unready=4, target=10.0) == 8
    # 4 ready at 3x, 2 starting: 12 units over 6 pods -> 12.
    assert pods_replicas(6, ready_average=30.0, ready=4, unready=2, target=10.0) == 12
    # scaling down: unready pods are left out
    assert pods_replicas(8, ready_average=5.0, ready=4, unready=4, target=10.0) == 2


def test_pods_missing_metrics_are_conservative() -> None:
    # scale down with 2 missing: they count as at target, so 4*0.5 + 2*1 over 6 -> 4
    assert pods_replicas(6, ready_average=5.0, ready=4, missing=2, target=10.0) == 4
    # a scale up that the missing pods (as 0) turn into a scale down: no change
    assert pods_replicas(6, ready_average=12.0, ready=4, missing=2, target=10.0) == 6


def test_bad_targets_are_refused() -> None:
    with pytest.raises(ValueError, match="target"):
        value_replicas(1, 1.0, 0.0)


# -- stabilization ---------------------------------------------------------------------


def test_scale_down_waits_for_the_window() -> None:
    history = History()
    replicas = 10
    for t in range(0, 300, 15):
        decision = decide(
            history,
            current=replicas,
            recommendation=10 if t == 0 else 3,
            min_replicas=1,
            max_replicas=20,
            behavior=DEFAULT_BEHAVIOR,
            now=float(t),
        )
        history = decision.history
        assert decision.replicas == 10
        assert decision.able_reason in ("ReadyForNewScale", "ScaleDownStabilized")
    decision = decide(
        history,
        current=10,
        recommendation=3,
        min_replicas=1,
        max_replicas=20,
        behavior=DEFAULT_BEHAVIOR,
        now=301.0,
    )
    assert decision.replicas == 3


def test_scale_up_is_immediate_but_rate_limited() -> None:
    decision = decide(
        History(),
        current=2,
        recommendation=50,
        min_replicas=1,
        max_replicas=100,
        behavior=DEFAULT_BEHAVIOR,
        now=0.0,
    )
    assert decision.stabilized == 50
    assert decision.replicas == 6  # max(2 + 4, 2 * 2)
    assert decision.limited_reason == "ScaleUpLimit"
    again = decide(
        decision.history,
        current=6,
        recommendation=50,
        min_replicas=1,
        max_replicas=100,
        behavior=DEFAULT_BEHAVIOR,
        now=5.0,
    )
    assert again.replicas == 6  # the period began at 2: 6 is all it allows
    later = decide(
        again.history,
        current=6,
        recommendation=50,
        min_replicas=1,
        max_replicas=100,
        behavior=DEFAULT_BEHAVIOR,
        now=15.0,
    )
    assert later.replicas == 12


def test_out_of_range_goes_straight_to_the_bound() -> None:
    decision = decide(
        History(),
        current=30,
        recommendation=30,
        min_replicas=1,
        max_replicas=10,
        behavior=DEFAULT_BEHAVIOR,
        now=0.0,
    )
    assert decision.replicas == 10
    decision = decide(
        History(),
        current=1,
        recommendation=1,
        min_replicas=3,
        max_replicas=10,
        behavior=DEFAULT_BEHAVIOR,
        now=0.0,
    )
    assert decision.replicas == 3


def test_disabled_direction_never_moves() -> None:
    behavior = Behavior(
        scale_down=ScalingRules(0, (ScalingPolicy("Percent", 100, 15),), "Disabled")
    )
    replicas, reason, _ = limit_rate(2, 8, 1, 10, (), behavior, 0.0)
    assert (replicas, reason) == (8, "ScaleDownLimit")


# -- properties --------------------------------------------------------------------------

steps = st.lists(
    st.tuples(st.integers(min_value=1, max_value=40), st.integers(min_value=0, max_value=60)),
    min_size=1,
    max_size=40,
)


@given(
    steps=steps,
    low=st.integers(min_value=0, max_value=5),
    span=st.integers(min_value=0, max_value=30),
    start=st.integers(min_value=0, max_value=50),
)
@settings(max_examples=200, deadline=None)
def test_never_outside_min_max(
    steps: list[tuple[int, int]], low: int, span: int, start: int
) -> None:
    high = max(low + span, 1)
    history, replicas, now = History(), start, 0.0
    for dt, recommendation in steps:
        now += dt
        decision = decide(
            history,
            current=replicas,
            recommendation=recommendation,
            min_replicas=low,
            max_replicas=high,
            behavior=DEFAULT_BEHAVIOR,
            now=now,
        )
        history, replicas = decision.history, decision.replicas
        assert low <= replicas <= high


@given(
    steps=steps,
    up=st.integers(min_value=1, max_value=6),
    down=st.integers(min_value=1, max_value=6),
    period=st.integers(min_value=5, max_value=90),
)
@settings(max_examples=200, deadline=None)
def test_never_faster_than_the_policies(
    steps: list[tuple[int, int]], up: int, down: int, period: int
) -> None:
    behavior = Behavior(
        ScalingRules(0, (ScalingPolicy("Pods", up, period),)),
        ScalingRules(0, (ScalingPolicy("Pods", down, period),)),
    )
    history, replicas, now = History(), 10, 0.0
    changes: list[tuple[float, int]] = []
    for dt, recommendation in steps:
        now += dt
        decision = decide(
            history,
            current=replicas,
            recommendation=recommendation,
            min_replicas=0,
            max_replicas=100,
            behavior=behavior,
            now=now,
        )
        history = decision.history
        change = decision.replicas - replicas
        replicas = decision.replicas
        if change == 0:
            continue
        changes.append((now, change))
        # the policy counts from the replicas at the start of its period: within the
        # last `period` seconds, a move is at most `value` beyond the moves back
        recent = [c for t, c in changes if t > now - period]
        added = sum(c for c in recent if c > 0)
        removed = -sum(c for c in recent if c < 0)
        if change > 0:
            assert added <= up + removed
        else:
            assert removed <= down + added


@given(
    steps=steps,
    window=st.integers(min_value=0, max_value=300),
    current=st.integers(min_value=0, max_value=60),
    desired=st.integers(min_value=0, max_value=60),
)
@settings(max_examples=200, deadline=None)
def test_stabilization_picks_the_max_down_and_the_min_up(
    steps: list[tuple[int, int]], window: int, current: int, desired: int
) -> None:
    loose = (ScalingPolicy("Percent", 10_000, 15),)
    down_only = Behavior(ScalingRules(0, loose), ScalingRules(window, loose))
    up_only = Behavior(ScalingRules(window, loose), ScalingRules(0, loose))
    seen: list[Recommendation] = []
    history_down: tuple[Recommendation, ...] = ()
    history_up: tuple[Recommendation, ...] = ()
    now = 0.0
    for dt, recommendation in steps:
        now += dt
        _, history_down = stabilize(history_down, recommendation, current, down_only, now)
        _, history_up = stabilize(history_up, recommendation, current, up_only, now)
        seen.append(Recommendation(recommendation, now))
    now += 1
    in_window = [r.replicas for r in seen if r.time > now - window] + [desired]
    got_down, _ = stabilize(history_down, desired, current, down_only, now)
    got_up, _ = stabilize(history_up, desired, current, up_only, now)
    if desired < current:  # scaling down: the highest of the window, never above current
        assert got_down == min(current, max(in_window))
    if desired > current:  # scaling up: the lowest of the window, never below current
        assert got_up == max(current, min(in_window))


def test_events_older_than_every_period_are_forgotten() -> None:
    events = (ScaleEvent(4, 0.0), ScaleEvent(2, 10.0))
    decision = decide(
        History((), events),
        current=16,
        recommendation=40,
        min_replicas=1,
        max_replicas=100,
        behavior=DEFAULT_BEHAVIOR,
        now=100.0,
    )
    assert decision.replicas == 32
    assert all(e.time >= 100.0 - 15 for e in decision.history.scale_events)
    assert math.isclose(decision.history.scale_events[-1].time, 100.0)


def test_select_policy_min_takes_the_smaller_change() -> None:
    both = (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15))
    largest = Behavior(ScalingRules(0, both, "Max"))
    smallest = Behavior(ScalingRules(0, both, "Min"))
    assert limit_rate(100, 10, 1, 100, (), largest, 0.0)[0] == 20  # max(10 + 4, 2 * 10)
    assert limit_rate(100, 10, 1, 100, (), smallest, 0.0)[0] == 14  # min(10 + 4, 2 * 10)
    assert limit_rate(100, 2, 1, 100, (), largest, 0.0)[0] == 6  # max(2 + 4, 2 * 2)
    assert limit_rate(100, 2, 1, 100, (), smallest, 0.0)[0] == 4


def test_percent_down_truncates_as_the_hpa_does() -> None:
    halve = Behavior(scale_down=ScalingRules(0, (ScalingPolicy("Percent", 50, 60),)))
    # int(7 * 0.5) = 3: the HPA truncates the scale-down limit toward zero
    assert limit_rate(1, 7, 1, 10, (), halve, 0.0) == (
        3,
        "ScaleDownLimit",
        "the desired replica count is decreasing faster than the maximum scale rate",
    )
    # a removal 30 s ago still counts: the period began at 7, not at 3
    events = (ScaleEvent(-4, 0.0),)
    assert limit_rate(1, 3, 1, 10, events, halve, 30.0)[0] == 3
    assert limit_rate(1, 3, 1, 10, events, halve, 61.0)[0] == 1
