"""Causes before symptoms (`setpoint.insight.ranking`, `setpoint.insight.onsets`): the change
that began a dependency's trouble ranks above the trouble, with it as the evidence; the path
to it is shown step by step with the entries that show it."""

from __future__ import annotations

from typing import Any

from explain_support import CACHE, DB, T0, WEB, WEB0, by_ts, change, edge, log, ready, webapp

from setpoint.insight.entries import ObjectRef
from setpoint.insight.index import TimelineIndex
from setpoint.insight.onsets import changes_an_amount
from setpoint.insight.ranking import Candidate, explain

TARGET = ObjectRef("Deployment", "web", "default")
SECRET = {"kind": "Secret", "name": "db-credentials", "namespace": "default"}


def ranked(entries: list[dict[str, Any]]) -> list[Candidate]:
    return explain(TimelineIndex.build(by_ts(entries)), TARGET)


def killed(ts: float, o: dict[str, str]) -> dict[str, Any]:
    return {"ts": T0 + ts, "type": "exit", "object": o, "exitCode": None, "signal": "SIGKILL"}


def event(ts: float, o: dict[str, str], reason: str, message: str) -> dict[str, Any]:
    return {"ts": T0 + ts, "type": "event", "object": o, "eventType": "Warning",
            "reason": reason, "message": message}  # fmt: skip


def test_a_lowered_limit_ranks_above_the_kills_it_began_with_them_as_its_evidence() -> None:
    """cache's memory limit is lowered; two minutes later it is killed again and again, and
    web, which depends on it, waits: the change is first, the kills are its evidence."""
    lowered = change(600, CACHE, "spec.resources.memoryLimit", "512Mi", "48Mi")
    kills = [
        {"ts": T0 + 600.2, "type": "exit", "object": CACHE, "exitCode": None, "signal": 15},
        ready(601.5, CACHE, "True", "ProbeSucceeded"),
    ]
    for k in range(7):
        at = 720 + 15 * k
        kills += [killed(at, CACHE), event(at + 0.2, CACHE, "BackOff", "back-off restarting")]
    kills += [
        ready(720.1, CACHE, "False", "ProcessExited"),
        ready(722, WEB, "False", "DependencyNotReady"),
    ]
    decoy = change(700, WEB, "spec.replicas", 1, 2, "carol")
    entries = [*webapp(), edge(1, WEB, CACHE, "dependsOn"), lowered, decoy, *kills]
    candidates = ranked(entries)
    top = candidates[0]
    assert top.entry is lowered
    assert "2 min before Process/cache began exiting with signal SIGKILL (7 times since)" in (
        top.reason
    )
    assert "Deployment/web" in top.reason
    assert [str(o) for o in top.path] == ["Deployment/web", "Process/cache"]
    (hop,) = top.hops
    assert (hop.relation, hop.verified) == ("dependsOn", True)
    assert hop.entry is not None
    assert hop.entry["type"] == "edge"
    kill_ranks = [i for i, c in enumerate(candidates) if c.entry.get("type") == "exit"]
    assert kill_ranks
    assert min(kill_ranks) > 0


def test_a_secret_changed_under_a_running_db_is_found_through_what_uses_it() -> None:
    """The db's password changes in its Secret; the db is restarted later (an annotation)
    and takes it; web's replicas cannot log in. The Secret's change is first, and the path
    from web to it goes through the db's `uses` edge."""
    rotated = change(600, SECRET, "data.password", "(hidden)", "(changed)")
    restarted = change(900, DB, "metadata.annotations.restartedAt", None, "900", "oncall")
    failing = "FATAL:  password authentication failed for user shop"
    entries = [
        *webapp(),
        change(0, SECRET, "data", None, {"password": "(hidden)"}),
        edge(1, DB, SECRET, "uses"),
        rotated,
        restarted,
        {"ts": T0 + 900.2, "type": "exit", "object": DB, "exitCode": None, "signal": 15},
        ready(901.5, DB, "True", "ProbeSucceeded"),
        log(903, DB, failing),
        {"ts": T0 + 904, "type": "exit", "object": WEB0, "exitCode": 1, "lines": [failing]},
        {"ts": T0 + 916, "type": "exit", "object": WEB0, "exitCode": 1, "lines": [failing]},
        ready(904.5, WEB0, "False", "CrashLoopBackOff"),
        ready(905, WEB, "False", "ReplicasNotReady"),
    ]
    top = ranked(entries)[0]
    assert top.entry is rotated
    assert [str(o) for o in top.path] == [
        "Deployment/web",
        "Process/db",
        "Secret/db-credentials",
    ]
    assert [h.relation for h in top.hops] == ["dependsOn", "uses"]
    assert all(h.verified for h in top.hops)


