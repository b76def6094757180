"""The score of each candidate cause of a failure (`setpoint.insight.ranking` ranks with it):
the settings, the candidate and the failure explained, and how changes and symptoms are
scored. Pure: no I/O, no clock, no asyncio; time is the entries' own `ts`.

The failure is the latest transition of the target, at or before `at` (default: any time),
to Ready=False, Stalled=True or a crash loop; if it has none, `at` itself. Candidates are the
changes within `RankingSettings.horizon_s` before it, and the first symptoms (below) within
`symptom_horizon_s` of other objects connected to the target. Each candidate's score is a
product of factors, each a reason to believe it:

    score = prior x time_factor ** w_time x graph_factor ** w_graph
            x history ** w_history x (1 + w_novelty * novelty)
            x (1 + w_evidence * 4 * evidence) x (precedence_penalty if it came too late)

* prior: what the entry is. A spec change can change what runs (1.0); a `spec.replicas`
  change only the load (0.5); a labels/annotations-only change nothing that runs (0.2); a
  symptom of another object says where, not what, and is not something one can revert (0.3).
  A change a controller made (actor `controller...`) counts half: it mostly carries out
  another change (a rollout's new replica) rather than causing anything by itself.
* time_factor = 1 / (1 + dt / tau), dt the seconds from the entry to the failure: heavy
  tailed, because a change shows only after probes fail a few times and back-offs run (tens
  of seconds), yet an hour-old change can still be the cause. tau = 60 s.
* graph_factor = 0.5 ** hops from the target along dependency and ownership edges (toward
  what the target depends on and both ways along ownership; against a dependency counts two
  hops): each hop halves the belief. Unconnected objects count as 4 hops (edges may be
  missing from a timeline, so not zero).
* history: in the history before the candidate window, how often changes of this kind
  (object kind and path, list indices dropped) were followed within `follow_s` by a failure
  of this kind (the target's kind and failure class), against an even chance: 2 x (followed
  + 1) / (made + 2) (Laplace's rule of succession), 1 without history. A kind of change
  made three times before with nothing following (a routine log level) counts 0.4; one
  followed by such a failure each time it was made, up to 2. The kind of change most
  telling of the change's paths counts.
* novelty: a change sets a value the path never had before; a log line's template never
  appeared for that object before.
* evidence: the changed object (or one it owns) showed a new symptom after the change and
  before the target failed, and nothing it depends on showed one first or had what runs in
  it changed by a person in between (either would explain it better):
  1 / (1 + gap / tau), gap the seconds from the change to that symptom. Its gain
  is 4 (`evidence_gain`): a change followed at once by trouble of its own is far likelier
  the cause (a likelihood ratio of about five) than one after which nothing of its own broke.
* precedence: a failure propagates from its first symptom; a change made after something the
  target depends on, or owns, already showed a symptom (in the `tau_s` before the failure)
  or was already failing (and still was) is unlikely to have started it: x 0.5. A symptom
  that its object recovered from (Ready=True again) before the failure does not count, here
  or for evidence (where a symptom healed before the change is new again after it): objects
  fail while they start (a Job is not Ready until it completes). A log line stamped within
  `LOG_LAG_S` after a recovery counts as before it: lines are stamped when read.

* healed: the target turned Ready again after the change and before this failure began: the
  change was followed by a whole failure and its end (an earlier episode), so it is an
  unlikely start of this one: x 0.2 (`healed_penalty`). So is a change before the target
  was created (a rollout that made this replica) once the target was Ready: it ran with the
  change in force. A target that stayed Ready after a change (a slow leak) makes no such
  entry and is not discounted.
* episode: a failure is an episode that began when the target was last healthy before it
  (its last Ready=True or recovery, `episode_start`). A change that a person's later change
  of the same settings (a fix, a rollback, or the object made anew) followed, and then the
  target healthy again (or, for a target made after that, the changed object itself), belongs
  to an episode that ended: it gets no evidence (its trouble was that episode's), and x
  `healed_penalty`. A symptom of what the target depends on or owns seen before the
  episode began is no precedence (an error line of a dependency during an earlier, healed
  episode is not where this one began). A blink of health with nothing changed again (a
  dependency restarted and its dependents briefly Ready) ends no change's episode.
* untouched: a change of the target's owner (a Deployment's template) made after the target
  was created, by a person, reaches it only through new objects (a rollout replaces
  replicas, it does not change a running one): x `healed_penalty` too, and what the
  target showed after it is no evidence for it.
* fixed: a change made while its own object was failing, after which that object was Ready
  again before this failure, ended a failure (a fix, a rollback): x `healed_penalty`. Not
  when the object had healed by itself in the `symptom_horizon_s` before (a flapping probe,
  Ready again with nothing changed): its recovery after the change was its own again. So
  is a rollback of another object (every setting it changed put back to the value its
  previous change replaced) after which that object was Ready again.
* A labels/annotations-only change gets no evidence: it changes nothing that runs, so the
  trouble that follows it is not its doing (else a harmless annotation made just before a
  crash would outrank everything).

* the target's own symptoms: its exits, Warning events and error lines from `tau_s` before
  its failure up to now (not its conditions: they are the failure itself) are candidates
  scored as other objects' symptoms (0 hops). When nothing that runs changed before the
  failure (a stranger took a replica's port), what the target said as it failed is the
  best answer there is; a change followed by its own trouble still outranks it.

* creation: an object's own creation (a change with `action` `created`) is no cause by
  itself (everything that exists was created): it is a candidate only when the object then
  failed by itself (its spec is what fails: an arg that makes the command exit at once),
  scored x 0.2 (`prior_creation`) with that failure evidence quoted in its reason.

The weights are 1 (w_novelty 0.5: a first-seen value is common for harmless changes too);
`bench/insight.py` reports the accuracy with each halved and doubled.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from setpoint.insight.entries import Entry, ObjectRef
from setpoint.insight.index import (
    EVIDENCE_WEIGHTS,
    METADATA_ONLY,
    TimelineIndex,
    by_controller,
    change_paths,
    evidence_kind,
    path_kind,
    symptom_of,
    template_of,
)
from setpoint.insight.paths import Hop
from setpoint.insight.words import (
    ago,
    describe_change,
    describe_symptom,
    how_failed,
    how_related,
)


def change_prior(paths: Sequence[str], settings: RankingSettings) -> float:
    """How able a change to these paths is to break something (see the module docstring)."""
    if not paths:
        return settings.prior_metadata
    if all(p.startswith(METADATA_ONLY) for p in paths):
        return settings.prior_metadata
    if all(path_kind(p).endswith("replicas") or p.startswith(METADATA_ONLY) for p in paths):
        return settings.prior_scale
    return settings.prior_spec


@dataclass(frozen=True)
class RankingSettings:
    """The constants of the score (their reasons are in the module docstring)."""

    w_time: float = 1.0
    w_graph: float = 1.0
    w_history: float = 1.0
    w_novelty: float = 0.5
    w_evidence: float = 1.0
    evidence_gain: float = 4.0
    """A change followed at once by a new symptom of its own is about five times likelier the
    cause than one that shows nothing (the factor is 1 + 4 x evidence)."""
    tau_s: float = 60.0
    hop_factor: float = 0.5
    unconnected_hops: int = 4
    prior_spec: float = 1.0
    prior_scale: float = 0.5
    prior_metadata: float = 0.2
    prior_symptom: float = 0.3
    prior_controller: float = 0.5
    precedence_penalty: float = 0.5
    healed_penalty: float = 0.2
    prior_blocker: float = 2.0
    """A root blocker's failure evidence (see `setpoint.insight.chains`)."""
    prior_creation: float = 0.2
    """An object's creation, ranked only when the object itself then failed."""
    horizon_s: float = 3600.0
    """How long before the failure a change may be its cause."""
    symptom_horizon_s: float = 600.0
    follow_s: float = 600.0
    """How soon after a change a failure counts as following it (co-occurrence)."""
    history_s: float = 30 * 86400.0
    max_history_changes: int = 20000
    limit: int | None = 20

    @property
    def floor(self) -> float:
        """The least score a candidate needs for `explain` to name a cause: what a spec
        change of an object not connected to the target, made `tau_s` before the failure,
        with nothing else for it, scores. Below it every candidate is noise."""
        unconnected = (self.hop_factor**self.unconnected_hops) ** self.w_graph
        return float(self.prior_spec * unconnected * 2.0**-self.w_time)


