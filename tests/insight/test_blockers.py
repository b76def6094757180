"""Blocked chains: the root-blocker walk (`setpoint.insight.blockers`) and `explain` ranking a
root blocker's failure evidence first, with its chain, on hand-written timelines."""

from __future__ import annotations

from typing import Any

from explain_support import DB, MIGRATE, T0, WEB, WEB0, by_ts, edge, obj, ready

from setpoint.insight.blockers import root_blockers
from setpoint.insight.entries import ObjectRef
from setpoint.insight.index import TimelineIndex
from setpoint.insight.ranking import (
    RankingSettings,
    confident,
    explain,
    target_state,
)

DB_INIT = obj("Job", "db-init")
LINE = "pg.py: the postgres user cannot reach /root/x: /root is not searchable by it"


def ref(o: dict[str, str]) -> ObjectRef:
    ref = ObjectRef.of(o)
    assert ref is not None
    return ref


def test_the_walk_follows_every_branch_to_its_end_once() -> None:
    graph = {"web": ["migrate", "web-0"], "migrate": ["db"], "web-0": ["db"], "db": []}
    assert root_blockers("web", lambda n: graph[n], lambda n: False) == [["web", "migrate", "db"]]
    graph["web-0"] = ["cache"]
    graph["cache"] = []
    chains = root_blockers("web", lambda n: graph[n], lambda n: False)
    assert chains == [["web", "migrate", "db"], ["web", "web-0", "cache"]]


def test_the_walk_ends_at_a_failed_object_a_cycle_or_nothing() -> None:
    graph = {"a": ["b"], "b": ["c"], "c": ["a"]}
    assert root_blockers("a", lambda n: graph[n], lambda n: False) == [["a", "b", "c", "a"]]
    assert root_blockers("a", lambda n: graph[n], lambda n: n == "b") == [["a", "b"]]
    assert root_blockers("a", lambda n: [], lambda n: False) == []


def created(ts: float, o: dict[str, str]) -> dict[str, Any]:
    return {
        "ts": T0 + ts,
        "type": "change",
        "object": o,
        "diff": {"spec": [None, {"name": o["name"]}]},
        "action": "created",
        "actor": "root@vm",
    }


def exit_of(ts: float, o: dict[str, str], code: int, lines: list[str]) -> dict[str, Any]:
    return {
        "ts": T0 + ts,
        "type": "exit",
        "object": o,
        "exitCode": code,
        "signal": None,
        "stoppedOnRequest": False,
        "lines": lines,
    }


def waiting(ts: float, o: dict[str, str], on: str) -> dict[str, Any]:
    cond = {
        "type": "Ready",
        "status": "False",
        "reason": "WaitingForDependency",
        "message": f"waiting for {on}",
    }
    return {"ts": T0 + ts, "type": "condition", "object": o, "condition": cond}


def db_init_fails() -> list[dict[str, Any]]:
    """The webapp's start-up: db-init exits 1 at once (twice), so db, migrate and web wait."""
    return by_ts(
        [
            *(created(0, o) for o in (DB_INIT, DB, MIGRATE, WEB)),
            edge(0, DB, DB_INIT, "dependsOn"),
            edge(0, MIGRATE, DB, "dependsOn"),
            edge(0, WEB, MIGRATE, "dependsOn"),
            waiting(0.1, DB, "Job/db-init"),
            waiting(0.1, MIGRATE, "Process/db"),
            waiting(0.1, WEB, "Job/migrate"),
            ready(0.1, DB_INIT, "False", "Running"),
            exit_of(0.5, DB_INIT, 1, ["starting", LINE]),
            ready(0.6, DB_INIT, "False", "BackOff"),
            exit_of(2.5, DB_INIT, 1, ["starting", LINE]),
            ready(2.6, DB_INIT, "False", "BackoffLimitExceeded"),
        ]
    )


def test_a_start_up_failure_ranks_the_root_blockers_exit_first_with_its_chain() -> None:
    index = TimelineIndex.build(db_init_fails())
    assert target_state(index, ref(WEB)) == "failing"
    first = explain(index, ref(WEB))[0]
    assert first.entry["type"] == "exit"
    assert first.entry["object"] == DB_INIT
    assert LINE in first.reason
    assert [str(o) for o in first.path] == [
        "Deployment/web",
        "Job/migrate",
        "Process/db",
        "Job/db-init",
    ]
    assert "Deployment/web <- Job/migrate <- Process/db <- Job/db-init" in first.reason


def test_the_failing_object_itself_ranks_its_own_exit_before_its_creation() -> None:
    index = TimelineIndex.build(db_init_fails())
    candidates = explain(index, ref(DB_INIT))
    assert candidates[0].entry["type"] == "exit"
    assert LINE in candidates[0].reason
    assert candidates[0].path == (ref(DB_INIT),)
    creations = [c for c in candidates if c.entry.get("action") == "created"]
    assert [c.entry["object"] for c in creations] == [DB_INIT]  # it then failed, others did not
    assert LINE in creations[0].reason  # its evidence is quoted


def test_a_replica_holds_back_its_deployment() -> None:
    entries = [
        created(0, WEB),
        created(0, WEB0),
        edge(0, WEB0, WEB, "ownerReference"),
        ready(0.1, WEB, "False", "ReplicasNotReady"),
        exit_of(0.5, WEB0, 127, ["sh: 1: exec: webserver: not found"]),
        ready(0.6, WEB0, "False", "CrashLoopBackOff"),
    ]
    index = TimelineIndex.build(by_ts(entries))
    first = explain(index, ref(WEB))[0]
    assert first.entry["object"] == WEB0
    assert first.entry["type"] == "exit"
    assert "webserver: not found" in first.reason
    assert [str(o) for o in first.path] == ["Deployment/web", "Process/web-0"]
    assert confident([first], RankingSettings())
