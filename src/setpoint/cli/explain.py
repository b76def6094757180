"""`setpoint explain KIND/NAME [--at TIME] [--timeline FILE.jsonl] [-o table|wide|json]`: the
probable causes of an object's failure, best first, each with its score and a one-line reason.

Without `--timeline` the entries come from the timeline `setpoint up` records beside the
store (`setpoint.insight.timeline`); with it, from a JSONL file (one entry per line, as
`setpoint timeline -o jsonl` writes). KIND is matched as kubectl does (`deployment`,
`Deployment`, `deploy`); a kind no module registered still matches the timeline's kinds by
name, case-insensitively. The failure is the object's latest transition, at or before
`--at` when given, to Ready=False, Stalled=True or a crash loop. The table's WHEN is an
entry's time from the failure (`-10s` before it, `+5s` after: a root blocker's evidence
may come later than the start of the wait it explains). Its REASON (then
ENTRY) is cut to the terminal's width (`COLUMNS`, else the terminal's; nothing is cut in a
pipe);
`-o wide` shows all of it; `-o json` prints a JSON list, best first, of
{"entry": <timeline entry>, "score": float, "reason": str, "path": [KIND/NAME, ...],
"hops": [{"from", "to", "relation", "entry"}], "verified": bool}
(`path`: the chain from the object to the entry's object, a root blocker's or the shortest
along dependency, ownership and `uses` edges; empty when they are not connected. `hops`:
each step of it with the edge entry that shows it, `relation` "unknown" and `entry` null
when no entry does; `verified`: every step is shown). The table's PATH is that path in
names (`web > migrate > db`), `?` before a step no entry shows, `unknown` when the entry's
object is not connected, `-` for the object's own entries. The ranking itself is
`setpoint.insight.ranking` (pure), the path `setpoint.insight.paths`.

Honest answers: an object the timeline does not show (never, or deleted) is an error (exit
1); one that is Ready and not failing gets "nothing is wrong" (exit 0); when no candidate
scores `RankingSettings.floor` or more, it says the cause is not known. Those print an empty
JSON list with `-o json` (and the sentence on stderr). An object that is not Ready and was
never reported failing (still starting, waiting) is explained from its creation on.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import textwrap
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from setpoint.cli import render
from setpoint.cli.context import Context
from setpoint.cli.timeline import recorded_timeline
from setpoint.errors import Invalid, NotFound, UnknownKind
from setpoint.insight.entries import (
    ObjectRef,
    pick_target,
    read_timeline,
    resolve_kind,
    split_object_arg,
)
from setpoint.insight.index import TimelineIndex
from setpoint.insight.ranking import (
    Candidate,
    RankingSettings,
    confident_causes,
    failure_to_explain,
    target_state,
)

LIVE_WINDOW_S = 7 * 86400.0
"""How far back the live form reads the recorded timeline (edges: all of them)."""
LIVE_MAX_ENTRIES = 1_000_000
GIVE_WAY = ((5, 20), (4, 16), (5, 10), (3, 24))
"""How the table fits a narrow terminal: REASON is cut down to 20 columns, then PATH to 16,
REASON to 10, then ENTRY to 24."""


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "explain",
        parents=parents,
        description="Rank what most probably caused an object's failure (a condition going "
        "False, Stalled, a crash loop): changes and symptoms before it, scored by time, "
        "dependency/ownership distance, past co-occurrence and novelty, each with a reason.",
    )
    p.add_argument("object", metavar="KIND/NAME", help="e.g. deployment/web")
    p.add_argument(
        "--at",
        metavar="TIME",
        help="explain the failure at or before TIME (seconds since the epoch, or ISO 8601 "
        "such as 2026-11-30T10:00:05Z, UTC unless it says); default: the latest one",
    )
    p.add_argument(
        "--timeline",
        metavar="FILE",
        help="read entries from this JSONL file instead of the recorded timeline",
    )
    p.add_argument(
        "--limit", type=int, default=20, metavar="N", help="show the N best (0: all; default 20)"
    )
    p.add_argument(
        "-o",
        "--output",
        choices=("table", "wide", "json"),
        default="table",
        help="table (default): REASON cut to the terminal's width; wide: all of it; json",
    )
    p.set_defaults(run=run)


def parse_time(text: str) -> float:
    """`1700000000.5` or an ISO 8601 time (naive means UTC) -> seconds since the epoch."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise Invalid(
            f"{text!r}: want seconds since the epoch or an ISO 8601 time", field="--at"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


async def run(ctx: Context, args: argparse.Namespace) -> int:
    if args.limit < 0:
        raise Invalid("want 0 (all) or more", field="--limit")
    at = parse_time(args.at) if args.at is not None else None
    typed_kind, name = split_object_arg(args.object)
    entries = read_timeline(args.timeline) if args.timeline else await _recorded(ctx, at)
    index = TimelineIndex.build(entries)
    kind = resolve_kind(typed_kind, ctx.registry, index.kinds)
    namespace = ctx.namespace if ctx.namespace_explicit else None
    target = pick_target(kind, name, namespace, index.objects)
    state = target_state(index, target, at)
    if state == "missing":
        if args.timeline is None and at is None and await _in_store(ctx, target):
            print(f"error: {target} has no recorded history yet", file=sys.stderr)
        else:
            print(
                f"error: {target} does not exist (the timeline does not show it)", file=sys.stderr
            )
        return 1
    if state == "healthy" and (at is None or index.failure_of(target, at) is None):
        return _say(args.output, f"{target} is Ready: nothing is wrong")
    failure = failure_to_explain(index, target, at)
    settings = RankingSettings(limit=args.limit or None)
    candidates = confident_causes(index, failure, settings)
    if not candidates:
        return _say(
            args.output,
            f"{target} {failure.failure}: the cause is not known (no change or symptom "
            f"before it scored {settings.floor:.3f} or more)",
        )
    if args.output == "json":
        doc = [c.as_json() for c in candidates]
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    width = None if args.output == "wide" else table_width()
    _print_table(target, failure.ts, failure.failure, candidates, width)
    return 0


