"""Read the PetShop root-cause-analysis dataset's files into `setpoint.insight.rca` data.

The format (amazon-science/petshop-root-cause-analysis, CLeaR 2024):

* `graph.csv`: an adjacency matrix with node names as header row and first column; a
  non-zero cell in row A, column B means A calls B.
* `metrics.csv`: three header rows (node, metric, statistic; their first cells are
  labels), one more row naming the index (`unix_timestamp`), then one row per
  timestamp; an empty cell is a missing value.
* `target.json`: `{"target": {"node", "metric", "agg", "timestamp"},
  "root_cause": {"node", "metric"}}`.

A baseline can be pooled from several tables, each cut at a time: `pool_normal` keeps
the rows of each table before its cut (the pre-anomaly rows of other issues of the same
scenario, for scenarios with no `noissue` recording). This module reads files; the
ranking itself (`rca.py`) does no I/O.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from setpoint.errors import Invalid
from setpoint.insight.rca import CallGraph, MetricTable, SeriesKey, split_at


@dataclass(frozen=True)
class Target:
    """An issue's `target.json`: the anomalous node's metric and statistic and the anomaly's
    time; the labelled root cause (node, and metric or None) when the file has one."""

    node: str
    metric: str
    statistic: str
    timestamp: float
    root_cause_node: str | None = None
    root_cause_metric: str | None = None


@dataclass(frozen=True)
class Issue:
    """One issue directory: where it is, its metrics and its target."""

    path: Path
    metrics: MetricTable
    target: Target


def read_graph(path: Path) -> CallGraph:
    """A `graph.csv` adjacency matrix (row calls column)."""
    rows = _read_csv(path)
    if not rows or len(rows[0]) < 2:
        raise Invalid(f"{path}: empty adjacency matrix", field="graph")
    names = [n.strip() for n in rows[0][1:]]
    calls: set[tuple[str, str]] = set()
    nodes = list(names)
    for line, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        caller = row[0].strip()
        if caller not in nodes:
            nodes.append(caller)
        for callee, cell in zip(names, row[1:], strict=False):
            try:
                weight = float(cell) if cell.strip() else 0.0
            except ValueError:
                raise Invalid(f"{path}:{line}: not a number: {cell!r}", field="graph") from None
            if weight != 0.0:
                calls.add((caller, callee))
    return CallGraph(tuple(nodes), frozenset(calls))


def read_metrics(path: Path) -> MetricTable:
    """A `metrics.csv`: three header rows (node, metric, statistic), then timestamped rows."""
    rows = _read_csv(path)
    if len(rows) < 3:
        raise Invalid(f"{path}: want three header rows (node, metric, statistic)", field="metrics")
    header = rows[:3]
    width = len(header[0])
    if any(len(h) != width for h in header) or width < 2:
        raise Invalid(f"{path}: the three header rows differ in length", field="metrics")
    keys = [SeriesKey(header[0][j], header[1][j], header[2][j]) for j in range(1, width)]
    timestamps: list[float] = []
    values: list[list[float]] = [[] for _ in keys]
    for line, row in enumerate(rows[3:], start=4):
        if not row or not row[0].strip():
            continue
        if line == 4 and not any(c.strip() for c in row[1:]) and not _is_number(row[0]):
            continue  # the row that names the index (`unix_timestamp`)
        stamp = _number(row[0], path, line)
        timestamps.append(stamp)
        for j in range(len(keys)):
            cell = row[j + 1] if j + 1 < len(row) else ""
            values[j].append(_number(cell, path, line) if cell.strip() else math.nan)
    if not timestamps:
        raise Invalid(f"{path}: no timestamped rows", field="metrics")
    order = sorted(range(len(timestamps)), key=timestamps.__getitem__)
    columns: dict[SeriesKey, list[float]] = {}
    for key, column in zip(keys, values, strict=True):
        columns[key] = [column[i] for i in order]
    return MetricTable(tuple(timestamps[i] for i in order), columns)


def read_target(path: Path) -> Target:
    """A `target.json`."""
    try:
        doc: Any = json.loads(path.read_text())
        target = doc["target"]
        cause = doc.get("root_cause") or {}
        return Target(
            node=str(target["node"]),
            metric=str(target["metric"]),
            statistic=str(target.get("agg") or "Average"),
            timestamp=float(target["timestamp"]),
            root_cause_node=cause.get("node"),
            root_cause_metric=cause.get("metric"),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise Invalid(f"{path}: not a PetShop target.json ({exc})", field="target") from None


def read_issue(directory: Path) -> Issue:
    """An issue directory holding `metrics.csv` and `target.json`."""
    return Issue(
        directory,
        read_metrics(directory / "metrics.csv"),
        read_target(directory / "target.json"),
    )


def before(table: MetricTable, cut: float) -> MetricTable:
    """The rows of `table` before `cut` (as `rca.split_at` counts them)."""
    keep = [not after for after in split_at(table.timestamps, cut)]
    stamps = tuple(t for t, k in zip(table.timestamps, keep, strict=True) if k)
    columns = {
        key: [v for v, k in zip(values, keep, strict=True) if k]
        for key, values in table.columns.items()
    }
    return MetricTable(stamps, columns)


def pool_normal(parts: Iterable[tuple[MetricTable, float | None]]) -> MetricTable:
    """One baseline from several tables, each cut at its time (`None`: every row). Series
    missing from a table are missing (`nan`) in its rows. Rows keep their order of parts;
    their timestamps are not used by the ranking."""
    pieces = [before(t, cut) if cut is not None else t for t, cut in parts]
    keys = sorted({k for p in pieces for k in p.columns})
    columns: dict[SeriesKey, list[float]] = {k: [] for k in keys}
    stamps: list[float] = []
    for piece in pieces:
        n = len(piece.timestamps)
        stamps.extend(piece.timestamps)
        for key in keys:
            columns[key].extend(piece.columns.get(key, [math.nan] * n))
    order = sorted(range(len(stamps)), key=stamps.__getitem__)
    return MetricTable(
        tuple(stamps[i] for i in order), {k: [v[i] for i in order] for k, v in columns.items()}
    )


def normal_part(path: Path) -> tuple[MetricTable, float | None]:
    """A `--normal` argument: `FILE` or `FILE@TIME`. Only the rows before TIME count; a
    FILE with a `target.json` beside it (another issue's window) is cut at that target's
    timestamp, any other FILE (a `noissue` recording) counts whole."""
    text = str(path)
    if not path.exists() and "@" in text:
        name, _, when = text.rpartition("@")
        try:
            cut = float(when)
        except ValueError:
            raise Invalid(f"{text}: want FILE or FILE@TIME", field="normal") from None
        return read_metrics(Path(name)), cut
    table = read_metrics(path)
    beside = path.parent / "target.json"
    return table, (read_target(beside).timestamp if beside.is_file() else None)


def scenario_issues(scenario: Path, split: str = "train") -> list[Issue]:
    """The issues of one scenario's split, in the order of their number."""
    folder = scenario / split
    dirs = [d for d in folder.iterdir() if d.is_dir() and (d / "target.json").is_file()]
    return [read_issue(d) for d in sorted(dirs, key=_issue_number)]


def scenario_normal(scenario: Path, issue: Issue, others: Sequence[Issue]) -> MetricTable:
    """The baseline the dataset offers for `issue`: the scenario's `noissue` recording when
    there is one, else the rows before their own anomaly of the scenario's other issues."""
    recording = scenario / "noissue" / "metrics.csv"
    if recording.is_file():
        return read_metrics(recording)
    return pool_normal((o.metrics, o.target.timestamp) for o in others if o.path != issue.path)


def _issue_number(directory: Path) -> tuple[int, str]:
    tail = directory.name.rpartition("_")[2]
    return (int(tail), directory.name) if tail.isdigit() else (1 << 30, directory.name)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _number(text: str, path: Path, line: int) -> float:
    try:
        return float(text)
    except ValueError:
        raise Invalid(f"{path}:{line}: not a number: {text!r}", field="metrics") from None


def _read_csv(path: Path) -> list[list[str]]:
    try:
        with path.open(newline="") as f:
            return list(csv.reader(f))
    except FileNotFoundError:
        raise Invalid(f"{path}: no such file", field=None) from None
    except IsADirectoryError:
        raise Invalid(f"{path}: is a directory, not a CSV file", field=None) from None
