"""The ranking rules that live failures of the webapp need (`setpoint.insight.ranking`), each on
a small hand-written timeline: a replica whose port a stranger took, a dependency deleted or
moved under its dependents, a harmless change just before trouble."""

from __future__ import annotations

from typing import Any

from explain_support import DB, T0, WEB, WEB0, by_ts, change, edge, log, ready, webapp

from setpoint.insight.entries import ObjectRef
from setpoint.insight.index import TimelineIndex
from setpoint.insight.ranking import Candidate, explain

WEB1 = {"kind": "Process", "name": "web-1", "namespace": "default"}


def exit_(ts: float, o: dict[str, str], code: int | None, *lines: str, **more: Any) -> Any:
    return {"ts": T0 + ts, "type": "exit", "object": o, "exitCode": code, "lines": list(lines),
            **more}  # fmt: skip


def rollout_to_web1(at: float) -> list[dict[str, Any]]:
    """`bob` rolls `web` out at `at`: a new replica web-1 starts and is Ready, web-0 is
    deleted (it stops on request), web is Ready again."""
    created = change(at + 0.2, WEB1, "spec", None, {"args": ["web"]}, "controller")
    deleted = change(at + 2.1, WEB0, "spec", {"args": ["web"]}, None, "controller")
    return [
        change(at, WEB, "spec.template.spec.env.VERSION", "1", "2", "bob"),
        ready(at + 0.1, WEB, "False", "RollingUpdate"),
        {**created, "action": "created"},
        edge(at + 0.2, WEB1, WEB, "ownerReference"),
        ready(at + 1, WEB1, "True", "ReadinessProbeSucceeded"),
        change(at + 1.1, WEB0, "metadata.deletionTimestamp", None, "2025-11-24T16:01:41Z", "c"),
        exit_(at + 1.5, WEB0, 0, stoppedOnRequest=True),
        {**deleted, "action": "deleted"},
        ready(at + 2.2, WEB, "True", "Available"),
    ]


def first(entries: list[dict[str, Any]], target: dict[str, str]) -> Candidate:
    candidates = explain(TimelineIndex.build(by_ts(entries)), ObjectRef.of(target) or WEB_REF)
    return candidates[0]


WEB_REF = ObjectRef("Deployment", "web", "default")


def test_a_stranger_on_the_port_of_a_replica_made_after_a_rollout_is_what_broke_it() -> None:
    """web-1 was made by the rollout and was Ready after it: the rollout is healed for it.
    A minute later it exits "Address already in use" with no change before it but an
    annotation (which changes nothing that runs): its own exit is the first cause."""
    decoy = change(158, WEB, "metadata.annotations.note", None, "hello", "alice")
    in_use = exit_(160, WEB1, 1, "OSError: [Errno 98] Address already in use")
    trouble = [
        decoy,
        exit_(159, WEB1, None, signal=9),
        ready(159.5, WEB1, "False", "ProcessExited"),
        in_use,
        log(160.1, WEB1, "OSError: [Errno 98] Address already in use"),
    ]
    top = first(webapp() + rollout_to_web1(100) + trouble, WEB1)
    assert top.entry["type"] in ("exit", "log")
    assert "in use" in str(top.entry.get("lines") or top.entry.get("line"))


def test_a_change_the_target_was_ready_again_after_is_healed_even_if_it_was_new() -> None:
    """The target did not exist at the change, then was made and turned Ready: the change
    took effect and the target ran with it, as after a failure that ended."""
    rollout = rollout_to_web1(100)
    index = TimelineIndex.build(by_ts(webapp() + rollout + [ready(300, WEB1, "False", "X")]))
    candidates = explain(index, ObjectRef("Process", "web-1", "default"))
    change_of_web = next(c for c in candidates if c.entry is rollout[0])
    assert "was Ready again" in change_of_web.reason


