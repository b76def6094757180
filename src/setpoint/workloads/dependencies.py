"""`dependsOn`: what a workload waits for before it starts, and who to wake when that changes.

* `Dependency` is one entry of a workload's `spec.dependsOn`: another object
  (`kind`, `name`, `namespace`: the dependent's own by default) and the condition
  it must meet (`CONDITIONS`):

  - `Ready`, `Complete`: the object has that condition True (any kind);
  - `Started` (process-compose's `process_started`): a Process or Job has started a
    child of its current spec (not while a Process is `Starting`: its startup probe
    has not passed yet). It stays met after that child exits, until the spec changes
    or the child is stopped with the engine: a dependency for ordering, not for health;
  - `Completed` (process-compose's `process_completed`): a Process or Job whose
    child of its current spec exited, whatever its exit code, and will not be
    started again (phase `Succeeded` or `Failed`).

  `Started` and `Completed` read the status fields Process and Job share
  (`startedGeneration`, `phase`, `lastExit`) and the object's `metadata.generation`;
  naming them for another kind is refused when applied. No condition of a Process or Job
  holds while a restart request (`setpoint.dev/restartedAt`, `setpoint restart`) is not
  yet honoured (its `status.restartedAt` differs): what it reports is of the run before.
* `holds(dep, obj)` says whether one dependency holds for the object as last read,
  and if not, why; `unmet(deps, lookup, namespace=...)` names the first dependency
  that does not hold, or returns None when all do; `lookup(kind, name, namespace)`
  returns the object as last read, or None if there is none.
* `find_cycle(edges)` finds a dependency cycle (`setpoint.model.dependency_graph`, where
  the store's refusal of a write that closes one is decided).
* `dependency_keys(obj)` is a cache index function (`DEPENDS_ON_INDEX`): it yields
  `Kind/namespace/name` for each dependency of `obj`; `dependents_of(cache)` maps a
  changed object to requests for the objects (in `cache`) that depend on it.

* `unmet_in_store(store, obj)` is `unmet` over the objects as the store has them now.

Pure but for `unmet_in_store` (store reads): no other I/O, no clock. `lookup` and
the cache are read, never written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from setpoint.errors import Invalid, NotFound
from setpoint.model import Object
from setpoint.model.dependency_graph import find_cycle
from setpoint.runtime.cache import Cache
from setpoint.runtime.reconciler import Request
from setpoint.store import Store
from setpoint.workloads.depends_on import (
    CONDITIONS,
    DEPENDS_ON_INDEX,
    Dependency,
    Lookup,
    dependency_key,
    dependency_keys,
    holds,
    unmet,
)

__all__ = [
    "CONDITIONS",
    "DEPENDS_ON_INDEX",
    "Dependency",
    "Lookup",
    "dependency_key",
    "dependency_keys",
    "dependents_of",
    "find_cycle",
    "holds",
    "unmet",
]


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