def test_a_client_error_naming_the_port_points_at_the_dependency_not_a_later_change() -> None:
    """db's port moves; web's template changes right after (a harmless log level); then
    web's replica cannot connect to port 5432: the error names the old port, so the db's
    change is first though web's own change came later and closer."""
    moved = change(600, DB, "spec.env.PGPORT", "5432", "5433")
    level = change(610, WEB, "spec.template.spec.env.LOG_LEVEL", "info", "debug")
    refused = 'connection to server at "db", port 5432 failed: Connection refused'
    entries = [
        *webapp(),
        moved,
        {"ts": T0 + 600.2, "type": "exit", "object": DB, "exitCode": None, "signal": 15},
        ready(601.5, DB, "True", "ProbeSucceeded"),
        level,
        {"ts": T0 + 620, "type": "exit", "object": WEB0, "exitCode": 1, "lines": [refused]},
        {"ts": T0 + 631, "type": "exit", "object": WEB0, "exitCode": 1, "lines": [refused]},
        ready(631.5, WEB0, "False", "CrashLoopBackOff"),
        ready(632, WEB, "False", "ReplicasNotReady"),
    ]
    top = ranked(entries)[0]
    assert top.entry is moved
    assert "began exiting with code 1 (2 times since)" in top.reason


def test_an_object_made_after_a_dependency_changed_fails_on_its_own() -> None:
    """db's port is set back by bob; then a new Job that depends on db runs bad SQL and
    fails: its own exit is first, not the db change it was made after."""
    job = {"kind": "Job", "name": "migrate-2", "namespace": "default"}
    restored = change(600, DB, "spec.args[4]", "5433", "5432", "bob")
    bad_sql = 'migrate: 104_add_column.sql: syntax error at or near ";"'
    entries = [
        *webapp(),
        restored,
        {"ts": T0 + 600.2, "type": "exit", "object": DB, "exitCode": None, "signal": 15},
        ready(601.5, DB, "True", "ProbeSucceeded"),
        {**change(630, job, "spec", None, {"args": ["migrate"]}, "bob"), "action": "created"},
        edge(630, job, DB, "dependsOn"),
        {"ts": T0 + 633, "type": "exit", "object": job, "exitCode": 1, "lines": [bad_sql]},
        {"ts": T0 + 640, "type": "exit", "object": job, "exitCode": 1, "lines": [bad_sql]},
        {
            "ts": T0 + 640.5,
            "type": "condition",
            "object": job,
            "condition": {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "2 failed attempts",
            },
        },
    ]
    index = TimelineIndex.build(by_ts(entries))
    top = explain(index, ObjectRef("Job", "migrate-2", "default"))[0]
    assert top.entry is not restored
    assert top.entry["object"] == job


def flapping(start: float, stop: float, o: dict[str, str]) -> list[dict[str, Any]]:
    """`o`'s readiness probe fails now and then and passes again by itself (nothing changed)."""
    out: list[dict[str, Any]] = []
    for at in range(int(start), int(stop), 40):
        out += [
            event(at, o, "Unhealthy", "Readiness probe failed: PONG timeout"),
            ready(at + 0.1, o, "False", "ProbeFailed"),
            ready(at + 8, o, "True", "ProbeSucceeded"),
        ]
    return out


def test_a_limit_lowered_while_a_flapping_probe_failed_is_no_fix_of_it() -> None:
    """cache's probe flaps by itself; its memory limit is lowered while the probe is failing,
    and it passes again right after; a minute later the kills begin. The recovery was the
    probe's own (it had healed by itself before), not the change's: the change is no fix,
    and it ranks first, above an older harmless flag change of the cache."""
    older = change(300, CACHE, "spec.args[2]", "--maxmemory=1024mb", "--maxmemory=512mb")
    lowered = change(601, CACHE, "spec.resources.memoryLimit", "512Mi", "48Mi")
    entries = [
        *webapp(),
        edge(1, WEB, CACHE, "dependsOn"),
        older,
        *flapping(400, 640, CACHE),
        lowered,
        {"ts": T0 + 601.2, "type": "exit", "object": CACHE, "exitCode": None, "signal": 15},
    ]
    for k in range(4):
        at = 660 + 15 * k
        entries += [killed(at, CACHE), event(at + 0.2, CACHE, "BackOff", "back-off restarting")]
    entries += [ready(660.1, CACHE, "False", "ProcessExited")]
    entries += [ready(662, WEB, "False", "DependencyNotReady")]
    top = ranked(entries)[0]
    assert top.entry is lowered
    assert "fix" not in top.reason