def test_a_metadata_change_right_before_trouble_gets_no_credit_for_it() -> None:
    """An annotation changes nothing that runs: the trouble that follows is not its evidence."""
    decoy = change(100, WEB, "metadata.annotations.note", None, "hello", "alice")
    broken = [decoy, exit_(101, WEB0, 1, "Traceback"), ready(102, WEB, "False", "X")]
    candidates = explain(TimelineIndex.build(by_ts(webapp() + broken)), WEB_REF)
    annotation = next(c for c in candidates if c.entry is decoy)
    assert "then" not in annotation.reason
    assert annotation.score < 0.2


def test_a_deleted_dependency_is_the_cause_not_its_shutdown_nor_its_dependents_exits() -> None:
    """db is deleted: it exits as it stops (code 1, still a stop on request: its deletion had
    begun), and web's replica exits for want of it. web waits for db, which no longer
    exists: the deletion ranks first, with its chain."""
    deletion = change(100, DB, "metadata.deletionTimestamp", None, "2025-11-24T16:01:41Z", "bob")
    gone = [
        deletion,
        exit_(100.5, DB, 1, "FATAL: terminating connection due to administrator command"),
        log(100.6, DB, "FATAL: terminating connection due to administrator command"),
        {**change(101, DB, "spec", {"args": ["db"]}, None, "controller"), "action": "deleted"},
        exit_(103, WEB0, 1, "Traceback", "psycopg.OperationalError: connection refused"),
        ready(103.5, WEB0, "False", "ProcessExited"),
        ready(104, WEB, "False", "DependencyNotReady"),
    ]
    index = TimelineIndex.build(by_ts(webapp() + gone))
    assert not any(index.refs.get(p) == ObjectRef.of(DB) for p in index.symptoms)
    top = explain(index, WEB_REF)[0]
    assert top.entry is deletion
    assert top.path[-1] == ObjectRef.of(DB)


def test_a_moved_dependency_ranks_above_an_earlier_healed_change_of_the_target() -> None:
    """web broke and was healed by bob an earlier time; later db's port moves and web's
    replica cannot connect: the port change is first, the healed changes of web are not."""
    earlier = [
        change(100, WEB, "spec.template.spec.args[1]", None, "--no-such-flag", "bob"),
        exit_(101, WEB0, 2, "app.py: error: unrecognized arguments: --no-such-flag"),
        ready(102, WEB0, "False", "ProcessExited"),
        ready(103, WEB, "False", "ReplicasNotReady"),
        change(130, WEB, "spec.template.spec.args[1]", "--no-such-flag", None, "bob"),
        ready(132, WEB0, "True", "ReadinessProbeSucceeded"),
        ready(133, WEB, "True", "AllReplicasReady"),
    ]
    moved = change(190, DB, "spec.ports[0]", "5432", "5433", "bob")
    broken = [
        moved,
        exit_(190.5, DB, None, signal=15),
        ready(192, DB, "True", "ProbeSucceeded"),
        exit_(195, WEB0, 1, "Traceback", "psycopg.OperationalError: connection refused"),
        ready(196, WEB0, "False", "ProcessExited"),
        ready(197, WEB, "False", "ReplicasNotReady"),
    ]
    assert first(webapp() + earlier + broken, WEB).entry is moved


def test_an_owner_change_after_the_replica_was_made_does_not_reach_it() -> None:
    """bob changes web's template while web-0 runs on (the rollout never replaced it); then
    a stranger takes web-0's port: its own exit ranks above web's change."""
    rollback = change(100, WEB, "spec.template.spec.args[0]", "webapp-v7", "python", "bob")
    trouble = [
        rollback,
        exit_(130, WEB0, None, signal=9),
        ready(130.5, WEB0, "False", "ProcessExited"),
        exit_(131, WEB0, 1, "OSError: [Errno 98] Address already in use"),
    ]
    top = first(webapp() + trouble, WEB0)
    assert top.entry["type"] == "exit"
    assert "in use" in str(top.entry.get("lines"))


