"""Rank the probable causes of one object's failure among timeline entries ("what changed
before this broke"). Pure: no I/O, no clock, no asyncio; time is the entries' own `ts`.

`TimelineIndex.build(entries)` reads the entries once (they must be ordered by `ts`) and keeps
what every explanation needs: timestamps to bisect, the dependency/ownership edges, each
object's entries, failure onsets, and which config values and log lines were never seen
before. `explain(index, target, at=...)` then ranks, touching only the entries near the
failure, so one explanation on a million-entry timeline takes milliseconds.
`target_state` says first whether there is anything to explain: the object is `missing`,
`healthy` (Ready, no failure going on) or `failing`. The front ends (`setpoint explain`,
`describe`, the API's explanation) then ask `failure_to_explain` what failed and
`confident_causes` for the causes, the same way.

The parts, each pure (no I/O, no clock, no asyncio; time is the entries' own `ts`):

* `setpoint.insight.index`: what entries mean (a symptom, a stop on request, failure
  evidence) and the `TimelineIndex`;
* `setpoint.insight.scoring`: the settings, the candidate, the failure explained, and the
  score of each change and symptom (its docstring gives every factor and why);
* `setpoint.insight.chains`: what holds the target back, and the evidence at the ends of
  those chains;
* `setpoint.insight.causes` (with `setpoint.insight.onsets`): causes before symptoms;
* `setpoint.insight.paths`: the verified path of each candidate;
* `setpoint.insight.words`: how the reasons are worded.

Every candidate comes with its verified path (`Candidate.hops`,
`setpoint.insight.paths`): each step from the target to the entry's object with the edge
entry that shows it, `unknown` where none does.

Floor (`RankingSettings.floor`): what a spec change of an object not connected to the
target, made `tau_s` before the failure, with nothing else for it, scores (1 x 0.5 ** 4 x
0.5 = 0.031). When no candidate reaches it, `explain` says the cause is not known rather
than rank noise (`confident`). It follows from the weights above, not from a benchmark.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

from setpoint.errors import Invalid
from setpoint.insight.causes import causes_first
from setpoint.insight.chains import blocker_evidence, blocking_chains
from setpoint.insight.entries import ObjectRef
from setpoint.insight.index import TimelineIndex
from setpoint.insight.paths import edges_by_pair, verified_path
from setpoint.insight.scoring import (
    Candidate,
    Context,
    Failure,
    RankingSettings,
    change_prior,
    changes_what_runs,
    cooccurrence,
    episode_start,
    first_path_symptom,
    hops_from,
    score_change,
    score_symptoms,
    shortest_paths,
)

__all__ = [
    "Candidate",
    "Failure",
    "RankingSettings",
    "TargetState",
    "blocking_chains",
    "change_prior",
    "changes_what_runs",
    "confident",
    "confident_causes",
    "episode_start",
    "explain",
    "failure_to_explain",
    "find_failure",
    "hops_from",
    "rank",
    "target_state",
]


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


def failure_to_explain(index: TimelineIndex, target: ObjectRef, at: float | None = None) -> Failure:
    """What `setpoint explain` (the CLI, the API, `describe`) explains for a target that
    `target_state` says is failing: its failure (`find_failure`), or, when it never
    reported one (not Ready yet), `NotReady` since it was created."""
    if index.failure_of(target, at) is not None:
        return find_failure(index, target, at)
    now = at if at is not None else index.ts[-1]
    return Failure(target, index.created_at(target, now), "NotReady", None, now)


def confident_causes(
    index: TimelineIndex, failure: Failure, settings: RankingSettings
) -> list[Candidate]:
    """`rank`, or none when no candidate is `confident` (the cause is not known)."""
    candidates = rank(index, failure, settings)
    return candidates if confident(candidates, settings) else []


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
    ctx = Context(
        index, failure, settings, graph, shortest_paths(graph, failure.obj, via), via, None, {}
    )
    ctx.episode = episode_start(index, failure.obj, failure.ts)
    ctx.first_path_symptom = first_path_symptom(ctx)
    start = failure.ts - settings.horizon_s
    lo, hi = bisect_left(index.change_ts, start), bisect_right(index.change_ts, failure.ts)
    change_positions = index.changes[lo:hi]
    ctx.cooccurrence = cooccurrence(ctx, change_positions, lo)
    scored = [c for p in change_positions if (c := score_change(ctx, p)) is not None]
    scored += score_symptoms(ctx)
    scored += blocker_evidence(ctx)
    scored += causes_first(ctx, scored)
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
