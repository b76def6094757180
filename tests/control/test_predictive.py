"""The predictive scaling algorithm, pure: driven period by period against a load that
Hypothesis or the test picks; time is passed in, nothing is read from a clock."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.control.predictive import (
    DEFAULT_SETTINGS,
    Observation,
    PredictiveSettings,
    PredictiveState,
    Terms,
    step,
)

TARGET = 0.7


def run(
    loads: list[float],
    *,
    start: int = 4,
    low: int = 2,
    high: int = 100,
    arrivals: list[float | None] | None = None,
    period: float = 15.0,
) -> list[Terms]:
    """Periods against a world whose replicas are what the algorithm recommends (at once):
    the metric is `load / replicas` (the load in requests in flight; with no replica, the
    load)."""
    state = PredictiveState()
    replicas = start
    out = []
    for i, load in enumerate(loads):
        seen = Observation(
            load / max(replicas, 1),
            replicas,
            TARGET,
            low,
            high,
            i * period,
            None if arrivals is None else arrivals[i],
        )
        state, terms = step(state, seen)
        out.append(terms)
        replicas = terms.recommendation
    return out


@settings(max_examples=80, deadline=None)
@given(
    loads=st.lists(st.floats(0, 500, allow_nan=False), min_size=1, max_size=40),
    start=st.integers(1, 60),
    low=st.integers(0, 5),
    span=st.integers(0, 60),
)
def test_every_decision_is_within_bounds_and_says_which_way_it_went(
    loads: list[float], start: int, low: int, span: int
) -> None:
    high = max(low, 1) + span
    current = start
    for terms in run(loads, start=start, low=low, high=high):
        assert terms.current == current
        assert low <= terms.recommendation <= high or terms.recommendation == current
        if terms.recommendation > current:
            assert terms.direction == "up"
        elif terms.recommendation < current:
            assert terms.direction == "down"
        else:
            assert terms.direction == "hold"
        assert math.isclose(
            terms.prediction, terms.level + terms.feed_forward + terms.backlog, abs_tol=1e-9
        )
        assert terms.held >= terms.load - 1e-9
        current = terms.recommendation


@settings(max_examples=40, deadline=None)
@given(replicas=st.integers(2, 80))
def test_a_steady_load_at_the_target_moves_nothing(replicas: int) -> None:
    terms = run([replicas * TARGET] * 40, start=replicas)
    assert {t.recommendation for t in terms} == {replicas}
    assert {t.direction for t in terms} == {"hold"}


def test_a_flash_crowd_is_met_in_one_step_when_the_arrivals_are_given() -> None:
    base = [5 * TARGET] * 10  # 5 replicas' worth, 50 requests a second
    crowd = [50 * TARGET] * 10  # x10
    arrivals: list[float | None] = [50.0] * 10 + [500.0] * 10
    terms = run(base + crowd, start=5, arrivals=arrivals)
    first_up = next(t for t in terms[10:] if t.direction == "up")
    assert first_up is terms[10]
    assert first_up.recommendation >= 50
    assert all(t.direction != "up" for t in terms[11:])


def test_without_arrivals_a_flash_crowd_is_met_within_two_periods() -> None:
    """The metric alone cannot tell load from queue: one period counts at most
    `saturation_factor` x current (plus the trend); the next one the rest."""
    terms = run([5 * TARGET] * 10 + [50 * TARGET] * 10, start=5)
    assert terms[10].direction == "up"
    assert terms[10].load == 5 * DEFAULT_SETTINGS.saturation_factor
    assert terms[11].recommendation >= 50


def test_a_fall_is_followed_after_the_hold_in_one_step() -> None:
    hold = DEFAULT_SETTINGS.hold_seconds
    high, low = [40 * TARGET] * 4, [10 * TARGET] * 40
    terms = run(high + low, start=40)
    downs = [(i, t) for i, t in enumerate(terms) if t.direction == "down"]
    assert len(downs) == 1
    index, down = downs[0]
    assert (index - 4) * 15.0 >= hold - 15.0  # the highest load of the hold went first
    assert down.recommendation == math.ceil(10 * (1 + DEFAULT_SETTINGS.up_margin))


def test_the_arrivals_keep_a_queue_from_being_held_as_load() -> None:
    """Below the target the algorithm learns the arrivals per needed replica; then a period
    whose metric counts a queue of 20x the load asks for the load's replicas plus a share
    for the backlog, and holds only the load's."""
    steady = [10 * TARGET] * 6
    arrivals: list[float | None] = [100.0] * 6 + [200.0] + [200.0] * 30
    queued = [20 * 10 * TARGET]  # the metric: in flight, the queue included
    after = [20 * TARGET] * 30  # the queue drained: twice the load
    terms = run(steady + queued + after, start=10, arrivals=arrivals)
    burst = terms[6]
    assert burst.need == pytest.approx(200.0)
    assert burst.load == pytest.approx(20.0)  # 200 / s at 10 / s per needed replica
    assert burst.backlog == pytest.approx(DEFAULT_SETTINGS.drain * (40.0 - 20.0))
    assert burst.recommendation < 100
    assert max(t.held for t in terms[6:]) == pytest.approx(20.0, rel=0.01)
    assert terms[-1].recommendation <= math.ceil(20 * (1 + DEFAULT_SETTINGS.up_margin) * 1.2)


