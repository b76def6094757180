"""How `explain` says things: durations, changes, symptoms, how an object failed or began
to, and how two objects are related (`setpoint.insight.ranking` and its parts word their
reasons with these).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Any

import orjson

from setpoint.insight.entries import Entry, ObjectRef


def ago(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 1:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


def how_failed(failure: str) -> str:
    """How a failure of this class (`Failure.failure`) reads after the object's name."""
    return {
        "NotReady": "went NotReady",
        "Stalled": "stalled",
        "CrashLoop": "began crash-looping",
        "Failed": "failed",
    }.get(failure, "failed")


def short(value: Any, width: int = 40) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return text if len(text) <= width else text[: width - 3] + "..."


def describe_change(entry: Entry, obj: ObjectRef) -> str:
    diff = entry.get("diff") or {}
    actor = entry.get("actor")
    by = f" by {actor}" if actor else ""
    items = list(diff.items())
    if len(items) == 1 and isinstance(items[0][1], list | tuple) and len(items[0][1]) == 2:
        path, (old, new) = items[0]
        if old is None:
            return f"{obj} {path} set to {short(new)}{by}"
        if new is None:
            return f"{obj} {path} removed (was {short(old)}){by}"
        return f"{obj} {path} changed from {short(old)} to {short(new)}{by}"
    paths = ", ".join(str(p) for p, _ in items[:3]) + (", ..." if len(items) > 3 else "")
    return f"{obj} changed ({paths}){by}"


def describe_symptom(entry: Entry, novel: bool = False) -> str:
    kind = entry.get("type")
    if kind == "log":
        news = "a never-seen line" if novel else "a line not seen for an hour"
        return f"logged {news} {short(entry.get('line', ''), 60)!r}"
    if kind == "exit":
        sig = entry.get("signal")
        said = f"exited with signal {sig}" if sig else f"exited with code {entry.get('exitCode')}"
        lines = [str(x) for x in entry.get("lines") or () if str(x).strip()]
        return f"{said}: {short(lines[-1].strip(), 100)!r}" if lines else said
    if kind == "condition" and (entry.get("condition") or {}).get("message"):
        cond = entry.get("condition") or {}
        state = f"{cond.get('type')}={cond.get('status')} ({cond.get('reason')})"
        return f"became {state}: {short(cond.get('message'), 100)}"
    if kind == "event":
        return f"had a Warning event {entry.get('reason')}: {short(entry.get('message', ''), 100)}"
    cond = entry.get("condition") or {}
    return f"became {cond.get('type')}={cond.get('status')} ({cond.get('reason')})"


def how_related(target: ObjectRef, obj: ObjectRef, hops: int, path: list[str]) -> str:
    if obj == target:
        return ""
    if not path:
        return f"{obj} is not connected to {target} in the timeline"
    return f"{target} {', '.join(path)}"


def how_began(entry: Entry) -> str:
    """How an object's trouble began, in words (`began exiting with signal 9`)."""
    kind = entry.get("type")
    if kind == "exit":
        sig = entry.get("signal")
        how = f"signal {sig}" if sig else f"code {entry.get('exitCode')}"
        return f"began exiting with {how}"
    if kind == "log":
        return f"began logging {short(entry.get('line', ''), 60)!r}"
    if kind == "event":
        return f"began having Warning events {entry.get('reason')}"
    return describe_symptom(entry)
