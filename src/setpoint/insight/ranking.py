"""Rank the probable causes of one object's failure among timeline entries ("what changed
before this broke"). Pure: no I/O, no clock, no asyncio; time is the entries' own `ts`.

`TimelineIndex.build(entries)` reads the entries once (they must be ordered by `ts`) and keeps
what every explanation needs: timestamps to bisect, the dependency/ownership edges, each
object's entries, failure onsets, and which config values and log lines were never seen
before. `explain(index, target, at=...)` then ranks, touching only the entries near the
failure, so one explanation on a million-entry timeline takes milliseconds.
`target_state` says first whether there is anything to explain: the object is `missing`,
`healthy` (Ready, no failure going on) or `failing`.

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
  Ready again with nothing changed): its recovery after the change was its own again.
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

Blocked chains. When the target is not Ready at the explanation's `now` (`at`, else the
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

Causes before symptoms. A failure propagates from where it began, and what began it is what
one reverts. So the ranking finds the troubles (`setpoint.insight.onsets.troubles`): the
root blockers when the target is held back, else the target, what it owns and what it
depends on, each with its first symptom after which it was not Ready again (one line that
nothing followed is no trouble). For each, the person's changes of what runs in what can
change the troubled object (`onsets.reach`: itself, its owner's template, the Secrets it
uses, what it depends on) made in the `symptom_horizon_s` before the trouble began are its
possible causes; the one that fits best (a change the trouble's own words name, as `port
5432` names the port moved from 5432, the latest of those; else, when the trouble says a
resource ran out (killed by SIGKILL, out of memory, too many clients), a change of an amount
(`4` -> `32` workers, `512Mi` -> `48Mi`) rather than of a name (a log level); else the best
scored) is ranked
above the trouble's symptoms, with them as its evidence and the time between ("db
spec.env.PGPORT changed from 5432 to 6432 by alice, 21 s before Process/web-0 began
exiting with code 1 (3 times since); then Deployment/web went NotReady"); the one behind
the earliest trouble above everything. A change the ranking doubts (`Candidate.doubted`:
healed, a fix, an episode that ended, an owner's change that reaches only new objects) is
such a cause only when it is another object's change the trouble's words name. A symptom
ranks first only when no change explains it.

Every candidate comes with its verified path (`Candidate.hops`,
`setpoint.insight.paths`): each step from the target to the entry's object with the edge
entry that shows it, `unknown` where none does.

Floor (`RankingSettings.floor`): what a spec change of an object not connected to the
target, made `tau_s` before the failure, with nothing else for it, scores (1 x 0.5 ** 4 x
0.5 = 0.031). When no candidate reaches it, `explain` says the cause is not known rather
than rank noise (`confident`). It follows from the weights above, not from a benchmark.

The weights are 1 (w_novelty 0.5: a first-seen value is common for harmless changes too);
`bench/insight.py` reports the accuracy with each halved and doubled.

What entries mean (a symptom, a stop on request) and the index are
`setpoint.insight.index`.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import orjson

from setpoint.errors import Invalid
from setpoint.insight.blockers import root_blockers
from setpoint.insight.entries import Entry, ObjectRef
from setpoint.insight.index import (
    ERROR_LINE,
    METADATA_ONLY,
    TimelineIndex,
    by_controller,
    change_paths,
    deletion_begun,
    path_kind,
    symptom_of,
    template_of,
)
from setpoint.insight.onsets import (
    Trouble,
    changes_an_amount,
    exhausted,
    mentions,
    reach,
    troubles,
)
from setpoint.insight.paths import Hop, edges_by_pair, verified_path


def change_prior(paths: Sequence[str], settings: RankingSettings) -> float:
    """How able a change to these paths is to break something (see the module docstring)."""
    if not paths:
        return settings.prior_metadata
    if all(p.startswith(METADATA_ONLY) for p in paths):
        return settings.prior_metadata
    if all(path_kind(p).endswith("replicas") or p.startswith(METADATA_ONLY) for p in paths):
        return settings.prior_scale
    return settings.prior_spec


# -- ranking -----------------------------------------------------------------------------


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
    """A root blocker's failure evidence (see "Blocked chains" in the module docstring)."""
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
class _Context:
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


