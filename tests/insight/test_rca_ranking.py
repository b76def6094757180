"""`setpoint.insight.rca` on small hand-made call graphs whose root cause is known by
construction: the anomaly is injected into one node and copied, weaker, into the nodes
that call it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from setpoint.errors import Invalid
from setpoint.insight.rca import (
    CallGraph,
    MetricTable,
    RcaSettings,
    SeriesKey,
    rank_root_causes,
    series_anomaly,
    split_at,
)

STEP = 60.0
BEFORE = 12  # rows of normal operation in the window
AFTER = 4  # rows after the anomaly
AT = BEFORE * STEP


def graph(*calls: tuple[str, str]) -> CallGraph:
    nodes = sorted({n for call in calls for n in call})
    return CallGraph(tuple(nodes), frozenset(calls))


def window(
    shifts: dict[str, float], nodes: list[str], *, metric: str = "latency", level: float = 1.0
) -> MetricTable:
    """BEFORE + AFTER rows per node: a deterministic wobble of +-1% around `level`, and
    after AT, `level * (1 + shift)` for the nodes in `shifts`."""
    stamps = tuple(i * STEP for i in range(BEFORE + AFTER))
    columns: dict[SeriesKey, list[float]] = {}
    for k, node in enumerate(nodes):
        values = []
        for i in range(BEFORE + AFTER):
            wobble = 0.01 * math.sin(1.7 * i + k)
            shift = shifts.get(node, 0.0) if i >= BEFORE else 0.0
            values.append(level * (1 + wobble + shift))
        for statistic in ("Average", "p99"):
            columns[SeriesKey(node, metric, statistic)] = list(values)
    return MetricTable(stamps, columns)


def ranked_nodes(g: CallGraph, table: MetricTable, target: str, **kw: object) -> list[str]:
    metric = str(kw.pop("metric", "latency"))
    return [r.node for r in rank_root_causes(g, table, target=target, metric=metric, at=AT)]


def test_the_deepest_anomalous_callee_of_a_chain_is_first() -> None:
    g = graph(("front", "api"), ("api", "db"), ("front", "cache"))
    table = window({"db": 3.0, "api": 1.5, "front": 0.8}, ["front", "api", "db", "cache"])
    ranking = rank_root_causes(g, table, target="front", metric="latency", at=AT)
    assert ranking[0].node == "db"
    assert ranking[0].metric == "latency"
    assert {r.node for r in ranking} == {"front", "api", "db", "cache"}
    assert next(r for r in ranking if r.node == "cache").metric is None  # not anomalous
    assert [r.score for r in ranking] == sorted((r.score for r in ranking), reverse=True)


def test_a_target_whose_callees_are_normal_is_its_own_cause() -> None:
    g = graph(("front", "api"), ("front", "db"))
    table = window({"front": 2.0}, ["front", "api", "db"])
    assert ranked_nodes(g, table, "front")[0] == "front"


def test_of_two_anomalous_callees_the_one_more_callers_depend_on_comes_first() -> None:
    # Both leaves are equally anomalous; "search" also slows "worker", which the target calls.
    g = graph(("front", "search"), ("front", "proxy"), ("front", "worker"), ("worker", "search"))
    nodes = ["front", "search", "proxy", "worker"]
    table = window({"search": 2.0, "proxy": 2.0, "worker": 1.0, "front": 1.0}, nodes)
    assert ranked_nodes(g, table, "front")[:2] == ["search", "proxy"]


def shaped(after: dict[str, list[float]], nodes: list[str]) -> MetricTable:
    """BEFORE rows of the +-1% wobble, then AFTER rows shifted by `after[node][i]`."""
    base = window({}, nodes)
    columns = {}
    for key, values in base.columns.items():
        shifts = after.get(key.node, [0.0] * AFTER)
        columns[key] = [
            v + (shifts[i - BEFORE] if i >= BEFORE else 0.0) for i, v in enumerate(values)
        ]
    return MetricTable(base.timestamps, columns)


def test_of_two_anomalous_callees_the_one_shaped_like_the_target_comes_first() -> None:
    """ "search" rises and falls with the target; "balancer" is more anomalous but peaks two
    rows later (a bystander): search is first. Without the shape step, balancer is."""
    g = graph(("front", "search"), ("front", "balancer"))
    table = shaped(
        {
            "front": [1.0, 0.6, 0.3, 0.1],
            "search": [2.0, 1.2, 0.6, 0.2],
            "balancer": [0.5, 1.0, 4.0, 0.5],
        },
        ["front", "search", "balancer"],
    )
    ranking = rank_root_causes(g, table, target="front", metric="latency", at=AT)
    assert [r.node for r in ranking[:2]] == ["search", "balancer"]
    blind = RcaSettings(shape_weight=0.0)
    ranking = rank_root_causes(g, table, target="front", metric="latency", at=AT, settings=blind)
    assert ranking[0].node == "balancer"


def test_an_anomaly_the_target_does_not_depend_on_ranks_below_one_it_does() -> None:
    # "batch" is far more anomalous, but the target does not call it.
    g = graph(("front", "api"), ("batch", "store"))
    table = window({"batch": 10.0, "api": 1.0, "front": 0.5}, ["front", "api", "batch", "store"])
    ranking = ranked_nodes(g, table, "front")
    assert ranking.index("api") < ranking.index("batch")


def test_a_level_that_had_shifted_before_the_anomaly_is_not_news() -> None:
    keys = [SeriesKey("a", "latency", "Average"), SeriesKey("b", "latency", "Average")]
    normal = np.array([[1.0, 1.0], [1.01, 0.99], [0.99, 1.01], [1.0, 1.0]])
    before = np.array([[3.0, 1.0], [3.02, 1.0]])  # "a" was already high before the anomaly
    after = np.array([[3.01, 3.0]])
    z = series_anomaly(normal, before, after, keys)
    assert z[0] < 1.0  # against its own recent past, "a" did not change
    assert z[1] > 5.0


def test_direction_latency_up_and_availability_down_are_bad() -> None:
    keys = [
        SeriesKey("a", "latency", "Average"),
        SeriesKey("a", "availability", "Average"),
        SeriesKey("a", "requests", "Sum"),
    ]
    normal = np.array([[1.0, 100.0, 50.0], [1.01, 99.9, 51.0], [0.99, 100.0, 49.0]])
    empty = np.empty((0, 3))
    worse = series_anomaly(normal, empty, np.array([[2.0, 90.0, 20.0]]), keys)
    better = series_anomaly(normal, empty, np.array([[0.5, 100.0, 90.0]]), keys)
    assert min(worse) > 5
    assert list(better[:2]) == [0.0, 0.0]
    assert better[2] > 5  # requests are anomalous both ways


def test_a_change_within_the_relative_floor_is_not_anomalous() -> None:
    keys = [SeriesKey("a", "latency", "Average")]
    flat = np.full((5, 1), 2.0)  # no spread at all: only the floors bound the unit
    small = series_anomaly(flat, np.empty((0, 1)), np.array([[2.1]]), keys)
    assert small[0] == pytest.approx(1.0)  # 5% of the level is one unit
    loose = RcaSettings(relative_floor=0.5)
    assert series_anomaly(flat, np.empty((0, 1)), np.array([[2.1]]), keys, loose)[0] < 0.2


def test_rows_count_as_after_when_most_of_their_period_is() -> None:
    assert split_at([0.0, 300.0, 600.0, 900.0], 590.0) == [False, False, True, True]
    assert split_at([0.0, 300.0, 600.0, 900.0], 460.0) == [False, False, True, True]
    assert split_at([0.0, 300.0, 600.0, 900.0], 440.0) == [False, True, True, True]
    assert split_at([100.0], 50.0) == [True]


def test_bad_input_is_refused_with_the_field_named() -> None:
    g = graph(("front", "api"))
    table = window({"api": 2.0}, ["front", "api"])
    with pytest.raises(Invalid, match="unknown target node 'nope'"):
        rank_root_causes(g, table, target="nope", metric="latency", at=AT)
    with pytest.raises(Invalid, match="no series of metric 'cpu'"):
        rank_root_causes(g, table, target="front", metric="cpu", at=AT)
    with pytest.raises(Invalid, match="no baseline") as caught:
        rank_root_causes(g, table, target="front", metric="latency", at=-1.0)
    assert caught.value.field == "at"
    with pytest.raises(Invalid, match="anomaly's time or a normal baseline"):
        rank_root_causes(g, table, target="front", metric="latency", at=None)


def test_a_separate_normal_table_serves_when_the_window_is_all_anomaly() -> None:
    g = graph(("front", "api"), ("front", "db"))
    full = window({"db": 2.0, "front": 1.0}, ["front", "api", "db"])
    normal = MetricTable(
        full.timestamps[:BEFORE], {k: list(v[:BEFORE]) for k, v in full.columns.items()}
    )
    abnormal = MetricTable(
        full.timestamps[BEFORE:], {k: list(v[BEFORE:]) for k, v in full.columns.items()}
    )
    ranking = rank_root_causes(
        g, abnormal, target="front", metric="latency", at=None, normal=normal
    )
    assert ranking[0].node == "db"
