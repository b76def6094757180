"""The recorder's decisions, without I/O (`setpoint.insight.recording`): diffs as dotted
paths, what an object's change means as timeline entries, who made it, and which log lines
are kept."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.insight.recording import (
    LogSampler,
    actor_of,
    diff_paths,
    entries_for,
    is_error_line,
    join_path,
    path_parts,
    project,
)
from setpoint.model.wellknown import CHANGED_BY

NOW = 1_700_000_000.0

keys = st.sampled_from(["a", "b", "args", "x-y", "app.kubernetes.io/name", 'q"uote', "_"])
leaves = st.one_of(st.integers(-5, 5), st.text(max_size=4), st.booleans())
values = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)
    ),
    max_leaves=12,
)
documents = st.dictionaries(keys, values, max_size=4)

# Timing never decides a test: no deadline, no "generation is slow" on a busy machine.
untimed = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def lookup(doc: Any, path: str) -> Any:
    for part in path_parts(path):
        if isinstance(part, int):
            doc = doc[part] if isinstance(doc, list) and part < len(doc) else None
        else:
            doc = doc.get(part) if isinstance(doc, dict) else None
    return doc


def apply_diff(doc: Any, diff: dict[str, list[Any]]) -> Any:
    """Set every path of `diff` to its new value (lists grow as needed)."""
    import copy

    out = copy.deepcopy(doc)
    for path, (_, new) in diff.items():
        parts = path_parts(path)
        node = out
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            nxt: Any = None if last else ([] if isinstance(parts[i + 1], int) else {})
            if isinstance(part, int):
                while len(node) <= part:
                    node.append(None)
                if last:
                    node[part] = new
                else:
                    if not isinstance(node[part], list | dict) or (
                        isinstance(node[part], list) != isinstance(nxt, list)
                    ):
                        node[part] = nxt
                    node = node[part]
            else:
                if last:
                    node[part] = new
                else:
                    if not isinstance(node.get(part), list | dict) or (
                        isinstance(node.get(part), list) != isinstance(nxt, list)
                    ):
                        node[part] = nxt
                    node = node[part]
    return out


def strip_nones(value: Any) -> Any:
    """What a diff cannot tell apart: a key set to None and an absent key; a trailing None."""
    if isinstance(value, dict):
        return {k: strip_nones(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        items = [strip_nones(v) for v in value]
        while items and items[-1] is None:
            items.pop()
        return items
    return value


@untimed
@given(documents)
def test_a_document_has_no_diff_with_itself(doc: dict[str, Any]) -> None:
    assert diff_paths(doc, doc) == {}


@untimed
@given(documents, documents)
def test_every_diff_path_names_the_old_and_new_values_there(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    diff = diff_paths(old, new)
    for path, (before, after) in diff.items():
        assert before != after
        assert lookup(old, path) == before
        assert lookup(new, path) == after


@untimed
@given(documents, documents)
def test_the_diff_is_symmetric(old: dict[str, Any], new: dict[str, Any]) -> None:
    forward = diff_paths(old, new)
    assert diff_paths(new, old) == {p: [b, a] for p, (a, b) in forward.items()}


@untimed
@given(documents, documents)
def test_applying_the_diff_to_the_old_document_gives_the_new_one(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    assert strip_nones(apply_diff(old, diff_paths(old, new))) == strip_nones(new)


@untimed
@given(st.lists(keys | st.integers(0, 30), min_size=1, max_size=5))
def test_paths_parse_back_into_their_parts(parts: list[str | int]) -> None:
    path = ""
    for part in parts:
        path = f"{path}[{part}]" if isinstance(part, int) else join_path(path, part)
    assert path_parts(path) == parts


def test_list_changes_are_indexed_like_spec_args() -> None:
    old = {"spec": {"args": ["db", "--port=1", "--max-conn=100"]}}
    new = {"spec": {"args": ["db", "--port=1", "--max-conn=5"]}}
    assert diff_paths(old, new) == {"spec.args[2]": ["--max-conn=100", "--max-conn=5"]}
    assert join_path("metadata.labels", "app.kubernetes.io/name") == (
        'metadata.labels["app.kubernetes.io/name"]'
    )


def process(spec: dict[str, Any], **status: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "db", "namespace": "default", "uid": "u1"}
    if "annotations" in status:
        meta["annotations"] = status.pop("annotations")
    if "owners" in status:
        meta["ownerReferences"] = status.pop("owners")
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": meta,
        "spec": spec,
        "status": status,
    }


REF = {"kind": "Process", "name": "db", "namespace": "default"}


def test_a_created_object_is_a_change_from_nothing_with_its_edges() -> None:
    spec = {"args": ["db"], "dependsOn": [{"kind": "Job", "name": "migrate"}]}
    entries = entries_for(None, project(process(spec), 1), now=NOW)
    assert entries == [
        {
            "ts": NOW,
            "type": "change",
            "object": REF,
            "diff": {"spec": [None, spec]},
            "action": "created",
            "actor": "unknown",
        },
        {
            "ts": NOW,
            "type": "edge",
            "from": REF,
            "to": {"kind": "Job", "name": "migrate", "namespace": "default"},
            "relation": "dependsOn",
        },
    ]


def test_a_spec_change_is_diffed_and_an_unchanged_edge_not_repeated() -> None:
    deps = [{"kind": "Job", "name": "migrate"}]
    old = project(process({"args": ["db", "-c", "100"], "dependsOn": deps}), 1)
    new = project(process({"args": ["db", "-c", "5"], "dependsOn": deps}), 2)
    entries = entries_for(old, new, now=NOW)
    assert [e["type"] for e in entries] == ["change"]
    assert entries[0]["diff"] == {"spec.args[2]": ["100", "5"]}
    assert entries[0]["action"] == "updated"


def test_a_secret_an_object_takes_values_from_is_a_uses_edge() -> None:
    """Its env's secretKeyRef and envFrom's secretRef (in a Deployment, its template's) are
    inputs: a change of the Secret can be traced to what reads it."""
    password = {"valueFrom": {"secretKeyRef": {"name": "db-credentials", "key": "password"}}}
    spec = {
        "args": ["db"],
        "env": {"PGPASSWORD": password},
        "envFrom": [{"secretRef": {"name": "tls"}}],
    }
    entries = entries_for(None, project(process(spec), 1), now=NOW)
    used = [(e["relation"], e["to"]["name"]) for e in entries if e["type"] == "edge"]
    assert used == [("uses", "db-credentials"), ("uses", "tls")]
    template = {"template": {"spec": {"env": [{"name": "P", **password}]}}}
    entries = entries_for(None, project(process(template), 1), now=NOW)
    assert [e["to"]["kind"] for e in entries if e["type"] == "edge"] == ["Secret"]


def test_condition_transitions_and_exits_are_entries_but_a_new_message_alone_is_not() -> None:
    ready = {"type": "Ready", "status": "True", "reason": "Up", "message": "ok"}
    failing = {"type": "Ready", "status": "False", "reason": "ReadinessProbeFailed", "message": "x"}
    base = project(process({"args": ["db"]}, conditions=[ready]), 1)
    same_but_message = project(process({"args": ["db"]}, conditions=[{**ready, "message": "y"}]), 2)
    assert entries_for(base, same_but_message, now=NOW) == []

    crashed = project(
        process(
            {"args": ["db"]},
            conditions=[failing],
            lastExit={"code": 1, "reason": "exited with 1", "finishedAt": "t"},
        ),
        3,
    )
    entries = entries_for(base, crashed, now=NOW)
    assert entries[0] == {"ts": NOW, "type": "condition", "object": REF, "condition": failing}
    assert entries[1]["type"] == "exit"
    assert (entries[1]["exitCode"], entries[1]["signal"]) == (1, None)


def test_deletion_is_a_change_to_nothing_and_a_new_uid_is_delete_then_create() -> None:
    old = project(process({"args": ["a"]}), 1)
    gone = entries_for(old, None, now=NOW)
    assert [(e["type"], e["action"], e["diff"]) for e in gone] == [
        ("change", "deleted", {"spec": [{"args": ["a"]}, None]})
    ]
    again = process({"args": ["b"]})
    again["metadata"]["uid"] = "u2"
    replaced = entries_for(old, project(again, 2), now=NOW)
    assert [e["action"] for e in replaced] == ["deleted", "created"]


def test_the_actor_is_the_stamp_set_by_this_write_else_a_controller_or_unknown() -> None:
    plain = project(process({"args": ["a"]}), 1)
    stamped = project(
        process({"args": ["b"]}, annotations={CHANGED_BY: "controller/deployment"}), 2
    )
    assert actor_of(plain, stamped) == "controller/deployment"
    again = project(process({"args": ["c"]}, annotations={CHANGED_BY: "controller/deployment"}), 3)
    assert actor_of(stamped, again) == "controller"  # the stamp is not this write's
    assert actor_of(plain, project(process({"args": ["d"]}), 4)) == "unknown"
    owned = project(
        process({"args": ["e"]}, owners=[{"kind": "Deployment", "name": "web", "uid": "d"}]), 5
    )
    assert actor_of(plain, owned) == "controller"
    # the stamp itself is not part of the recorded diff
    assert "metadata" not in str(entries_for(plain, stamped, now=NOW)[0]["diff"])


def test_an_event_is_filed_under_its_object_and_recorded_when_it_repeats() -> None:
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "db.1", "namespace": "default", "uid": "e"},
        "involvedObject": {"kind": "Process", "name": "db", "namespace": "default"},
        "type": "Warning",
        "reason": "BackOff",
        "message": "restarting",
        "count": 1,
        "lastTimestamp": "t1",
    }
    first = entries_for(None, project(event, 1), now=NOW)
    assert first == [
        {
            "ts": NOW,
            "type": "event",
            "object": REF,
            "eventType": "Warning",
            "reason": "BackOff",
            "message": "restarting",
            "count": 1,
        }
    ]
    assert entries_for(project(event, 1), project(event, 2), now=NOW) == []
    repeated = {**event, "count": 2, "lastTimestamp": "t2"}
    assert [e["count"] for e in entries_for(project(event, 1), project(repeated, 2), now=NOW)] == [
        2
    ]
    assert entries_for(project(event, 1), None, now=NOW) == []  # expiry is no news


def test_log_sampler_keeps_new_templates_errors_and_a_few_samples_per_minute() -> None:
    sampler = LogSampler(samples_per_minute=2, errors_per_minute=3)
    kept = [sampler.keep("db", 1, i == 0, False, NOW + i) for i in range(5)]
    assert kept == ["new", "sample", None, None, None]
    assert sampler.keep("db", 1, False, False, NOW + 61) == "sample"  # a new minute
    errors = [sampler.keep("db", 2, False, True, NOW) for _ in range(5)]
    assert errors == ["error", "error", "error", "sample", "sample"]
    assert sampler.keep("web", 2, False, True, NOW) == "error"  # per source


def test_error_lines_are_recognised_by_word() -> None:
    assert is_error_line("FATAL: too many connections")
    assert is_error_line("Traceback (most recent call last):")
    assert is_error_line("goroutine 1 [running]: panic: boom")
    assert is_error_line("2024-01-01 ERROR db down")
    assert not is_error_line("0 errors, all fine")
    assert not is_error_line("ready to accept connections")


# -- secrets ---------------------------------------------------------------------------


def _secret(data: dict[str, str], uid: str = "u1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db", "namespace": "default", "uid": uid},
        "data": data,
    }


def test_a_secrets_values_are_recorded_as_changed_never_shown() -> None:
    fields = ("data",)
    created = project(_secret({"password": "aHVudGVyMg=="}), 1, fields)
    changed = project(_secret({"password": "c2VjcmV0Mw==", "user": "YWRtaW4="}), 2, fields)
    same = project(_secret({"password": "c2VjcmV0Mw==", "user": "YWRtaW4="}), 3, fields)
    made = entries_for(None, created, now=1.0)
    updated = entries_for(created, changed, now=2.0)
    gone = entries_for(same, None, now=3.0)
    assert made[0]["diff"] == {"data": [None, {"password": "(hidden)"}]}
    assert updated[0]["diff"] == {
        "data.password": ["(hidden)", "(changed)"],
        "data.user": [None, "(hidden)"],
    }
    assert entries_for(changed, same, now=3.0) == []
    assert gone[0]["diff"]["data"] == [{"password": "(hidden)", "user": "(hidden)"}, None]
    everything = repr([created, changed, made, updated, gone])
    for value in ("aHVudGVyMg==", "hunter2", "c2VjcmV0Mw==", "YWRtaW4=", "admin"):
        assert value not in everything