@dataclass(frozen=True)
class Candidate:
    """One probable cause: the timeline entry, its score (higher is likelier) and why."""

    entry: Entry
    score: float
    reason: str
    path: tuple[ObjectRef, ...] = ()
    """The chain from the target to the entry's object (the target alone for its own
    entries): a root blocker's chain, else the shortest path along dependency and ownership
    edges; empty when they are not connected."""
    doubted: bool = False
    """A change the ranking found a reason against: the target was Ready again after it, it
    ended a failure (a fix), its episode ended, or it reaches the target only through new
    objects."""
    hops: tuple[Hop, ...] = ()
    """The verified path: each step of `path` with the timeline entry that shows it."""

    def as_json(self) -> dict[str, Any]:
        """What `explain -o json` and the API's explain say of it: the entry, score, reason,
        path, each hop, and whether every hop is shown."""
        return {
            "entry": self.entry,
            "score": self.score,
            "reason": self.reason,
            "path": [str(o) for o in self.path],
            "hops": [
                {
                    "from": str(h.source),
                    "to": str(h.target),
                    "relation": h.relation,
                    "entry": h.entry,
                }
                for h in self.hops
            ],
            "verified": bool(self.path) and all(h.verified for h in self.hops),
        }


@dataclass(frozen=True)
class Failure:
    """What is explained: the object, when it started failing, and how."""

    obj: ObjectRef
    ts: float
    failure: str
    entry: Entry | None
    now: float | None = None
    """When the explanation is asked for (`at`, else the timeline's last entry): what
    holds the target back is read as of then. None: as of `ts`."""


