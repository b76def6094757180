"""dependsOn, pure: which dependency is unmet and why, cycles, and the cache index and
mapper that wake dependents."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from setpoint.model import Object
from setpoint.runtime.cache import Cache
from setpoint.runtime.reconciler import Request
from setpoint.workloads.dependencies import (
    DEPENDS_ON_INDEX,
    Dependency,
    dependency_keys,
    dependents_of,
    find_cycle,
    unmet,
)


def obj(
    name: str,
    *,
    conditions: list[dict[str, Any]] | None = None,
    depends_on: list[dict[str, Any]] | None = None,
    namespace: str = "default",
) -> Object:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
        "spec": {"args": ["x"], "dependsOn": depends_on or []},
        "status": {"conditions": conditions or []},
    }


def lookup_in(*objects: Object) -> Any:
    table = {(o["kind"], o["metadata"]["name"], o["metadata"]["namespace"]): o for o in objects}
    return lambda kind, name, namespace: table.get((kind, name, namespace))


def dep(name: str, condition: str = "Ready", **extra: Any) -> Dependency:
    return Dependency.model_validate(
        {"kind": "Process", "name": name, "condition": condition, **extra}
    )


def test_all_met() -> None:
    db = obj("db", conditions=[{"type": "Ready", "status": "True"}])
    assert unmet([dep("db")], lookup_in(db), namespace="default") is None
    assert unmet([], lookup_in(), namespace="default") is None


def test_absent_dependency() -> None:
    message = unmet([dep("db")], lookup_in(), namespace="default")
    assert message == "waiting for Process/db to be Ready: it does not exist"


def test_not_yet_reported() -> None:
    message = unmet([dep("db")], lookup_in(obj("db")), namespace="default")
    assert message == "waiting for Process/db to be Ready"


def test_reported_false_gives_its_reason() -> None:
    db = obj("db", conditions=[{"type": "Ready", "status": "False", "reason": "CrashLoopBackOff"}])
    message = unmet([dep("db")], lookup_in(db), namespace="default")
    assert message == "Process/db is not Ready: CrashLoopBackOff"


def test_first_unmet_is_named_and_conditions_differ() -> None:
    db = obj("db", conditions=[{"type": "Ready", "status": "True"}])
    migrate = obj("migrate", conditions=[{"type": "Ready", "status": "False"}])
    deps = [dep("db"), dep("migrate", "Complete"), dep("other")]
    assert unmet(deps, lookup_in(db, migrate), namespace="default") == (
        "waiting for Process/migrate to be Complete"
    )


def test_namespace_defaults_to_the_dependents() -> None:
    db = obj("db", namespace="prod", conditions=[{"type": "Ready", "status": "True"}])
    assert unmet([dep("db")], lookup_in(db), namespace="prod") is None
    assert unmet([dep("db")], lookup_in(db), namespace="dev") is not None
    assert unmet([dep("db", namespace="prod")], lookup_in(db), namespace="dev") is None


def test_find_cycle() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    assert find_cycle({"a": ["b"], "b": ["a"]}) == ["a", "b", "a"]
    assert find_cycle({"a": ["a"]}) == ["a", "a"]
    assert find_cycle({"x": ["a"], "a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}) is None


@given(st.dictionaries(st.sampled_from("abcdef"), st.lists(st.sampled_from("abcdef"))))
def test_find_cycle_returns_a_real_cycle(edges: dict[str, list[str]]) -> None:
    cycle = find_cycle(edges)
    if cycle is None:
        # No cycle: a topological order exists (Kahn's algorithm consumes every node).
        nodes = set(edges) | {t for ts in edges.values() for t in ts}
        remaining = {n: set(edges.get(n, ())) for n in nodes}
        while remaining:
            free = [n for n, ts in remaining.items() if not ts & set(remaining)]
            assert free, f"find_cycle missed a cycle in {edges}"
            for n in free:
                del remaining[n]
    else:
        assert cycle[0] == cycle[-1]
        for a, b in itertools.pairwise(cycle):
            assert b in edges.get(a, ())


def test_index_and_mapper_wake_dependents() -> None:
    cache = Cache({DEPENDS_ON_INDEX: dependency_keys})
    web = obj("web", depends_on=[{"kind": "Process", "name": "db"}])
    other = obj("other", depends_on=[{"kind": "Process", "name": "db", "namespace": "prod"}])
    cache.put(web)
    cache.put(other)
    cache.put(obj("db"))
    assert list(dependency_keys(web)) == ["Process/default/db"]
    mapper = dependents_of(cache)
    assert list(mapper(obj("db"))) == [Request("web", "default")]
    assert list(mapper(obj("db", namespace="prod"))) == [Request("other", "default")]
    assert list(mapper(obj("web"))) == []
