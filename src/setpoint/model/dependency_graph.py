"""Dependency edges between objects, and the cycles they would make. Pure: no I/O, no clock.

A kind declares that its objects depend on others by naming, in `Kind.depends_on`, the
field that lists them (`spec.dependsOn` for Process, Job and Deployment): a list of
references `{kind, name, namespace}`, the namespace being the object's own when none is
given. Each reference is an edge of one graph whose nodes are `Node`s,
`(kind, namespace, name)`. A reference's kind is resolved through the registry (without
refreshing it), so `proc`, `processes` and `Process` name one node; a name no kind answers
to stays as written (such a node has no edges: it cannot be on a cycle).

* `node_of(kind, obj)` is an object's node; `dependencies_of(registry, kind, obj)` the nodes
  it depends on (empty for a kind that declares no edges); `declaring_kind(registry, name)`
  the kind of a node that may have edges.
* `closing_path(dependents_of, node, targets)`: the cycle that giving `node` the edges to
  `targets` would close in a graph given backwards (`dependents_of(n)`: the nodes that
  depend on `n`), or None.
* `find_cycle(edges)`: a cycle anywhere in a graph, or None.
* `cycle_message(path)`: `dependsOn cycle: Process/a -> Process/b -> Process/a; remove one
  of these dependencies`.

The store refuses a write that closes a cycle with these functions
(`setpoint.store.dependency_index`), and `setpoint apply` checks a set of manifests with
them before writing any.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any, Protocol, TypeVar

from setpoint.errors import Invalid, UnknownKind
from setpoint.model.kinds import Kind, Registry
from setpoint.model.meta import Object

Node = tuple[str, str, str]
"""(kind, namespace, name) of an object in the dependency graph; namespace "" when the kind
is cluster-scoped."""


class _Sortable(Hashable, Protocol):
    def __lt__(self, other: Any, /) -> bool: ...


N = TypeVar("N", bound=_Sortable)


def node_of(kind: Kind, obj: Object) -> Node:
    """The node of `obj`, an object of `kind`."""
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default") if kind.namespaced else ""
    return (kind.kind, namespace, str(meta.get("name", "")))


def dependencies_of(registry: Registry, kind: Kind, obj: Object) -> frozenset[Node]:
    """The nodes `obj` (an object of `kind`) depends on: the references in its
    `kind.depends_on` field. Entries that are not references (no kind or name) are
    skipped: validation, not this, refuses them."""
    if kind.depends_on is None:
        return frozenset()
    entries: Any = obj
    for part in kind.depends_on.split("."):
        entries = entries.get(part) if isinstance(entries, dict) else None
    if not isinstance(entries, list):
        return frozenset()
    own = node_of(kind, obj)[1] or "default"
    targets = set()
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        target_kind, name = entry.get("kind"), entry.get("name")
        if (
            not isinstance(target_kind, str)
            or not isinstance(name, str)
            or not (target_kind and name)
        ):
            continue
        namespace = entry.get("namespace")
        resolved = _resolve(registry, target_kind)
        if resolved is not None and not resolved.namespaced:
            where = ""
        else:
            where = namespace if isinstance(namespace, str) and namespace else own
        targets.add((resolved.kind if resolved else target_kind, where, name))
    return frozenset(targets)


def declaring_kind(registry: Registry, name: str) -> Kind | None:
    """The kind that declares edges whose `kind` is `name` (a `Node`'s kind), if any."""
    return next((k for k in registry if k.depends_on is not None and k.kind == name), None)


def _resolve(registry: Registry, name: str) -> Kind | None:
    try:
        return registry.resolve(name, refresh=False)
    except (UnknownKind, Invalid):
        return None


def closing_path(
    dependents_of: Callable[[N], Iterable[N]], node: N, targets: Iterable[N]
) -> list[N] | None:
    """The cycle that edges from `node` to `targets` would close, as the path
    `[node, target, ..., node]`, or None. The graph is given backwards, `dependents_of(n)`
    being the nodes that depend on `n`: the search walks from `node` through what depends
    on it, directly or not, until it meets a target, so its cost is the number of
    `node`'s dependents (none for a new object), not the size of what it depends on.
    Deterministic: dependents are visited breadth first, in sorted order."""
    wanted = set(targets)
    if node in wanted:
        return [node, node]
    if not wanted:
        return None
    next_to_node: dict[N, N] = {node: node}  # a dependent -> the node it depends on, towards `node`
    layer = [node]
    while layer:
        following: list[N] = []
        for current in layer:
            for dependent in sorted(set(dependents_of(current))):
                if dependent in next_to_node:
                    continue
                next_to_node[dependent] = current
                if dependent in wanted:
                    path = [node, dependent]
                    while path[-1] != node:
                        path.append(next_to_node[path[-1]])
                    return path
                following.append(dependent)
        layer = following
    return None


def find_cycle(edges: Mapping[N, Iterable[N]]) -> list[N] | None:
    """A cycle in the graph `edges` (node -> the nodes it depends on), as the path that
    closes it (`["a", "b", "a"]`), or None when there is none. Deterministic: nodes are
    visited in sorted order."""
    graph = {node: sorted(set(targets)) for node, targets in edges.items()}
    done: set[N] = set()
    for root in sorted(graph):
        if root in done:
            continue
        path: list[N] = [root]
        on_path = {root}
        stack: list[Iterator[N]] = [iter(graph.get(root, ()))]
        while stack:
            step = next(stack[-1], None)
            if step is None:
                stack.pop()
                finished = path.pop()
                done.add(finished)
                on_path.discard(finished)
                continue
            if step in on_path:
                return [*path[path.index(step) :], step]
            if step in done:
                continue
            path.append(step)
            on_path.add(step)
            stack.append(iter(graph.get(step, ())))
    return None


def cycle_message(path: list[Node]) -> str:
    """`dependsOn cycle: Process/a -> Process/b -> Process/a; remove one of these
    dependencies` (each node as `Kind/namespace/name` when the cycle spans namespaces)."""
    one_namespace = len({namespace for _, namespace, _ in path}) == 1
    shown = " -> ".join(
        f"{kind}/{name}" if one_namespace or not namespace else f"{kind}/{namespace}/{name}"
        for kind, namespace, name in path
    )
    return f"dependsOn cycle: {shown}; remove one of these dependencies"
