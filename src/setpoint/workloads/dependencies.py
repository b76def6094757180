"""`dependsOn`: what a workload waits for before it starts, and who to wake when that changes.

* `Dependency` is one entry of a workload's `spec.dependsOn`: another object
  (`kind`, `name`, `namespace`: the dependent's own by default) and the condition
  it must have True (`Ready`, `Complete` or `Started`).
* `unmet(deps, lookup, namespace=...)` names the first dependency that does not
  hold, or returns None when all do; `lookup(kind, name, namespace)` returns the
  object as last read, or None if there is none.
* `find_cycle(edges)` finds a dependency cycle, so that applying one can be refused.
* `dependency_keys(obj)` is a cache index function (`DEPENDS_ON_INDEX`): it yields
  `Kind/namespace/name` for each dependency of `obj`; `dependents_of(cache)` maps a
  changed object to requests for the objects (in `cache`) that depend on it.

* `unmet_in_store(store, obj)` is `unmet` over the objects as the store has them now.

Pure but for `unmet_in_store` (store reads): no other I/O, no clock. `lookup` and
the cache are read, never written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from setpoint.errors import Invalid, NotFound
from setpoint.model import Object, Schema, get_condition
from setpoint.runtime.cache import Cache
from setpoint.runtime.reconciler import Request
from setpoint.store import Store

__all__ = [
    "DEPENDS_ON_INDEX",
    "Dependency",
    "Lookup",
    "dependency_key",
    "dependency_keys",
    "dependents_of",
    "find_cycle",
    "unmet",
]

DEPENDS_ON_INDEX = "dependsOn"
"""Name of the cache index that `dependency_keys` computes."""

DependencyCondition = Literal["Ready", "Complete", "Started"]


class Dependency(Schema):
    """One entry of `spec.dependsOn`: `kind/name` must have condition `condition` True."""

    kind: str = Field(min_length=1)
    name: str = Field(min_length=1)
    namespace: str | None = None
    condition: DependencyCondition = "Ready"

    def describe(self) -> str:
        """`Process/db` (with the namespace only when one is given: `Process/other/db`)."""
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"


Lookup = Callable[[str, str, str], Object | None]
"""(kind, name, namespace) -> the object, or None if there is none."""


def unmet(deps: Sequence[Dependency], lookup: Lookup, *, namespace: str) -> str | None:
    """A message naming the first dependency that does not hold, or None when all hold.

    `namespace` is the dependent's, used for entries that name none. Messages:
    `waiting for Process/db to be Ready` (absent, or the condition not yet
    reported), `Process/db is not Ready: <its reason>: <its message>` (reported
    False or Unknown).
    """
    for dep in deps:
        obj = lookup(dep.kind, dep.name, dep.namespace or namespace)
        if obj is None:
            return f"waiting for {dep.describe()} to be {dep.condition}: it does not exist"
        condition = get_condition(obj.get("status"), dep.condition)
        if condition is None:
            return f"waiting for {dep.describe()} to be {dep.condition}"
        if condition.get("status") == "True":
            continue
        why = ": ".join(str(p) for p in (condition.get("reason"), condition.get("message")) if p)
        return f"{dep.describe()} is not {dep.condition}" + (f": {why}" if why else "")
    return None


def find_cycle(edges: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A cycle in the graph `edges` (node -> the nodes it depends on), as the path that
    closes it (`["a", "b", "a"]`), or None when there is none. Deterministic: nodes are
    visited in sorted order."""
    graph = {node: sorted(set(targets)) for node, targets in edges.items()}
    done: set[str] = set()
    for root in sorted(graph):
        if root in done:
            continue
        path: list[str] = [root]
        on_path = {root}
        stack: list[Iterator[str]] = [iter(graph.get(root, ()))]
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


def dependency_key(kind: str, namespace: str, name: str) -> str:
    """The index value of one object: `Kind/namespace/name`."""
    return f"{kind}/{namespace}/{name}"


def dependency_keys(obj: Object) -> Iterable[str]:
    """Cache index function: `Kind/namespace/name` of every entry of `obj`'s
    `spec.dependsOn` (an entry with no namespace is in `obj`'s)."""
    own = obj["metadata"].get("namespace") or ""
    spec: Mapping[str, Any] = obj.get("spec") or {}
    for entry in spec.get("dependsOn") or ():
        if isinstance(entry, Mapping) and entry.get("kind") and entry.get("name"):
            yield dependency_key(
                str(entry["kind"]), str(entry.get("namespace") or own), str(entry["name"])
            )


def dependents_of(cache: Cache) -> Callable[[Object], Iterable[Request]]:
    """A mapper for `ControllerBuilder.watches`: a change to an object enqueues every object
    in `cache` (which must have the `DEPENDS_ON_INDEX` index) that depends on it."""

    def mapper(obj: Object) -> Iterable[Request]:
        meta = obj["metadata"]
        key = dependency_key(str(obj.get("kind", "")), meta.get("namespace") or "", meta["name"])
        for dependent in cache.by_index(DEPENDS_ON_INDEX, key):
            dmeta = dependent["metadata"]
            yield Request(dmeta["name"], dmeta.get("namespace") or "")

    return mapper


async def unmet_in_store(store: Store, obj: Object) -> str | None:
    """`unmet` for `obj`'s `spec.dependsOn`, reading each dependency from `store` as it is
    now (an unknown kind or a missing object counts as unmet)."""
    entries = (obj.get("spec") or {}).get("dependsOn") or []
    if not entries:
        return None
    deps = [Dependency.model_validate(e) for e in entries]
    own = obj["metadata"].get("namespace") or "default"
    found: dict[tuple[str, str, str], Object | None] = {}
    for dep in deps:
        namespace = dep.namespace or own
        try:
            kind = store.registry.resolve(dep.kind)
            found[(dep.kind, dep.name, namespace)] = await store.get(
                kind.api_version, kind.kind, dep.name, namespace if kind.namespaced else None
            )
        except (NotFound, Invalid):
            found[(dep.kind, dep.name, namespace)] = None
    return unmet(deps, lambda k, n, ns: found.get((k, n, ns)), namespace=own)
