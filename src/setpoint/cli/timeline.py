"""`setpoint timeline [KIND/NAME] [--since 10m] [--type TYPE ...] [--audit] [-o table|json|jsonl]`:
what happened, oldest first, from the timeline `setpoint up` records beside its store.

The table leaves out the audit trail (`write` entries: one per write, whoever made it) unless
asked for: `--audit` shows only those, as TIME USER MANAGER VERB OBJECT REVISION (`--type
write` shows them among the rest); a change's row names who made it either way.

The timeline is read from the store's SQLite file (`setpoint.insight.timeline`);
a `memory://` store has none outside its process. `-o jsonl` writes the file
`setpoint explain --timeline FILE` reads.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from typing import Any

import orjson

from setpoint.cli import render
from setpoint.cli.context import Context, check_name, count
from setpoint.errors import Invalid, NotFound, UnknownKind
from setpoint.insight.recorder import Recorder
from setpoint.insight.timeline import (
    TYPES,
    Entry,
    Timeline,
    TimelineBackend,
    dump_jsonl,
    object_of,
)
from setpoint.model.durations import parse_duration

_DETAIL_WIDTH = 120
AUDIT = "write"
"""The type of the audit trail's entries (`setpoint.insight.recorder`)."""


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "timeline",
        parents=parents,
        description="Show the timeline `setpoint up` records: spec changes and who made them, "
        "condition transitions, events, process exits, sampled log lines and dependency "
        "edges, oldest first; of everything, or of one object (KIND/NAME).",
    )
    p.add_argument("object", nargs="?", metavar="KIND/NAME", help="e.g. process/db")
    p.add_argument(
        "--since", metavar="DURATION", help="only the last DURATION (e.g. 30s, 1m30s, 10m, 2h)"
    )
    p.add_argument(
        "--type",
        dest="types",
        action="append",
        metavar="TYPE",
        help="only entries of this type: write, change, condition, event, exit, log, edge "
        "(repeatable, or comma-separated; default: all but write)",
    )
    p.add_argument(
        "--audit",
        action="store_true",
        help="the audit trail: every write, with the user, field manager and verb that made it",
    )
    p.add_argument("--limit", type=count, metavar="N", help="only the newest N entries")
    p.add_argument(
        "-o", "--output", choices=("table", "json", "jsonl"), default="table", help="format"
    )
    p.set_defaults(run=run)


def _object(ctx: Context, arg: str | None) -> dict[str, Any] | None:
    if not arg:
        return None
    kind_name, _, name = arg.partition("/")
    if not kind_name or not name or "/" in name:
        raise Invalid(f"{arg!r}: want KIND/NAME, e.g. process/db")
    check_name(name, "KIND/NAME")
    try:
        kind = ctx.registry.resolve(kind_name)
    except UnknownKind:
        return {"kind": kind_name, "name": name}  # a kind this command has not loaded
    return {"kind": kind.kind, "name": name, "namespace": ctx.namespace_of(kind) or ""}


async def recorded_timeline(ctx: Context) -> TimelineBackend:
    """The timeline kept with the store, caught up with it first (`Recorder.catch_up`: what
    a controller with a manager of its own, or a client, wrote while no engine recorded is
    on it too). `Invalid` for a store that keeps none."""
    hint = "`setpoint explain --timeline FILE.jsonl` reads one that `timeline -o jsonl` wrote"
    try:
        ctx.require_store()
    except NotFound as exc:
        raise Invalid(f"no recorded timeline: {exc}; {hint}") from None
    if ctx.store_url.startswith("memory:"):
        raise Invalid(
            f"no recorded timeline for {ctx.store_shown}: a memory store keeps it in the memory "
            f"of the process that holds it; {hint}"
        )
    try:
        timeline = Timeline.of_store(ctx.store_url)
    except Invalid:
        raise Invalid(
            f"no recorded timeline for {ctx.store_shown} (sqlite:///, postgresql:// and etcd:// "
            f"stores keep one); {hint}"
        ) from None
    try:
        async with ctx.open_store() as store:
            await Recorder(store, timeline).catch_up()
    except BaseException:
        timeline.close()
        raise
    return timeline