def test_a_change_that_fixed_its_failing_object_is_no_cause_of_a_later_failure() -> None:
    """db failed; bob fixed it and db was Ready again; later a stranger takes web-0's port:
    the fix is not the cause, web-0's own exit is."""
    fix = change(130, DB, "spec.readinessProbe.port", 9, 5432, "bob")
    trouble = [
        ready(105, DB, "False", "ReadinessProbeFailed"),
        fix,
        ready(132, DB, "True", "ProbeSucceeded"),
        exit_(150, WEB0, None, signal=9),
        ready(150.5, WEB0, "False", "ProcessExited"),
        exit_(151, WEB0, 1, "OSError: [Errno 98] Address already in use"),
    ]
    candidates = explain(
        TimelineIndex.build(by_ts(webapp() + trouble)), ObjectRef.of(WEB0) or WEB_REF
    )
    assert "in use" in str(candidates[0].entry.get("lines"))
    assert "a fix" in next(c for c in candidates if c.entry is fix).reason


def test_a_change_of_an_earlier_episode_that_ended_does_not_explain_a_later_failure() -> None:
    """bob's probe path broke web's rollout (web NotReady at once: the change's evidence)
    and bob restored it: web was Ready again. Meanwhile db logged a client's bad SQL. Later
    bob sets an env that breaks the next rollout: that change is first. The earlier change
    showed its trouble in an episode that ended (no evidence now), and db's error line came
    before web's recovery (no trouble of this episode, so no precedence over the new
    change). Before the episode rule the earlier change ranked first (0.82 against 0.5)."""
    path = "spec.template.spec.readinessProbe.httpGet.path"
    earlier = [
        change(100, WEB, path, "/healthz", "/v2/healthz", "bob"),
        ready(100.1, WEB, "False", "RollingUpdate"),
        log(103, DB, 'ERROR:  syntax error at or near ";" at character 30'),
        change(105, WEB, path, "/v2/healthz", "/healthz", "bob"),
        ready(105.1, WEB, "True", "Available"),
    ]
    bad = change(150, WEB, "spec.template.spec.env.PYTHONHOME", None, "/nonexistent", "bob")
    broken = [bad, ready(150.01, WEB, "False", "RollingUpdate")]
    candidates = explain(TimelineIndex.build(by_ts(webapp() + earlier + broken)), WEB_REF)
    assert candidates[0].entry is bad
    assert "already showed trouble" not in candidates[0].reason
    old = next(c for c in candidates if c.entry is earlier[0])
    assert "then" not in old.reason


def test_the_change_that_broke_a_root_blocker_ranks_above_what_the_blocker_then_said() -> None:
    """db, Ready, logs a client's bad SQL (web stays Ready). bob gives db a setting it
    refuses: db stops on request (the spec changed), then exits FATAL at each start; web
    waits for it. The FATAL exit is db's evidence as a root blocker, but it is what the
    change did: the change is first, with the chain. Before, the exit ranked first (2.0
    against 1.25: the change came after db's error line)."""
    bad = change(190, DB, "spec.args[2]", None, "shared_buffers=lots", "bob")
    fatal = 'FATAL:  invalid value for parameter "shared_buffers": "lots"'
    trouble = [
        log(150, DB, 'ERROR:  syntax error at or near ";" at character 30'),
        bad,
        ready(190.01, DB, "False", "Restarting"),
        ready(190.02, WEB, "False", "DependencyNotReady"),
        exit_(190.1, DB, 0, "LOG:  database system is shut down", stoppedOnRequest=True),
        exit_(190.2, DB, 1, fatal),
        log(190.2, DB, fatal),
        exit_(190.3, DB, 1, fatal),
        ready(190.3, DB, "False", "CrashLoopBackOff"),
    ]
    candidates = explain(TimelineIndex.build(by_ts(webapp() + trouble)), WEB_REF)
    assert candidates[0].entry is bad
    assert candidates[0].path[-1] == ObjectRef.of(DB)
    exit_of_db = next(c for c in candidates if c.entry["type"] == "exit")
    assert "but a blocker was changed" in exit_of_db.reason