async def _in_store(ctx: Context, target: ObjectRef) -> bool:
    """Whether the store has `target` now (the recorder may not have written it yet)."""
    try:
        kind = ctx.registry.resolve(target.kind)
        async with ctx.open_store() as store:
            namespace = target.namespace if kind.namespaced else None
            await store.get(kind.api_version, kind.kind, target.name, namespace)
    except (NotFound, UnknownKind):
        return False
    return True


def _say(output: str, message: str) -> int:
    """No cause to list: `-o json` prints an empty list (`message` to stderr), the table
    `message`."""
    if output == "json":
        sys.stdout.write("[]\n")
        print(message, file=sys.stderr)
    else:
        print(message)
    return 0


def explanation_lines(index: TimelineIndex, target: ObjectRef, width: int = 100) -> list[str]:
    """What `describe` ends a failed object with: the best probable cause of its failure (at
    most two lines of `width`) and the `setpoint explain` command that shows the rest; none
    when the timeline does not show it failing or no cause scores above the floor."""
    if target_state(index, target) != "failing":
        return []
    failure = failure_to_explain(index, target)
    best = confident_causes(index, failure, RankingSettings(limit=1))
    if not best:
        return []
    said = textwrap.wrap(
        " ".join(best[0].reason.split()), width - 2, max_lines=2, placeholder=" ..."
    )
    where = "" if target.namespace == "default" else f" -n {target.namespace}"
    command = f"setpoint explain{where} {target.kind.lower()}/{target.name}"
    return ["Probable Cause:", *("  " + line for line in said), f"  (more: {command})"]


async def recorded_index(ctx: Context) -> TimelineIndex | None:
    """The timeline kept with the store, indexed; None when the store keeps none."""
    try:
        return TimelineIndex.build(await _recorded(ctx, None))
    except Invalid:
        return None


def table_width() -> int | None:
    """The columns the table must fit in: `COLUMNS` when set, else the terminal's when
    stdout is one; None (nothing is cut) when it goes to a pipe or a file."""
    if os.environ.get("COLUMNS", "").isdigit() or sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


async def _recorded(ctx: Context, at: float | None) -> list[dict[str, Any]]:
    """The entries of the timeline kept with the store, up to `at` (edges: all)."""
    timeline = await recorded_timeline(ctx)
    try:
        until = at + 1.0 if at is not None else None
        since = until - LIVE_WINDOW_S if until is not None else None
        window = timeline.query(since=since, until=until, limit=LIVE_MAX_ENTRIES)
        if window:
            since = float(window[0]["ts"])
        edges = timeline.query(until=since, types=["edge"]) if since is not None else []
    finally:
        timeline.close()
    entries = [dict(e) for e in (*edges, *window)]
    entries.sort(key=lambda e: e["ts"])
    return entries


def _print_table(
    target: ObjectRef,
    failed_at: float,
    failure: str,
    candidates: Sequence[Candidate],
    width: int | None,
) -> None:
    when = datetime.fromtimestamp(failed_at, UTC).isoformat(timespec="seconds")
    when = when.replace("+00:00", "Z")
    print(f"{target} {failure} at {when}; probable causes, best first:")
    if not candidates:
        print("(no change or symptom found before the failure)")
        return
    rows = [["RANK", "SCORE", "WHEN", "ENTRY", "PATH", "REASON"]]
    for i, c in enumerate(candidates, 1):
        before = failed_at - float(c.entry["ts"])
        rows.append(
            [
                str(i),
                f"{c.score:.3f}",
                _when(before),
                summarize(c.entry),
                path_cell(c),
                c.reason,
            ]
        )
    fitted = rows if width is None else render.fit_table(rows, width, GIVE_WAY)
    for line in render.format_table(fitted):
        print(line)


def path_cell(candidate: Candidate) -> str:
    """The PATH column: the names from the object explained to the entry's object
    (`web > migrate > db`), `?` before a step no timeline entry shows; `-` for the object's
    own entries; `unknown` when the entry's object is not connected to it."""
    if not candidate.path:
        return "unknown"
    if len(candidate.path) == 1:
        return "-"
    words = [candidate.path[0].name]
    for hop in candidate.hops:
        words.append(("" if hop.verified else "?") + hop.target.name)
    return " > ".join(words)


def _when(before: float) -> str:
    """`-10s` for an entry 10 s before the failure, `+5s` after it (a blocker's evidence)."""
    if before >= 0.5:
        return f"-{render.human_duration(before)}"
    if before <= -0.5:
        return f"+{render.human_duration(-before)}"
    return "0s"


def summarize(entry: Mapping[str, Any]) -> str:
    """A short column for one entry: its type and object (and the path of a one-path change)."""
    obj = ObjectRef.of(entry.get("object"))
    what = str(entry.get("type"))
    if what == "change":
        diff = entry.get("diff") or {}
        if len(diff) == 1:
            what += " " + next(iter(diff))
    return f"{what} {obj}" if obj else what
