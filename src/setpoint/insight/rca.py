"""Metric root-cause analysis: rank the nodes of a call graph most likely to have caused an
anomaly in one node's metric (`setpoint rca`).

Pure: numpy over in-memory data, no I/O, no clock. Time is the `at` argument (the
anomaly's time, in the same unit as the table's timestamps). Readers of particular
formats (the PetShop dataset's CSV files, live scrapes) build a `CallGraph` and a
`MetricTable` and call `rank_root_causes`.

The method, in four steps:

1. **How anomalous is each series** after `at`. Every row stands for the period up to
   the next timestamp; a row counts as *after* `at` when more than half of its period
   is, and as *before* otherwise. A series' deviation is measured against two
   references, and the smaller of the two counts: the median of the normal baseline
   (the `normal` table, plus the rows before `at`) and the median of this window's own
   rows before `at` (so a level that had already shifted before the anomaly, as when the
   normal data is weeks old, is not news). The unit of deviation is a robust spread of
   the baseline: the largest of 1.4826 x MAD, 1.2533 x mean absolute deviation (which
   stays positive for series that are constant but for rare spikes), `relative_floor`
   x the reference level, and `absolute_floor`. Latency-like metrics count only upward
   deviations, availability-like ones (percentages where 100 is perfect) only
   downward, any other metric both ways. A node's anomaly `z` is its largest deviation,
   over every statistic of the target's metric and every row after `at`.
2. **Blame**: with `g = log(1 + z)`, a node keeps the part of its anomaly its callees do
   not explain: `own = g x (1 - callee_discount x e)`, where `e` is the largest
   `g(callee) / g(node)` (capped at 1) over its anomalous callees. A node whose callee is
   as anomalous as itself is probably only passing the trouble on.
3. **Explanation**: anomalies travel from callee to caller. The anomalous callers of a
   node, their anomalous callers and so on, are what the node would explain if it were
   the cause; a cause explains more when more, and more anomalous, nodes depend on
   it. `score = own x (1 + coverage_weight x sum of g over them)`. A node counts as
   connected when the target is among them (or is the node); a node that is not
   anomalous (`z < threshold`) or not connected keeps `disconnected_penalty` of its
   score, and one the target does not call, directly or not, its square.

4. **Shape**: a cause's trouble has the shape of the symptom's. Over the whole window
   (the rows before `at` and after), each node's series of the metric is correlated with
   the target's, statistic by statistic (Pearson's r over the rows both have; a series that
   does not move has no shape of the target's, r = 0); `shape` is the mean r (1 when the
   target's series do not move or the window has fewer than 3 rows: no shape to match).
   `score x max(shape, 0) ** shape_weight`. Of two nodes that turned anomalous together,
   the one whose ups and downs are the target's is where the target's trouble comes from;
   one that peaks a row later, or was already moving before, is a bystander (a load
   balancer in front of the cause, measured from the caller's side, is as anomalous as the
   cause but follows its own traffic).

Every node of the graph (and of the table) is returned, best first (ties by anomaly,
then name).

**Verdict** (`window_verdict`, `diagnose`): before blaming anything, is the target's metric
anomalous after `at` at all? Every row of the window and every row of the baseline (normal
plus before) gets the target's deviation as in step 1 (the largest over the metric's
statistics). The window's rows are compared with normal operation: with `c` baseline rows
at least as extreme as a value out of `n`, one normal row is that extreme with chance
`q = (c + 1) / (n + 1)` (a conformal p-value). For each k, the window's k-th worst row
`z_k` is tested: the chance that `m` normal rows (the window's length) hold k rows as
extreme is the binomial tail `P(Binomial(m, q(z_k)) >= k)`; `p` is the smallest of these
tails times the number of k tested (Bonferroni; only the k with `z_k >= verdict_floor`
are tested). The window is anomalous when `p < significance` (0.2) and its worst row
`z >= verdict_floor` (2). A baseline too short to call any row rare (`1 / (n +
1) >= significance`) cannot give such a chance: then `z >= threshold` alone decides. So
one brief spike in a long window is normal when normal operation has such spikes too,
while a short burst right after `at`, or a shift that lasts, is not.

The verdict never hides the ranking: `diagnose` returns the ranked causes beside it
whatever it says, and the CLI shows them (for a normal window, on request). A verdict of
"normal" on a real anomaly costs the user the answer if it gates the ranking, while a
ranking shown for a quiet window costs a glance; so the two constants are the most
sensitive pair of a small grid (levels 0.01, 0.05, 0.1, 0.2; floors 2, 3) whose
specificity on the PetShop authors' normal-operation folds stays at least 0.8
(`bench/insight_petshop.py` applies the same rule with one scenario left out, and reports
each held-out scenario).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from setpoint.errors import Invalid

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, order=True)
class SeriesKey:
    """Which series: the node, the metric (`latency`), and the statistic (`Average`, `p99`)."""

    node: str
    metric: str
    statistic: str


@dataclass(frozen=True)
class CallGraph:
    """Who calls whom: `calls` holds (caller, callee) pairs between `nodes`."""

    nodes: tuple[str, ...]
    calls: frozenset[tuple[str, str]]

    def callees(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {n: set() for n in self.nodes}
        for caller, callee in self.calls:
            out.setdefault(caller, set()).add(callee)
            out.setdefault(callee, set())
        return out

    def callers(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {n: set() for n in self.nodes}
        for caller, callee in self.calls:
            out.setdefault(callee, set()).add(caller)
            out.setdefault(caller, set())
        return out


@dataclass(frozen=True)
class MetricTable:
    """Series sampled at shared `timestamps` (ascending); `nan` marks a missing value."""

    timestamps: tuple[float, ...]
    columns: Mapping[SeriesKey, Sequence[float]]

    def __post_init__(self) -> None:
        for key, values in self.columns.items():
            if len(values) != len(self.timestamps):
                raise Invalid(
                    f"{len(values)} values for {len(self.timestamps)} timestamps",
                    field=f"{key.node}/{key.metric}/{key.statistic}",
                )
        if any(b < a for a, b in zip(self.timestamps, self.timestamps[1:], strict=False)):
            raise Invalid("timestamps must be in ascending order", field="timestamps")

    def nodes(self) -> set[str]:
        return {k.node for k in self.columns}

    def rows(self, keys: Sequence[SeriesKey], mask: Sequence[bool] | None = None) -> FloatArray:
        """The values of `keys` as a (rows x keys) array; a key the table lacks is all `nan`."""
        n = len(self.timestamps)
        data = np.full((n, len(keys)), np.nan)
        for j, key in enumerate(keys):
            values = self.columns.get(key)
            if values is not None:
                data[:, j] = np.asarray(values, dtype=np.float64)
        if mask is not None:
            data = data[np.asarray(mask, dtype=bool)]
        return data


@dataclass(frozen=True)
class RankedNode:
    """One candidate cause: the node, the metric it is anomalous in (`None`: not
    anomalous), and a score (higher is likelier; only the order means something)."""

    node: str
    metric: str | None
    score: float


@dataclass(frozen=True)
class RcaSettings:
    """The method's few global constants (see the module docstring for their roles)."""

    threshold: float = 5.0
    """Robust z from which a node counts as anomalous (the PetShop authors' MAD cut, too)."""
    relative_floor: float = 0.05
    """No change smaller than this fraction of the reference level is anomalous."""
    absolute_floor: float = 1e-3
    """Smallest unit of deviation, in the metric's own unit (for series that are always 0)."""
    coverage_weight: float = 0.1
    callee_discount: float = 1.0
    disconnected_penalty: float = 0.1
    worse_when_higher: frozenset[str] = field(
        default_factory=lambda: frozenset({"latency", "errors", "error_rate", "duration"})
    )
    """Metrics for which only an increase is an anomaly."""
    percent_good: frozenset[str] = field(default_factory=lambda: frozenset({"availability"}))
    """Percentages where 100 is perfect: only a decrease is an anomaly (scored as 100 - x)."""
    significance: float = 0.2
    """The verdict's test level: a window is anomalous when normal operation would show rows
    as extreme as its worst in as many rows with a chance below this."""
    verdict_floor: float = 2.0
    """Robust z below which a window is never anomalous."""
    shape_weight: float = 1.0
    """How much a node's shape (its correlation with the target over the window) weighs."""


