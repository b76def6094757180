"""The Deployment's plan, pure: `plan(desired, observed, now)` returns a frozen `Plan`
holding everything to do now (replicas to create and delete, the revision to write or
renumber and those to prune, the status, the events, a rollback, when to look again);
the controller only carries it out.

Replicas follow Kubernetes' rolling update rules applied to single replicas: new ones
are created while the total stays within `replicas + maxSurge`; old ones are removed
(unavailable ones first) while at least `replicas - maxUnavailable` stay available. A
replica is available once it has been Ready for `minReadySeconds`. `Recreate` removes
every old replica, waits until they are gone, then creates. Each replica of a
`portRange` gets a port no replica holds and no other program has bound. A template
whose `user:` the engine may not use (`Observed.refused`) gets no replica, and the
replicas of earlier templates stay as they are: the refused change is not carried out.

No I/O, no clock: `now` is an argument.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from setpoint.model import STALLED, get_condition
from setpoint.runtime.plan import Plan as KitPlan
from setpoint.workloads.deployment.inputs import Desired, Observed, Replica, ReplicaSets
from setpoint.workloads.deployment.progress import Rollback, progress


@dataclass(frozen=True, slots=True)
class NewReplica:
    """A replica to create: its name, and its port from `portRange` (if there is one)."""

    name: str
    port: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan(KitPlan):
    """What to do now (see the module docstring); `status`, `events`, `stall` and
    `requeue_after` as every kind's (`setpoint.runtime.plan.Plan`). `revision` is the number
    the current template's ControllerRevision must carry: `create_revision` when it has none
    yet, `renumber_revision` when going back to an earlier template."""

    revision: int = 0
    create: tuple[NewReplica, ...] = ()
    delete: tuple[str, ...] = ()
    create_revision: bool = False
    renumber_revision: bool = False
    delete_revisions: tuple[str, ...] = ()
    rollback: Rollback | None = None


def plan(desired: Desired, observed: Observed, now: float) -> Plan:
    """The next step for a Deployment: pure, from what is wanted and what is observed."""
    if desired.deleting:
        return Plan(status=observed.status)  # the garbage collector removes replicas and revisions
    sets = ReplicaSets.of(desired, observed)
    revision, create_revision, renumber_revision, prune = _revisions(desired, observed)
    waiting = observed.unmet is not None and not sets.live
    create: tuple[NewReplica, ...] = ()
    delete: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()
    if not waiting and observed.refused is None:  # refused: the replicas stay as they are
        create, delete, failures = _replicas(desired, observed, sets, now)
    done = progress(
        desired, observed, sets, revision=revision, waiting=waiting, failures=failures, now=now
    )
    return Plan(
        status=done.status,
        revision=revision,
        create=create,
        delete=delete + tuple(n for n in done.restart if n not in delete),
        create_revision=create_revision,
        renumber_revision=renumber_revision,
        delete_revisions=prune,
        events=done.events,
        rollback=done.rollback,
        requeue_after=done.requeue_after,
        stall=_stall(done.status),
    )


def _stall(status: Mapping[str, Any]) -> tuple[str, str] | None:
    """The stall the status's `Stalled` condition reports (`progress` decides it)."""
    stalled = get_condition(status, STALLED)
    if stalled is None or stalled.get("status") != "True":
        return None
    return (str(stalled.get("reason") or ""), str(stalled.get("message") or ""))


def _revisions(desired: Desired, observed: Observed) -> tuple[int, bool, bool, tuple[str, ...]]:
    """The current template's revision must exist and carry the highest number: (its
    number, whether to create it, whether to renumber it, stale revisions to prune)."""
    numbers = {r.hash: r.number for r in observed.revisions}
    highest = max(numbers.values(), default=0)
    current = numbers.get(desired.hash)
    in_use = {r.hash for r in observed.replicas} | {desired.hash}
    stale = sorted((r for r in observed.revisions if r.hash not in in_use), key=lambda r: r.number)
    prune = tuple(r.name for r in stale[: max(0, len(stale) - desired.spec.revision_history_limit)])
    if current is None:
        return highest + 1, True, False, prune
    if current < highest:
        return highest + 1, False, True, prune
    return current, False, False, prune