Graph = Mapping[ObjectRef, list[tuple[ObjectRef, int, str]]]


@dataclass
class Context:
    index: TimelineIndex
    failure: Failure
    settings: RankingSettings
    graph: Graph
    hops: dict[ObjectRef, tuple[int, list[str]]]
    via: dict[ObjectRef, ObjectRef]
    """Each connected object -> the one before it on its shortest path from the target."""
    first_path_symptom: tuple[float, ObjectRef] | None
    cooccurrence: dict[str, tuple[int, int]]
    """Change kind -> (times made, times followed by such a failure) before the window."""
    episode: float = float("-inf")
    """When the target was last healthy before its failure (`episode_start`): what came
    before belongs to an earlier episode that ended."""


def hops_from(index: TimelineIndex, target: ObjectRef, ts: float) -> dict[ObjectRef, int]:
    """The objects connected to `target` as of `ts`, with their distance in hops."""
    return {obj: hops for obj, (hops, _) in shortest_paths(index.graph_at(ts), target).items()}


def shortest_paths(
    graph: Graph, target: ObjectRef, via: dict[ObjectRef, ObjectRef] | None = None
) -> dict[ObjectRef, tuple[int, list[str]]]:
    """Shortest hop counts from `target` toward possible causes, with the path's relations
    (and, in `via`, each object's predecessor on its path)."""
    best: dict[ObjectRef, tuple[int, list[str]]] = {target: (0, [])}
    queue: list[tuple[int, ObjectRef]] = [(0, target)]
    while queue:
        dist, node = heapq.heappop(queue)
        if dist > best[node][0]:
            continue
        for neighbour, cost, relation in graph.get(node, ()):
            nd = dist + cost
            if neighbour not in best or nd < best[neighbour][0]:
                best[neighbour] = (nd, [*best[node][1], f"{relation} {neighbour}"])
                if via is not None:
                    via[neighbour] = node
                heapq.heappush(queue, (nd, neighbour))
    return best


