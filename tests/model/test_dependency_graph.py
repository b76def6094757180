"""The dependency graph a kind declares (`Kind.depends_on`): which nodes an object depends on,
and the cycle a new set of edges would close, checked against a brute-force reachability."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.errors import Invalid
from setpoint.model import Kind, Registry
from setpoint.model.dependency_graph import (
    closing_path,
    cycle_message,
    declaring_kind,
    dependencies_of,
    find_cycle,
    node_of,
)

STEP = Kind("example.com/v1", "Step", short_names=("st",), depends_on="spec.needs")
PLAIN = Kind("example.com/v1", "Plain")
GLOBAL = Kind("example.com/v1", "Global", namespaced=False, depends_on="spec.needs")


def registry() -> Registry:
    r = Registry()
    for kind in (STEP, PLAIN, GLOBAL):
        r.register(kind)
    return r


def step(name: str, *needs: object, namespace: str | None = None) -> dict[str, object]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {
        "apiVersion": STEP.api_version,
        "kind": "Step",
        "metadata": meta,
        "spec": {"needs": list(needs)},
    }


def test_every_name_of_a_kind_is_one_node_and_the_namespace_is_the_objects() -> None:
    r = registry()
    obj = step(
        "a",
        {"kind": "Step", "name": "b"},
        {"kind": "steps", "name": "c"},
        {"kind": "st", "name": "d", "namespace": "other"},
        {"kind": "globals", "name": "g", "namespace": "ignored"},
        {"kind": "Unknown", "name": "u"},
        {"kind": "", "name": "skipped"},
        {"name": "no kind"},
        "not a reference",
        namespace="prod",
    )
    assert node_of(STEP, obj) == ("Step", "prod", "a")
    assert dependencies_of(r, STEP, obj) == {
        ("Step", "prod", "b"),
        ("Step", "prod", "c"),
        ("Step", "other", "d"),
        ("Global", "", "g"),
        ("Unknown", "prod", "u"),
    }


def test_a_kind_that_declares_no_edges_has_none_and_a_missing_field_is_empty() -> None:
    r = registry()
    plain = {
        "apiVersion": PLAIN.api_version,
        "kind": "Plain",
        "metadata": {"name": "p"},
        "spec": {"needs": [{"kind": "Step", "name": "a"}]},
    }
    assert dependencies_of(r, PLAIN, plain) == frozenset()
    assert dependencies_of(r, STEP, {"metadata": {"name": "a"}}) == frozenset()
    assert (
        dependencies_of(r, STEP, {"metadata": {"name": "a"}, "spec": {"needs": "x"}}) == frozenset()
    )
    assert declaring_kind(r, "Step") is STEP
    assert declaring_kind(r, "Plain") is None


def test_depends_on_must_be_a_dotted_path() -> None:
    with pytest.raises(Invalid, match="depends_on"):
        Kind("example.com/v1", "Bad", depends_on="spec.needs[0]")


def test_the_message_names_the_cycle_and_namespaces_only_when_they_differ() -> None:
    one = [("Process", "default", "a"), ("Process", "default", "b"), ("Process", "default", "a")]
    assert cycle_message(one) == (
        "dependsOn cycle: Process/a -> Process/b -> Process/a; remove one of these dependencies"
    )
    two = [("Process", "x", "a"), ("Job", "y", "b"), ("Process", "x", "a")]
    assert cycle_message(two).startswith("dependsOn cycle: Process/x/a -> Job/y/b -> Process/x/a;")


def backwards(graph: dict[str, list[str]]) -> dict[str, list[str]]:
    """Who depends on each node, in `graph` (node -> what it depends on)."""
    dependents: dict[str, list[str]] = {}
    for node, targets in graph.items():
        for target in targets:
            dependents.setdefault(target, []).append(node)
    return dependents


def test_closing_path_examples() -> None:
    graph = backwards({"b": ["c"], "c": ["a", "d"], "d": []})
    assert closing_path(lambda n: graph.get(n, ()), "a", ["b"]) == ["a", "b", "c", "a"]
    assert closing_path(lambda n: graph.get(n, ()), "a", ["d"]) is None
    assert closing_path(lambda n: graph.get(n, ()), "a", ["a"]) == ["a", "a"]
    # `a`'s own edges in the graph are never followed: only the new ones count.
    old = backwards({"a": ["b"], "b": []})
    assert closing_path(lambda n: old.get(n, ()), "a", ["b"]) is None


NODES = "abcdefg"
graphs = st.dictionaries(st.sampled_from(NODES), st.lists(st.sampled_from(NODES), max_size=4))


def reaches(graph: dict[str, list[str]], start: str) -> set[str]:
    """Brute force: every node reachable from `start` in one or more steps (a fixpoint)."""
    seen = set(graph.get(start, ()))
    while True:
        more = {t for n in seen for t in graph.get(n, ())} - seen
        if not more:
            return seen
        seen |= more


@given(graphs, st.sampled_from(NODES), st.lists(st.sampled_from(NODES), max_size=3))
def test_closing_path_agrees_with_brute_force(
    graph: dict[str, list[str]], node: str, targets: list[str]
) -> None:
    with_new = {**graph, node: targets}
    on_a_cycle = node in reaches(with_new, node)
    dependents = backwards(graph)
    path = closing_path(lambda n: dependents.get(n, ()), node, targets)
    assert (path is not None) == on_a_cycle, (graph, node, targets, path)
    if path is not None:
        assert path[0] == path[-1] == node
        assert node not in path[1:-1]
        for a, b in itertools.pairwise(path):
            assert b in with_new.get(a, ()), (a, b, path)


@given(graphs)
def test_find_cycle_agrees_with_brute_force(graph: dict[str, list[str]]) -> None:
    has_cycle = any(n in reaches(graph, n) for n in graph)
    cycle = find_cycle(graph)
    assert (cycle is not None) == has_cycle
    if cycle is not None:
        assert cycle[0] == cycle[-1]
        for a, b in itertools.pairwise(cycle):
            assert b in graph.get(a, ())
