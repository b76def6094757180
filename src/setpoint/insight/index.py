"""What `explain` needs from a timeline, gathered in one pass: what each entry means (a
failure, a recovery, a symptom, a change and its paths, a log line's shape) and
`TimelineIndex`, which keeps the timestamps to bisect, the dependency, ownership and `uses`
edges, each object's entries, failure onsets and recoveries, and which config values and log
lines were never seen before. `setpoint.insight.ranking` scores on top of it.

Pure: no I/O, no clock, no asyncio; time is the entries' own `ts`.

Failure evidence (`evidence_kind`, weighed by `EVIDENCE_WEIGHTS`; `evidence_shape` says when
two are the same) is what a root blocker shows: an exit with its last lines, a Stalled or
Failed reason, a failing condition with its reason, a Warning event, an error line.

A symptom is an exit other than a stop on request (SIGTERM, code 0 or 143), a Warning
event, a failure onset, or an error line (ERROR, FATAL, Traceback, ...Error) whose template
its object did not log in the hour before. A log line's template is the line with numbers,
addresses, ids and quoted strings masked (`line_shape`: each word with a digit in it).

Deletion is a stop on request too: once a change sets an object's `deletionTimestamp`, its
conditions (a replica turning Ready=False as a rollout removes it), and its exits, events and
log lines (PostgreSQL's shutdown exits non-zero) are neither failures nor symptoms nor a
blocker's evidence, until it is created again; and when it is deleted, a failure it had ends with it
(a removed crash-looping replica is not still failing).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from setpoint.errors import Invalid
from setpoint.insight.entries import Entry, ObjectRef

# -- what entries mean ---------------------------------------------------------------

CRASH_LOOP_REASONS = frozenset({"BackOff", "CrashLoopBackOff"})
STOP_SIGNALS = (None, 0, 15)
STOP_CODES = (None, 0, 143)
ERROR_LINE = re.compile(
    r"\b(?:ERROR|FATAL|PANIC|CRITICAL|SEVERE|Traceback|Exception|panic|refused|denied|"
    r"timed out|timeout|killed|OOM|[A-Z][A-Za-z]*Error)\b|\berror:"
)
"""A log line that reports a problem: a symptom if its object did not log its template in the
`QUIET_S` before (recurring warnings are not news)."""
QUIET_S = 3600.0
LOG_LAG_S = 1.0
"""How late the recorder may stamp a log line: it reads the log files at intervals."""


def failure_class(entry: Entry) -> str | None:
    """The failure an entry reports: "NotReady", "Stalled", "CrashLoop", "Failed" or None."""
    kind = entry.get("type")
    if kind == "condition":
        cond = entry.get("condition") or {}
        ctype, status, reason = cond.get("type"), cond.get("status"), cond.get("reason")
        if reason in CRASH_LOOP_REASONS and status == ("False" if ctype == "Ready" else "True"):
            return "CrashLoop"
        if ctype == "Ready" and status == "False":
            return "NotReady"
        if ctype == "Stalled" and status == "True":
            return "Stalled"
        if ctype == "Failed" and status == "True":
            return "Failed"
    elif kind == "event" and entry.get("reason") in CRASH_LOOP_REASONS:
        return "CrashLoop"
    return None


def deletion_begun(entry: Entry) -> bool:
    """Whether a change entry sets its object's `metadata.deletionTimestamp`."""
    values = (entry.get("diff") or {}).get("metadata.deletionTimestamp")
    return isinstance(values, list | tuple) and len(values) == 2 and values[1] is not None


def recovered_from(entry: Entry) -> frozenset[str]:
    """The failure classes an entry ends: Ready=True ends them all, Stalled=False a stall,
    Failed=False a failure."""
    if entry.get("type") != "condition":
        return frozenset()
    cond = entry.get("condition") or {}
    ctype, status = cond.get("type"), cond.get("status")
    if ctype == "Ready" and status == "True":
        return ALL_FAILURES
    if ctype in ("Stalled", "Failed") and status == "False":
        return frozenset({ctype})
    return frozenset()


ALL_FAILURES = frozenset({"NotReady", "Stalled", "CrashLoop", "Failed"})