def episode_start(index: TimelineIndex, target: ObjectRef, ts: float) -> float:
    """When `target`'s failure at `ts` began as an episode: the last time at or before `ts`
    that it turned healthy (Ready=True, or a recovery), -inf if it never did. Symptoms and
    evidence before it belong to an earlier episode, which ended."""
    positions = index.ready.get(target, [])
    i = bisect_right(positions, ts, key=lambda p: index.ts[p]) - 1
    while i >= 0 and (index.entries[positions[i]].get("condition") or {}).get("status") != "True":
        i -= 1
    last_ready = index.ts[positions[i]] if i >= 0 else float("-inf")
    recoveries = index.recoveries.get(target, [])
    j = bisect_right(recoveries, ts) - 1
    return max(last_ready, recoveries[j] if j >= 0 else float("-inf"))


def first_path_symptom(ctx: Context) -> tuple[float, ObjectRef] | None:
    """Where the failure began: the earliest symptom, in the `tau_s` before the failure, of
    what the target depends on (directly or not) or of what it owns; or the start of a
    failure of those still going on when the target failed. (An isolated symptom minutes
    earlier is not the start of this failure; a condition still failing is.)"""
    first: tuple[float, ObjectRef] | None = None
    index, failure = ctx.index, ctx.failure
    children = [n for n, _, rel in ctx.graph.get(failure.obj, ()) if rel == "owns"]
    since = max(failure.ts - ctx.settings.tau_s, ctx.episode)
    for obj in {*upstream_of(ctx.graph, failure.obj), *children}:
        began = index.failing_at(
            obj, failure.ts, max(failure.ts - ctx.settings.horizon_s, ctx.episode)
        )
        symptom = index.lasting_symptom(obj, since, failure.ts)
        if symptom is not None and (began is None or symptom < began):
            began = symptom
        if began is not None and (first is None or began < first[0]):
            first = (began, obj)
    return first


def change_kind(ref: ObjectRef, path: str) -> str:
    return f"{ref.kind}:{path_kind(path)}"


def cooccurrence(
    ctx: Context, candidates: Sequence[int], window_start: int
) -> dict[str, tuple[int, int]]:
    """For each kind of change among the candidates: how often such a change was made, and
    followed by a failure like this one, before the candidate window."""
    index, settings, failure = ctx.index, ctx.settings, ctx.failure
    wanted = {
        change_kind(index.refs[p], path)
        for p in candidates
        for path in change_paths(index.entries[p])
    }
    if not wanted:
        return {}
    failures = index.onsets_by_failure.get((failure.obj.kind, failure.failure), [])
    oldest = failure.ts - settings.history_s
    lo = max(bisect_left(index.change_ts, oldest), window_start - settings.max_history_changes)
    hi = bisect_left(index.change_ts, failure.ts - settings.follow_s, lo, window_start)
    seen: dict[str, int] = defaultdict(int)
    followed: dict[str, int] = defaultdict(int)
    for i in range(lo, hi):
        position = index.changes[i]
        kinds = {
            change_kind(index.refs[position], p) for p in change_paths(index.entries[position])
        } & wanted
        if not kinds:
            continue
        ts = index.change_ts[i]
        j = bisect_right(failures, ts)
        hit = j < len(failures) and failures[j] <= ts + settings.follow_s
        for k in kinds:
            seen[k] += 1
            followed[k] += hit
    return {k: (seen[k], followed[k]) for k in seen}


def history_factor(made: int, followed: int) -> float:
    """How much likelier a change is the cause, given how often its kind was followed by
    such a failure: 2 x (followed + 1) / (made + 2); 1 without history."""
    return 2.0 * (followed + 1) / (made + 2)


def route_to(ctx: Context, obj: ObjectRef) -> tuple[ObjectRef, ...]:
    """The objects from the target to `obj` along its shortest path (empty: not connected)."""
    if obj not in ctx.hops:
        return ()
    route = [obj]
    while route[-1] != ctx.failure.obj:
        route.append(ctx.via[route[-1]])
    return tuple(reversed(route))


def path_of(ctx: Context, obj: ObjectRef) -> tuple[int, list[str]]:
    return ctx.hops.get(obj, (ctx.settings.unconnected_hops, []))