def test_a_resource_that_ran_out_points_at_the_amount_not_a_later_log_level() -> None:
    """web's template gets more workers; the replica restarts and is Ready; then the log level
    changes (a restart too); then the replica runs out of memory and is killed over and
    over. The trouble says a resource ran out, so the change of an amount (4 -> 32 workers)
    fits it, not the later and closer change of a name (info -> debug)."""
    more = change(600, WEB, "spec.template.spec.env.WORKERS", "4", "32")
    level = change(612, WEB, "spec.template.spec.env.LOG_LEVEL", "info", "debug")
    entries = [
        *webapp(),
        more,
        {"ts": T0 + 601, "type": "exit", "object": WEB0, "exitCode": None, "signal": 15},
        ready(602, WEB0, "True", "ProbeSucceeded"),
        level,
        {"ts": T0 + 613, "type": "exit", "object": WEB0, "exitCode": None, "signal": 15},
    ]
    for k in range(3):
        at = 630 + 10 * k
        entries += [
            log(at, WEB0, "MemoryError"),
            {"ts": T0 + at + 0.1, "type": "exit", "object": WEB0, "exitCode": 137, "signal": 9},
        ]
    entries += [ready(630.3, WEB0, "False", "CrashLoopBackOff")]
    entries += [ready(631, WEB, "False", "ReplicasNotReady")]
    candidates = ranked(entries)
    assert candidates[0].entry is more
    assert "began logging 'MemoryError'" in candidates[0].reason


def test_a_timeout_logged_once_while_serving_is_not_where_the_trouble_began() -> None:
    """web-0 logs one timeout and goes on serving; minutes later the db's memory limit is
    lowered and the db is killed over and over, and web waits. The lone timeout began
    nothing: an older harmless change before it is not the cause, the limit is."""
    older = change(100, CACHE, "spec.args[2]", "--maxmemory=1024mb", "--maxmemory=512mb")
    lowered = change(600, DB, "spec.resources.memoryLimit", "1Gi", "96Mi")
    entries = [
        *webapp(),
        edge(1, WEB, CACHE, "dependsOn"),
        older,
        log(480, WEB0, "WARNING web.db: query timed out after 5.0s"),
        lowered,
        {"ts": T0 + 600.2, "type": "exit", "object": DB, "exitCode": None, "signal": 15},
        ready(601.5, DB, "True", "ProbeSucceeded"),
    ]
    for k in range(4):
        at = 700 + 15 * k
        entries += [killed(at, DB), event(at + 0.2, DB, "BackOff", "back-off restarting")]
    entries += [
        ready(700.1, DB, "False", "ProcessExited"),
        log(701, WEB0, "ERROR web.db: could not connect to db"),
        ready(702, WEB0, "False", "DependencyNotReady"),
        ready(703, WEB, "False", "DependencyNotReady"),
    ]
    top = ranked(entries)[0]
    assert top.entry is lowered
    assert "began exiting with signal SIGKILL" in top.reason


def test_a_dependency_change_the_replica_ran_well_with_does_not_explain_its_new_trouble() -> None:
    """db's port is moved and moved back (with the argument that carries it); each time db
    and web's replica are Ready again after it. A minute later the replica is killed and
    cannot bind its own port, its last lines naming the db's port: the changes had settled,
    so the replica's own words come first, not the db's changes."""

    def moved(ts: float, old: int, new: int) -> dict[str, Any]:
        return {
            "ts": T0 + ts, "type": "change", "object": DB, "actor": "bob",
            "diff": {"spec.args[4]": [str(old), str(new)], "spec.ports[0]": [old, new]},
        }  # fmt: skip

    def restart(ts: float) -> list[dict[str, Any]]:
        return [
            ready(ts + 0.1, DB, "False", "Restarting"),
            ready(ts + 0.15, WEB0, "False", "ReadinessProbeFailed"),
            {"ts": T0 + ts + 0.2, "type": "exit", "object": DB, "exitCode": 0, "signal": None},
            ready(ts + 0.3, WEB0, "True", "ReadinessProbeSucceeded"),
            ready(ts + 1.5, DB, "True", "ProbeSucceeded"),
        ]

    away, back = moved(600, 39809, 39810), moved(606, 39810, 39809)
    in_use = "OSError: [Errno 98] Address already in use"
    said = ["web-0 listening on 8080, database webapp on port 39809", in_use]
    entries = [
        *webapp(),
        away,
        *restart(600),
        back,
        *restart(606),
        killed(660, WEB0),
        ready(660.1, WEB0, "False", "ReadinessProbePending"),
        log(660.4, WEB0, in_use),
        {"ts": T0 + 660.4, "type": "exit", "object": WEB0, "exitCode": 1, "lines": said},
        ready(660.5, WEB0, "False", "CrashLoopBackOff"),
    ]
    candidates = explain(TimelineIndex.build(by_ts(entries)), ObjectRef.of(WEB0))
    assert candidates
    assert candidates[0].entry not in (away, back)
    assert candidates[0].entry["object"] == WEB0