def split_at(timestamps: Sequence[float], at: float) -> list[bool]:
    """For each row, whether it counts as after `at`: more than half of its period (up to
    the next timestamp; the median spacing for the last row) is at or after `at`."""
    ts = np.asarray(timestamps, dtype=np.float64)
    if len(ts) < 2:
        return [bool(t >= at) for t in ts]
    period = float(np.median(np.diff(ts)))
    return [bool(t + period / 2 > at) for t in ts]


def row_deviations(
    normal: FloatArray,
    before: FloatArray,
    rows: FloatArray,
    keys: Sequence[SeriesKey],
    settings: RcaSettings = RcaSettings(),
) -> FloatArray:
    """The deviation (robust z, >= 0 in the bad direction) of every cell of `rows`, a
    (rows x keys) array; `normal` and `before` are the baseline rows of the same columns."""
    width = len(keys)
    if rows.shape[0] == 0:
        return np.zeros((0, width))
    percent = np.array([k.metric in settings.percent_good for k in keys])
    one_sided = np.array(
        [k.metric in settings.worse_when_higher or k.metric in settings.percent_good for k in keys]
    )
    normal, before, rows = (np.where(percent, 100.0 - a, a) for a in (normal, before, rows))
    baseline = np.vstack([normal, before])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-nan columns: nan, handled below
        centre = np.nanmedian(baseline, axis=0) if baseline.shape[0] else np.full(width, np.nan)
        mad = np.nanmedian(np.abs(baseline - centre), axis=0) * 1.4826
        mean_ad = np.nanmean(np.abs(baseline - centre), axis=0) * 1.2533
        normal_level = np.nanmedian(normal, axis=0) if normal.shape[0] else np.full(width, np.nan)
        recent_level = np.nanmedian(before, axis=0) if before.shape[0] else np.full(width, np.nan)
    recent_level = np.where(np.isnan(recent_level), normal_level, recent_level)
    normal_level = np.where(np.isnan(normal_level), recent_level, normal_level)
    scale = np.maximum(np.nan_to_num(mad), np.nan_to_num(mean_ad))
    scale = np.maximum(scale, settings.relative_floor * np.abs(np.nan_to_num(recent_level)))
    scale = np.maximum(scale, settings.absolute_floor)
    from_recent = (rows - recent_level) / scale
    from_normal = (rows - normal_level) / scale
    same_side = np.sign(from_recent) == np.sign(from_normal)
    smaller = np.minimum(np.abs(from_recent), np.abs(from_normal))
    deviation = np.where(same_side, np.sign(from_recent) * smaller, 0.0)
    deviation = np.where(one_sided, deviation, np.abs(deviation))
    deviation = np.nan_to_num(deviation, nan=0.0, posinf=0.0, neginf=0.0)
    return np.asarray(np.maximum(deviation, 0.0), dtype=np.float64)


