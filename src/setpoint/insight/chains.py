"""What holds a target back, and the evidence at the ends of those chains
(`setpoint.insight.ranking` ranks it with the other candidates).

When the target is not Ready at the explanation's `now` (`at`, else the
timeline's last entry) and either never was Ready since it was created (a start-up) or
waits for a dependency (reason `WaitingForDependency` or `DependencyNotReady`),
`blocking_chains` walks what holds it back (`setpoint.insight.blockers.root_blockers`, the
walk the live view's detail line uses too): what it depends on, and what it owns (a
Deployment's replicas), while not Ready, to the objects at the ends of those chains (the
target itself when nothing holds it back). The failure evidence of each such root blocker
since `symptom_horizon_s` before the failure (an exit with its last line, a Stalled or
Failed reason, a failing condition with its message (a probe, a command that could not
start), a Warning event (a back-off), an error line; the latest of each kind and shape) is
a candidate scored `prior_blocker` (2) x its kind's weight (`EVIDENCE_WEIGHTS`, 1 down to
0.6), with no time or distance factor: it is what is wrong now, where the wait ends. Its
`path` is the chain (`web <- migrate <- db <- db-init` in its reason). A dependency that no
longer exists holds back whatever it last said, and its deletion is its evidence (weight 1):
it is what is wrong now. Evidence of other root blockers stamped after such a deletion is
x `precedence_penalty`: a replica that exits for want of the deleted `db` follows from it.
Likewise a root blocker that a change broke: the latest change of what runs in it (a spec
change by a person), made while it was Ready, after which it was not Ready again, is its
evidence (weight 1, the chain as its path), and what the blocker showed after it (a stop on
request as it restarts with the new spec, exits, failing probes) is what the change did:
x `precedence_penalty`, as after a deletion. A change that its own new symptom followed
right away (evidence x 5) can rank above a blocker's evidence too: the change is why the
blocker fails.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from setpoint.insight.blockers import root_blockers
from setpoint.insight.entries import ObjectRef
from setpoint.insight.index import (
    EVIDENCE_WEIGHTS,
    TimelineIndex,
    deletion_begun,
    evidence_kind,
    evidence_shape,
)
from setpoint.insight.scoring import Candidate, Context, changes_what_runs
from setpoint.insight.words import ago, describe_change, describe_symptom

WAITING_REASONS = frozenset({"WaitingForDependency", "DependencyNotReady"})
"""Reasons of a False `Ready` that mean the object waits for a dependency."""


def deletion_of(index: TimelineIndex, obj: ObjectRef, since: float, now: float) -> int | None:
    """The position of the change that began deleting `obj` (its `deletionTimestamp` set,
    else its `deleted` change) in [`since`, `now`], if `obj` does not exist at `now`."""
    if index.exists_at(obj, now):
        return None
    found = None
    for position in reversed(index.objects.get(obj, [])):
        ts = index.ts[position]
        if ts > now:
            continue
        if ts < since:
            break
        entry = index.entries[position]
        if entry.get("type") != "change":
            continue
        if entry.get("action") == "created":
            break
        if deletion_begun(entry) or entry.get("action") == "deleted":
            found = position  # keep going back: the request comes before the removal
    return found


def breaking_change(ctx: Context, obj: ObjectRef, since: float, now: float) -> int | None:
    """The position of the change that broke `obj`, if one did: the latest person's change
    of what runs in it (`changes_what_runs`, not its creation) in [`since`, `now`], made
    while `obj` was Ready, after which it was not Ready again by `now`. What `obj` showed
    after it (a stop on request, exits, failing probes) is what the change did."""
    index = ctx.index
    if (index.ready_at(obj, now) or {}).get("status") == "True":
        return None
    positions = index.objects.get(obj, [])
    for k in range(bisect_right(positions, now, key=lambda p: index.ts[p]) - 1, -1, -1):
        position = positions[k]
        if index.ts[position] < since:
            return None
        entry = index.entries[position]
        if entry.get("type") == "condition":
            cond = entry.get("condition") or {}
            if cond.get("type") == "Ready" and cond.get("status") == "True":
                return None  # Ready again after any change since
            continue
        if entry.get("type") != "change" or entry.get("action") == "created":
            continue
        if not changes_what_runs(entry, ctx.settings):
            continue
        readies = index.ready.get(obj, [])
        i = bisect_left(readies, position) - 1  # its Ready as it was before the change
        was = (index.entries[readies[i]].get("condition") or {}).get("status") if i >= 0 else None
        return position if was == "True" else None
    return None


def is_blocked(ctx: Context, now: float) -> bool:
    """Whether the target is held back at `now`: not Ready, and either never Ready since it
    was created (a start-up) or waiting for a dependency."""
    index, target = ctx.index, ctx.failure.obj
    ready = index.ready_at(target, now)
    if ready is None or ready.get("status") == "True":
        return False  # Ready, or a kind without Ready: it waits for nothing we can see
    if ready.get("reason") in WAITING_REASONS:
        return True
    return not index.was_ready(target, index.created_at(target, now), now)


def blocking_chains(index: TimelineIndex, target: ObjectRef, now: float) -> list[list[ObjectRef]]:
    """The chains from `target` to its root blockers at `now` (`blockers.root_blockers`):
    an object is held back by what it depends on and by what it owns (a Deployment's
    replicas) while those are not Ready; an object the timeline does not show is an end."""
    graph = index.graph_at(now)

    def held_back_by(obj: ObjectRef) -> list[ObjectRef]:
        out = []
        for n, _, relation in graph.get(obj, ()):
            if relation not in ("dependsOn", "owns"):
                continue
            exists = index.exists_at(n, now)
            if relation == "dependsOn" and not exists:
                out.append(n)  # a deleted dependency holds back, whatever it last said
            elif exists and (index.ready_at(n, now) or {}).get("status") != "True":
                out.append(n)
        return out

    return root_blockers(target, held_back_by, lambda obj: not index.exists_at(obj, now))


def blocker_evidence(ctx: Context) -> list[Candidate]:
    """When the target is held back (`is_blocked`), the failure evidence of each root blocker
    (the target itself when nothing holds it back) since `symptom_horizon_s` before the
    failure, up to now: the latest entry of each kind and shape, each with its chain."""
    index, s, failure = ctx.index, ctx.settings, ctx.failure
    now = failure.now if failure.now is not None else failure.ts
    if not is_blocked(ctx, now):
        return []
    chains = blocking_chains(index, failure.obj, now) or [[failure.obj]]
    since = failure.ts - s.symptom_horizon_s
    broken: dict[ObjectRef, tuple[str, int]] = {}  # root -> how it was deleted or broken
    for chain in chains:
        deletion = deletion_of(index, chain[-1], since, now)
        change = None if deletion is not None else breaking_change(ctx, chain[-1], since, now)
        if deletion is not None:
            broken[chain[-1]] = ("deleted", deletion)
        elif change is not None:
            broken[chain[-1]] = ("changed", change)
    first_break = min(((index.ts[p], k) for k, p in broken.values()), default=None)
    out = []
    for chain in chains:
        root = chain[-1]
        positions = index.objects.get(root, [])
        lo = bisect_left(positions, failure.ts - s.symptom_horizon_s, key=lambda p: index.ts[p])
        hi = bisect_right(positions, now, key=lambda p: index.ts[p])
        latest: dict[tuple[str, str], int] = {}
        for position in positions[lo:hi]:
            entry = index.entries[position]
            kind = None if position in index.stopping else evidence_kind(entry)
            if kind is not None:
                latest[(kind, evidence_shape(entry))] = position
        if root in broken:
            latest[(broken[root][0], "")] = broken[root][1]
        path = tuple(chain)
        route = " <- ".join(str(o) for o in path)
        for (kind, _), position in latest.items():
            entry = index.entries[position]
            by_change = kind in ("deleted", "changed")
            what = describe_change(entry, root) if by_change else describe_symptom(entry)
            reason = what if by_change else f"{root} {what}"
            if len(path) > 1:
                reason += f"; it holds back {failure.obj}: {route}"
            score = s.prior_blocker * EVIDENCE_WEIGHTS[kind]
            if first_break is not None and index.ts[position] > first_break[0]:
                score *= s.precedence_penalty
                gap = ago(index.ts[position] - first_break[0])
                reason += f"; but a blocker was {first_break[1]} {gap} before it"
            out.append(Candidate(entry, round(score, 6), reason, path))
    return out
