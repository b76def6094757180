"""Metric root-cause analysis on the PetShop dataset's training split: how often
`setpoint rca` ranks the labelled root cause first, and in its top three.

Run with `./dev bench insight_petshop` (a few seconds). Progress goes to stderr; the
last stdout line is one JSON object. `measure()` returns the same figures (for
`bench/insight.py`).

Data: `../shared/data/petshop/` next to the repository (or `$SETPOINT_PETSHOP`),
four scenarios of the training split (CC-BY-4.0, amazon-science/
petshop-root-cause-analysis). Every issue is ranked the way the CLI ranks it: the
scenario's `graph.csv`, the issue's `metrics.csv`, its target's node, metric and
timestamp (`--at`), and as `--normal` the scenario's `noissue/metrics.csv`, or, for the
temporal scenarios that have none, the rows before their own anomaly of the scenario's
other issues. The CLI itself runs once on the first issue (`cli_matches_library`).

Figures:

* `petshop_train_top1`, `petshop_train_top3`: fraction of the issues (all scenarios)
  whose labelled root-cause node is ranked first / in the top three, with the default
  settings (targets 0.6 / 0.85); `per_scenario` splits them.
* `petshop_loso_top1`, `petshop_loso_top3`: leave one scenario out. For each scenario,
  the settings (threshold x coverage weight x relative floor x shape weight, a 3 x 3 x 3
  x 3 grid around the defaults; a shape weight of 0 is the method without its step 4)
  that do best on the other three (top-1 + top-3 hits; ties go to the defaults, then grid
  order) rank its issues; `loso_choices` says what each fold chose, and
  `loso_per_scenario` how each held-out scenario fared (`loso_worst_scenario` the worst).
* `traversal_top1`, `traversal_top3`: the dataset authors' anomaly-traversal baseline
  (their `baseline_anomaly_traversal.py`, reimplemented without dowhy/networkx) on the
  same issues and baselines: per node, |x - median| / MAD of the target's metric and
  statistic over the normal rows (no model with fewer than 10 normal values), anomalous
  above 5, at the third row of the window or the first later one where the target is
  anomalous; root causes are anomalous nodes none of whose callees is anomalous, with an
  all-anomalous call path from the target, scored by the largest sum of scores along
  such a path (a MAD of 0 makes a score infinite, as in dowhy; ties go by name). With
  fewer than 10 pooled normal rows (the temporal scenarios) it finds nothing, so its
  figures here differ from the authors' 0.45 / 0.75.

* `petshop_normal_specificity`: the PetShop authors' specificity (their `code/rca_task.py`,
  `evaluate_specificity`): each scenario's `noissue` recording is cut at 50%, 60%, ... of
  its rows; the rows before are the normal baseline, the rows after the window (no
  `--at`), and for every target (node, metric, statistic) of the scenario's issues the
  method is right when its verdict says normal (the authors count a method right when it
  returns no root cause; `rca` ranks whatever the verdict, so its verdict is what is
  judged). The mean over (scenario, target) pairs; `normal_specificity_per_target` splits
  it. Only low_traffic and high_traffic have a `noissue` recording in the training split.
* `issue_sensitivity`: the fraction of issues whose verdict is anomalous. The top-1/top-3
  figures above count the ranking whatever the verdict: a verdict never hides it.
* `verdict_loso_sensitivity`, `verdict_loso_specificity`, `verdict_loso_per_scenario`: the
  verdict's two constants (`significance` x `verdict_floor`, `VERDICT_GRID`) chosen by
  `verdict_choice` (the most sensitive pair whose specificity is at least 0.8, the most
  lenient among equals) on the other three scenarios, then measured on the held-out one;
  `verdict_rule_on_all` is the rule's choice on all four, which is the default.
* `petshop_missed`: the figures below their targets (`TARGETS`: LOSO top-1 0.8 and top-3
  0.95, specificity 0.8, sensitivity 0.98).

Nothing here passes or fails; the training split has one root cause in every issue, so
these figures say little about other causes (the held-out split is measured elsewhere).
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from setpoint.cli.main import main as cli_main
from setpoint.insight import petshop
from setpoint.insight.rca import (
    CallGraph,
    Diagnosis,
    MetricTable,
    RcaSettings,
    SeriesKey,
    diagnose,
    node_anomaly,
    node_shape,
    rank_by_anomaly,
    window_verdict,
)

DATA = Path(
    os.environ.get("SETPOINT_PETSHOP")
    or Path(__file__).parents[1] / ".." / "shared" / "data" / "petshop"
)
GRID = {
    "threshold": (3.0, 5.0, 8.0),
    "coverage_weight": (0.1, 0.3, 1.0),
    "relative_floor": (0.02, 0.05, 0.1),
    "shape_weight": (0.0, 1.0, 2.0),
}
VERDICT_GRID = {"significance": (0.01, 0.05, 0.1, 0.2), "verdict_floor": (2.0, 3.0)}
TARGETS = {
    "petshop_loso_top1": 0.8,
    "petshop_loso_top3": 0.95,
    "petshop_normal_specificity": 0.8,
    "issue_sensitivity": 0.98,
}


@dataclass(frozen=True)
class Case:
    scenario: str
    issue: petshop.Issue
    graph: CallGraph
    normal: MetricTable
    normal_path: list[str]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_cases(data: Path) -> list[Case]:
    cases: list[Case] = []
    for scenario in sorted(p for p in data.iterdir() if (p / "graph.csv").is_file()):
        graph = petshop.read_graph(scenario / "graph.csv")
        issues = petshop.scenario_issues(scenario)
        for issue in issues:
            normal = petshop.scenario_normal(scenario, issue, issues)
            recording = scenario / "noissue" / "metrics.csv"
            paths = (
                [str(recording)]
                if recording.is_file()
                else [str(o.path / "metrics.csv") for o in issues if o.path != issue.path]
            )
            cases.append(Case(scenario.name, issue, graph, normal, paths))
    return cases


def hits(ranked: Sequence[str], truth: str | None) -> tuple[bool, bool]:
    return (truth in ranked[:1], truth in ranked[:3])


def rank_case(case: Case, settings: RcaSettings) -> Diagnosis:
    target = case.issue.target
    return diagnose(
        case.graph,
        case.issue.metrics,
        target=target.node,
        metric=target.metric,
        at=target.timestamp,
        normal=case.normal,
        settings=settings,
    )


def fractions(results: Sequence[tuple[bool, bool]]) -> tuple[float, float]:
    n = len(results) or 1
    return (sum(r[0] for r in results) / n, sum(r[1] for r in results) / n)


def grid_settings() -> list[RcaSettings]:
    default = RcaSettings()
    combos = [
        replace(default, threshold=t, coverage_weight=c, relative_floor=r, shape_weight=w)
        for t, c, r, w in itertools.product(*GRID.values())
    ]
    return [default] + [s for s in combos if s != default]


def leave_one_scenario_out(
    cases: Sequence[Case],
) -> tuple[list[tuple[bool, bool]], dict[str, Any], dict[str, Any]]:
    """Hits on each scenario's issues with the settings that did best on the others; what
    each fold chose; and each held-out scenario's figures."""
    options = grid_settings()
    shapes = [
        node_shape(
            c.issue.metrics, target=c.issue.target.node, metric=c.issue.target.metric,
            at=c.issue.target.timestamp,
        )
        for c in cases
    ]  # fmt: skip
    by_floor: dict[float, list[dict[str, float]]] = {}
    for floor in GRID["relative_floor"]:  # anomalies depend only on the floor: compute once
        settings = replace(RcaSettings(), relative_floor=floor)
        by_floor[floor] = [
            node_anomaly(
                c.graph,
                c.issue.metrics,
                metric=c.issue.target.metric,
                at=c.issue.target.timestamp,
                normal=c.normal,
                settings=settings,
            )
            for c in cases
        ]
    table: list[list[tuple[bool, bool]]] = []
    for settings in options:
        row = []
        for case, anomaly, shape in zip(
            cases, by_floor[settings.relative_floor], shapes, strict=True
        ):
            t = case.issue.target
            ranked = rank_by_anomaly(
                case.graph, anomaly, target=t.node, metric=t.metric, settings=settings, shape=shape
            )
            row.append(hits([r.node for r in ranked], t.root_cause_node))
        table.append(row)
    held: list[tuple[bool, bool]] = []
    choices: dict[str, Any] = {}
    per_scenario: dict[str, Any] = {}
    for scenario in sorted({c.scenario for c in cases}):
        train = [i for i, c in enumerate(cases) if c.scenario != scenario]
        test = [i for i, c in enumerate(cases) if c.scenario == scenario]
        best = max(
            range(len(options)),
            key=lambda k: (sum(table[k][i][0] + table[k][i][1] for i in train), -k),
        )
        chosen = options[best]
        choices[scenario] = {name: getattr(chosen, name) for name in GRID}
        mine = [table[best][i] for i in test]
        held.extend(mine)
        top1, top3 = fractions(mine)
        per_scenario[scenario] = {
            "issues": len(mine),
            "top1": round(top1, 4),
            "top3": round(top3, 4),
        }
    return held, choices, per_scenario