def find_failure(index: TimelineIndex, target: ObjectRef, at: float | None = None) -> Failure:
    """The failure to explain: the target's latest failure onset at or before `at`; with none,
    `at` itself (no `at` and no failure: `Invalid`)."""
    now = at if at is not None else (index.ts[-1] if index.ts else None)
    onset = index.failure_of(target, at)
    if onset is not None:
        return Failure(target, onset.ts, onset.failure, index.entries[onset.position], now)
    if at is None:
        raise Invalid(
            f"{target} never became NotReady, Stalled or crash-looping in the timeline: "
            "say when it failed with --at"
        )
    return Failure(target, at, "Failure", None, now)


TargetState = Literal["missing", "healthy", "failing"]


def target_state(index: TimelineIndex, target: ObjectRef, at: float | None = None) -> TargetState:
    """How `target` is at `at` (default: the timeline's last entry): `missing` when the
    timeline does not show it then (never seen, or deleted); `failing` when its `Ready` is
    not True or a failure of it is going on; else `healthy`."""
    now = at if at is not None else (index.ts[-1] if index.ts else 0.0)
    if not index.exists_at(target, now):
        return "missing"
    ready = index.ready_at(target, now)
    if ready is not None and ready.get("status") != "True":
        return "failing"
    if index.failing_at(target, now, float("-inf")) is not None:
        return "failing"
    return "healthy"


def confident(candidates: Sequence[Candidate], settings: RankingSettings) -> bool:
    """Whether the best candidate scores at least `settings.floor`: if not, say that the
    cause is not known rather than rank noise."""
    return bool(candidates) and candidates[0].score >= settings.floor


def explain(
    index: TimelineIndex,
    target: ObjectRef,
    *,
    at: float | None = None,
    settings: RankingSettings | None = None,
) -> list[Candidate]:
    """The probable causes of `target`'s failure (see `find_failure`), best first."""
    failure = find_failure(index, target, at)
    return rank(index, failure, settings or RankingSettings())


def rank(index: TimelineIndex, failure: Failure, settings: RankingSettings) -> list[Candidate]:
    """Score every candidate of `failure` and return the best `settings.limit`, best first."""
    graph = index.graph_at(failure.ts)
    via: dict[ObjectRef, ObjectRef] = {}
    ctx = _Context(index, failure, settings, graph, _hops(graph, failure.obj, via), via, None, {})
    ctx.episode = episode_start(index, failure.obj, failure.ts)
    ctx.first_path_symptom = _first_path_symptom(ctx)
    start = failure.ts - settings.horizon_s
    lo, hi = bisect_left(index.change_ts, start), bisect_right(index.change_ts, failure.ts)
    change_positions = index.changes[lo:hi]
    ctx.cooccurrence = _cooccurrence(ctx, change_positions, lo)
    scored = [c for p in change_positions if (c := _score_change(ctx, p)) is not None]
    scored += _score_symptoms(ctx)
    scored += _blocker_evidence(ctx)
    scored += _causes_first(ctx, scored)
    scored.sort(key=lambda c: (-c.score, -float(c.entry["ts"])))
    scored = _best_of_each_entry(scored)
    best = scored[: settings.limit] if settings.limit else scored
    pairs = edges_by_pair(index, failure.now if failure.now is not None else failure.ts)
    return [replace(c, hops=verified_path(index, c.path, pairs)) for c in best]


def _best_of_each_entry(ranked: list[Candidate]) -> list[Candidate]:
    """`ranked` (best first) with each entry once, at its best: the target's own exit can be
    both a symptom and a blocker's evidence."""
    seen: set[int] = set()
    out = []
    for candidate in ranked:
        if id(candidate.entry) not in seen:
            seen.add(id(candidate.entry))
            out.append(candidate)
    return out


def hops_from(index: TimelineIndex, target: ObjectRef, ts: float) -> dict[ObjectRef, int]:
    """The objects connected to `target` as of `ts`, with their distance in hops."""
    return {obj: hops for obj, (hops, _) in _hops(index.graph_at(ts), target).items()}


