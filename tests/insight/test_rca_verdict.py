"""`setpoint.insight.rca.window_verdict` and `diagnose`: a window of noise alone is normal;
an injected anomaly, short or lasting, is anomalous; the ranking is returned either way."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.insight.rca import (
    CallGraph,
    MetricTable,
    RcaSettings,
    SeriesKey,
    diagnose,
    window_verdict,
)

STEP = 300.0
GRAPH = CallGraph(("front", "db"), frozenset({("front", "db")}))


def table(columns: dict[str, list[float]], start: int = 0) -> MetricTable:
    """One `latency`/`Average` series per node, one row every STEP seconds from `start`."""
    n = len(next(iter(columns.values())))
    stamps = tuple((start + i) * STEP for i in range(n))
    return MetricTable(
        stamps, {SeriesKey(node, "latency", "Average"): v for node, v in columns.items()}
    )


def noisy(
    rng: np.random.Generator, rows: int, level: float = 1.0, spikes: float = 0.02
) -> list[float]:
    """Gaussian noise around `level`, with rare large spikes (as normal operation has)."""
    values = level * (1 + 0.03 * rng.standard_normal(rows))
    values[rng.random(rows) < spikes] *= 3.0
    return [float(v) for v in values]


@settings(max_examples=60, deadline=None)
@given(
    level=st.floats(0.01, 1e4),
    baseline=st.lists(st.floats(-0.025, 0.025), min_size=1, max_size=40),
    window=st.lists(st.floats(-0.025, 0.025), min_size=1, max_size=40),
)
def test_noise_within_the_relative_floor_is_always_normal(
    level: float, baseline: list[float], window: list[float]
) -> None:
    """Noise of +-2.5% around a level: no row moves from the baseline's median by more than
    the 5% relative floor. (+-5% noise could move 10%: a z just above 2, as hypothesis
    found with a baseline of -4.9% and a window of +4.7%.)"""
    normal = table({"front": [level * (1 + e) for e in baseline]})
    abnormal = table({"front": [level * (1 + e) for e in window]}, start=len(baseline))
    verdict = window_verdict(abnormal, target="front", metric="latency", at=None, normal=normal)
    assert not verdict.anomalous
    assert verdict.z < RcaSettings().verdict_floor


def test_long_windows_of_normal_operation_with_their_usual_spikes_are_mostly_normal() -> None:
    # At level 0.2 a window of pure noise is called anomalous at most one time in five (the
    # p-value is conformal and Bonferroni-corrected, so fewer); 0.8 is the specificity the
    # verdict is held to.
    normal_windows = spiky = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        normal = table({"front": noisy(rng, 300), "db": noisy(rng, 300)})
        window = table({"front": noisy(rng, 300), "db": noisy(rng, 300)}, start=300)
        found = diagnose(GRAPH, window, target="front", metric="latency", at=None, normal=normal)
        assert {c.node for c in found.causes} == {"front", "db"}  # the verdict hides nothing
        normal_windows += not found.verdict.anomalous
        spiky += found.verdict.z >= RcaSettings().threshold  # spikes that are usual
    assert normal_windows >= 32
    assert spiky >= 30


def test_a_burst_right_after_the_anomaly_time_is_anomalous_and_ranked() -> None:
    rng = np.random.default_rng(7)
    normal = table({"front": noisy(rng, 300, spikes=0.0), "db": noisy(rng, 300, spikes=0.0)})
    front, db = noisy(rng, 5, spikes=0.0), noisy(rng, 5, spikes=0.0)
    for i in (2, 3):
        db[i] *= 4.0
        front[i] *= 2.0
    window = table({"front": front, "db": db}, start=300)
    at = 302 * STEP
    found = diagnose(GRAPH, window, target="front", metric="latency", at=at, normal=normal)
    assert found.verdict.anomalous
    assert found.verdict.p_value is not None
    assert found.verdict.p_value < 0.05
    assert found.verdict.window_rows == 3
    assert [c.node for c in found.causes] == ["db", "front"]


def test_a_shift_over_a_whole_long_window_is_anomalous() -> None:
    rng = np.random.default_rng(3)
    normal = table({"front": noisy(rng, 300)})
    window = table({"front": [2 * v for v in noisy(rng, 300)]}, start=300)
    verdict = window_verdict(window, target="front", metric="latency", at=None, normal=normal)
    assert verdict.anomalous


def test_with_too_short_a_baseline_the_threshold_decides() -> None:
    normal = table({"front": [1.0, 1.01, 0.99]})
    small = table({"front": [1.2]}, start=3)  # 20%: four robust units (5% floor)
    large = table({"front": [2.0]}, start=3)
    for window, anomalous in ((small, False), (large, True)):
        verdict = window_verdict(window, target="front", metric="latency", at=None, normal=normal)
        assert verdict.p_value is None
        assert verdict.anomalous is anomalous