def series_anomaly(
    normal: FloatArray,
    before: FloatArray,
    after: FloatArray,
    keys: Sequence[SeriesKey],
    settings: RcaSettings = RcaSettings(),
) -> FloatArray:
    """The anomaly (robust z, >= 0 in the bad direction) of each column of `after`, the
    largest over its rows; `normal` and `before` are the baseline rows of the same columns."""
    if after.shape[0] == 0:
        return np.zeros(len(keys))
    deviations = row_deviations(normal, before, after, keys, settings)
    return np.asarray(deviations.max(axis=0), dtype=np.float64)


def _split_rows(
    abnormal: MetricTable,
    normal: MetricTable | None,
    keys: Sequence[SeriesKey],
    at: float | None,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The (normal, before, after) rows of `keys` (`at` None: the whole window is after)."""
    if at is None:
        after = abnormal.rows(keys)
        before = np.empty((0, len(keys)))
    else:
        after_mask = split_at(abnormal.timestamps, at)
        after = abnormal.rows(keys, after_mask)
        before = abnormal.rows(keys, [not m for m in after_mask])
    base = normal.rows(keys) if normal is not None else np.empty((0, len(keys)))
    return base, before, after


def node_anomaly(
    graph: CallGraph,
    abnormal: MetricTable,
    *,
    metric: str,
    at: float | None,
    normal: MetricTable | None = None,
    settings: RcaSettings = RcaSettings(),
) -> dict[str, float]:
    """Each node's anomaly `z` in `metric` (the largest over its statistics) after `at`
    (`None`: the whole `abnormal` window is after, and `normal` is the whole baseline)."""
    keys = sorted(k for k in abnormal.columns if k.metric == metric)
    base, before, after = _split_rows(abnormal, normal, keys, at)
    z = series_anomaly(base, before, after, keys, settings)
    out = {n: 0.0 for n in graph.nodes}
    for key, value in zip(keys, z, strict=True):
        out[key.node] = max(out.get(key.node, 0.0), float(value))
    return out


MIN_SHAPE_ROWS = 3
"""Fewer rows than this have no shape to compare."""


def node_shape(
    abnormal: MetricTable, *, target: str, metric: str, at: float | None
) -> dict[str, float]:
    """Step 4's `shape` of every node of `abnormal` that has `metric`: the mean, over the
    statistics it shares with `target`, of the correlation of its series with the target's
    over the whole window (see the module docstring). 1 for every node when the window does
    not hold the anomaly's start (`at` None, or no rows before or after it): what is left is
    noise around a level, with no shape to match."""
    after = split_at(abnormal.timestamps, at) if at is not None else []
    nodes = sorted({k.node for k in abnormal.columns if k.metric == metric})
    if all(after) or not any(after):
        return {n: 1.0 for n in nodes}
    statistics = sorted(
        {k.statistic for k in abnormal.columns if k.node == target and k.metric == metric}
    )
    reference: dict[str, FloatArray] = {}
    for statistic in statistics:
        values = np.asarray(
            abnormal.columns[SeriesKey(target, metric, statistic)], dtype=np.float64
        )
        if int(np.sum(~np.isnan(values))) >= MIN_SHAPE_ROWS and float(np.nanstd(values)) > 0:
            reference[statistic] = values
    if not reference:
        return {n: 1.0 for n in nodes}
    out: dict[str, float] = {}
    for node in nodes:
        rs = []
        for statistic, ref in reference.items():
            column = abnormal.columns.get(SeriesKey(node, metric, statistic))
            if column is None:
                continue
            values = np.asarray(column, dtype=np.float64)
            both = ~np.isnan(values) & ~np.isnan(ref)
            if int(both.sum()) < MIN_SHAPE_ROWS:
                continue
            a, b = values[both], ref[both]
            if float(np.std(a)) == 0 or float(np.std(b)) == 0:
                rs.append(0.0)  # it did not move: none of the target's shape
                continue
            rs.append(float(np.corrcoef(a, b)[0, 1]))
        out[node] = float(np.mean(rs)) if rs else 0.0
    out[target] = 1.0
    return out


def rank_by_anomaly(
    graph: CallGraph,
    anomaly: Mapping[str, float],
    *,
    target: str,
    metric: str,
    settings: RcaSettings = RcaSettings(),
    shape: Mapping[str, float] | None = None,
) -> list[RankedNode]:
    """Steps 2 to 4 of the method: blame, explanation and shape over the call graph, given
    each node's anomaly `z` (missing nodes: 0) and `shape` (`node_shape`; None, or a node
    missing from it: 1, no shape to weigh)."""
    nodes = sorted(set(graph.nodes) | set(anomaly) | {target})
    callees, callers = graph.callees(), graph.callers()
    g = {n: math.log1p(max(anomaly.get(n, 0.0), 0.0)) for n in nodes}
    anomalous = {n for n in nodes if anomaly.get(n, 0.0) >= settings.threshold}
    called = _closure(target, callees, lambda _: True)  # the target and all it calls
    ranked: list[tuple[float, float, str, RankedNode]] = []
    for node in nodes:
        explained = 0.0
        if g[node] > 0:
            explained = max(
                (min(1.0, g[k] / g[node]) for k in callees.get(node, ()) if k in anomalous),
                default=0.0,
            )
        own = g[node] * max(0.0, 1.0 - settings.callee_discount * explained)
        dependents = _closure(node, callers, lambda n: n in anomalous) - {node}
        score = own * (1.0 + settings.coverage_weight * sum(g[v] for v in dependents))
        connected = node == target or target in dependents
        if node not in anomalous or not connected:
            score *= settings.disconnected_penalty
        if node not in called:
            score *= settings.disconnected_penalty
        if shape is not None and settings.shape_weight:
            score *= max(shape.get(node, 1.0), 0.0) ** settings.shape_weight
        label = metric if node in anomalous else None
        ranked.append((-score, -g[node], node, RankedNode(node, label, float(score))))
    ranked.sort(key=lambda r: r[:3])
    return [r[3] for r in ranked]


@dataclass(frozen=True)
class Verdict:
    """Whether the target's metric is anomalous after `at` at all (see the module docstring).

    `z` is the target's largest robust z after `at`; `p_value` the chance that normal
    operation shows rows as extreme within as many rows (`None`: `z` is below the floor, or
    the baseline has too few rows to say and `z` alone decides); `window_rows` and
    `baseline_rows` count the rows tested and the baseline's rows."""

    anomalous: bool
    z: float
    p_value: float | None
    window_rows: int
    baseline_rows: int