@dataclass(frozen=True)
class NormalFold:
    """One of the authors' specificity folds: a `noissue` recording cut at `split`."""

    scenario: str
    target: tuple[str, str, str]
    graph: CallGraph
    normal: MetricTable
    window: MetricTable


def rows_between(table: MetricTable, start: int, stop: int) -> MetricTable:
    return MetricTable(
        table.timestamps[start:stop],
        {key: list(values[start:stop]) for key, values in table.columns.items()},
    )


def normal_folds(data: Path, cases: Sequence[Case]) -> list[NormalFold]:
    """The authors' folds (`evaluate_specificity`): for each target of a scenario's issues,
    the `noissue` rows cut at range(n // 2, n - 3, int(n * 0.1))."""
    folds: list[NormalFold] = []
    for scenario in sorted({c.scenario for c in cases}):
        recording = data / scenario / "noissue" / "metrics.csv"
        if not recording.is_file():
            continue
        table = petshop.read_metrics(recording)
        graph = next(c.graph for c in cases if c.scenario == scenario)
        targets = sorted(
            {
                (c.issue.target.node, c.issue.target.metric, c.issue.target.statistic)
                for c in cases
                if c.scenario == scenario
            }
        )
        n = len(table.timestamps)
        for target in targets:
            for split in range(n // 2, n - 3, int(n * 0.1)):
                folds.append(
                    NormalFold(
                        scenario,
                        target,
                        graph,
                        rows_between(table, 0, split),
                        rows_between(table, split, n),
                    )
                )
    return folds


def fold_is_normal(fold: NormalFold, settings: RcaSettings) -> bool:
    """Right in the authors' sense: the verdict says the fold is normal (`rca` still ranks,
    on request: a verdict never hides the ranking)."""
    node, metric, _ = fold.target
    verdict = window_verdict(
        fold.window, target=node, metric=metric, at=None, normal=fold.normal, settings=settings
    )
    return not verdict.anomalous


def specificity(folds: Sequence[NormalFold], right: Sequence[bool]) -> dict[str, float]:
    """The mean of `right` per (scenario, target), as the authors tabulate it."""
    groups: dict[str, list[bool]] = {}
    for fold, ok in zip(folds, right, strict=True):
        groups.setdefault(f"{fold.scenario}/{'/'.join(fold.target)}", []).append(ok)
    return {name: round(sum(oks) / len(oks), 4) for name, oks in groups.items()}


def verdict_options() -> list[RcaSettings]:
    """The verdict's grid, the defaults first."""
    default = RcaSettings()
    combos = (
        replace(default, significance=a, verdict_floor=f)
        for a, f in itertools.product(*VERDICT_GRID.values())
    )
    return [default] + [s for s in combos if s != default]


def verdict_choice(issue_ok: Sequence[Sequence[bool]], fold_ok: Sequence[Sequence[bool]]) -> int:
    """The rule that set the defaults: of the options (rows of per-issue "called anomalous"
    and per-fold "called normal"), the most sensitive whose specificity is at least
    `TARGETS["petshop_normal_specificity"]`; among equals the most lenient (the highest
    level, then the lowest floor), a miss costing more than a false alarm when the
    ranking is shown either way."""
    options = verdict_options()
    floor = TARGETS["petshop_normal_specificity"]

    def key(k: int) -> tuple[bool, float, float, float]:
        sensitivity = sum(issue_ok[k]) / max(len(issue_ok[k]), 1)
        specific = sum(fold_ok[k]) / max(len(fold_ok[k]), 1)
        o = options[k]
        return (specific >= floor, sensitivity, o.significance, -o.verdict_floor)

    return max(range(len(options)), key=key)


def split(
    rows: Sequence[Sequence[bool]], of: Sequence[Any], scenario: str, held: bool
) -> list[list[bool]]:
    """Each row's entries for the cases or folds `of` of `scenario` (held) or of the others."""
    return [
        [ok for x, ok in zip(of, r, strict=True) if (x.scenario == scenario) == held] for r in rows
    ]


def verdict_loso(cases: Sequence[Case], folds: Sequence[NormalFold]) -> dict[str, Any]:
    """The verdict's constants chosen by `verdict_choice` on three scenarios, measured on the
    fourth; and the choice on all four (which the defaults must be)."""
    options = verdict_options()
    issue_ok = [
        [
            window_verdict(
                c.issue.metrics,
                target=c.issue.target.node,
                metric=c.issue.target.metric,
                at=c.issue.target.timestamp,
                normal=c.normal,
                settings=o,
            ).anomalous
            for c in cases
        ]
        for o in options
    ]
    fold_ok = [[fold_is_normal(f, o) for f in folds] for o in options]
    held_issue: list[bool] = []
    held_fold: list[bool] = []
    per_scenario: dict[str, Any] = {}
    for scenario in sorted({c.scenario for c in cases}):
        best = verdict_choice(
            split(issue_ok, cases, scenario, False), split(fold_ok, folds, scenario, False)
        )
        issues = split(issue_ok, cases, scenario, True)[best]
        normal = split(fold_ok, folds, scenario, True)[best]
        held_issue += issues
        held_fold += normal
        per_scenario[scenario] = {
            **{name: getattr(options[best], name) for name in VERDICT_GRID},
            "issue_sensitivity": round(sum(issues) / len(issues), 4) if issues else None,
            "normal_specificity": round(sum(normal) / len(normal), 4) if normal else None,
        }
    chosen = options[verdict_choice(issue_ok, fold_ok)]
    return {
        "verdict_loso_specificity": round(sum(held_fold) / max(len(held_fold), 1), 4),
        "verdict_loso_sensitivity": round(sum(held_issue) / max(len(held_issue), 1), 4),
        "verdict_loso_per_scenario": per_scenario,
        "verdict_rule_on_all": {name: getattr(chosen, name) for name in VERDICT_GRID},
    }


def traversal_baseline(case: Case) -> list[str]:
    """The authors' anomaly traversal (see the module docstring), best first."""
    target = case.issue.target
    nodes = sorted(set(case.graph.nodes))
    keys = [SeriesKey(n, target.metric, target.statistic) for n in nodes]
    normal = case.normal.rows(keys)
    window = case.issue.metrics.rows(keys)
    scores = np.zeros_like(window)
    anomalous = np.zeros(window.shape, dtype=bool)
    for j in range(len(keys)):
        train = normal[:, j][~np.isnan(normal[:, j])]
        if train.shape[0] < 10:
            continue
        values = window[:, j]
        if np.std(train) == 0:
            s = np.abs(values - np.mean(train))
            threshold = 0.0
        else:
            median = np.median(train)
            mad = np.median(np.abs(train - median))
            s = np.abs(values - median) / mad if mad > 0 else np.where(values == median, 0, np.inf)
            threshold = 5.0
        s = np.nan_to_num(s, nan=0.0)
        scores[:, j] = s
        anomalous[:, j] = s > threshold
    t = nodes.index(target.node)
    row = min(2, window.shape[0] - 1)
    for i in range(row, window.shape[0]):
        if anomalous[i, t]:
            row = i
            break
    if not anomalous[row, t]:
        return []
    bad = {n: float(scores[row, j]) for j, n in enumerate(nodes) if anomalous[row, j]}
    callees = case.graph.callees()
    roots = [n for n in bad if not any(k in bad for k in callees.get(n, ()))]
    best: dict[str, float] = {}

    def walk(node: str, path: list[str]) -> None:  # call paths target -> ... -> root
        if node in roots:
            total = sum(bad[p] for p in path)
            best[node] = max(best.get(node, -math.inf), total)
        for k in callees.get(node, ()):
            if k in bad and k not in path:
                walk(k, [*path, k])

    if target.node in bad:
        walk(target.node, [target.node])
    return [n for n, _ in sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))]