def time_and_distance(
    ctx: Context, ts: float, obj: ObjectRef
) -> tuple[float, float, int, list[str]]:
    s = ctx.settings
    dt = max(0.0, ctx.failure.ts - ts)
    time_factor = (1.0 + dt / s.tau_s) ** -s.w_time
    hops, path = path_of(ctx, obj)
    graph_factor = (s.hop_factor**hops) ** s.w_graph
    return dt, time_factor * graph_factor, hops, path


def score_change(ctx: Context, position: int) -> Candidate | None:
    index, s, failure = ctx.index, ctx.settings, ctx.failure
    entry = index.entries[position]
    obj = index.refs[position]
    ts = float(entry["ts"])
    paths = change_paths(entry)
    dt, closeness, hops, path = time_and_distance(ctx, ts, obj)
    score = change_prior(paths, s) * closeness
    if by_controller(entry):
        score *= s.prior_controller
    made, followed = max(
        (ctx.cooccurrence.get(change_kind(obj, p), (0, 0)) for p in paths),
        key=lambda mf: abs(history_factor(*mf) - 1.0),
        default=(0, 0),
    )
    history = history_factor(made, followed)
    novel = index.novel_paths.get(position, ())
    untouched = (
        any(n == obj and r == "ownedBy" for n, _, r in ctx.graph.get(failure.obj, ()))
        and index.created_at(failure.obj, failure.ts) < ts
        and not by_controller(entry)
    )
    if entry.get("action") == "created":
        evidence, symptom = own_failure(ctx, obj, ts)
        if symptom is None:
            return None  # an object being created is no cause unless it then failed
        score *= s.prior_creation
    elif change_prior(paths, s) == s.prior_metadata or untouched:
        evidence, symptom = 0.0, None  # it changed nothing that runs here: what followed is not its
    else:
        evidence, symptom = change_evidence(ctx, obj, ts)
    ended = episode_ended(ctx, obj, ts, paths)
    if ended is not None:
        evidence, symptom = 0.0, None  # changed again, then healthy: its episode ended
    score *= history**s.w_history * (1 + s.w_novelty * bool(novel))
    score *= 1 + s.w_evidence * s.evidence_gain * evidence
    late = ctx.first_path_symptom is not None and ts > ctx.first_path_symptom[0]
    if late:
        score *= s.precedence_penalty
    healed = (
        None
        if untouched
        else min(
            (
                t
                for t in (
                    index.recovered(failure.obj, ts, failure.ts),
                    index.became_ready(failure.obj, ts, failure.ts),
                )
                if t is not None
            ),
            default=None,
        )
    )
    if healed is not None or (ended is not None and ended[1] != failure.obj):
        score *= s.healed_penalty
    if untouched:
        score *= s.healed_penalty
    fixed = (
        obj != failure.obj
        and index.failing_at(obj, ts, float("-inf")) is not None
        and index.recovered(obj, ts, failure.ts) is not None
        and not heals_by_itself(ctx, obj, ts)
    )
    rollback = (
        obj != failure.obj
        and not fixed
        and reverts(ctx, obj, position)
        and index.became_ready(obj, ts, failure.ts) is not None
    )
    if fixed or rollback:
        score *= s.healed_penalty
    failed = how_failed(failure.failure)
    parts = [f"{describe_change(entry, obj)} {ago(dt)} before {failure.obj} {failed}"]
    parts.append(how_related(failure.obj, obj, hops, path))
    if novel:
        parts.append(f"a value {obj} never had before ({', '.join(novel)})")
    if symptom is not None:
        parts.append(f"then {symptom[1]}")
    if followed > 0:
        parts.append(f"such changes were followed by such failures before ({followed} of {made})")
    elif made >= 2:
        parts.append(f"such changes were made {made} times before with no such failure")
    if late and ctx.first_path_symptom is not None:
        began, failing = ctx.first_path_symptom
        parts.append(f"but {failing} already showed trouble {ago(ts - began)} before it")
    if healed is not None:
        parts.append(f"but {failure.obj} was Ready again {ago(healed - ts)} after it")
    if fixed:
        parts.append(f"but it ended a failure of {obj} (a fix)")
    if rollback:
        parts.append(f"but it put back what {obj} had before its last change (a rollback)")
    if ended is not None:
        fixed_at, healthy = ended
        parts.append(
            f"but it was changed again {ago(fixed_at - ts)} later and {healthy} was healthy "
            "after that: an episode that ended"
        )
    if untouched:
        parts.append(
            f"but {failure.obj} was made before it: its owner's change reaches only new ones"
        )
    doubted = healed is not None or ended is not None or untouched or fixed or rollback
    reason = "; ".join(p for p in parts if p)
    return Candidate(entry, round(score, 6), reason, route_to(ctx, obj), doubted)


