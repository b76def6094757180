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
  the settings (threshold x coverage weight x relative floor, a 3 x 3 x 3 grid around
  the defaults) that do best on the other three (top-1 + top-3 hits; ties go to the
  defaults, then grid order) rank its issues; `loso_choices` says what each fold chose.
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
    MetricTable,
    RankedNode,
    RcaSettings,
    SeriesKey,
    node_anomaly,
    rank_by_anomaly,
    rank_root_causes,
)

DATA = Path(
    os.environ.get("SETPOINT_PETSHOP")
    or Path(__file__).parents[1] / ".." / "shared" / "data" / "petshop"
)
GRID = {
    "threshold": (3.0, 5.0, 8.0),
    "coverage_weight": (0.1, 0.3, 1.0),
    "relative_floor": (0.02, 0.05, 0.1),
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


def rank_case(case: Case, settings: RcaSettings) -> list[RankedNode]:
    target = case.issue.target
    return rank_root_causes(
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
        replace(default, threshold=t, coverage_weight=c, relative_floor=r)
        for t, c, r in itertools.product(*GRID.values())
    ]
    return [default] + [s for s in combos if s != default]


def leave_one_scenario_out(cases: Sequence[Case]) -> tuple[list[tuple[bool, bool]], dict[str, Any]]:
    """Hits on each scenario's issues with the settings that did best on the others."""
    options = grid_settings()
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
        for case, anomaly in zip(cases, by_floor[settings.relative_floor], strict=True):
            t = case.issue.target
            ranked = rank_by_anomaly(
                case.graph, anomaly, target=t.node, metric=t.metric, settings=settings
            )
            row.append(hits([r.node for r in ranked], t.root_cause_node))
        table.append(row)
    held: list[tuple[bool, bool]] = []
    choices: dict[str, Any] = {}
    for scenario in sorted({c.scenario for c in cases}):
        train = [i for i, c in enumerate(cases) if c.scenario != scenario]
        test = [i for i, c in enumerate(cases) if c.scenario == scenario]
        best = max(
            range(len(options)),
            key=lambda k: (sum(table[k][i][0] + table[k][i][1] for i in train), -k),
        )
        chosen = options[best]
        choices[scenario] = {name: getattr(chosen, name) for name in GRID}
        held.extend(table[best][i] for i in test)
    return held, choices


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


def run_cli_once(case: Case) -> list[dict[str, Any]]:
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
    parsed: list[dict[str, Any]] = json.loads(out.getvalue())
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
    for case in cases:
        ranked = rank_case(case, default)
        h = hits([r.node for r in ranked], case.issue.target.root_cause_node)
        results.append(h)
        per_scenario.setdefault(case.scenario, []).append(h)
        name = f"{case.scenario}/{case.issue.path.name}"
        log(f"  {name}: top1={h[0]} top3={h[1]} first={ranked[0].node}")
    top1, top3 = fractions(results)
    held, choices = leave_one_scenario_out(cases)
    loso1, loso3 = fractions(held)
    traversal = [hits(traversal_baseline(c), c.issue.target.root_cause_node) for c in cases]
    trav1, trav3 = fractions(traversal)
    cli = run_cli_once(cases[0])
    library = rank_case(cases[0], default)
    same = [r["node"] for r in cli] == [r.node for r in library] and all(
        math.isclose(r["score"], x.score) for r, x in zip(cli, library, strict=True)
    )
    return {
        "petshop_train_top1": round(top1, 4),
        "petshop_train_top3": round(top3, 4),
        "petshop_loso_top1": round(loso1, 4),
        "petshop_loso_top3": round(loso3, 4),
        "traversal_top1": round(trav1, 4),
        "traversal_top3": round(trav3, 4),
        "issues": len(cases),
        "per_scenario": {
            s: {
                "issues": len(r),
                "top1": round(fractions(r)[0], 4),
                "top3": round(fractions(r)[1], 4),
            }
            for s, r in per_scenario.items()
        },
        "loso_choices": choices,
        "settings": {name: getattr(default, name) for name in GRID},
        "cli_matches_library": same,
        "seconds": round(time.perf_counter() - started, 2),
    }


if __name__ == "__main__":
    print(json.dumps(measure()))
