"""Causes before symptoms: the change that began each trouble of a failure, ranked above the
trouble's symptoms with them as its evidence (`setpoint.insight.ranking` adds these to its
candidates).

A failure propagates from where it began, and what began it is what one reverts. So the
ranking finds the troubles (`setpoint.insight.onsets.troubles`): the root blockers when the
target is held back, else the target, what it owns and what it depends on, each with its
first symptom after which it was not Ready again (one line that nothing followed, or that
began nothing, is no trouble). For each, the person's changes of what runs in what can
change the troubled object (`onsets.reach`: itself, its owner's template, the Secrets it
uses, what it depends on) made in the `symptom_horizon_s` before the trouble began are its
possible causes; the one that fits best (a change the trouble's own words name, as `port
5432` names the port moved from 5432, the latest of those; else, when the trouble says a
resource ran out (killed by SIGKILL, out of memory, too many clients), a change of an amount
(`4` -> `32` workers, `512Mi` -> `48Mi`) rather than of a name (a log level); else the best
scored) is ranked above the trouble's symptoms, with them as its evidence and the time
between ("db
spec.env.PGPORT changed from 5432 to 6432 by alice, 21 s before Process/web-0 began
exiting with code 1 (3 times since); then Deployment/web went NotReady"); the one behind
the earliest trouble above everything. A change the ranking doubts (`Candidate.doubted`:
healed, a fix, an episode that ended, an owner's change that reaches only new objects) is
such a cause only when it is another object's change the trouble's words name. A change after
which the troubled object was Ready again ran well with it (`settled_before`), whatever its
lines name. A symptom ranks first only when no change explains it.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from setpoint.insight.chains import blocking_chains, is_blocked
from setpoint.insight.entries import Entry, ObjectRef
from setpoint.insight.index import TimelineIndex, by_controller, deletion_begun
from setpoint.insight.onsets import (
    Trouble,
    changes_an_amount,
    exhausted,
    mentions,
    reach,
    troubles,
)
from setpoint.insight.scoring import Candidate, Context, changes_what_runs, route_to, upstream_of
from setpoint.insight.words import ago, describe_change, how_began, how_failed


def troubled(ctx: Context) -> tuple[list[Trouble], float, bool]:
    """Where the failure's trouble is (`onsets.troubles`): the root blockers when the target
    is held back (up to now), else the target, what it owns, and what it depends on (up to
    the failure, since its episode began); with the time read up to and whether it is held
    back."""
    index, s, failure = ctx.index, ctx.settings, ctx.failure
    now = failure.now if failure.now is not None else failure.ts
    if is_blocked(ctx, now):
        chains = blocking_chains(index, failure.obj, now) or [[failure.obj]]
        roots = {c[-1] for c in chains if index.exists_at(c[-1], now)}
        return (
            troubles(index, roots, failure.ts - s.symptom_horizon_s, now, settle_s=s.tau_s),
            now,
            True,
        )
    children = [n for n, _, rel in ctx.graph.get(failure.obj, ()) if rel == "owns"]
    near = {failure.obj, *children, *upstream_of(ctx.graph, failure.obj)}
    since = max(ctx.episode, failure.ts - s.symptom_horizon_s)
    found = troubles(index, near, since, failure.ts, settle_s=s.tau_s)
    lasting = [
        t
        for t in found
        if t.count > 1 or index.failing_at(t.obj, failure.ts, float("-inf")) is not None
    ]  # one line that nothing followed is no trouble this failure grew from
    return lasting, failure.ts, False


def causes_first(ctx: Context, scored: Sequence[Candidate]) -> list[Candidate]:
    """Causes before symptoms: for each trouble (`troubled`), the person's change of what
    runs (or deletion) in what can change the troubled object (`onsets.reach`: itself, its owner's
    template, its inputs, what it depends on) made in the `symptom_horizon_s` before the
    trouble began that fits it best (`fit`), unless the troubled object ran well with it
    (`settled_before`), or the ranking doubts it (`doubted`) or it came before the troubled
    object was made (`before_it_was_made`) and it is not a change of another object the
    trouble's words name (`named_elsewhere`). It
    is ranked above the trouble's own symptoms, with them as its evidence and the time
    between; the change behind the earliest trouble above everything: a failure propagates
    from where it began, and what began it is what one reverts."""
    index, s = ctx.index, ctx.settings
    found, _, held = troubled(ctx)
    if not found:
        return []
    changes = [
        c
        for c in scored
        if c.entry.get("type") == "change"
        and c.entry.get("action") != "created"
        and (changes_what_runs(c.entry, s) or deleted_by_person(c.entry))
    ]
    top = max((c.score for c in scored), default=0.0)
    out: list[Candidate] = []
    for trouble in found:
        able = reach(ctx.graph, trouble.obj)
        fits = [
            c
            for c in changes
            if index_ref(index, c.entry) in able
            and trouble.onset - s.symptom_horizon_s <= float(c.entry["ts"]) < trouble.onset
        ]
        born = index.created_at(trouble.obj, trouble.onset)
        ranked = [
            (fit(ctx, trouble, c), c)
            for c in fits
            if not settled_before(ctx, trouble, c)
            and (
                named_elsewhere(ctx, trouble, c)
                or not (c.doubted or before_it_was_made(ctx, trouble, c, born))
            )
        ]
        if not ranked:
            continue
        best = max(ranked, key=lambda fc: fc[0])[1]
        own = max(
            (c.score for c in scored if index_ref(index, c.entry) == trouble.obj), default=0.0
        )
        score = (top if not out else max(own, best.score)) * 1.05
        if out:
            score = min(score, out[0].score * 0.99)
        obj = index_ref(index, best.entry)
        gap = ago(trouble.onset - float(best.entry["ts"]))
        times = f" ({trouble.count} times since)" if trouble.count > 1 else ""
        symptom = index.entries[trouble.position]
        reason = (
            f"{describe_change(best.entry, obj)}, {gap} before {trouble.obj} "
            f"{how_began(symptom)}{times}"
        )
        more = best.reason.split("; ")[1:]  # the change's own reasons, but its first words
        chained = any(m.startswith("it holds back") for m in more)
        if trouble.obj != ctx.failure.obj and not chained:
            reason += (
                f"; it holds back {ctx.failure.obj}"
                if held
                else f"; then {ctx.failure.obj} {how_failed(ctx.failure.failure)}"
            )
        reason += "".join(f"; {m}" for m in more)
        out.append(Candidate(best.entry, round(score, 6), reason, route_to(ctx, obj)))
    return out


def deleted_by_person(entry: Entry) -> bool:
    """Whether a change entry is a person's deletion of its object (its `deletionTimestamp`
    set, or its removal): what depends on it loses it."""
    deleted = entry.get("action") == "deleted" or deletion_begun(entry)
    return deleted and not by_controller(entry)


def before_it_was_made(ctx: Context, trouble: Trouble, candidate: Candidate, born: float) -> bool:
    """Whether `candidate` changed another object than the troubled one (or its owner)
    before the troubled object was made: it was made into the world as that change left
    it, so its trouble is its own (a new Job's bad SQL is not the db's earlier change)."""
    obj = index_ref(ctx.index, candidate.entry)
    mine = {trouble.obj, *(n for n, _, rel in ctx.graph.get(trouble.obj, ()) if rel == "ownedBy")}
    return obj not in mine and float(candidate.entry["ts"]) < born


def settled_before(ctx: Context, trouble: Trouble, candidate: Candidate) -> bool:
    """Whether `candidate` changed another object than the troubled one (or its owner), that
    object was Ready again after it, and so was the troubled object before its trouble
    began: the troubled object ran well with the change in place, so its trouble is new (a
    dependency's port moved back, a minute before a replica's own port was taken)."""
    index, obj = ctx.index, index_ref(ctx.index, candidate.entry)
    mine = {trouble.obj, *(n for n, _, rel in ctx.graph.get(trouble.obj, ()) if rel == "ownedBy")}
    ts = float(candidate.entry["ts"])
    return (
        obj not in mine
        and index.became_ready(obj, ts, trouble.onset) is not None
        and index.became_ready(trouble.obj, ts, trouble.onset) is not None
    )


def named_elsewhere(ctx: Context, trouble: Trouble, candidate: Candidate) -> bool:
    """Whether `candidate` changed another object than the troubled one (or its owner) and
    the trouble's words name it, its setting or its value: a client's error that points at
    what changed elsewhere (a probe's failure naming a probe setting of its own template is
    no such pointer: the words are the probe's own)."""
    obj = index_ref(ctx.index, candidate.entry)
    mine = {trouble.obj, *(n for n, _, rel in ctx.graph.get(trouble.obj, ()) if rel == "ownedBy")}
    said = [ctx.index.entries[p] for p in trouble.said]
    changed = still_changed(ctx, candidate.entry, obj, trouble)
    return obj not in mine and mentions(said, changed, obj)


def still_changed(ctx: Context, change: Entry, obj: ObjectRef, trouble: Trouble) -> Entry:
    """`change` without the settings that held its old value again when the trouble began
    (a port moved and moved back): a client that names that value uses what is there, so
    its words point at no change of it."""
    index, diff = ctx.index, change.get("diff") or {}
    positions = index.changes_by_object.get(obj, [])
    upto = bisect_right(positions, trouble.onset, key=lambda p: index.ts[p])
    kept: dict[str, Any] = {}
    decided: set[str] = set()
    for position in reversed(positions[:upto]):
        entry = index.entries[position]
        later = entry.get("diff") or {}
        for path in (diff.keys() & later.keys()) - decided:
            decided.add(path)
            now = later[path]
            restored = (
                entry is not change
                and isinstance(now, list | tuple)
                and len(now) == 2
                and now[1] == diff[path][0]
            )
            if not restored:
                kept[path] = diff[path]
        if entry is change:
            break
    return {**change, "diff": kept}


def fit(ctx: Context, trouble: Trouble, candidate: Candidate) -> tuple[bool, bool, float]:
    """How well a change fits a trouble: first whether the trouble's words name it
    (`onsets.mentions`; for a change of the troubled object or its owner, by its setting's
    name only: its own lines say its own values all the time, a `UTC` time stamp); then,
    for a trouble that says a resource ran out (`onsets.exhausted`), whether the change set
    an amount (`onsets.changes_an_amount`); of those named the latest; of the others the
    best scored."""
    obj = index_ref(ctx.index, candidate.entry)
    mine = {trouble.obj, *(n for n, _, rel in ctx.graph.get(trouble.obj, ()) if rel == "ownedBy")}
    said = [ctx.index.entries[p] for p in trouble.said]
    named = mentions(said, candidate.entry, obj, values=obj not in mine)
    sized = exhausted(said) and changes_an_amount(candidate.entry)
    return named, sized, float(candidate.entry["ts"]) if named else candidate.score


def index_ref(index: TimelineIndex, entry: Entry) -> ObjectRef:
    """The object of a candidate's entry."""
    ref = ObjectRef.of(entry.get("object"))
    assert ref is not None
    return ref