def _hops(
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


def _first_path_symptom(ctx: _Context) -> tuple[float, ObjectRef] | None:
    """Where the failure began: the earliest symptom, in the `tau_s` before the failure, of
    what the target depends on (directly or not) or of what it owns; or the start of a
    failure of those still going on when the target failed. (An isolated symptom minutes
    earlier is not the start of this failure; a condition still failing is.)"""
    first: tuple[float, ObjectRef] | None = None
    index, failure = ctx.index, ctx.failure
    children = [n for n, _, rel in ctx.graph.get(failure.obj, ()) if rel == "owns"]
    since = max(failure.ts - ctx.settings.tau_s, ctx.episode)
    for obj in {*_upstream(ctx.graph, failure.obj), *children}:
        began = index.failing_at(
            obj, failure.ts, max(failure.ts - ctx.settings.horizon_s, ctx.episode)
        )
        symptom = index.lasting_symptom(obj, since, failure.ts)
        if symptom is not None and (began is None or symptom < began):
            began = symptom
        if began is not None and (first is None or began < first[0]):
            first = (began, obj)
    return first


def _change_kind(ref: ObjectRef, path: str) -> str:
    return f"{ref.kind}:{path_kind(path)}"


def _cooccurrence(
    ctx: _Context, candidates: Sequence[int], window_start: int
) -> dict[str, tuple[int, int]]:
    """For each kind of change among the candidates: how often such a change was made, and
    followed by a failure like this one, before the candidate window."""
    index, settings, failure = ctx.index, ctx.settings, ctx.failure
    wanted = {
        _change_kind(index.refs[p], path)
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
            _change_kind(index.refs[position], p) for p in change_paths(index.entries[position])
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


def _history_factor(made: int, followed: int) -> float:
    """How much likelier a change is the cause, given how often its kind was followed by
    such a failure: 2 x (followed + 1) / (made + 2); 1 without history."""
    return 2.0 * (followed + 1) / (made + 2)


def _route(ctx: _Context, obj: ObjectRef) -> tuple[ObjectRef, ...]:
    """The objects from the target to `obj` along its shortest path (empty: not connected)."""
    if obj not in ctx.hops:
        return ()
    route = [obj]
    while route[-1] != ctx.failure.obj:
        route.append(ctx.via[route[-1]])
    return tuple(reversed(route))


def _hops_of(ctx: _Context, obj: ObjectRef) -> tuple[int, list[str]]:
    return ctx.hops.get(obj, (ctx.settings.unconnected_hops, []))


def _common(ctx: _Context, ts: float, obj: ObjectRef) -> tuple[float, float, int, list[str]]:
    s = ctx.settings
    dt = max(0.0, ctx.failure.ts - ts)
    time_factor = (1.0 + dt / s.tau_s) ** -s.w_time
    hops, path = _hops_of(ctx, obj)
    graph_factor = (s.hop_factor**hops) ** s.w_graph
    return dt, time_factor * graph_factor, hops, path


def _score_change(ctx: _Context, position: int) -> Candidate | None:
    index, s, failure = ctx.index, ctx.settings, ctx.failure
    entry = index.entries[position]
    obj = index.refs[position]
    ts = float(entry["ts"])
    paths = change_paths(entry)
    dt, closeness, hops, path = _common(ctx, ts, obj)
    score = change_prior(paths, s) * closeness
    if by_controller(entry):
        score *= s.prior_controller
    made, followed = max(
        (ctx.cooccurrence.get(_change_kind(obj, p), (0, 0)) for p in paths),
        key=lambda mf: abs(_history_factor(*mf) - 1.0),
        default=(0, 0),
    )
    history = _history_factor(made, followed)
    novel = index.novel_paths.get(position, ())
    untouched = (
        any(n == obj and r == "ownedBy" for n, _, r in ctx.graph.get(failure.obj, ()))
        and index.created_at(failure.obj, failure.ts) < ts
        and not by_controller(entry)
    )
    if entry.get("action") == "created":
        evidence, symptom = _own_failure(ctx, obj, ts)
        if symptom is None:
            return None  # an object being created is no cause unless it then failed
        score *= s.prior_creation
    elif change_prior(paths, s) == s.prior_metadata or untouched:
        evidence, symptom = 0.0, None  # it changed nothing that runs here: what followed is not its
    else:
        evidence, symptom = _evidence(ctx, obj, ts)
    ended = _episode_ended(ctx, obj, ts, paths)
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
        and not _heals_by_itself(ctx, obj, ts)
    )
    if fixed:
        score *= s.healed_penalty
    parts = [f"{_describe_change(entry, obj)} {_ago(dt)} before {failure.obj} {_failed(failure)}"]
    parts.append(_relation(failure.obj, obj, hops, path))
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
        parts.append(f"but {failing} already showed trouble {_ago(ts - began)} before it")
    if healed is not None:
        parts.append(f"but {failure.obj} was Ready again {_ago(healed - ts)} after it")
    if fixed:
        parts.append(f"but it ended a failure of {obj} (a fix)")
    if ended is not None:
        fixed_at, healthy = ended
        parts.append(
            f"but it was changed again {_ago(fixed_at - ts)} later and {healthy} was healthy "
            "after that: an episode that ended"
        )
    if untouched:
        parts.append(
            f"but {failure.obj} was made before it: its owner's change reaches only new ones"
        )
    doubted = healed is not None or ended is not None or untouched or fixed
    reason = "; ".join(p for p in parts if p)
    return Candidate(entry, round(score, 6), reason, _route(ctx, obj), doubted)


def _heals_by_itself(ctx: _Context, obj: ObjectRef, ts: float) -> bool:
    """Whether `obj` recovered by itself in the `symptom_horizon_s` before `ts`: it turned
    Ready again after a failure with no person's change of what runs in it in between (a
    flapping probe). Its recovery after a change at `ts` is then no sign of a fix."""
    index = ctx.index
    since = ts - ctx.settings.symptom_horizon_s
    recoveries = index.recoveries.get(obj, [])
    lo, hi = bisect_right(recoveries, since), bisect_left(recoveries, ts)
    for recovery in recoveries[lo:hi]:
        began = index.failing_at(obj, recovery - 1e-6, since)
        if began is not None and _next_change(ctx, [obj], began, recovery) is None:
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


def _overlap(a: Sequence[str], b: Sequence[str]) -> bool:
    """Whether two changes touched a common setting (one path is the other or under it)."""
    return any(p == q or q.startswith((p + ".", p + "[")) for p in a for q in b) or any(
        q.startswith((p + ".", p + "[")) for p in b for q in a
    )


def _next_change(
    ctx: _Context, objs: Sequence[ObjectRef], after: float, until: float, paths: Sequence[str] = ()
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
                entry.get("action") == "created" or _overlap(paths, change_paths(entry))
            ):
                continue
            first = (ts, obj)
            break
    return first


def _episode_ended(
    ctx: _Context, obj: ObjectRef, ts: float, paths: Sequence[str]
) -> tuple[float, ObjectRef] | None:
    """Whether the change at `ts` of `obj` belongs to an episode that ended before this
    failure: a person changed the same settings again (a fix, a rollback, or made the object
    anew) and then the target was healthy (before its episode began), or else `obj` itself
    was (Ready again before the target failed: a target made after the fix never ran with
    the change). Returns when it was changed again and what was healthy after."""
    index, failure = ctx.index, ctx.failure
    again = _next_change(ctx, [obj], ts, failure.ts, paths)
    if again is None:
        return None
    if again[0] <= ctx.episode:
        return again[0], failure.obj
    if obj != failure.obj and index.became_ready(obj, again[0], failure.ts) is not None:
        return again[0], obj
    return None


def _evidence(ctx: _Context, obj: ObjectRef, ts: float) -> tuple[float, tuple[float, str] | None]:
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
    upstream = _upstream(ctx.graph, obj)
    since = failure.ts - s.symptom_horizon_s
    for u in upstream:
        if index.lasting_symptom(u, since, seen_at) is not None:
            return 0.0, None  # something it depends on showed trouble first
    if _next_change(ctx, sorted(upstream), ts, seen_at) is not None:
        return 0.0, None  # what it depends on changed in between
    position = _symptom_position(index, where, seen_at)
    if position is None:
        what = "a symptom"
    else:
        what = _describe_symptom(index.entries[position], position in index.novel_logs)
    gap = seen_at - ts
    return 1.0 / (1.0 + gap / s.tau_s), (seen_at, f"{where} {what} {_ago(gap)} later")


def _own_failure(
    ctx: _Context, obj: ObjectRef, ts: float
) -> tuple[float, tuple[float, str] | None]:
    """Whether `obj`, created at `ts`, then failed by itself (its spec is what fails): its
    most telling failure evidence (`EVIDENCE_WEIGHTS`, the earliest of the best kind) after
    `ts`, up to the explanation's `now` and within `symptom_horizon_s`, said as `_evidence`
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
        kind = _evidence_kind(index.entries[position])
        if kind is not None and (best is None or EVIDENCE_WEIGHTS[kind] > best[0]):
            best = (EVIDENCE_WEIGHTS[kind], position)
    if best is None:
        return 0.0, None
    gap = index.ts[best[1]] - ts
    what = f"{obj} {_describe_symptom(index.entries[best[1]])} {_ago(gap)} later"
    return 1.0 / (1.0 + gap / ctx.settings.tau_s), (index.ts[best[1]], what)


def _upstream(graph: Graph, obj: ObjectRef) -> set[ObjectRef]:
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


def _symptom_position(index: TimelineIndex, obj: ObjectRef, ts: float) -> int | None:
    i = bisect_left(index.symptom_ts, ts)
    while i < len(index.symptom_ts) and index.symptom_ts[i] == ts:
        if index.refs[index.symptoms[i]] == obj:
            return index.symptoms[i]
        i += 1
    return None


def _score_symptoms(ctx: _Context) -> list[Candidate]:
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
        dt, closeness, hops, path = _common(ctx, float(entry["ts"]), obj)
        score = s.prior_symptom * closeness * (1 + s.w_novelty * novel_log)
        what = _describe_symptom(entry, novel_log)
        reason = f"{obj} {what} {_ago(dt)} before {failure.obj} {_failed(failure)}"
        parts = [reason, _relation(failure.obj, obj, hops, path)]
        reason = "; ".join(p for p in parts if p)
        out.append(Candidate(entry, round(score, 6), reason, _route(ctx, obj)))
    return out + _own_symptoms(ctx)


def _own_symptoms(ctx: _Context) -> list[Candidate]:
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
        dt, closeness, _, _ = _common(ctx, float(entry["ts"]), failure.obj)
        score = s.prior_symptom * closeness * (1 + s.w_novelty * novel_log)
        what = _describe_symptom(entry, novel_log)
        when = f"{_ago(dt)} before it {_failed(failure)}" if dt > 0 else "as it failed"
        reason = f"{failure.obj} {what} {when}"
        out.append(Candidate(entry, round(score, 6), reason, (failure.obj,)))
    return out


# -- causes before symptoms ------------------------------------------------------------


def _troubled(ctx: _Context) -> tuple[list[Trouble], float, bool]:
    """Where the failure's trouble is (`onsets.troubles`): the root blockers when the target
    is held back (up to now), else the target, what it owns, and what it depends on (up to
    the failure, since its episode began); with the time read up to and whether it is held
    back."""
    index, s, failure = ctx.index, ctx.settings, ctx.failure
    now = failure.now if failure.now is not None else failure.ts
    if _blocked(ctx, now):
        chains = blocking_chains(index, failure.obj, now) or [[failure.obj]]
        roots = {c[-1] for c in chains if index.exists_at(c[-1], now)}
        return troubles(index, roots, failure.ts - s.symptom_horizon_s, now), now, True
    children = [n for n, _, rel in ctx.graph.get(failure.obj, ()) if rel == "owns"]
    near = {failure.obj, *children, *_upstream(ctx.graph, failure.obj)}
    since = max(ctx.episode, failure.ts - s.symptom_horizon_s)
    found = troubles(index, near, since, failure.ts)
    lasting = [
        t
        for t in found
        if t.count > 1 or index.failing_at(t.obj, failure.ts, float("-inf")) is not None
    ]  # one line that nothing followed is no trouble this failure grew from
    return lasting, failure.ts, False


def _causes_first(ctx: _Context, scored: Sequence[Candidate]) -> list[Candidate]:
    """Causes before symptoms: for each trouble (`_troubled`), the person's change of what
    runs (or deletion) in what can change the troubled object (`onsets.reach`: itself, its owner's
    template, its inputs, what it depends on) made in the `symptom_horizon_s` before the
    trouble began that fits it best (`_fit`), unless the ranking doubts it (`doubted`) or it
    came before the troubled object was made (`_before_it_was_made`) and it is not a change
    of another object the trouble's words name (`_named_elsewhere`). It
    is ranked above the trouble's own symptoms, with them as its evidence and the time
    between; the change behind the earliest trouble above everything: a failure propagates
    from where it began, and what began it is what one reverts."""
    index, s = ctx.index, ctx.settings
    found, _, held = _troubled(ctx)
    if not found:
        return []
    changes = [
        c
        for c in scored
        if c.entry.get("type") == "change"
        and c.entry.get("action") != "created"
        and (changes_what_runs(c.entry, s) or _deleted_by_person(c.entry))
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
            (_fit(ctx, trouble, c), c)
            for c in fits
            if _named_elsewhere(ctx, trouble, c)
            or not (c.doubted or _before_it_was_made(ctx, trouble, c, born))
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
        gap = _ago(trouble.onset - float(best.entry["ts"]))
        times = f" ({trouble.count} times since)" if trouble.count > 1 else ""
        symptom = index.entries[trouble.position]
        reason = (
            f"{_describe_change(best.entry, obj)}, {gap} before {trouble.obj} "
            f"{_began(symptom)}{times}"
        )
        more = best.reason.split("; ")[1:]  # the change's own reasons, but its first words
        chained = any(m.startswith("it holds back") for m in more)
        if trouble.obj != ctx.failure.obj and not chained:
            reason += (
                f"; it holds back {ctx.failure.obj}"
                if held
                else f"; then {ctx.failure.obj} {_failed(ctx.failure)}"
            )
        reason += "".join(f"; {m}" for m in more)
        out.append(Candidate(best.entry, round(score, 6), reason, _route(ctx, obj)))
    return out


def _deleted_by_person(entry: Entry) -> bool:
    """Whether a change entry is a person's deletion of its object (its `deletionTimestamp`
    set, or its removal): what depends on it loses it."""
    deleted = entry.get("action") == "deleted" or deletion_begun(entry)
    return deleted and not by_controller(entry)


def _before_it_was_made(ctx: _Context, trouble: Trouble, candidate: Candidate, born: float) -> bool:
    """Whether `candidate` changed another object than the troubled one (or its owner)
    before the troubled object was made: it was made into the world as that change left
    it, so its trouble is its own (a new Job's bad SQL is not the db's earlier change)."""
    obj = index_ref(ctx.index, candidate.entry)
    mine = {trouble.obj, *(n for n, _, rel in ctx.graph.get(trouble.obj, ()) if rel == "ownedBy")}
    return obj not in mine and float(candidate.entry["ts"]) < born


def _named_elsewhere(ctx: _Context, trouble: Trouble, candidate: Candidate) -> bool:
    """Whether `candidate` changed another object than the troubled one (or its owner) and
    the trouble's words name it, its setting or its value: a client's error that points at
    what changed elsewhere (a probe's failure naming a probe setting of its own template is
    no such pointer: the words are the probe's own)."""
    obj = index_ref(ctx.index, candidate.entry)
    mine = {trouble.obj, *(n for n, _, rel in ctx.graph.get(trouble.obj, ()) if rel == "ownedBy")}
    said = [ctx.index.entries[p] for p in trouble.said]
    return obj not in mine and mentions(said, candidate.entry, obj)


def _fit(ctx: _Context, trouble: Trouble, candidate: Candidate) -> tuple[bool, bool, float]:
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


def _began(entry: Entry) -> str:
    """How an object's trouble began, in words (`began exiting with signal 9`)."""
    kind = entry.get("type")
    if kind == "exit":
        sig = entry.get("signal")
        how = f"signal {sig}" if sig else f"code {entry.get('exitCode')}"
        return f"began exiting with {how}"
    if kind == "log":
        return f"began logging {_short(entry.get('line', ''), 60)!r}"
    if kind == "event":
        return f"began having Warning events {entry.get('reason')}"
    return _describe_symptom(entry)


# -- blocked chains ------------------------------------------------------------------------

WAITING_REASONS = frozenset({"WaitingForDependency", "DependencyNotReady"})
"""Reasons of a False `Ready` that mean the object waits for a dependency."""
FAILURE_REASONS = frozenset(
    {
        "ReadinessProbeFailed",
        "LivenessProbeFailed",
        "ProbeFailed",
        "StartFailed",
        "ProcessExited",
        "CrashLoopBackOff",
        "BackOff",
        "Failed",
        "BackoffLimitExceeded",
        "DeadlineExceeded",
        "ProgressDeadlineExceeded",
        "ListenFailed",
        "SecretMissing",
        "SecretInvalid",
        "FailedCreate",
    }
)
"""Reasons of a condition that say what went wrong (a probe failing, a command that could
not start, a back-off, a limit reached), as the workloads write them."""
EVIDENCE_WEIGHTS = {
    "deleted": 1.0,
    "changed": 1.0,
    "exit": 1.0,
    "stalled": 0.9,
    "condition": 0.8,
    "event": 0.7,
    "log": 0.6,
}
"""How directly each kind of a blocker's evidence says what is wrong: its deletion (a
blocker that no longer exists), the change that broke it, or an exit with its last lines
first, then a Stalled or Failed reason, a failing condition (a probe's message, a command
that could not start), a Warning event (a back-off), an error line."""


def _evidence_kind(entry: Entry) -> str | None:
    """What kind of failure evidence `entry` is (a key of `EVIDENCE_WEIGHTS`), if any."""
    kind = entry.get("type")
    if kind == "exit":
        return "exit" if symptom_of(entry) is not None else None
    if kind == "event":
        return "event" if entry.get("eventType") == "Warning" else None
    if kind == "log":
        return "log" if ERROR_LINE.search(str(entry.get("line", ""))) else None
    if kind == "condition":
        cond = entry.get("condition") or {}
        if cond.get("type") in ("Stalled", "Failed") and cond.get("status") == "True":
            return "stalled"
        if cond.get("status") != "True" and cond.get("reason") in FAILURE_REASONS:
            return "condition"
    return None


def _deletion(index: TimelineIndex, obj: ObjectRef, since: float, now: float) -> int | None:
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


def _breaking_change(ctx: _Context, obj: ObjectRef, since: float, now: float) -> int | None:
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


def _evidence_shape(entry: Entry) -> str:
    """What makes two pieces of evidence the same: a log line's template, a condition's
    type and reason, an event's reason, an exit's code or signal."""
    kind = entry.get("type")
    if kind == "log":
        return template_of(entry)
    if kind == "condition":
        cond = entry.get("condition") or {}
        return f"{cond.get('type')} {cond.get('reason')}"
    if kind == "event":
        return str(entry.get("reason"))
    return str(symptom_of(entry))


def _blocked(ctx: _Context, now: float) -> bool:
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


def _blocker_evidence(ctx: _Context) -> list[Candidate]:
    """When the target is held back (`_blocked`), the failure evidence of each root blocker
    (the target itself when nothing holds it back) since `symptom_horizon_s` before the
    failure, up to now: the latest entry of each kind and shape, each with its chain."""
    index, s, failure = ctx.index, ctx.settings, ctx.failure
    now = failure.now if failure.now is not None else failure.ts
    if not _blocked(ctx, now):
        return []
    chains = blocking_chains(index, failure.obj, now) or [[failure.obj]]
    since = failure.ts - s.symptom_horizon_s
    broken: dict[ObjectRef, tuple[str, int]] = {}  # root -> how it was deleted or broken
    for chain in chains:
        deletion = _deletion(index, chain[-1], since, now)
        change = None if deletion is not None else _breaking_change(ctx, chain[-1], since, now)
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
            kind = None if position in index.stopping else _evidence_kind(entry)
            if kind is not None:
                latest[(kind, _evidence_shape(entry))] = position
        if root in broken:
            latest[(broken[root][0], "")] = broken[root][1]
        path = tuple(chain)
        route = " <- ".join(str(o) for o in path)
        for (kind, _), position in latest.items():
            entry = index.entries[position]
            by_change = kind in ("deleted", "changed")
            what = _describe_change(entry, root) if by_change else _describe_symptom(entry)
            reason = what if by_change else f"{root} {what}"
            if len(path) > 1:
                reason += f"; it holds back {failure.obj}: {route}"
            score = s.prior_blocker * EVIDENCE_WEIGHTS[kind]
            if first_break is not None and index.ts[position] > first_break[0]:
                score *= s.precedence_penalty
                gap = _ago(index.ts[position] - first_break[0])
                reason += f"; but a blocker was {first_break[1]} {gap} before it"
            out.append(Candidate(entry, round(score, 6), reason, path))
    return out


# -- words -------------------------------------------------------------------------------


def _ago(seconds: float) -> str:
    seconds = abs(seconds)
    if seconds < 1:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


def _failed(failure: Failure) -> str:
    return {
        "NotReady": "went NotReady",
        "Stalled": "stalled",
        "CrashLoop": "began crash-looping",
        "Failed": "failed",
    }.get(failure.failure, "failed")


def _short(value: Any, width: int = 40) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return text if len(text) <= width else text[: width - 3] + "..."


def _describe_change(entry: Entry, obj: ObjectRef) -> str:
    diff = entry.get("diff") or {}
    actor = entry.get("actor")
    by = f" by {actor}" if actor else ""
    items = list(diff.items())
    if len(items) == 1 and isinstance(items[0][1], list | tuple) and len(items[0][1]) == 2:
        path, (old, new) = items[0]
        if old is None:
            return f"{obj} {path} set to {_short(new)}{by}"
        if new is None:
            return f"{obj} {path} removed (was {_short(old)}){by}"
        return f"{obj} {path} changed from {_short(old)} to {_short(new)}{by}"
    paths = ", ".join(str(p) for p, _ in items[:3]) + (", ..." if len(items) > 3 else "")
    return f"{obj} changed ({paths}){by}"


def _describe_symptom(entry: Entry, novel: bool = False) -> str:
    kind = entry.get("type")
    if kind == "log":
        news = "a never-seen line" if novel else "a line not seen for an hour"
        return f"logged {news} {_short(entry.get('line', ''), 60)!r}"
    if kind == "exit":
        sig = entry.get("signal")
        said = f"exited with signal {sig}" if sig else f"exited with code {entry.get('exitCode')}"
        lines = [str(x) for x in entry.get("lines") or () if str(x).strip()]
        return f"{said}: {_short(lines[-1].strip(), 100)!r}" if lines else said
    if kind == "condition" and (entry.get("condition") or {}).get("message"):
        cond = entry.get("condition") or {}
        state = f"{cond.get('type')}={cond.get('status')} ({cond.get('reason')})"
        return f"became {state}: {_short(cond.get('message'), 100)}"
    if kind == "event":
        return f"had a Warning event {entry.get('reason')}: {_short(entry.get('message', ''), 100)}"
    cond = entry.get("condition") or {}
    return f"became {cond.get('type')}={cond.get('status')} ({cond.get('reason')})"


def _relation(target: ObjectRef, obj: ObjectRef, hops: int, path: list[str]) -> str:
    if obj == target:
        return ""
    if not path:
        return f"{obj} is not connected to {target} in the timeline"
    return f"{target} {', '.join(path)}"