def _replicas(
    desired: Desired, observed: Observed, sets: ReplicaSets, now: float
) -> tuple[tuple[NewReplica, ...], tuple[str, ...], tuple[str, ...]]:
    """(replicas to create, with their ports; to delete; why some cannot be created)."""
    if desired.spec.strategy.type == "Recreate":
        names, delete = _recreate(desired, sets)
    else:
        names, delete = _roll(desired, sets, now)
    if desired.ports is None or not names:
        return tuple(NewReplica(n, None) for n in names), delete, ()
    ports = _free_ports(desired.ports, observed.replicas, observed.busy_ports)[: len(names)]
    failures: tuple[str, ...] = ()
    if len(ports) < len(names):
        start, end = desired.ports
        missing = len(names) - len(ports)
        failures = (f"no free port in portRange {start}-{end} for {missing} replica(s)",)
    return tuple(NewReplica(n, p) for n, p in zip(names, ports, strict=False)), delete, failures


def _roll(desired: Desired, sets: ReplicaSets, now: float) -> tuple[list[str], tuple[str, ...]]:
    """Kubernetes' rolling update, one replica at a time: scale the new template up within
    `replicas + maxSurge`, the old ones down keeping `replicas - maxUnavailable` available.
    Returns (names to create, replicas to delete)."""
    spec = desired.spec
    min_ready = spec.min_ready_seconds
    new, old = sets.new, sets.old
    total = len(new) + len(old)
    taken = {r.name for r in new} | {r.name for r in old}
    create: list[str] = []
    delete: list[str] = []
    if len(new) < spec.replicas:
        room = spec.replicas + spec.max_surge - total if old else spec.replicas - total
        create = _free_names(desired, taken, max(0, min(spec.replicas - len(new), room)))
    elif len(new) > spec.replicas:
        extra = _order_for_removal(new, now, min_ready)[: len(new) - spec.replicas]
        delete += [r.name for r in extra]
    if not old:
        return create, tuple(delete)
    min_available = spec.replicas - spec.max_unavailable
    new_unavailable = sum(not r.available(now, min_ready) for r in new)
    budget = total - min_available - new_unavailable
    if budget <= 0:
        return create, tuple(delete)
    ordered = _order_for_removal(old, now, min_ready)
    unhealthy = [r for r in ordered if not r.available(now, min_ready)][:budget]
    delete += [r.name for r in unhealthy]
    available = sum(r.available(now, min_ready) for r in (*new, *old))
    can_remove = min(budget - len(unhealthy), available - min_available)
    healthy = [r for r in ordered if r.available(now, min_ready)]
    delete += [r.name for r in healthy[: max(0, can_remove)]]
    return create, tuple(delete)


def _recreate(desired: Desired, sets: ReplicaSets) -> tuple[list[str], tuple[str, ...]]:
    """`Recreate`: remove every old replica, wait until they are gone, then create.
    Returns (names to create, replicas to delete)."""
    if sets.old:
        return [], tuple(r.name for r in sets.old)
    if any(r.hash != desired.hash for r in sets.terminating):
        return [], ()
    replicas = desired.spec.replicas
    taken = {r.name for r in sets.new} | {r.name for r in sets.terminating}
    if len(sets.new) < replicas:
        return _free_names(desired, taken, replicas - len(sets.new)), ()
    return [], tuple(sorted(r.name for r in sets.new)[replicas:])


def _order_for_removal(replicas: Sequence[Replica], now: float, min_ready: float) -> list[Replica]:
    """Replicas to remove first come first: failing, not ready, not yet available; then
    the youngest (as Kubernetes' ActivePods ordering)."""

    def key(r: Replica) -> tuple[bool, bool, bool, float, str]:
        return (
            r.failure is None,
            r.ready,
            r.available(now, min_ready),
            -(r.ready_since or 0.0),
            r.name,
        )

    return sorted(replicas, key=key)


def _free_names(desired: Desired, taken: set[str], count: int) -> list[str]:
    names: list[str] = []
    n = 0
    while len(names) < count:
        name = f"{desired.name}-{desired.hash}-{n}"
        if name not in taken:
            names.append(name)
        n += 1
    return names


def _free_ports(
    ports: tuple[int, int], replicas: Sequence[Replica], busy: frozenset[int]
) -> list[int]:
    """The ports of the range that no replica holds and no other program has bound."""
    used = {r.port for r in replicas} | busy
    return [p for p in range(ports[0], ports[1] + 1) if p not in used]
