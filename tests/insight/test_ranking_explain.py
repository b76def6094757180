"""The ranking of probable causes (`setpoint.insight.ranking`) on hand-written timelines and on
generated scenarios: what ranks first, and why."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from explain_support import (
    CACHE,
    DB,
    MIGRATE,
    T0,
    WEB,
    WEB0,
    by_ts,
    change,
    db_breaks,
    edge,
    log,
    ready,
    webapp,
)
from scenario_support import FAMILIES, generate, suite

from setpoint.errors import Invalid
from setpoint.insight import index as index_module
from setpoint.insight import ranking
from setpoint.insight.entries import ObjectRef
from setpoint.insight.index import TimelineIndex, failure_class, symptom_of
from setpoint.insight.ranking import explain

TARGET = ObjectRef("Deployment", "web", "default")


def ranked(entries: list[dict[str, Any]], at: float | None = None) -> list[ranking.Candidate]:
    return explain(TimelineIndex.build(by_ts(entries)), TARGET, at=at)


def position_of(candidates: list[ranking.Candidate], entry: dict[str, Any]) -> int:
    return next(i for i, c in enumerate(candidates) if c.entry is entry)


def test_planted_cause_ranks_first_ahead_of_later_decoys() -> None:
    broken = db_breaks(600)
    cause = broken[0]
    decoys = [
        change(
            603,
            {"kind": "Service", "name": "web", "namespace": "default"},
            "spec.ports[0].port",
            80,
            8080,
        ),
        change(604, WEB, "metadata.annotations.note", None, "friday"),
        change(605, CACHE, "spec.args[1]", "--maxmemory=1gb", "--maxmemory=2gb"),
        change(607, WEB, "spec.replicas", 1, 2),
        change(590, WEB, "metadata.labels.team", "a", "b"),
    ]
    candidates = ranked(webapp() + broken + decoys)
    assert candidates[0].entry is cause
    reason = candidates[0].reason
    assert "Process/db" in reason
    assert "spec.args[1]" in reason
    assert "--max-connections=1" in reason
    assert "too many clients" in reason  # the evidence: what db logged right after
    assert all(c.score > 0 for c in candidates)
    assert [c.score for c in candidates] == sorted((c.score for c in candidates), reverse=True)


def test_the_latest_failure_is_explained_unless_at_says_which() -> None:
    first = change(200, DB, "spec.env.TZ", "UTC", "Mars/Olympus")
    earlier = [
        first,
        ready(205, WEB, "False", "DependencyNotReady"),
        change(300, DB, "spec.env.TZ", "Mars/Olympus", "UTC"),
        ready(310, WEB, "True", "AllReplicasReady"),
    ]
    later = db_breaks(600)
    entries = webapp() + earlier + later
    assert ranked(entries)[0].entry is later[0]
    assert ranked(entries, at=T0 + 250)[0].entry is first
    # --at during the later failure: its onset, not the moment asked about, is explained
    assert ranked(entries, at=T0 + 700)[0].entry is later[0]


def test_no_failure_and_no_time_is_an_error_naming_the_object() -> None:
    with pytest.raises(Invalid, match=r"Deployment/web never became NotReady.*--at"):
        ranked(webapp())


def test_a_time_with_no_failure_explains_that_time() -> None:
    cause = change(100, DB, "spec.args[1]", "--max-connections=100", "--max-connections=1")
    after = change(130, DB, "spec.args[1]", "--max-connections=1", "--max-connections=2")
    candidates = ranked([*webapp(), cause, after], at=T0 + 120)
    assert candidates[0].entry is cause
    assert all(c.entry is not after for c in candidates)


def test_changes_after_the_failure_are_not_candidates() -> None:
    broken = db_breaks(600)
    late = change(611, DB, "spec.args[1]", "--max-connections=1", "--max-connections=100")
    candidates = ranked(webapp() + broken + [late])
    assert all(c.entry is not late for c in candidates)
    assert all(c.entry["ts"] <= broken[-1]["ts"] for c in candidates)


def test_unknown_types_and_fields_are_ignored() -> None:
    plain = webapp() + db_breaks(600)
    extra = [dict(e, recorderNote="x", kept="first") for e in plain]
    extra += [
        {"ts": T0 + 601, "type": "probe", "object": WEB0, "role": "readiness", "result": "failure"},
        {"ts": T0 + 602, "type": "heartbeat", "node": "n1"},
    ]
    a, b = ranked(plain), ranked(extra)
    assert [(c.entry["ts"], c.score, c.reason) for c in a] == [
        (c.entry["ts"], c.score, c.reason) for c in b
    ]


def test_entries_out_of_order_are_refused() -> None:
    entries = webapp()
    entries[0], entries[-1] = entries[-1], entries[0]
    with pytest.raises(Invalid, match="older than the one before it"):
        TimelineIndex.build(entries)


def test_a_connected_object_outranks_an_unconnected_one() -> None:
    on_db = change(600, DB, "spec.env.A", "1", "2")
    on_cache = change(600, CACHE, "spec.env.A", "1", "2")
    candidates = ranked([*webapp(), on_db, on_cache, ready(620, WEB, "False", "ProbeFailed")])
    assert position_of(candidates, on_db) < position_of(candidates, on_cache)
    assert "not connected" in candidates[position_of(candidates, on_cache)].reason
    assert (
        "Deployment/web dependsOn Process/db" in candidates[position_of(candidates, on_db)].reason
    )


def test_a_change_made_once_a_dependency_was_already_failing_is_held_back() -> None:
    cause = change(600, DB, "spec.args[1]", "--port=5432", "--port=0")
    entries = [
        *webapp(),
        cause,
        {"ts": T0 + 601, "type": "exit", "object": DB, "exitCode": 1, "signal": None},
        ready(601.5, DB, "False", "ProcessExited"),
        change(606, WEB, "spec.template.spec.env.LOG_LEVEL", "info", "debug"),
        ready(608, WEB, "False", "DependencyNotReady"),
    ]
    candidates = ranked(entries)
    assert candidates[0].entry is cause
    second = next(c for c in candidates if c.entry["object"] == WEB)
    assert "Process/db already showed trouble" in second.reason


def test_a_kind_of_change_that_broke_this_before_ranks_higher() -> None:
    history: list[dict[str, Any]] = []
    for k in range(3):  # spec.env.POOL changes were followed by web failures, twice
        t = 1000 + 2000 * k
        history.append(change(t, DB, "spec.env.POOL", str(k), str(k + 10)))
        history.append(change(t + 1, DB, "spec.env.CACHE", str(k), str(k + 10)))
        if k < 2:
            history += [
                ready(t + 60, WEB, "False", "ProbeFailed"),
                ready(t + 900, WEB, "True", "Ok"),
            ]
    pool = change(9000, DB, "spec.env.POOL", "12", "99")
    cache = change(9000, DB, "spec.env.CACHE", "12", "99")
    candidates = ranked(
        [*webapp(), *history, pool, cache, ready(9030, WEB, "False", "ProbeFailed")]
    )
    assert position_of(candidates, pool) < position_of(candidates, cache)
    assert "followed by such failures before" in candidates[position_of(candidates, pool)].reason


def test_a_value_never_seen_before_ranks_above_a_rollback() -> None:
    setup = [
        change(100, DB, "spec.env.B", "old", "new"),
        change(200, DB, "spec.env.B", "new", "old"),
    ]
    rollback = change(600, DB, "spec.env.B", "old", "new")  # a value it had before
    novel = change(600, DB, "spec.env.C", "x", "never-before")
    candidates = ranked(
        [*webapp(), *setup, rollback, novel, ready(620, WEB, "False", "ProbeFailed")]
    )
    assert position_of(candidates, novel) < position_of(candidates, rollback)
    assert "never had before" in candidates[position_of(candidates, novel)].reason
    assert "never had before" not in candidates[position_of(candidates, rollback)].reason


def test_a_new_error_line_right_after_a_change_is_evidence_for_it() -> None:
    on_db = change(600, DB, "spec.env.A", "1", "2")
    on_migrate = change(600, MIGRATE, "spec.env.A", "1", "2")
    entries = [
        *webapp(),
        log(300, DB, "LOG:  checkpoint complete: wrote 12 buffers"),
        on_db,
        on_migrate,
        log(603, DB, "PANIC:  could not write to file pg_wal/xlogtemp.77: No space left on device"),
        ready(620, WEB, "False", "ProbeFailed"),
    ]
    candidates = ranked(entries)
    assert candidates[0].entry is on_db
    assert "never-seen line 'PANIC:" in candidates[0].reason
    log_candidate = next(c for c in candidates if c.entry["type"] == "log")
    assert "Process/db logged a never-seen line" in log_candidate.reason


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"type": "Ready", "status": "False", "reason": "ProbeFailed"}, "NotReady"),
        ({"type": "Ready", "status": "True", "reason": "Ok"}, None),
        ({"type": "Stalled", "status": "True", "reason": "ProgressDeadlineExceeded"}, "Stalled"),
        ({"type": "Stalled", "status": "False", "reason": "Ok"}, None),
        ({"type": "Ready", "status": "False", "reason": "CrashLoopBackOff"}, "CrashLoop"),
    ],
)
def test_failure_classes(condition: dict[str, str], expected: str | None) -> None:
    entry = {"ts": T0, "type": "condition", "object": WEB, "condition": condition}
    assert failure_class(entry) == expected


def test_a_crash_loop_event_is_a_failure_to_explain() -> None:
    cause = change(600, WEB, "spec.template.spec.args[1]", "shop:v1", "shop:v2")
    back_off = {
        "ts": T0 + 640,
        "type": "event",
        "object": WEB,
        "eventType": "Warning",
        "reason": "BackOff",
        "message": "back-off restarting",
    }
    assert ranked([*webapp(), cause, back_off])[0].entry is cause


def test_generated_scenarios_keep_the_truth_apart_and_are_reproducible() -> None:
    a, b = generate(11, "bad_config"), generate(11, "bad_config")
    assert a.entries == b.entries
    assert any(e is a.cause for e in a.entries)
    assert a.decoys >= 5
    changes = [e for e in a.entries if e["type"] == "change" and e["ts"] > a.failure_ts - 1000]
    assert any(e["ts"] < a.cause["ts"] for e in changes if e is not a.cause)
    assert any(a.cause["ts"] < e["ts"] <= a.failure_ts for e in changes)
    assert all("cause" not in e and "truth" not in e for e in a.entries)


def test_generated_scenarios_are_mostly_explained() -> None:
    """A floor against regressions; bench/insight.py measures the real figure on 250."""
    scenarios = suite(5 * len(FAMILIES), first_seed=1000)
    ranks = []
    for s in scenarios:
        candidates = explain(TimelineIndex.build(s.entries), s.target)
        ranks.append(next((i for i, c in enumerate(candidates) if c.entry is s.cause), None))
    assert sum(r == 0 for r in ranks) >= 0.7 * len(ranks), ranks
    assert all(r is not None and r < 3 for r in ranks), ranks


@pytest.mark.parametrize("module", [ranking, index_module])
def test_the_ranking_modules_do_no_io_and_read_no_clock(module: Any) -> None:
    tree = ast.parse(Path(module.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    forbidden = {"time", "asyncio", "socket", "subprocess", "setpoint.clock", "setpoint.store"}
    assert not {m for m in imported if m in forbidden or m.startswith("setpoint.store.")}


def test_a_stop_on_request_is_no_symptom_but_a_crash_is() -> None:
    stopped = {"type": "exit", "object": DB, "exitCode": None, "signal": 15}
    killed_on_stop = {
        "type": "exit",
        "object": DB,
        "signal": 9,
        "reason": "killed by SIGKILL",
        "stoppedOnRequest": True,
    }
    assert symptom_of(stopped) is None
    assert symptom_of(killed_on_stop) is None
    assert symptom_of({"type": "exit", "object": DB, "exitCode": 0}) is None
    assert symptom_of({"type": "exit", "object": DB, "exitCode": 1}) == "exit 1/"
    assert symptom_of({"type": "exit", "object": DB, "signal": 9}) == "exit /9"


def test_entries_that_name_no_namespace_are_in_default() -> None:
    bare = [
        {
            key: ({"kind": v["kind"], "name": v["name"]} if key in ("object", "from", "to") else v)
            for key, v in e.items()
        }
        for e in webapp() + db_breaks(600)
    ]
    assert ranked(bare)[0].entry["diff"] == {
        "spec.args[1]": ["--max-connections=100", "--max-connections=1"]
    }


def test_a_stall_ends_when_stalled_turns_false_and_the_next_one_is_explained() -> None:
    def stalled(ts: float, status: str) -> dict[str, Any]:
        cond = {"type": "Stalled", "status": status, "reason": "ProgressDeadlineExceeded"}
        return {"ts": T0 + ts, "type": "condition", "object": WEB, "condition": cond}

    first = change(100, WEB, "spec.template.spec.args[1]", "shop:v1", "shop:v2")
    second = change(1000, WEB, "spec.template.spec.args[1]", "shop:v1", "shop:v3")
    entries = [
        *webapp(),
        first,
        stalled(200, "True"),
        change(300, WEB, "spec.template.spec.args[1]", "shop:v2", "shop:v1", actor="oncall"),
        stalled(320, "False"),
        second,
        stalled(1100, "True"),
    ]
    index = TimelineIndex.build(entries)
    assert [o.ts - T0 for o in index.onsets[TARGET]] == [200, 1100]
    assert ranking.find_failure(index, TARGET).failure == "Stalled"
    assert explain(index, TARGET)[0].entry is second


def test_a_replica_stopping_because_it_is_deleted_is_no_trouble_that_came_first() -> None:
    """A rollout deletes the old replica, which turns Ready=False as it stops and is gone: that
    is no failure still going on when a later change to db breaks web."""
    web1 = {"kind": "Process", "name": "web-1", "namespace": "default"}
    rollout = [
        change(100, WEB, "spec.template.spec.env.VERSION", "1", "2"),
        ready(100.1, WEB, "False", "RollingUpdate"),
        {**change(100.2, web1, "spec", None, {"args": ["web"]}, "controller"), "action": "created"},
        edge(100.2, web1, WEB, "ownerReference"),
        ready(101, web1, "True", "ReadinessProbeSucceeded"),
        change(
            101.1, WEB0, "metadata.deletionTimestamp", None, "2025-11-24T16:01:41Z", "controller"
        ),
        ready(102, WEB0, "False", "NotRunning"),
        {"ts": T0 + 102, "type": "exit", "object": WEB0, "exitCode": 0, "stoppedOnRequest": True},
        {**change(102.1, WEB0, "spec", {"args": ["web"]}, None, "unknown"), "action": "deleted"},
        ready(102.2, WEB, "True", "Available"),
    ]
    cause = change(110, DB, "spec.args[2]", None, "listen_addresses=")
    broken = [cause, ready(110.2, DB, "False", "ReadinessProbePending"),
              ready(110.3, WEB, "False", "DependencyNotReady")]  # fmt: skip
    index = TimelineIndex.build(by_ts(webapp() + rollout + broken))
    assert ObjectRef("Process", "web-0", "default") not in index.onsets
    first = explain(index, TARGET)[0]
    assert first.entry is cause
    assert "already showed trouble" not in first.reason


def test_a_failing_object_that_is_deleted_fails_no_more_and_fails_anew_when_recreated() -> None:
    crashing = [
        ready(100, WEB0, "False", "CrashLoopBackOff"),
        change(200, WEB0, "metadata.deletionTimestamp", None, "2025-11-24T16:03:20Z"),
        ready(201, WEB0, "False", "NotRunning"),
        {**change(202, WEB0, "spec", {"args": ["web"]}, None, "unknown"), "action": "deleted"},
        {**change(300, WEB0, "spec", None, {"args": ["web"]}), "action": "created"},
        ready(301, WEB0, "False", "ReadinessProbeFailed"),
    ]
    index = TimelineIndex.build(by_ts(webapp() + crashing))
    ref = ObjectRef("Process", "web-0", "default")
    assert [(o.ts - T0, o.failure) for o in index.onsets[ref]] == [
        (100, "CrashLoop"),
        (301, "NotReady"),
    ]
    assert index.failing_at(ref, T0 + 250, since=T0) is None
