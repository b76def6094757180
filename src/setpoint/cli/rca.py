"""`setpoint rca --graph G.csv --abnormal A.csv [--normal N.csv ...] --target NODE --metric M
[--statistic S] [--at TS] [--ranking] [-o json]`: rank the likely root causes of a metric anomaly.

The files are in the PetShop dataset's format (`setpoint.insight.petshop`). The
baseline is every `--normal` file (`FILE@TIME` or a FILE with a `target.json` beside it
counts only its rows before that time), plus the rows of `--abnormal` before `--at`;
without `--normal` those rows alone are the baseline.

First comes a verdict: is TARGET's METRIC anomalous after `--at` at all
(`setpoint.insight.rca.window_verdict`)? The verdict never hides the ranking. `-o json`
prints one object: `{"verdict": "anomalous" | "normal", "z", "p_value", "window_rows",
"baseline_rows", "causes": [{"node", "metric", "score"}, ...]}`, the causes best first,
every node of the graph, whatever the verdict. The default output's first line is
`verdict: ...` with its reason, then a table of the best ten causes; for a window that
looks normal the table is shown with `--ranking` (and a line says so). Reads files and
prints; the analysis is `setpoint.insight.rca`, which needs numpy (the extra
`setpoint[rca]`; without it the command says how to install it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from setpoint.cli import render
from setpoint.cli.context import Context
from setpoint.errors import Error, Invalid

if TYPE_CHECKING:
    from setpoint.insight.rca import Diagnosis, Verdict

TABLE_ROWS = 10
NEEDS_NUMPY = "setpoint rca needs numpy: pip install 'setpoint[rca]'"


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "rca",
        parents=parents,
        description="Rank the nodes of a call graph most likely to have caused TARGET's "
        "anomaly in METRIC, from per-node metric series (the PetShop dataset's CSV format).",
    )
    p.add_argument("--graph", required=True, type=Path, metavar="G.csv", help="call graph")
    p.add_argument(
        "--abnormal", required=True, type=Path, metavar="A.csv", help="metrics around the anomaly"
    )
    p.add_argument(
        "--normal",
        action="append",
        default=[],
        type=Path,
        metavar="N.csv[@TIME]",
        help="metrics of normal operation (repeatable; with @TIME, or a target.json beside "
        "the file, only its rows before that time)",
    )
    p.add_argument("--target", required=True, metavar="NODE", help="the anomalous node")
    p.add_argument("--metric", required=True, metavar="METRIC", help="e.g. latency")
    p.add_argument(
        "--statistic",
        default="Average",
        metavar="STAT",
        help="the target's statistic (default Average); every statistic of METRIC is weighed",
    )
    p.add_argument("--at", type=float, metavar="TS", help="the anomaly's time (unix seconds)")
    p.add_argument(
        "--ranking",
        action="store_true",
        help="show the ranked causes even when the window looks normal",
    )
    p.add_argument("-o", "--output", choices=["table", "json"], default="table")
    p.set_defaults(run=run)


def diagnose_files(args: argparse.Namespace) -> Diagnosis:
    """Read the files the arguments name, judge and rank (what `run` prints)."""
    # numpy is imported here, not with the CLI: every other verb starts faster, and runs
    # without it (it is the optional extra `setpoint[rca]`).
    try:
        from setpoint.insight import petshop
        from setpoint.insight.rca import diagnose
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "numpy":
            raise
        raise Error(NEEDS_NUMPY) from None

    graph = petshop.read_graph(args.graph)
    abnormal = petshop.read_metrics(args.abnormal)
    normal = (
        petshop.pool_normal(petshop.normal_part(p) for p in args.normal) if args.normal else None
    )
    if args.target not in graph.nodes:
        raise Invalid(f"node {args.target!r} is not in {args.graph}", field="--target")
    if not any(k.metric == args.metric for k in abnormal.columns):
        known = ", ".join(sorted({k.metric for k in abnormal.columns}))
        message = f"no series of {args.metric!r} in {args.abnormal} (known: {known})"
        raise Invalid(message, field="--metric")
    if not any(
        k.node == args.target and k.metric == args.metric and k.statistic == args.statistic
        for k in abnormal.columns
    ):
        series = f"{args.target}/{args.metric}/{args.statistic}"
        raise Invalid(f"{args.abnormal} has no series {series}", field="--statistic")
    try:
        return diagnose(
            graph, abnormal, target=args.target, metric=args.metric, at=args.at, normal=normal
        )
    except Invalid as exc:
        if exc.field != "at" or args.normal:
            raise
        if args.at is None:
            raise Invalid("give --at or --normal", field="--at") from None
        message = f"no rows of {args.abnormal} before {args.at:g}: give --normal"
        raise Invalid(message, field="--at") from None


async def run(ctx: Context, args: argparse.Namespace) -> int:
    diagnosis = diagnose_files(args)
    verdict, ranked = diagnosis.verdict, diagnosis.causes
    if args.output == "json":
        doc = {
            "verdict": "anomalous" if verdict.anomalous else "normal",
            "z": verdict.z,
            "p_value": verdict.p_value,
            "window_rows": verdict.window_rows,
            "baseline_rows": verdict.baseline_rows,
            "causes": [{"node": r.node, "metric": r.metric, "score": r.score} for r in ranked],
        }
        print(json.dumps(doc))
        return 0
    print(verdict_line(verdict, f"{args.target} {args.metric}"))
    if not verdict.anomalous and not args.ranking:
        print("the window looks normal: --ranking shows the causes ranked anyway")
        return 0
    rows = [("RANK", "NODE", "METRIC", "SCORE")] + [
        (str(i), r.node, r.metric or "-", f"{r.score:.3g}")
        for i, r in enumerate(ranked[:TABLE_ROWS], start=1)
    ]
    for line in render.format_table(rows):
        print(line)
    if len(ranked) > TABLE_ROWS:
        print(f"({len(ranked) - TABLE_ROWS} more; -o json lists every node)", file=sys.stderr)
    return 0


def verdict_line(verdict: Verdict, series: str) -> str:
    """`verdict: anomalous (...)` or `verdict: normal (...)`, the reason in words."""
    z = f"worst z {verdict.z:.3g} over {verdict.window_rows} rows"
    if verdict.p_value is None:
        short = f"baseline of {verdict.baseline_rows} rows too short for a p-value"
        if verdict.anomalous:
            return f"verdict: anomalous ({series}: {z}; {short}, the z threshold decides)"
        if verdict.window_rows == 0:
            return f"verdict: normal ({series}: no rows after the anomaly's time)"
        return f"verdict: normal ({series}: {z}, no row beyond the threshold)"
    chance = f"p {verdict.p_value:.2g} against {verdict.baseline_rows} normal rows"
    if verdict.anomalous:
        return f"verdict: anomalous ({series}: {z}, {chance})"
    return f"verdict: normal ({series}: {z}, no rarer than normal operation: {chance})"