def run_cli_once(case: Case) -> dict[str, Any]:
    """`setpoint rca ... -o json` on one case, through the CLI's own entry point."""
    t = case.issue.target
    scenario = DATA / case.scenario
    argv = ["rca", "--graph", str(scenario / "graph.csv")]
    argv += ["--abnormal", str(case.issue.path / "metrics.csv")]
    for path in case.normal_path:
        argv += ["--normal", path]
    argv += ["--target", t.node, "--metric", t.metric, "--statistic", t.statistic]
    argv += ["--at", repr(t.timestamp), "-o", "json"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli_main(argv)
    if status != 0:
        raise RuntimeError(f"setpoint {' '.join(argv)} exited {status}")
    parsed: dict[str, Any] = json.loads(out.getvalue())
    return parsed


def measure() -> dict[str, Any]:
    """The figures described in the module docstring."""
    data = DATA.resolve()
    if not data.is_dir():
        return {"error": f"no PetShop data at {data}", "not_measured": True}
    started = time.perf_counter()
    cases = load_cases(data)
    log(f"insight_petshop: {len(cases)} issues loaded from {data}")
    default = RcaSettings()
    results = []
    per_scenario: dict[str, list[tuple[bool, bool]]] = {}
    anomalous = []
    for case in cases:
        diagnosis = rank_case(case, default)
        ranked = diagnosis.causes
        anomalous.append(diagnosis.verdict.anomalous)
        h = hits([r.node for r in ranked], case.issue.target.root_cause_node)
        results.append(h)
        per_scenario.setdefault(case.scenario, []).append(h)
        name = f"{case.scenario}/{case.issue.path.name}"
        verdict = "anomalous" if diagnosis.verdict.anomalous else "normal"
        log(f"  {name}: top1={h[0]} top3={h[1]} first={ranked[0].node} verdict={verdict}")
    top1, top3 = fractions(results)
    held, choices, loso_per_scenario = leave_one_scenario_out(cases)
    loso1, loso3 = fractions(held)
    traversal = [hits(traversal_baseline(c), c.issue.target.root_cause_node) for c in cases]
    trav1, trav3 = fractions(traversal)
    folds = normal_folds(data, cases)
    per_target = specificity(folds, [fold_is_normal(f, default) for f in folds])
    log(f"insight_petshop: specificity on {len(folds)} normal folds: {per_target}")
    loso_verdict = verdict_loso(cases, folds)
    cli = run_cli_once(cases[0])
    library = rank_case(cases[0], default).causes
    same = [r["node"] for r in cli["causes"]] == [r.node for r in library] and all(
        math.isclose(r["score"], x.score) for r, x in zip(cli["causes"], library, strict=True)
    )
    figures: dict[str, Any] = {
        "petshop_train_top1": round(top1, 4),
        "petshop_train_top3": round(top3, 4),
        "petshop_loso_top1": round(loso1, 4),
        "petshop_loso_top3": round(loso3, 4),
        "traversal_top1": round(trav1, 4),
        "traversal_top3": round(trav3, 4),
        "petshop_normal_specificity": round(sum(per_target.values()) / max(len(per_target), 1), 4),
        "issue_sensitivity": round(sum(anomalous) / len(anomalous), 4),
        **loso_verdict,
        "normal_specificity_per_target": per_target,
        "normal_folds": len(folds),
        "issues": len(cases),
        "per_scenario": {
            s: {
                "issues": len(r),
                "top1": round(fractions(r)[0], 4),
                "top3": round(fractions(r)[1], 4),
            }
            for s, r in per_scenario.items()
        },
        "loso_per_scenario": loso_per_scenario,
        "loso_worst_scenario": min(
            ({"scenario": k, **v} for k, v in loso_per_scenario.items()),
            key=lambda f: (f["top1"], f["top3"]),
        ),
        "loso_choices": choices,
        "settings": {name: getattr(default, name) for name in GRID},
        "cli_matches_library": same,
        "seconds": round(time.perf_counter() - started, 2),
    }
    figures["petshop_missed"] = [k for k, v in TARGETS.items() if figures[k] < v]
    return figures


if __name__ == "__main__":
    print(json.dumps(measure()))