@dataclass(frozen=True)
class Diagnosis:
    """A verdict and the ranked causes: every node best first, whatever the verdict says
    (a verdict never hides the ranking; see the module docstring)."""

    verdict: Verdict
    causes: list[RankedNode]


def window_verdict(
    abnormal: MetricTable,
    *,
    target: str,
    metric: str,
    at: float | None,
    normal: MetricTable | None = None,
    settings: RcaSettings = RcaSettings(),
) -> Verdict:
    """Is `target`'s `metric` anomalous after `at`? (The module docstring's **Verdict**.)"""
    keys = sorted(k for k in abnormal.columns if k.node == target and k.metric == metric)
    base, before, after = _split_rows(abnormal, normal, keys, at)
    baseline = np.vstack([base, before])
    window_z = _row_max(row_deviations(base, before, after, keys, settings))
    baseline_z = _row_max(row_deviations(base, before, baseline, keys, settings))
    z = float(window_z.max()) if window_z.shape[0] else 0.0
    n, m = baseline_z.shape[0], window_z.shape[0]
    if z < settings.verdict_floor or m == 0:
        return Verdict(False, z, None, m, n)
    if 1.0 / (n + 1) >= settings.significance:  # too few rows to call any row rare
        return Verdict(z >= settings.threshold, z, None, m, n)
    p_value = _exceedance_p_value(window_z, baseline_z, settings.verdict_floor)
    return Verdict(p_value < settings.significance, z, p_value, m, n)


