"""Helpers of the explain tests: build timeline entries by hand, in the recorder's format."""

from __future__ import annotations

from typing import Any

T0 = 1_764_000_000.0


def obj(kind: str, name: str, namespace: str = "default") -> dict[str, str]:
    return {"kind": kind, "name": name, "namespace": namespace}


DB = obj("Process", "db")
MIGRATE = obj("Job", "migrate")
WEB = obj("Deployment", "web")
WEB0 = obj("Process", "web-0")
CACHE = obj("Process", "cache")


def change(
    ts: float, o: dict[str, str], path: str, old: Any, new: Any, actor: str = "alice"
) -> dict[str, Any]:
    return {
        "ts": T0 + ts,
        "type": "change",
        "object": o,
        "diff": {path: [old, new]},
        "actor": actor,
    }


def ready(ts: float, o: dict[str, str], status: str, reason: str = "") -> dict[str, Any]:
    cond = {"type": "Ready", "status": status, "reason": reason, "message": ""}
    return {"ts": T0 + ts, "type": "condition", "object": o, "condition": cond}


def log(ts: float, o: dict[str, str], line: str) -> dict[str, Any]:
    return {"ts": T0 + ts, "type": "log", "object": o, "line": line}


def edge(
    ts: float, source: dict[str, str], target: dict[str, str], relation: str
) -> dict[str, Any]:
    return {"ts": T0 + ts, "type": "edge", "from": source, "to": target, "relation": relation}


def webapp(ts: float = 0.0) -> list[dict[str, Any]]:
    """db <- migrate <- web (which depends on db too) owning web-0; a lone cache; all Ready."""
    return [
        change(ts, DB, "spec", None, {"args": ["db", "--max-connections=100"]}),
        change(ts, MIGRATE, "spec", None, {"args": ["migrate"]}),
        change(ts, WEB, "spec", None, {"replicas": 1}),
        change(ts, CACHE, "spec", None, {"args": ["cache"]}),
        edge(ts + 1, MIGRATE, DB, "dependsOn"),
        edge(ts + 1, WEB, MIGRATE, "dependsOn"),
        edge(ts + 1, WEB, DB, "dependsOn"),
        edge(ts + 1, WEB0, WEB, "ownerReference"),
        ready(ts + 5, DB, "True", "ProbeSucceeded"),
        ready(ts + 9, WEB0, "True", "ProbeSucceeded"),
        ready(ts + 10, WEB, "True", "AllReplicasReady"),
        ready(ts + 10, CACHE, "True", "ProbeSucceeded"),
    ]


def db_breaks(at: float) -> list[dict[str, Any]]:
    """The planted cause at `at`: db's max connections set to 1; db refuses clients 6 s later
    and web goes NotReady at `at` + 10."""
    return [
        change(at, DB, "spec.args[1]", "--max-connections=100", "--max-connections=1"),
        {"ts": T0 + at + 0.2, "type": "exit", "object": DB, "exitCode": None, "signal": 15},
        ready(at + 2, DB, "True", "ProbeSucceeded"),
        log(at + 6, DB, "FATAL:  sorry, too many clients already"),
        log(at + 6.5, WEB0, "ERROR web.db: could not connect: too many clients"),
        ready(at + 9, WEB0, "False", "ReadinessProbeFailed"),
        ready(at + 10, WEB, "False", "ReplicasNotReady"),
    ]


def by_ts(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(entries, key=lambda e: e["ts"])