def test_a_draining_backlog_keeps_the_replicas_it_asked_for() -> None:
    """A queue asks for replicas beyond the load; the next period, the queue still
    draining, the count is held, not dropped to the load's (`held`) and asked for again."""
    state = PredictiveState()
    for i in range(6):  # 10 replicas at the target: 7 requests a second per needed replica
        state, _ = step(state, Observation(TARGET, 10, TARGET, 2, 100, i * 15.0, 70.0))
    # a queue: 100 in flight per replica, the arrivals unchanged
    state, up = step(state, Observation(100 * TARGET / 10, 10, TARGET, 2, 100, 90.0, 70.0))
    assert up.direction == "up"
    assert up.load == pytest.approx(10.0)
    assert up.backlog > 0
    # the same queue over the new count: still draining
    queued = 100 * TARGET / up.recommendation
    state, after = step(state, Observation(queued, up.recommendation, TARGET, 2, 100, 105.0, 70.0))
    assert after.held < up.recommendation * (1 - DEFAULT_SETTINGS.down_tolerance)
    assert after.direction == "hold"
    assert after.recommendation == up.recommendation


@settings(max_examples=60, deadline=None)
@given(
    loads=st.lists(st.floats(0, 500, allow_nan=False), min_size=2, max_size=40),
    arrivals=st.lists(st.one_of(st.none(), st.floats(0, 5000)), min_size=40, max_size=40),
)
def test_a_scale_down_never_goes_below_the_prediction(
    loads: list[float], arrivals: list[float | None]
) -> None:
    for terms in run(loads, start=10, arrivals=arrivals[: len(loads)]):
        if terms.direction == "down" and terms.recommendation > 2:
            assert terms.recommendation >= math.ceil(terms.prediction - 1e-9)


def test_without_arrivals_a_queue_counts_at_most_the_saturation_factor() -> None:
    terms = run([10 * TARGET] * 3 + [1000 * TARGET], start=10)
    assert terms[-1].load == pytest.approx(10 * DEFAULT_SETTINGS.saturation_factor)


def test_a_repeated_time_takes_the_new_figure_without_dividing_by_zero() -> None:
    seen = Observation(1.4, 4, TARGET, 1, 20, 30.0)
    state, _ = step(PredictiveState(), seen)
    state, terms = step(state, seen)
    assert terms.load == pytest.approx(8.0)
    assert terms.trend == 0.0


def test_terms_as_the_status_holds_them() -> None:
    _, terms = step(PredictiveState(), Observation(1.4, 4, TARGET, 1, 20, 0.0, 80.0))
    shown = terms.as_dict()
    assert shown["need"] == 8.0
    assert shown["arrivals"] == 80.0
    assert shown["direction"] == "up"
    assert shown["recommendation"] == 9  # ceil(8 x 1.05)
    assert set(shown) >= {"metric", "level", "trendPerSecond", "feedForward", "prediction"}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("level_seconds", 0.0),
        ("hold_seconds", -1.0),
        ("down_tolerance", 1.0),
        ("rate_gain", 0.0),
        ("saturation_factor", 0.5),
    ],
)
def test_bad_settings_are_refused_naming_the_field(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        PredictiveSettings(**{field: value})


def test_a_target_of_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="target"):
        step(PredictiveState(), Observation(1.0, 1, 0.0, 1, 2, 0.0))