def _exceedance_p_value(window_z: FloatArray, baseline_z: FloatArray, floor: float) -> float:
    """The chance that as many normal rows hold, for some k, k rows as extreme as the
    window's k-th worst (the k whose k-th worst row is at least `floor`; Bonferroni over
    them). One normal row is at least as extreme as `v` with the conformal chance
    `(c + 1) / (n + 1)`, `c` of the `n` baseline rows being so."""
    m, n = window_z.shape[0], baseline_z.shape[0]
    worst = np.sort(window_z)[::-1]
    tested = worst[worst >= floor]
    as_extreme = n - np.searchsorted(np.sort(baseline_z), tested, side="left")
    one_row = (as_extreme + 1.0) / (n + 1.0)
    tails = [_binomial_tail(m, k, float(q)) for k, q in enumerate(one_row, start=1)]
    return min(1.0, min(tails, default=1.0) * max(len(tails), 1))


def _binomial_tail(m: int, k: int, q: float) -> float:
    """P(X >= k) for X ~ Binomial(m, q)."""
    if q >= 1.0 or k <= 0:
        return 1.0
    j = np.arange(k, m + 1, dtype=np.float64)
    log_choose = np.array(
        [math.lgamma(m + 1) - math.lgamma(i + 1) - math.lgamma(m - i + 1) for i in range(k, m + 1)]
    )
    return min(1.0, float(np.exp(log_choose + j * math.log(q) + (m - j) * math.log1p(-q)).sum()))