def symptom_of(entry: Entry) -> str | None:
    """What makes an entry (other than a log line) a symptom, as a key; None if it is not.

    A non-zero exit or a signal other than a stop on request, a Warning event, a failure."""
    kind = entry.get("type")
    if kind == "exit":
        code, signal = entry.get("exitCode"), entry.get("signal")
        if (signal in STOP_SIGNALS and code in STOP_CODES) or entry.get("stoppedOnRequest"):
            return None  # stopped on request (a restart, a rollout): not a failure
        return f"exit {code if code is not None else ''}/{signal or ''}"
    if kind == "event" and entry.get("eventType") == "Warning":
        return f"event {entry.get('reason')}"
    cls = failure_class(entry)
    return f"condition {cls}" if cls else None


_VARIABLE = re.compile(r"""'[^']*'|"[^"]*"|`[^`]*`|[^\s'"`]*\d[^\s'"`]*""")


def line_shape(line: str) -> str:
    """A log line with what varies replaced by `<*>`: quoted strings, and every word with a
    digit in it (numbers, addresses, ids, times, sizes). One regex pass, a few microseconds."""
    return _VARIABLE.sub("<*>", line.strip())


def template_of(entry: Entry) -> str:
    """What a log entry's line is an instance of: the line's shape (`line_shape`). Not the
    recorder's `template`: a streaming miner's templates generalise as it learns, so one
    statement would look new again each time its template widened."""
    line = entry.get("line")
    if isinstance(line, str):
        return line_shape(line)
    template = entry.get("template")
    return template if isinstance(template, str) else ""


_INDEX = re.compile(r"\[\d+\]")


def change_paths(entry: Entry) -> list[str]:
    """The paths a change entry touched, as written (`spec.args[2]`)."""
    diff = entry.get("diff")
    return [str(p) for p in diff] if isinstance(diff, Mapping) else []


def path_kind(path: str) -> str:
    """A path with its list indices dropped: what kind of setting it is (`spec.args`)."""
    return _INDEX.sub("", path)


METADATA_ONLY = ("metadata.labels", "metadata.annotations")


def by_controller(entry: Entry) -> bool:
    """Whether a controller made the change (the recorder's actor `controller` or
    `controller/<name>`): mostly the consequence of another change, such as a rollout's new
    replica, rather than a cause of its own."""
    actor = entry.get("actor")
    return isinstance(actor, str) and (actor == "controller" or actor.startswith("controller/"))