def reverts(ctx: Context, obj: ObjectRef, position: int) -> bool:
    """Whether the change at `position` puts back, in every setting it changed, the value
    that `obj`'s previous change of that setting replaced (a rollback)."""
    index = ctx.index
    pending = {
        path: pair
        for path, pair in (index.entries[position].get("diff") or {}).items()
        if isinstance(pair, list | tuple) and len(pair) == 2
    }
    if not pending:
        return False
    positions = index.changes_by_object.get(obj, [])
    for earlier in reversed(positions[: bisect_left(positions, position)]):
        before = index.entries[earlier].get("diff") or {}
        for path in pending.keys() & before.keys():
            old, new = pending.pop(path)
            undone = before[path]
            if not (isinstance(undone, list | tuple) and list(undone) == [new, old]):
                return False
        if not pending:
            return True
    return False


def heals_by_itself(ctx: Context, obj: ObjectRef, ts: float) -> bool:
    """Whether `obj` recovered by itself in the `symptom_horizon_s` before `ts`: it turned
    Ready again after a failure with no person's change of what runs in it in between (a
    flapping probe). Its recovery after a change at `ts` is then no sign of a fix."""
    index = ctx.index
    since = ts - ctx.settings.symptom_horizon_s
    recoveries = index.recoveries.get(obj, [])
    lo, hi = bisect_right(recoveries, since), bisect_left(recoveries, ts)
    for recovery in recoveries[lo:hi]:
        began = index.failing_at(obj, recovery - 1e-6, since)
        if began is not None and next_change(ctx, [obj], began, recovery) is None:
            return True
    return False


def changes_what_runs(entry: Entry, settings: RankingSettings) -> bool:
    """Whether a change entry is a person's change of what runs: a spec change (or a
    creation) not made by a controller."""
    if by_controller(entry):
        return False
    return entry.get("action") == "created" or (
        entry.get("action") != "deleted"
        and change_prior(change_paths(entry), settings) == settings.prior_spec
    )


