"""Server-side apply (`setpoint.model.managed_fields`): an apply owns the fields it sets,
drops the ones it no longer sets, conflicts (naming the fields and their owners) with
other managers' fields unless forced, and shares fields applied with the same value;
plain writes take the fields they change."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.errors import Conflict, Invalid
from setpoint.model.managed_fields import (
    apply,
    decode,
    encode,
    field_path,
    fields_of,
    manager_of,
    update,
)
from setpoint.store.base import WriteOptions

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def deploy(spec: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": "default"}
    if labels is not None:
        meta["labels"] = labels
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": spec,
    }


def owners(obj: dict[str, Any]) -> dict[str, set[str]]:
    return {
        f"{e['manager']}/{e['operation']}": {field_path(p)[1:] for p in decode(e["fieldsV1"])}
        for e in obj["metadata"].get("managedFields", [])
    }


def test_a_first_apply_owns_every_field_it_sets() -> None:
    applied = deploy({"replicas": 2, "template": {"args": ["web"]}}, labels={"app": "web"})
    merged = apply(None, applied, manager="kubectl", force=False, now=NOW)
    assert merged["spec"] == applied["spec"]
    assert merged["metadata"]["labels"] == {"app": "web"}
    (entry,) = merged["metadata"]["managedFields"]
    assert entry == {
        "manager": "kubectl",
        "operation": "Apply",
        "apiVersion": "setpoint.dev/v1alpha1",
        "time": "2026-01-01T12:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:replicas": {}, "f:template": {"f:args": {}}},
        },
    }


def test_a_field_no_longer_applied_is_removed() -> None:
    first = apply(
        None, deploy({"replicas": 2, "paused": True}, {"a": "1", "b": "2"}), manager="m",
        force=False, now=NOW,
    )  # fmt: skip
    second = apply(first, deploy({"replicas": 2}, {"a": "1"}), manager="m", force=False, now=NOW)
    assert second["spec"] == {"replicas": 2}
    assert second["metadata"]["labels"] == {"a": "1"}
    third = apply(second, deploy({"replicas": 2}), manager="m", force=False, now=NOW)
    assert "labels" not in third["metadata"]
    assert owners(third) == {"m/Apply": {"spec.replicas"}}


def test_another_managers_field_is_a_conflict_naming_it() -> None:
    live = apply(None, deploy({"replicas": 2, "paused": False}), manager="a", force=False, now=NOW)
    with pytest.raises(Conflict) as caught:
        apply(live, deploy({"replicas": 5}), manager="b", force=False, now=NOW)
    assert caught.value.causes == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "a" using setpoint.dev/v1alpha1',
            "field": ".spec.replicas",
        }
    ]
    assert "Apply failed with 1 conflict" in str(caught.value)
    assert live["spec"]["replicas"] == 2  # nothing changed


def test_force_takes_the_field_and_the_same_value_shares_it() -> None:
    live = apply(None, deploy({"replicas": 2, "paused": False}), manager="a", force=False, now=NOW)
    shared = apply(live, deploy({"paused": False}), manager="b", force=False, now=NOW)
    assert owners(shared) == {
        "a/Apply": {"spec.replicas", "spec.paused"},
        "b/Apply": {"spec.paused"},
    }
    # a drops `paused`: b still owns it, so it stays
    kept = apply(shared, deploy({"replicas": 2}), manager="a", force=False, now=NOW)
    assert kept["spec"] == {"replicas": 2, "paused": False}
    taken = apply(kept, deploy({"replicas": 7}), manager="b", force=True, now=NOW)
    assert taken["spec"]["replicas"] == 7
    assert owners(taken) == {"b/Apply": {"spec.replicas"}}  # a owned nothing else: gone
    assert taken["spec"] == {"replicas": 7}  # b's apply no longer holds `paused`


def test_an_apply_of_the_status_owns_status_fields_only_in_an_entry_of_its_own() -> None:
    live = apply(None, deploy({"replicas": 2}), manager="kubectl", force=False, now=NOW)
    applied = {**deploy({"replicas": 9}), "status": {"phase": "Ready", "replicas": 2}}
    merged = apply(live, applied, manager="kubectl", force=False, now=NOW, subresource="status")
    assert (merged["spec"], merged["status"]) == ({"replicas": 2}, applied["status"])
    entries = merged["metadata"]["managedFields"]
    assert [(e["operation"], e.get("subresource"), e["fieldsV1"]) for e in entries] == [
        ("Apply", None, {"f:spec": {"f:replicas": {}}}),
        ("Apply", "status", {"f:status": {"f:phase": {}, "f:replicas": {}}}),
    ]
    merged = apply(  # no longer applied: removed; the object's own entry is untouched
        merged,
        {**deploy({}), "status": {"phase": "Done"}},
        manager="kubectl",
        force=False,
        now=NOW,
        subresource="status",
    )
    assert (merged["spec"], merged["status"]) == ({"replicas": 2}, {"phase": "Done"})
    with pytest.raises(Conflict, match=r"\.status\.phase"):
        apply(
            merged,
            {**deploy({}), "status": {"phase": "Lost"}},
            manager="other",
            force=False,
            now=NOW,
            subresource="status",
        )


def test_a_plain_write_takes_what_it_changes() -> None:
    live = apply(None, deploy({"replicas": 2, "paused": False}), manager="kubectl", force=False,
                 now=NOW)  # fmt: skip
    scaled = copy.deepcopy(live)
    scaled["spec"]["replicas"] = 4
    written = update(live, scaled, manager="autoscaler", now=NOW)
    assert owners(written) == {
        "kubectl/Apply": {"spec.paused"},
        "autoscaler/Update": {"spec.replicas"},
    }
    with pytest.raises(Conflict) as caught:
        apply(written, deploy({"replicas": 2, "paused": False}), manager="kubectl", force=False,
              now=NOW)  # fmt: skip
    assert caught.value.causes[0]["field"] == ".spec.replicas"
    assert 'conflict with "autoscaler"' in caught.value.causes[0]["message"]
    same = apply(written, deploy({"replicas": 4, "paused": False}), manager="kubectl",
                 force=False, now=NOW)  # fmt: skip
    assert same["spec"]["replicas"] == 4  # the same value: shared, no conflict


def test_fieldsv1_round_trips_and_reads_kubernetes_forms() -> None:
    paths = {
        ("f:spec", "f:replicas"),
        ("f:spec", "f:template", "f:args"),
        ("f:metadata", "f:labels", "f:a"),
        ("f:spec", "f:ports", 'k:{"port":80}'),
        ("f:spec", "f:ports", 'k:{"port":80}', "f:port"),
    }
    assert decode(encode(paths)) == paths
    assert encode(paths)["f:spec"]["f:ports"] == {'k:{"port":80}': {".": {}, "f:port": {}}}
    kubernetes = {
        "f:spec": {".": {}, "f:ports": {'k:{"port":80}': {".": {}, "f:port": {}}}},
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:finalizers": {'v:"a"': {}},
    }
    assert decode(kubernetes) == {
        ("f:spec",),
        ("f:spec", "f:ports", 'k:{"port":80}'),
        ("f:spec", "f:ports", 'k:{"port":80}', "f:port"),
        ("f:metadata", "f:labels"),
        ("f:metadata", "f:labels", "f:app"),
        ("f:finalizers", 'v:"a"'),
    }


_VALUES = st.recursive(
    st.integers(0, 3) | st.text("ab", max_size=2) | st.lists(st.integers(0, 2), max_size=2),
    lambda inner: st.dictionaries(st.sampled_from(["x", "y", "z"]), inner, max_size=3),
    max_leaves=6,
)
_SPECS = st.dictionaries(st.sampled_from(["a", "b", "c"]), _VALUES, max_size=3)


@settings(max_examples=80, deadline=None)
@given(_SPECS, _SPECS)
def test_one_manager_never_conflicts_and_reapplying_changes_nothing(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    live = apply(None, deploy(first), manager="m", force=False, now=NOW)
    after = apply(live, deploy(second), manager="m", force=False, now=NOW)
    assert after["spec"] == second
    assert apply(after, deploy(second), manager="m", force=False, now=NOW) == after
    assert {p for e in after["metadata"].get("managedFields", []) for p in decode(e["fieldsV1"])} \
        == fields_of(deploy(second))  # fmt: skip


async def test_server_side_apply_against_a_store() -> None:
    from setpoint.engine import builtin_kinds
    from setpoint.errors import Invalid
    from setpoint.store import open_store
    from setpoint.store.apply import server_side_apply
    from setpoint.workloads.kinds import PROCESS

    store = await open_store("memory://", builtin_kinds())
    try:
        applied = {
            "apiVersion": PROCESS.api_version,
            "kind": "Process",
            "metadata": {"name": "p"},
            "spec": {"args": ["true"]},
        }
        dry = await server_side_apply(
            store,
            PROCESS,
            "p",
            "default",
            applied,
            field_manager="m",
            options=WriteOptions(dry_run=True),
        )
        assert dry["spec"]["restartPolicy"] == "Always"  # validated, defaults filled
        assert await store.revision() == 0  # nothing written
        created = await server_side_apply(
            store, PROCESS, "p", "default", applied, field_manager="m"
        )
        again = await server_side_apply(store, PROCESS, "p", "default", applied, field_manager="m")
        assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        with pytest.raises(Conflict) as caught:
            await server_side_apply(
                store, PROCESS, "p", "default", {**applied, "spec": {"args": ["false"]}},
                field_manager="n",
            )  # fmt: skip
        assert [c["field"] for c in caught.value.causes] == [".spec.args"]
        with pytest.raises(Invalid) as refused:
            await server_side_apply(store, PROCESS, "q", "default", applied, field_manager="m")
        assert refused.value.field == "metadata.name"
    finally:
        await store.close()


# -- lists merged by key (x-kubernetes-list-type) -----------------------------------------

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "env": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
                    },
                },
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "set",
                    "items": {"type": "integer"},
                },
                "args": {"type": "array", "items": {"type": "string"}},
            },
        }
    },
}


def ssa(live: dict[str, Any] | None, spec: dict[str, Any], manager: str, **kw: Any) -> Any:
    return apply(live, deploy(spec), manager=manager, force=kw.get("force", False), now=NOW,
                 schema=kw.get("schema", SCHEMA))  # fmt: skip


def test_two_managers_own_different_elements_of_a_map_list() -> None:
    live = ssa(None, {"env": [{"name": "A", "value": "1"}], "args": ["x"]}, "a")
    both = ssa(live, {"env": [{"name": "B", "value": "2"}]}, "b")  # no conflict
    assert both["spec"]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert owners(both) == {
        "a/Apply": {'spec.env[name="A"]', 'spec.env[name="A"].name',
                    'spec.env[name="A"].value', "spec.args"},
        "b/Apply": {'spec.env[name="B"]', 'spec.env[name="B"].name', 'spec.env[name="B"].value'},
    }  # fmt: skip
    assert both["metadata"]["managedFields"][1]["fieldsV1"] == {
        "f:spec": {"f:env": {'k:{"name":"B"}': {".": {}, "f:name": {}, "f:value": {}}}}
    }
    # a drops its element: b's stays, a's goes
    dropped = ssa(both, {"args": ["x"]}, "a")
    assert dropped["spec"]["env"] == [{"name": "B", "value": "2"}]
    # b changes its own element: no conflict with a
    changed = ssa(both, {"env": [{"name": "B", "value": "3"}]}, "b")
    assert changed["spec"]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]


def test_an_element_of_another_manager_with_another_value_is_a_conflict() -> None:
    live = ssa(None, {"env": [{"name": "A", "value": "1"}]}, "a")
    with pytest.raises(Conflict) as caught:
        ssa(live, {"env": [{"name": "A", "value": "9"}]}, "b")
    assert [c["field"] for c in caught.value.causes] == ['.spec.env[name="A"].value']
    # the same element named without the value: shared, nothing to conflict on
    shared = ssa(live, {"env": [{"name": "A"}]}, "b")
    assert shared["spec"]["env"] == [{"name": "A", "value": "1"}]
    # a leaves it: the element stays (b owns it), without a's value
    left = ssa(shared, {"args": ["x"]}, "a")
    assert left["spec"]["env"] == [{"name": "A"}]
    taken = ssa(live, {"env": [{"name": "A", "value": "9"}]}, "b", force=True)
    assert taken["spec"]["env"] == [{"name": "A", "value": "9"}]
    assert owners(taken)["a/Apply"] == {'spec.env[name="A"]', 'spec.env[name="A"].name'}


def test_set_lists_own_values_and_atomic_lists_stay_whole() -> None:
    live = ssa(None, {"ports": [80], "args": ["x", "y"]}, "a")
    both = ssa(live, {"ports": [443]}, "b")
    assert both["spec"]["ports"] == [80, 443]
    assert owners(both)["b/Apply"] == {"spec.ports[=443]"}
    with pytest.raises(Conflict) as caught:
        ssa(both, {"args": ["z"]}, "b")
    assert [c["field"] for c in caught.value.causes] == [".spec.args"]
    gone = ssa(both, {"args": ["x", "y"]}, "a")
    assert gone["spec"]["ports"] == [443]
    # without a schema every list is atomic: another manager's list is a conflict
    with pytest.raises(Conflict):
        ssa(live, {"ports": [443]}, "b", schema=None)


def test_a_keyed_list_needs_its_keys_once_each() -> None:
    with pytest.raises(Invalid) as missing:
        ssa(None, {"env": [{"value": "1"}]}, "a")
    assert missing.value.field == "spec.env"
    with pytest.raises(Invalid) as twice:
        ssa(None, {"env": [{"name": "A"}, {"name": "A"}]}, "a")
    assert twice.value.field == "spec.env"
    assert '[name="A"]' in str(twice.value)


def test_a_plain_write_takes_the_element_fields_it_changes() -> None:
    live = ssa(None, {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}, "a")
    edited = copy.deepcopy(live)
    edited["spec"]["env"][1]["value"] = "5"
    written = update(live, edited, manager="kubectl-edit", now=NOW, schema=SCHEMA)
    assert owners(written)["kubectl-edit/Update"] == {'spec.env[name="B"].value'}
    assert 'spec.env[name="B"]' in owners(written)["a/Apply"]  # still a's element
    with pytest.raises(Conflict) as caught:
        ssa(written, {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}, "a")
    assert caught.value.causes == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "kubectl-edit" using setpoint.dev/v1alpha1',
            "field": '.spec.env[name="B"].value',
        }
    ]


def test_a_write_that_sets_managed_fields_keeps_them_and_reset_clears_them() -> None:
    live = ssa(None, {"args": ["x"]}, "a")
    edited = copy.deepcopy(live)
    edited["spec"]["args"] = ["y"]
    edited["metadata"]["managedFields"] = [{}]
    assert "managedFields" not in update(live, edited, manager="m", now=NOW)["metadata"]
    edited["metadata"].pop("managedFields")
    recorded = update(live, edited, manager="m", now=NOW)  # none given: recorded
    assert owners(recorded) == {"m/Update": {"spec.args"}}


def test_the_manager_of_a_plain_write() -> None:
    assert manager_of("kubectl-edit", "kubectl/v1.31.0 (linux/amd64)") == "kubectl-edit"
    assert manager_of(None, "kubectl/v1.31.0 (linux/amd64) kubernetes/abc") == "kubectl"
    assert manager_of("", "python-httpx/0.28") == "python-httpx"
    assert manager_of(None, "x" * 200) == "x" * 128


def _env(names: str) -> st.SearchStrategy[list[dict[str, str]]]:
    entry = st.builds(
        lambda n, v: {"name": n, "value": v}, st.sampled_from(names), st.text("xy", max_size=1)
    )
    return st.lists(entry, max_size=3, unique_by=lambda e: e["name"])


@settings(max_examples=60, deadline=None)
@given(_env("ab"), _env("cd"), _env("ab"))
def test_managers_of_disjoint_elements_never_conflict(
    first: list[dict[str, str]], theirs: list[dict[str, str]], second: list[dict[str, str]]
) -> None:
    def spec(env: list[dict[str, str]]) -> dict[str, Any]:
        return {"args": ["x"], "env": env} if env else {"args": ["x"]}

    live = ssa(ssa(None, spec(first), "a"), spec(theirs), "b")
    after = ssa(live, spec(second), "a")
    env = after["spec"].get("env", [])
    assert sorted(e["name"] for e in env) == sorted(e["name"] for e in second + theirs)
    assert all(e in env for e in second + theirs)
    assert ssa(after, spec(second), "a") == after  # reapplying changes nothing


def test_the_builtin_kinds_keyed_lists_are_in_their_crds() -> None:
    from setpoint.model.crd import crd_of
    from setpoint.workloads.kinds import DEPLOYMENT, JOB, PROCESS

    def spec_of(kind: Any) -> dict[str, Any]:
        (version,) = crd_of(kind)["spec"]["versions"]
        properties: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]
        return properties["spec"]["properties"]  # type: ignore[no-any-return]

    for kind in (PROCESS, JOB, DEPLOYMENT):
        depends_on = spec_of(kind)["dependsOn"]
        assert depends_on["x-kubernetes-list-type"] == "map"
        assert depends_on["x-kubernetes-list-map-keys"] == ["kind", "name"]
    assert spec_of(PROCESS)["ports"]["x-kubernetes-list-type"] == "set"
    assert "x-kubernetes-list-type" not in spec_of(PROCESS)["args"]  # atomic


def test_an_empty_map_owns_only_that_it_is_there() -> None:
    live = ssa(None, {"env": [{"name": "A", "value": "1"}], "args": ["x"]}, "a")
    empty = ssa(live, {}, "b")  # `spec: {}`: no conflict, nothing of a's undone
    assert empty["spec"] == live["spec"]
    assert owners(empty)["b/Apply"] == {"spec"}
    gone = ssa(empty, {"args": ["x"]}, "a")  # a leaves env: b's empty spec does not keep it
    assert gone["spec"] == {"args": ["x"]}