def _value_key(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return repr(value).encode()


# -- the index ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Edge:
    """A dependency (`dependsOn`), ownership (`ownerReference`) or input (`uses`) edge, as of
    `ts`; `position` is its entry's index in the timeline."""

    ts: float
    source: ObjectRef
    target: ObjectRef
    relation: str
    position: int = -1


@dataclass(frozen=True)
class Onset:
    """An object started failing: `position` is the entry's index in the timeline."""

    ts: float
    position: int
    obj: ObjectRef
    failure: str


@dataclass
class TimelineIndex:
    """What `explain` needs from a timeline, gathered in one pass (see `build`)."""

    entries: Sequence[Entry]
    ts: list[float]
    edges: list[Edge]
    edge_ts: list[float]
    objects: dict[ObjectRef, list[int]]
    """Positions of each object's entries (not edges), oldest first."""
    changes: list[int]
    change_ts: list[float]
    symptoms: list[int]
    """Positions of symptoms: error lines not logged in the hour before, and the entries
    `symptom_of` names."""
    symptom_ts: list[float]
    symptoms_by_object: dict[ObjectRef, list[float]]
    symptom_keys: dict[ObjectRef, list[str]]
    """What each of an object's symptoms is (parallel to `symptoms_by_object`)."""
    onsets: dict[ObjectRef, list[Onset]]
    recoveries: dict[ObjectRef, list[float]]
    onsets_by_failure: dict[tuple[str, str], list[float]]
    """(object kind, failure class) -> when objects of that kind started failing that way."""
    novel_paths: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Change position -> its paths whose new value the object never had before."""
    novel_logs: set[int] = field(default_factory=set)
    """Positions of log lines whose template the object never logged before."""
    refs: dict[int, ObjectRef] = field(default_factory=dict)
    """Position -> object, for changes and symptoms."""
    ready: dict[ObjectRef, list[int]] = field(default_factory=dict)
    """Positions of each object's `Ready` condition entries, oldest first."""
    lifecycle: dict[ObjectRef, list[tuple[float, str]]] = field(default_factory=dict)
    """Each object's `created` and `deleted` changes: (ts, action), oldest first."""
    symptom_positions: set[int] = field(default_factory=set)
    changes_by_object: dict[ObjectRef, list[int]] = field(default_factory=dict)
    """Positions of each object's changes, oldest first."""
    stopping: set[int] = field(default_factory=set)
    """Positions of exits, log lines and events of an object while it was being deleted or
    after it was: it stops because it was asked to (neither symptoms nor evidence)."""

    @property
    def kinds(self) -> set[str]:
        return {o.kind for o in self.objects}

    @classmethod
    def build(cls, entries: Sequence[Entry]) -> TimelineIndex:
        """Index `entries` (ordered by `ts`; an entry out of order raises `Invalid`)."""
        index = cls(entries, [], [], [], {}, [], [], [], [], {}, {}, {}, {}, {})
        interned: dict[tuple[str, str, str], ObjectRef] = {}
        seen_values: dict[tuple[ObjectRef, str], set[bytes]] = {}
        template_seen: dict[tuple[ObjectRef, str], float] = {}
        failing: dict[ObjectRef, set[str]] = defaultdict(set)  # its failure classes now
        deleting: set[ObjectRef] = set()  # their deletion has begun
        gone: set[ObjectRef] = set()  # deleted (until created again)
        objects = index.objects
        ts_list = index.ts
        last = float("-inf")

        def ref_of(raw: Any) -> ObjectRef | None:
            if not isinstance(raw, Mapping):
                return None
            ns = raw.get("namespace")
            key = (raw.get("kind"), raw.get("name"), ns if isinstance(ns, str) else "default")
            ref = interned.get(key)  # type: ignore[arg-type]
            if ref is None:
                ref = ObjectRef.of(raw)
                if ref is None:
                    return None
                interned[key] = ref  # type: ignore[index]
            return ref

        for position, entry in enumerate(entries):
            ts = entry["ts"]
            if ts < last:
                raise Invalid(f"timeline entry {position + 1} is older than the one before it")
            last = ts
            ts_list.append(ts)
            kind = entry.get("type")
            if kind == "edge":
                source, target = ref_of(entry.get("from")), ref_of(entry.get("to"))
                if source is not None and target is not None:
                    index.edges.append(
                        Edge(ts, source, target, str(entry.get("relation")), position)
                    )
                    index.edge_ts.append(ts)
                continue
            ref = ref_of(entry.get("object"))
            if ref is None:
                continue
            mine = objects.get(ref)
            if mine is None:
                mine = objects[ref] = []
            mine.append(position)
            if kind in ("exit", "log", "event") and (ref in deleting or ref in gone):
                index.stopping.add(position)
                continue  # it stops because it was asked to: no symptom
            if kind == "log":
                key = (ref, template_of(entry))
                last_seen = template_seen.get(key)
                template_seen[key] = ts
                if last_seen is None:
                    index.novel_logs.add(position)
                if (last_seen is None or ts - last_seen > QUIET_S) and ERROR_LINE.search(
                    str(entry.get("line", ""))
                ):
                    index._add_symptom(position, ts, ref, "log " + key[1])
                continue
            if kind == "change":
                index.changes.append(position)
                index.change_ts.append(ts)
                index.changes_by_object.setdefault(ref, []).append(position)
                index.refs[position] = ref
                novel = index._novel_paths(entry, ref, seen_values)
                if novel:
                    index.novel_paths[position] = novel
                action = entry.get("action")
                if action in ("created", "deleted"):
                    index.lifecycle.setdefault(ref, []).append((ts, str(action)))
                if action == "created":
                    deleting.discard(ref)
                    gone.discard(ref)
                elif deletion_begun(entry):
                    deleting.add(ref)
                elif action == "deleted":
                    deleting.discard(ref)
                    gone.add(ref)
                    if failing[ref]:  # it is gone, and its failure with it
                        failing[ref].clear()
                        index.recoveries.setdefault(ref, []).append(ts)
                continue
            if kind == "condition" and (entry.get("condition") or {}).get("type") == "Ready":
                index.ready.setdefault(ref, []).append(position)
            if kind == "condition" and ref in deleting:
                continue  # stopping because it was asked to, as an exit stopped on request
            cls_ = failure_class(entry)
            if cls_ is not None:
                if not failing[ref]:  # it was healthy: a failure begins
                    onset = Onset(ts, position, ref, cls_)
                    index.onsets.setdefault(ref, []).append(onset)
                    index.onsets_by_failure.setdefault((ref.kind, cls_), []).append(ts)
                failing[ref].add(cls_)
            else:
                ended = recovered_from(entry)
                if ended and failing[ref]:
                    failing[ref] -= ended
                    if not failing[ref]:
                        index.recoveries.setdefault(ref, []).append(ts)
            symptom = symptom_of(entry)
            if symptom is not None:
                index._add_symptom(position, ts, ref, symptom)
        return index

    def _add_symptom(self, position: int, ts: float, ref: ObjectRef, key: str) -> None:
        self.symptom_positions.add(position)
        self.symptoms.append(position)
        self.symptom_ts.append(ts)
        self.refs[position] = ref
        self.symptoms_by_object.setdefault(ref, []).append(ts)
        self.symptom_keys.setdefault(ref, []).append(key)

    @staticmethod
    def _novel_paths(
        entry: Entry, ref: ObjectRef, seen: dict[tuple[ObjectRef, str], set[bytes]]
    ) -> tuple[str, ...]:
        """The paths whose new value was never seen at that path of that object (a path seen
        for the first time is not novel: a created object's every value would be)."""
        novel = []
        for path, values in (entry.get("diff") or {}).items():
            if not isinstance(values, list | tuple) or len(values) != 2:
                continue
            old, new = values
            known = seen.get((ref, path))
            if known is None:
                known = seen[(ref, path)] = set()
            if old is not None:
                known.add(_value_key(old))
            new_key = _value_key(new)
            if old is not None and new is not None and new_key not in known:
                novel.append(path)
            known.add(new_key)
        return tuple(novel)

    # -- queries ---------------------------------------------------------------------

    def failure_of(self, target: ObjectRef, at: float | None) -> Onset | None:
        """The start of the target's latest failure at or before `at`."""
        onsets = self.onsets.get(target, [])
        if at is not None:
            onsets = onsets[: bisect_right([o.ts for o in onsets], at)]
        return onsets[-1] if onsets else None

    def failing_at(self, obj: ObjectRef, ts: float, since: float) -> float | None:
        """When `obj`'s failure that is still going on at `ts` began, if it began after `since`."""
        onsets = self.onsets.get(obj)
        if not onsets:
            return None
        i = bisect_right([o.ts for o in onsets], ts) - 1
        if i < 0 or onsets[i].ts < since:
            return None
        recoveries = self.recoveries.get(obj, [])
        j = bisect_right(recoveries, onsets[i].ts)
        if j < len(recoveries) and recoveries[j] <= ts:
            return None
        return onsets[i].ts

    def lasting_symptom(self, obj: ObjectRef, lo: float, hi: float) -> float | None:
        """The earliest symptom of `obj` in [`lo`, `hi`] that `obj` had not recovered from
        (a Ready=True) by `hi`: a dependency that failed while starting and then became
        Ready is not where a later failure began. A log line is stamped when it was read,
        up to `LOG_LAG_S` after it was written: one read that long after a recovery may
        have been written before it."""
        times = self.symptoms_by_object.get(obj, [])
        keys = self.symptom_keys.get(obj, [])
        i = bisect_left(times, lo)
        while i < len(times) and times[i] <= hi:
            since = times[i] - (LOG_LAG_S if keys[i].startswith("log ") else 0.0)
            if not self.recovered(obj, since, hi):
                return times[i]
            i += 1
        return None

    def recovered(self, obj: ObjectRef, since: float, until: float) -> float | None:
        """When `obj` first turned Ready again (or was deleted) after `since`, if it did by
        `until`."""
        recoveries = self.recoveries.get(obj, [])
        j = bisect_right(recoveries, since)
        return recoveries[j] if j < len(recoveries) and recoveries[j] <= until else None

    def became_ready(self, obj: ObjectRef, since: float, until: float) -> float | None:
        """When `obj` first turned Ready=True after `since`, by `until`: from not Ready, or
        as it was first Ready after being created (a replica a rollout made)."""
        positions = self.ready.get(obj, [])
        lo = bisect_right(positions, since, key=lambda p: self.ts[p])
        hi = bisect_right(positions, until, key=lambda p: self.ts[p])
        for k in range(lo, hi):
            p = positions[k]
            if (self.entries[p].get("condition") or {}).get("status") != "True":
                continue
            if k == 0:
                return self.ts[p]
            before = positions[k - 1]
            was = (self.entries[before].get("condition") or {}).get("status")
            if was != "True" or self.created_at(obj, self.ts[p]) > self.ts[before]:
                return self.ts[p]
        return None

    def ready_at(self, obj: ObjectRef, ts: float) -> Mapping[str, Any] | None:
        """`obj`'s `Ready` condition as last recorded at or before `ts` (None: none yet)."""
        positions = self.ready.get(obj, [])
        i = bisect_right(positions, ts, key=lambda p: self.ts[p]) - 1
        return self.entries[positions[i]].get("condition") if i >= 0 else None

    def was_ready(self, obj: ObjectRef, since: float, until: float) -> bool:
        """Whether `obj` was Ready=True at some time in [`since`, `until`]."""
        if (self.ready_at(obj, since) or {}).get("status") == "True":
            return True
        positions = self.ready.get(obj, [])
        lo = bisect_right(positions, since, key=lambda p: self.ts[p])
        hi = bisect_right(positions, until, key=lambda p: self.ts[p])
        return any(
            (self.entries[p].get("condition") or {}).get("status") == "True"
            for p in positions[lo:hi]
        )

    def exists_at(self, obj: ObjectRef, ts: float) -> bool:
        """Whether the timeline shows `obj` at `ts`: it has an entry by then, and its last
        `created` or `deleted` change by then is not a deletion."""
        positions = self.objects.get(obj)
        if not positions or self.ts[positions[0]] > ts:
            return False
        lifecycle = self.lifecycle.get(obj, [])
        i = bisect_right(lifecycle, ts, key=lambda c: c[0]) - 1
        return i < 0 or lifecycle[i][1] != "deleted"

    def created_at(self, obj: ObjectRef, ts: float) -> float:
        """When `obj` was last created at or before `ts` (its first entry if no `created`)."""
        lifecycle = self.lifecycle.get(obj, [])
        i = bisect_right(lifecycle, ts, key=lambda c: c[0]) - 1
        while i >= 0 and lifecycle[i][1] != "created":
            i -= 1
        return lifecycle[i][0] if i >= 0 else self.ts[self.objects[obj][0]]

    def graph_at(self, ts: float) -> dict[ObjectRef, list[tuple[ObjectRef, int, str]]]:
        """Adjacency as of `ts`, toward possible causes: (neighbour, hops, relation)."""
        graph: dict[ObjectRef, list[tuple[ObjectRef, int, str]]] = defaultdict(list)
        for edge in self.edges[: bisect_right(self.edge_ts, ts)]:
            if edge.relation == "dependsOn":
                graph[edge.source].append((edge.target, 1, "dependsOn"))
                graph[edge.target].append((edge.source, 2, "is depended on by"))
            elif edge.relation == "uses":  # an input: a Secret its env takes values from
                graph[edge.source].append((edge.target, 1, "uses"))
                graph[edge.target].append((edge.source, 2, "is used by"))
            else:
                graph[edge.source].append((edge.target, 1, "ownedBy"))
                graph[edge.target].append((edge.source, 1, "owns"))
        return graph


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


def evidence_kind(entry: Entry) -> str | None:
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


def evidence_shape(entry: Entry) -> str:
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