def test_a_port_moved_with_the_argument_that_carries_it_is_no_change_of_an_amount() -> None:
    """`changes_an_amount` reads ports as addresses: neither the port nor the argument that
    carries its value counts, while a real amount beside them does."""
    ports = {"spec.args[4]": ["39810", "39809"], "spec.ports[0]": [39810, 39809]}
    assert not changes_an_amount({"diff": ports})
    assert not changes_an_amount({"diff": {"spec.env.PGPORT": ["5432", "5433"]}})
    assert changes_an_amount({"diff": {**ports, "spec.args[2]": ["--workers=4", "--workers=32"]}})


def test_a_client_naming_a_value_that_was_put_back_points_at_no_change_of_it() -> None:
    """db's probe is pointed at a wrong port and then back; web's replica stays Ready
    throughout. A minute later the replica is killed and cannot bind its own port, its
    banner naming the db's port 39809, which the probe holds again: the banner points at
    neither change, and the replica's own words come first."""
    path = "spec.readinessProbe.exec.command[3]"
    wrong, back = change(600, DB, path, "39809", "39899"), change(630, DB, path, "39899", "39809")
    in_use = "OSError: [Errno 98] Address already in use"
    said = ["web-0 listening on 8080, database webapp on port 39809", in_use]
    entries = [
        *webapp(),
        wrong,
        ready(601, DB, "False", "ProbeFailed"),
        back,
        ready(631, DB, "True", "ProbeSucceeded"),
        killed(680, WEB0),
        ready(680.1, WEB0, "False", "ReadinessProbePending"),
        log(680.4, WEB0, in_use),
        {"ts": T0 + 680.4, "type": "exit", "object": WEB0, "exitCode": 1, "lines": said},
        ready(680.5, WEB0, "False", "CrashLoopBackOff"),
    ]
    candidates = explain(TimelineIndex.build(by_ts(entries)), ObjectRef.of(WEB0))
    assert candidates
    assert candidates[0].entry not in (wrong, back)
    assert candidates[0].entry["object"] == WEB0


def test_a_rollback_of_a_dependency_that_healed_it_does_not_explain_a_later_trouble() -> None:
    """db, which had failed and healed by itself before (so its recovery proves no fix), has
    its probe pointed at a wrong port (db not Ready), then rolled back (db Ready again);
    web's replica never noticed. Later the replica is killed and cannot bind its
    port: the rollback is doubted (it put back what db had), so it does not outrank the
    replica's own words, and the ranking says why."""
    path = "spec.readinessProbe.exec.command[3]"
    wrong, back = change(600, DB, path, "46243", "46743"), change(640, DB, path, "46743", "46243")
    in_use = "OSError: [Errno 98] Address already in use"
    entries = [
        *webapp(),
        ready(300, DB, "False", "ReadinessProbeFailed"),
        ready(310, DB, "True", "ProbeSucceeded"),
        wrong,
        ready(600.1, DB, "False", "Restarting"),
        ready(603, DB, "False", "ReadinessProbeFailed"),
        back,
        ready(640.1, DB, "False", "Restarting"),
        ready(642, DB, "True", "ProbeSucceeded"),
        killed(678, WEB0),
        ready(678.1, WEB0, "False", "ReadinessProbePending"),
        log(680.4, WEB0, in_use),
        {"ts": T0 + 680.4, "type": "exit", "object": WEB0, "exitCode": 1, "lines": [in_use]},
        ready(680.5, WEB0, "False", "CrashLoopBackOff"),
    ]
    candidates = explain(TimelineIndex.build(by_ts(entries)), ObjectRef.of(WEB0))
    assert candidates[0].entry["object"] == WEB0
    (rolled,) = [c for c in candidates if c.entry is back]
    assert rolled.doubted
    assert "put back what Process/db had before its last change (a rollback)" in rolled.reason