def diagnose(
    graph: CallGraph,
    abnormal: MetricTable,
    *,
    target: str,
    metric: str,
    at: float | None,
    normal: MetricTable | None = None,
    settings: RcaSettings = RcaSettings(),
) -> Diagnosis:
    """The verdict on `target`'s `metric` after `at` and the ranked causes beside it
    (`rank_root_causes`; the same errors)."""
    causes = rank_root_causes(
        graph, abnormal, target=target, metric=metric, at=at, normal=normal, settings=settings
    )
    verdict = window_verdict(
        abnormal, target=target, metric=metric, at=at, normal=normal, settings=settings
    )
    return Diagnosis(verdict, causes)


def rank_root_causes(
    graph: CallGraph,
    abnormal: MetricTable,
    *,
    target: str,
    metric: str,
    at: float | None,
    normal: MetricTable | None = None,
    settings: RcaSettings = RcaSettings(),
) -> list[RankedNode]:
    """The nodes of `graph` best first as causes of `target`'s anomaly in `metric` after `at`.

    `normal` is a baseline of the same series in normal operation (optional when the
    window has rows before `at`). Raises `Invalid` when the target or the metric is unknown
    or there is no baseline at all.
    """
    if target not in graph.nodes and target not in abnormal.nodes():
        raise Invalid(f"unknown target node {target!r}", field="target")
    if not any(k.metric == metric for k in abnormal.columns):
        known = sorted({k.metric for k in abnormal.columns})
        raise Invalid(f"no series of metric {metric!r} (known: {', '.join(known)})", field="metric")
    if at is None and normal is None:
        raise Invalid("give the anomaly's time or a normal baseline", field="at")
    own_before = 0 if at is None else split_at(abnormal.timestamps, at).count(False)
    if own_before + (len(normal.timestamps) if normal is not None else 0) == 0:
        when = "" if at is None else f" and no rows before {at:g}"
        raise Invalid(f"no baseline: no normal rows{when}", field="at")
    anomaly = node_anomaly(graph, abnormal, metric=metric, at=at, normal=normal, settings=settings)
    shape = node_shape(abnormal, target=target, metric=metric, at=at)
    return rank_by_anomaly(
        graph, anomaly, target=target, metric=metric, settings=settings, shape=shape
    )


def _row_max(deviations: FloatArray) -> FloatArray:
    """Each row's largest deviation over its columns (0 for a row of no columns)."""
    if deviations.shape[1] == 0:
        return np.zeros(deviations.shape[0])
    return np.asarray(deviations.max(axis=1), dtype=np.float64)


def _closure(
    start: str, edges: Mapping[str, Iterable[str]], keep: Callable[[str], bool]
) -> set[str]:
    """`start` and every node reachable from it along `edges` through nodes `keep` accepts."""
    seen = {start}
    stack = [start]
    while stack:
        for nxt in edges.get(stack.pop(), ()):
            if nxt not in seen and keep(nxt):
                seen.add(nxt)
                stack.append(nxt)
    return seen
