"""`setpoint describe KIND [NAME...]` (or KIND/NAME...): an object and its events, for people.

`describe_object` does the drawing and is pure (the time is an argument), so
every kind gets the same sections: the metadata fields (Name, Namespace, Kind,
API Version, Labels, Annotations, Created, Generation, Observed Generation,
Finalizers, Owner References, Deletion Timestamp if set); one section per
declared top-level field (`Spec` as YAML); `Status` with its conditions as a
table and its other fields as YAML; and `Events`, oldest first. A kind may add
header fields of its own through `SUMMARIES`. A kind's secret fields
(`Kind.secret_fields`, a Secret's `data`) show their keys and sizes in bytes, never
their values, as `kubectl describe secret` does. Without NAMEs every object of
the kind in the namespace is described.

A failed object (`status_table.health`: Stalled, failed, crash-looping) ends with its most
probable cause from the timeline `setpoint up` records beside the store, if there is one,
and the `setpoint explain` command that tells more (`explain.explanation_lines`). An object
that waits (not Ready, not failed) for a dependency ends with its root blocker
(`root_blocker_lines`): the end of its chain of unmet `dependsOn` entries
(`status_table.Blockers`, the walk the live view's detail line makes), that object's own
reason, the chain, and the command that tells more about it.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import re
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from typing import Any

from setpoint.cli import explain, render
from setpoint.cli.context import Context, add_kind_and_names, kind_and_names
from setpoint.cli.events import Involved
from setpoint.cli.status_table import (
    Blockers,
    Key,
    command,
    key_of,
    kind_aliases,
    ref_of,
)
from setpoint.control import autoscaler, thermostat
from setpoint.control.kinds import AUTOSCALER, THERMOSTAT
from setpoint.errors import Invalid, NotFound, UnknownKind
from setpoint.insight.entries import ObjectRef
from setpoint.insight.health import Health, headline, health
from setpoint.model import Kind, Object, Registry
from setpoint.runtime import EVENT
from setpoint.store import Store
from setpoint.workloads.dependencies import Dependency

Summary = Callable[[Object, float], list[tuple[str, str]]]
"""Kind-specific header fields of an object at a time `now`, as (label, value) pairs."""

SUMMARIES: dict[tuple[str, str], Summary] = {}
"""Extra header fields by (apiVersion, kind), printed after Observed Generation
(e.g. a Process's pid and restarts). Kinds not here get the generic fields only."""
SUMMARIES[(THERMOSTAT.api_version, THERMOSTAT.kind)] = thermostat.step_summary
SUMMARIES[(AUTOSCALER.api_version, AUTOSCALER.kind)] = autoscaler.decision_summary

NONE = "<none>"
_ENVELOPE = ("apiVersion", "kind", "metadata", "status")
_INDENT = "  "


def describe_object(
    obj: Object, events: Sequence[Object], now: float, secret_fields: Sequence[str] = ()
) -> str:
    """The text `describe` prints for `obj` and its `events` (any order), at time `now`;
    of `secret_fields` only keys and sizes."""
    meta = obj.get("metadata") or {}
    status = obj.get("status")
    fields: list[tuple[str, str]] = [("Name", str(meta.get("name", "")))]
    if meta.get("namespace"):
        fields.append(("Namespace", str(meta["namespace"])))
    fields += [
        ("Kind", str(obj.get("kind", ""))),
        ("API Version", str(obj.get("apiVersion", ""))),
        ("Labels", _pairs(meta.get("labels"), "=")),
        ("Annotations", _pairs(meta.get("annotations"), ": ")),
        ("Created", _when(meta.get("creationTimestamp"), now)),
        ("Generation", str(meta.get("generation", NONE))),
        ("Observed Generation", str((status or {}).get("observedGeneration", NONE))),
    ]
    summary = SUMMARIES.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
    if summary is not None:
        fields += summary(obj, now)
    fields += [
        ("Finalizers", "\n".join(str(f) for f in meta.get("finalizers") or []) or NONE),
        ("Owner References", _owners(meta.get("ownerReferences"))),
    ]
    if meta.get("deletionTimestamp"):
        fields.append(("Deletion Timestamp", _when(meta["deletionTimestamp"], now)))
    lines = _fields(fields)
    for key, value in obj.items():
        if key in secret_fields:
            lines += _sizes(_title(key), value)
        elif key not in _ENVELOPE:
            lines += _section(_title(key), value)
    lines += _status(status, now)
    lines += _events(events, now)
    return "\n".join(lines)


def root_blocker_lines(blockers: Blockers, obj: Object, width: int = 100) -> list[str]:
    """What `describe` ends an object that waits with: its root blocker (`Blockers.root`)
    and that object's own reason (`unmet`'s message when it does not exist), the chain of
    `dependsOn` to it, and the command that tells more (`explain` when the blocker failed,
    else `describe`); none when `obj` is Ready, failed, or waits for nothing it names."""
    if health(obj) is not Health.PROGRESSING:
        return []
    root = blockers.root(obj)
    if root is None:
        return []
    chain, message, target = root
    said = headline(target) if target is not None else ""
    text = f"{ref_of(chain[-1])}: {said or message}"
    verb = "explain" if target is not None and health(target) is Health.FAILED else "describe"
    route = " <- ".join(ref_of(key) for key in chain)
    lines = textwrap.wrap(" ".join(text.split()), width - 2, max_lines=2, placeholder=" ...")
    return [
        "Root Blocker:",
        *(_INDENT + line for line in lines),
        f"{_INDENT}(waits along dependsOn: {route})",
        f"{_INDENT}(more: {command(verb, chain[-1])})",
    ]


async def dependency_closure(store: Store, registry: Registry, obj: Object) -> dict[Key, Object]:
    """`obj` and what it depends on, directly or not, as the store has them now (what
    `Blockers` needs to follow its chains). A kind no module registered, or an object that
    does not exist, is left out (`Blockers` calls it missing)."""
    found: dict[Key, Object] = {key_of(obj): obj}
    todo = [obj]
    while todo:
        current = todo.pop()
        _, namespace, _ = key_of(current)
        for raw in (current.get("spec") or {}).get("dependsOn") or ():
            try:
                dep = Dependency.model_validate(raw)
                kind = registry.resolve(dep.kind)
            except (ValueError, UnknownKind):
                continue  # admission refuses these; nothing to follow
            where = (dep.namespace or namespace) if kind.namespaced else None
            key = (kind.kind, where or "default", dep.name)
            if key in found:
                continue
            try:
                got = await store.get(kind.api_version, kind.kind, dep.name, where)
            except NotFound:
                continue
            found[key_of(got)] = got
            todo.append(got)
    return found


def _fields(fields: Sequence[tuple[str, str]], indent: str = "") -> list[str]:
    """`Label:  value` lines, values aligned; a value's further lines are aligned under it."""
    width = max(len(label) for label, _ in fields) + 3
    lines: list[str] = []
    for label, value in fields:
        first, *rest = value.split("\n")
        lines.append((indent + f"{label}:".ljust(width) + first).rstrip())
        lines += [indent + " " * width + line for line in rest]
    return lines


def _pairs(mapping: Any, sep: str) -> str:
    if not isinstance(mapping, dict) or not mapping:
        return NONE
    return "\n".join(f"{k}{sep}{v}" for k, v in sorted(mapping.items()))


def _when(timestamp: Any, now: float) -> str:
    """`2026-11-29T22:00:00Z (5m ago)`."""
    if not isinstance(timestamp, str) or not timestamp:
        return NONE
    return f"{timestamp} ({render.timestamp_age(timestamp, now)} ago)"


def _owners(refs: Any) -> str:
    if not isinstance(refs, list) or not refs:
        return NONE
    lines = []
    for ref in refs:
        line = f"{ref.get('kind')}/{ref.get('name')}"
        lines.append(line + " (controller)" if ref.get("controller") else line)
    return "\n".join(lines)


def _title(key: str) -> str:
    """`involvedObject` -> `Involved Object`."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", key)
    return words[:1].upper() + words[1:]


def _section(title: str, value: Any, indent: str = "") -> list[str]:
    """`Title:` and `value` below it as YAML, indented; a scalar or nothing on the same line."""
    if value is None or value == {} or value == []:
        return [f"{indent}{title}:  {NONE}"]
    if not isinstance(value, dict | list):
        return [f"{indent}{title}:  {value}"]
    body = render.to_yaml(value).rstrip("\n").split("\n")
    return [f"{indent}{title}:"] + [indent + _INDENT + line for line in body]


def _sizes(title: str, value: Any) -> list[str]:
    """A secret field: each key and the size of its value (decoded, if base64) in bytes."""
    if not isinstance(value, dict) or not value:
        return [f"{title}:  {NONE}"]
    sizes = []
    for key, held in sorted(value.items()):
        text = str(held)
        try:
            size = len(base64.b64decode(text, validate=True))
        except (binascii.Error, ValueError):
            size = len(text.encode())
        sizes.append((str(key), f"{size} bytes"))
    return [f"{title}:", *_fields(sizes, _INDENT)]


def _status(status: Any, now: float) -> list[str]:
    if not isinstance(status, dict) or not status:
        return _section("Status", status)
    lines = ["Status:"]
    conditions = status.get("conditions") or []
    if conditions:
        rows = [["Type", "Status", "Reason", "Age", "Message"]]
        rows.append(["-" * len(cell) for cell in rows[0]])
        for cond in conditions:
            rows.append(
                [
                    str(cond.get("type", "")),
                    str(cond.get("status", "")),
                    str(cond.get("reason") or ""),
                    render.timestamp_age(cond.get("lastTransitionTime"), now),
                    _one_line(cond.get("message")),
                ]
            )
        lines.append(_INDENT + "Conditions:")
        lines += [_INDENT * 2 + line for line in render.format_table(rows)]
    else:
        lines.append(f"{_INDENT}Conditions:  {NONE}")
    rest = {k: v for k, v in status.items() if k not in ("conditions", "observedGeneration")}
    if rest:
        lines += [_INDENT + line for line in render.to_yaml(rest).rstrip("\n").split("\n")]
    return lines


def _events(events: Sequence[Object], now: float) -> list[str]:
    if not events:
        return [f"Events:  {NONE}"]
    rows = [["Type", "Reason", "Age", "From", "Message"]]
    rows.append(["-" * len(cell) for cell in rows[0]])
    for event in sorted(events, key=render.event_sort_key):
        rows.append(
            [
                str(event.get("type") or ""),
                str(event.get("reason") or ""),
                render.event_interval(event, now),
                render.event_source(event),
                _one_line(event.get("message")),
            ]
        )
    return ["Events:"] + [_INDENT + line for line in render.format_table(rows)]


def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split())


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "describe",
        parents=parents,
        description="Show objects in detail: metadata, spec, status and conditions, and the "
        "events about them. Without NAMEs, every object of the kind in the namespace.",
    )
    add_kind_and_names(p)
    p.add_argument(
        "--plot",
        metavar="FILE",
        help="for one Thermostat: also draw setpoint, temperature and output since its last "
        "step to a PNG (needs matplotlib: pip install 'setpoint[plot]')",
    )
    p.set_defaults(run=run)


async def run(ctx: Context, args: argparse.Namespace) -> int:
    if not args.kind:
        raise Invalid("say what to describe: KIND NAME, KIND/NAME, or KIND for all of them")
    kind, names = kind_and_names(ctx.registry, args.kind, args.names)
    namespace = ctx.namespace_of(kind)
    found: list[Object] = []
    missing: list[str] = []
    async with ctx.open_store() as store:
        if names:
            for name in names:
                try:
                    found.append(await store.get(kind.api_version, kind.kind, name, namespace))
                except NotFound as exc:
                    missing.append(str(exc))
        else:
            found, _ = await store.list(kind.api_version, kind.kind, namespace=namespace)
            found.sort(key=render.sort_key)
            if not found:
                where = f" in {namespace} namespace" if namespace else ""
                print(f"No resources found{where}.", file=sys.stderr)
                return 0
        events: list[Object] = []
        if found:  # a cluster-scoped object's events may be in any namespace
            events, _ = await store.list(EVENT.api_version, EVENT.kind, namespace=namespace)
        waiting = []
        for obj in found:
            if health(obj) is Health.PROGRESSING and (obj.get("spec") or {}).get("dependsOn"):
                blockers = Blockers(
                    await dependency_closure(store, ctx.registry, obj), kind_aliases(ctx.registry)
                )
                waiting.append(root_blocker_lines(blockers, obj))
            else:
                waiting.append([])
    now = time.time()
    texts = [_describe(kind, obj, events, now) for obj in found]
    for i, lines in enumerate(waiting):
        texts[i] += "".join("\n" + line for line in lines)
    failed = [i for i, obj in enumerate(found) if health(obj) is Health.FAILED]
    index = await explain.recorded_index(ctx) if failed else None
    for i in failed:
        if index is not None:
            _, namespace, name = key_of(found[i])
            lines = explain.explanation_lines(index, ObjectRef(kind.kind, name, namespace))
            texts[i] += "".join("\n" + line for line in lines)
    if texts:
        print("\n\n".join(texts), flush=True)
    for message in missing:
        print(f"error: {message}", file=sys.stderr)
    if getattr(args, "plot", None) and found:
        if kind is not THERMOSTAT or len(found) != 1:
            raise Invalid("--plot draws one Thermostat: describe thermostat/NAME --plot FILE")
        thermostat.write_plot(found[0], args.plot)
        print(f"plot written to {args.plot}", file=sys.stderr)
    return 1 if missing else 0


def _describe(kind: Kind, obj: Object, events: Sequence[Object], now: float) -> str:
    involved = Involved.of(kind, obj)
    return describe_object(obj, [e for e in events if involved.matches(e)], now, kind.secret_fields)
