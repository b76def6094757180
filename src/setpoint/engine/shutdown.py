"""The order an engine stops its children in: dependents before their dependencies.

Starting follows `dependsOn` (the web server waits for the database); a full stop goes the
other way, so nothing runs while something it needs is gone: the web server stops before
the database. Children with no relation stop in parallel.

* `stop_order(objects, stopping)` is pure: from the Processes, Jobs and Deployments (plain
  objects, as the store has them) it says, for each child being stopped, which others must
  have stopped first. The relation is `spec.dependsOn`, followed through objects that have
  no running child (a finished Job between two Processes still orders them), and through a
  Deployment to its replicas (whatever depends on a Deployment stops before its replicas,
  which stop before what the Deployment depends on).
  Objects in a dependency cycle stop together rather than wait for each other forever.
* `StopTurns` carries such an order out: a child's stop waits for `wait_turn`, and reports
  `stopped` when done (the lifecycle's `StopTurns` protocol, `setpoint.workloads.children`).

No I/O and no clock; `StopTurns` only waits on asyncio events.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterable, Mapping

from setpoint.model import Object
from setpoint.workloads.dependencies import dependency_keys

__all__ = ["Node", "StopTurns", "stop_order"]

Node = tuple[str, str, str]
"""(kind, namespace, name) of an object."""

_OWNER_KINDS = frozenset({"Deployment"})
"""Kinds whose controlled objects (a Deployment's replica Processes) count as what they
depend on: a dependent of the owner stops before them."""


def stop_order(
    objects: Iterable[Object],
    stopping: Collection[Node],
    *,
    canonical_kind: Callable[[str], str] = str,
) -> dict[Node, frozenset[Node]]:
    """For each node of `stopping`, the nodes of `stopping` that must stop before it: those
    that depend on it, directly or through other objects of `objects`, and that it does not
    depend on in turn. `canonical_kind` maps a kind as a `dependsOn` entry spells it to the
    kind's name (`process` -> `Process`)."""
    declared: dict[Node, set[Node]] = {}  # node -> what its dependsOn names
    owned: list[tuple[Node, Node]] = []  # (owner, replica)
    for obj in objects:
        node = _node(obj)
        for key in dependency_keys(obj):
            kind, namespace, name = key.split("/", 2)
            target = (canonical_kind(kind), namespace or "default", name)
            declared.setdefault(node, set()).add(target)
        for ref in obj["metadata"].get("ownerReferences") or ():
            if ref.get("controller") and ref.get("kind") in _OWNER_KINDS:
                owned.append(((str(ref["kind"]), node[1], str(ref["name"])), node))
    # A replica needs what its owner's dependsOn names; the owner needs its replicas.
    needs = {node: set(targets) for node, targets in declared.items()}
    for owner, replica in owned:
        needs.setdefault(replica, set()).update(declared.get(owner, ()))
        needs.setdefault(owner, set()).add(replica)
    dependents: dict[Node, set[Node]] = {}
    for node, targets in needs.items():
        for target in targets:
            dependents.setdefault(target, set()).add(node)
    reach = {node: _reachable(node, dependents) for node in stopping}
    return {
        node: frozenset(
            other for other in reach[node] if other in reach and node not in reach[other]
        )
        for node in stopping
    }


def _node(obj: Object) -> Node:
    meta = obj["metadata"]
    return (str(obj.get("kind", "")), meta.get("namespace") or "default", meta["name"])


def _reachable(start: Node, edges: Mapping[Node, Iterable[Node]]) -> set[Node]:
    """Every node reachable from `start` along `edges`, without `start` itself unless a
    cycle leads back to it."""
    seen: set[Node] = set()
    todo = list(edges.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(edges.get(node, ()))
    return seen


class StopTurns:
    """Carries out a `stop_order`: `wait_turn(kind, key)` returns once every child to stop
    before it has `stopped`. A child the order does not know waits for nothing."""

    def __init__(self, order: Mapping[Node, frozenset[Node]]) -> None:
        self._order = order
        self._stopped = {node: asyncio.Event() for node in order}

    async def wait_turn(self, kind: str, key: tuple[str, str]) -> None:
        for node in self._order.get((kind, key[0] or "default", key[1]), ()):
            await self._stopped[node].wait()

    def stopped(self, kind: str, key: tuple[str, str]) -> None:
        event = self._stopped.get((kind, key[0] or "default", key[1]))
        if event is not None:
            event.set()