def overlap(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether two changes touched a common setting (one path is the other or under it)."""
    return any(p == q or q.startswith((p + ".", p + "[")) for p in a for q in b) or any(
        q.startswith((p + ".", p + "[")) for p in b for q in a
    )


def next_change(
    ctx: Context, objs: Sequence[ObjectRef], after: float, until: float, paths: Sequence[str] = ()
) -> tuple[float, ObjectRef] | None:
    """The first person's change of what runs (`changes_what_runs`) in one of `objs`,
    stamped in (`after`, `until`], touching one of `paths` if given (or re-creating it)."""
    index, first = ctx.index, None
    for obj in objs:
        positions = index.changes_by_object.get(obj, [])
        lo = bisect_right(positions, after, key=lambda p: index.ts[p])
        for position in positions[lo:]:
            ts = index.ts[position]
            if ts > until or (first is not None and ts >= first[0]):
                break
            entry = index.entries[position]
            if not changes_what_runs(entry, ctx.settings):
                continue
            if paths and not (
                entry.get("action") == "created" or overlap(paths, change_paths(entry))
            ):
                continue
            first = (ts, obj)
            break
    return first


def episode_ended(
    ctx: Context, obj: ObjectRef, ts: float, paths: Sequence[str]
) -> tuple[float, ObjectRef] | None:
    """Whether the change at `ts` of `obj` belongs to an episode that ended before this
    failure: a person changed the same settings again (a fix, a rollback, or made the object
    anew) and then the target was healthy (before its episode began), or else `obj` itself
    was (Ready again before the target failed: a target made after the fix never ran with
    the change). Returns when it was changed again and what was healthy after."""
    index, failure = ctx.index, ctx.failure
    again = next_change(ctx, [obj], ts, failure.ts, paths)
    if again is None:
        return None
    if again[0] <= ctx.episode:
        return again[0], failure.obj
    if obj != failure.obj and index.became_ready(obj, again[0], failure.ts) is not None:
        return again[0], obj
    return None


def change_evidence(
    ctx: Context, obj: ObjectRef, ts: float
) -> tuple[float, tuple[float, str] | None]:
    """Whether the change showed: the first new symptom of the changed object or of the objects
    it owns after the change, before the target failed, and not preceded by a symptom of
    something they depend on (that would explain it better). A symptom is new if neither the
    object nor what it owns showed it in the `symptom_horizon_s` before the change."""
    index, s, failure = ctx.index, ctx.settings, ctx.failure
    unit = [obj, *(n for n, _, rel in ctx.graph.get(obj, ()) if rel == "owns")]
    before: set[str] = set()  # what the object and those it owns already showed, unhealed
    for o in unit:
        times = index.symptoms_by_object.get(o, [])
        lo, hi = bisect_left(times, ts - s.symptom_horizon_s), bisect_right(times, ts)
        keys = index.symptom_keys.get(o, [])
        before.update(keys[k] for k in range(lo, hi) if not index.recovered(o, times[k], ts))
    first: tuple[float, ObjectRef] | None = None
    for o in unit:
        times = index.symptoms_by_object.get(o, [])
        if not times:
            continue
        keys = index.symptom_keys[o]
        i = bisect_right(times, ts)
        while i < len(times) and times[i] <= failure.ts:
            if keys[i] not in before and not (o == failure.obj and times[i] >= failure.ts):
                if first is None or times[i] < first[0]:
                    first = (times[i], o)
                break
            i += 1
    if first is None:
        return 0.0, None
    seen_at, where = first
    upstream = upstream_of(ctx.graph, obj)
    since = failure.ts - s.symptom_horizon_s
    for u in upstream:
        if index.lasting_symptom(u, since, seen_at) is not None:
            return 0.0, None  # something it depends on showed trouble first
    if next_change(ctx, sorted(upstream), ts, seen_at) is not None:
        return 0.0, None  # what it depends on changed in between
    position = symptom_position(index, where, seen_at)
    if position is None:
        what = "a symptom"
    else:
        what = describe_symptom(index.entries[position], position in index.novel_logs)
    gap = seen_at - ts
    return 1.0 / (1.0 + gap / s.tau_s), (seen_at, f"{where} {what} {ago(gap)} later")


def own_failure(ctx: Context, obj: ObjectRef, ts: float) -> tuple[float, tuple[float, str] | None]:
    """Whether `obj`, created at `ts`, then failed by itself (its spec is what fails): its
    most telling failure evidence (`EVIDENCE_WEIGHTS`, the earliest of the best kind) after
    `ts`, up to the explanation's `now` and within `symptom_horizon_s`, said as `change_evidence`
    says it; (0, None) if none."""
    index, failure = ctx.index, ctx.failure
    now = failure.now if failure.now is not None else failure.ts
    positions = index.objects.get(obj, [])
    lo = bisect_right(positions, ts, key=lambda p: index.ts[p])
    hi = bisect_right(
        positions, min(now, ts + ctx.settings.symptom_horizon_s), key=lambda p: index.ts[p]
    )
    best: tuple[float, int] | None = None
    for position in positions[lo:hi]:
        if position in index.stopping:
            continue
        kind = evidence_kind(index.entries[position])
        if kind is not None and (best is None or EVIDENCE_WEIGHTS[kind] > best[0]):
            best = (EVIDENCE_WEIGHTS[kind], position)
    if best is None:
        return 0.0, None
    gap = index.ts[best[1]] - ts
    what = f"{obj} {describe_symptom(index.entries[best[1]])} {ago(gap)} later"
    return 1.0 / (1.0 + gap / ctx.settings.tau_s), (index.ts[best[1]], what)


def upstream_of(graph: Graph, obj: ObjectRef) -> set[ObjectRef]:
    """What `obj` (or its owner) depends on, directly or not, with the objects those own."""
    starts = [obj, *(n for n, _, rel in graph.get(obj, ()) if rel == "ownedBy")]
    found: set[ObjectRef] = set()
    todo = [n for o in starts for n, _, rel in graph.get(o, ()) if rel in ("dependsOn", "uses")]
    while todo:
        node = todo.pop()
        if node in found or node == obj:
            continue
        found.add(node)
        todo += [n for n, _, rel in graph.get(node, ()) if rel in ("dependsOn", "owns", "uses")]
    return found


def symptom_position(index: TimelineIndex, obj: ObjectRef, ts: float) -> int | None:
    i = bisect_left(index.symptom_ts, ts)
    while i < len(index.symptom_ts) and index.symptom_ts[i] == ts:
        if index.refs[index.symptoms[i]] == obj:
            return index.symptoms[i]
        i += 1
    return None


def score_symptoms(ctx: Context) -> list[Candidate]:
    """Symptoms of connected objects other than the target, the earliest of each kind."""
    index, s, failure = ctx.index, ctx.settings, ctx.failure
    lo = bisect_left(index.symptom_ts, failure.ts - s.symptom_horizon_s)
    hi = bisect_right(index.symptom_ts, failure.ts)
    seen: set[tuple[ObjectRef, str]] = set()
    out = []
    for position in index.symptoms[lo:hi]:
        obj = index.refs[position]
        if obj == failure.obj or obj not in ctx.hops:
            continue
        entry = index.entries[position]
        is_log = entry.get("type") == "log"
        novel_log = position in index.novel_logs
        key = (obj, template_of(entry) if is_log else str(symptom_of(entry)))
        if key in seen:
            continue
        seen.add(key)
        dt, closeness, hops, path = time_and_distance(ctx, float(entry["ts"]), obj)
        score = s.prior_symptom * closeness * (1 + s.w_novelty * novel_log)
        what = describe_symptom(entry, novel_log)
        reason = f"{obj} {what} {ago(dt)} before {failure.obj} {how_failed(failure.failure)}"
        parts = [reason, how_related(failure.obj, obj, hops, path)]
        reason = "; ".join(p for p in parts if p)
        out.append(Candidate(entry, round(score, 6), reason, route_to(ctx, obj)))
    return out + own_symptoms(ctx)


def own_symptoms(ctx: Context) -> list[Candidate]:
    """The target's own exits, Warning events and error lines from `tau_s` before its failure
    up to now, the first of each kind: what happened to it when nothing changed (a stranger
    took its port)."""
    index, s, failure = ctx.index, ctx.settings, ctx.failure
    now = failure.now if failure.now is not None else failure.ts
    positions = index.objects.get(failure.obj, [])
    lo = bisect_left(positions, failure.ts - s.tau_s, key=lambda p: index.ts[p])
    hi = bisect_right(positions, now, key=lambda p: index.ts[p])
    seen: set[str] = set()
    out = []
    for position in positions[lo:hi]:
        entry = index.entries[position]
        if position not in index.symptom_positions or entry.get("type") == "condition":
            continue  # its conditions are the failure itself, not a cause
        is_log = entry.get("type") == "log"
        key = template_of(entry) if is_log else str(symptom_of(entry))
        if key in seen:
            continue
        seen.add(key)
        novel_log = position in index.novel_logs
        dt, closeness, _, _ = time_and_distance(ctx, float(entry["ts"]), failure.obj)
        score = s.prior_symptom * closeness * (1 + s.w_novelty * novel_log)
        what = describe_symptom(entry, novel_log)
        when = f"{ago(dt)} before it {how_failed(failure.failure)}" if dt > 0 else "as it failed"
        reason = f"{failure.obj} {what} {when}"
        out.append(Candidate(entry, round(score, 6), reason, (failure.obj,)))
    return out