def event(ts: float, o: dict[str, str], reason: str, message: str) -> dict[str, Any]:
    return {"ts": T0 + ts, "type": "event", "object": o, "eventType": "Warning",
            "reason": reason, "message": message}  # fmt: skip


def test_a_moved_dependency_explains_web_after_a_blink_of_health_and_a_fix_before_it() -> None:
    """bob broke web's rollout and fixed it (web Ready again). Then he moves db's port: db
    restarts, web waits for it, db is Ready, web too for a blink, then web's replica fails
    its probe (it still calls the old port). The move is first: the replica's failure came
    after it, so it is no evidence for bob's earlier fix of web (db, which web depends on,
    changed in between); and a blink of health after the move did not end its episode
    (nothing changed db again). Before, the fix ranked first with that evidence."""
    env = "spec.template.spec.env.PYTHONHOME"
    earlier = [
        change(100, WEB, env, None, "/nonexistent", "bob"),
        ready(100.01, WEB, "False", "RollingUpdate"),
        change(106, WEB, env, "/nonexistent", None, "bob"),
        ready(106.01, WEB, "True", "Available"),
    ]
    moved = change(115, DB, "spec.ports[0]", 5432, 5433, "bob")
    broken = [
        moved,
        ready(115.01, DB, "False", "Restarting"),
        ready(115.02, WEB, "False", "DependencyNotReady"),
        exit_(115.2, DB, 0, "LOG:  database system is shut down", stoppedOnRequest=True),
        ready(116.3, DB, "True", "ReadinessProbeSucceeded"),
        ready(116.31, WEB, "True", "Available"),
        event(117, WEB0, "Unhealthy", "readiness probe failed: HTTP 503"),
        ready(117, WEB0, "False", "ReadinessProbeFailed"),
        ready(117, WEB, "False", "ReplicasUnavailable"),
    ]
    candidates = explain(TimelineIndex.build(by_ts(webapp() + earlier + broken)), WEB_REF)
    assert candidates[0].entry is moved
    fix = next(c for c in candidates if c.entry is earlier[2])
    assert "then" not in fix.reason


def test_a_dependency_change_fixed_before_the_target_was_made_does_not_explain_it() -> None:
    """bob pointed db's probe at a wrong port (db NotReady at once), then put it back: db
    was Ready again. Later he makes a Job migrate-2 with bad SQL; it exits 1. migrate-2 was
    never healthy (made after the fix), but db, the changed object, was healthy after the
    fix: the probe change's episode ended, and migrate-2's own exit is first. Before, the
    probe change ranked first with db's restart as its evidence."""
    migrate2 = {"kind": "Job", "name": "migrate-2", "namespace": "default"}
    probe = "spec.readinessProbe.exec.command[3]"
    earlier = [
        change(100, DB, probe, "5432", "5932", "bob"),
        ready(100.01, DB, "False", "Restarting"),
        ready(104, DB, "False", "ReadinessProbeFailed"),
        change(110, DB, probe, "5932", "5432", "bob"),
        ready(112, DB, "True", "ReadinessProbeSucceeded"),
    ]
    syntax = 'migrate: 101_add_column_1.sql: syntax error at or near ";"'
    created = {**change(130, migrate2, "spec", None, {"args": ["migrate"]}, "bob"),
               "action": "created"}  # fmt: skip
    failing = [
        created,
        edge(130, migrate2, DB, "dependsOn"),
        ready(130.01, migrate2, "False", "Running"),
        exit_(135, migrate2, 1, syntax),
        ready(135.01, migrate2, "False", "BackoffLimitExceeded"),
    ]
    candidates = explain(
        TimelineIndex.build(by_ts(webapp() + earlier + failing)), ObjectRef.of(migrate2) or WEB_REF
    )
    assert candidates[0].entry["type"] == "exit"
    assert syntax in str(candidates[0].entry["lines"])
    fixed = next(c for c in candidates if c.entry is earlier[0])
    assert "an episode that ended" in fixed.reason