async def run(ctx: Context, args: argparse.Namespace) -> int:
    about = _object(ctx, args.object)
    since = time.time() - parse_duration(args.since, "--since") if args.since else None
    types = [t.strip() for arg in args.types or [] for t in arg.split(",") if t.strip()] or None
    if args.audit:
        if types is not None:
            raise Invalid("--audit shows write entries only: leave out --type")
        types = [AUDIT]
    elif types is None and args.output == "table":
        types = [t for t in TYPES if t != AUDIT]
    with await recorded_timeline(ctx) as timeline:
        entries = timeline.query(object=about, since=since, types=types, limit=args.limit)
    if args.output == "jsonl":
        dump_jsonl(entries, sys.stdout.buffer)
        sys.stdout.flush()
        return 0
    if args.output == "json":
        sys.stdout.buffer.write(orjson.dumps(entries, option=orjson.OPT_INDENT_2) + b"\n")
        sys.stdout.flush()
        return 0
    if not entries:
        print("No timeline entries found.", file=sys.stderr)
        return 0
    if args.audit:
        rows = [["TIME", "USER", "MANAGER", "VERB", "OBJECT", "REVISION"]]
        rows += [_audit_row(e) for e in entries]
    else:
        rows = [["TIME", "TYPE", "OBJECT", "DETAIL"]] + [_row(e) for e in entries]
    widths = render.column_widths(rows)
    for row in rows:
        print(render.format_row(row, widths), flush=True)
    return 0


def _when(entry: Entry) -> str:
    ts = float(entry.get("ts") or 0.0)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"


def _ref(entry: Entry) -> str:
    about = object_of(entry)
    return f"{about.get('kind')}/{about.get('name')}" if about else "-"


def _audit_row(entry: Entry) -> list[str]:
    user, manager = entry.get("user") or "-", entry.get("manager") or "-"
    return [_when(entry), str(user), str(manager), str(entry.get("verb")), _ref(entry),
            str(entry.get("revision"))]  # fmt: skip


def _row(entry: Entry) -> list[str]:
    when, ref = _when(entry), _ref(entry)
    detail = " ".join(describe_entry(entry).split())
    if len(detail) > _DETAIL_WIDTH:
        detail = detail[: _DETAIL_WIDTH - 3] + "..."
    return [when, str(entry.get("type")), ref, detail]


def describe_entry(entry: Entry) -> str:
    """One line saying what an entry records."""
    kind = entry.get("type")
    if kind == AUDIT:
        who = entry.get("user") or entry.get("manager") or "an unnamed writer"
        manager = f" ({entry['manager']})" if entry.get("user") and entry.get("manager") else ""
        return f"{entry.get('verb')} by {who}{manager}, revision {entry.get('revision')}"
    if kind == "change":
        diff = entry.get("diff") or {}
        parts = [f"{path}: {_short(v[0])} -> {_short(v[1])}" for path, v in _pairs(diff)]
        return f"{entry.get('action', 'updated')} by {entry.get('actor', 'unknown')}: " + "; ".join(
            parts
        )
    if kind == "condition":
        c = entry.get("condition") or {}
        text = f"{c.get('type')}={c.get('status')}"
        if c.get("reason"):
            text += f" {c.get('reason')}"
        return text + (f": {c.get('message')}" if c.get("message") else "")
    if kind == "event":
        return f"{entry.get('eventType')} {entry.get('reason')}: {entry.get('message')}"
    if kind == "exit":
        how = (
            f"signal {entry.get('signal')}"
            if entry.get("signal") is not None
            else f"code {entry.get('exitCode')}"
        )
        lines = entry.get("lines") or []
        last = f" | {lines[-1]}" if lines else ""
        return f"exited, {how}" + last
    if kind == "log":
        return str(entry.get("line"))
    if kind == "edge":
        to = entry.get("to") or {}
        return f"{entry.get('relation')} -> {to.get('kind')}/{to.get('name')}"
    rest = {k: v for k, v in entry.items() if k not in ("ts", "type", "object")}
    return orjson.dumps(rest).decode()


def _pairs(diff: Mapping[str, Any]) -> list[tuple[str, list[Any]]]:
    return [(p, v) for p, v in diff.items() if isinstance(v, list) and len(v) == 2]


def _short(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 40 else text[:37] + "..."
