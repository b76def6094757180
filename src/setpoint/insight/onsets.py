"""Where a failure's trouble began, and what it can reach: the facts "causes before symptoms"
rests on (`setpoint.insight.ranking` ranks with them).

* `reach(graph, obj)`: what can change what `obj` does: itself, its owner (a replica's
  template), its inputs (a Secret it `uses`), and what it depends on, directly or not (with
  what those own and use).
* `troubles(index, objs, since, until, settle_s=...)`: for each object, its first symptom in
  [`since`, `until`] after which it was not Ready again by `until` (a trouble that lasted),
  with how many symptoms of that shape it showed since; earliest first. A symptom that
  began nothing (seen once, followed by others, the object still Ready `settle_s` later;
  the ranking passes its `tau_s`, a minute) is not a trouble's first.
* `mentions(said, change, obj)`: whether a trouble's words name what a change changed: the
  changed object's name, the setting's name, or its old or new value (`port 5432`,
  `maxmemory`, `password`). An error that names a changed thing points at it.
* `exhausted(said)` and `changes_an_amount(change)`: whether a trouble says a resource ran
  out (killed by SIGKILL, as the kernel kills what exceeds its memory; out of memory; too
  many clients; no space left), and whether a change set an amount (a count or a size: `4`
  to `32`, `512Mi` to `48Mi`, `--max-connections=3`). A resource that runs out was sized by
  an amount: such a trouble fits a change of an amount better than one of a name (a log
  level, a time zone, an image).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from setpoint.insight.entries import Entry, ObjectRef
from setpoint.insight.index import (
    LOG_LAG_S,
    TimelineIndex,
    change_paths,
    symptom_of,
    template_of,
)

Graph = Mapping[ObjectRef, Sequence[tuple[ObjectRef, int, str]]]

TOWARD_CAUSES = ("dependsOn", "uses")
"""Relations from an object toward what can change what it does (with its owners')."""


def reach(graph: Graph, obj: ObjectRef) -> set[ObjectRef]:
    """`obj`, its owners, what they use and depend on (directly or not), and what those own
    and use: every object whose change can change what `obj` does."""
    starts = {obj, *(n for n, _, rel in graph.get(obj, ()) if rel == "ownedBy")}
    found = set(starts)
    todo = list(starts)
    while todo:
        node = todo.pop()
        for n, _, rel in graph.get(node, ()):
            if n not in found and (rel in TOWARD_CAUSES or (rel == "owns" and node not in starts)):
                found.add(n)
                todo.append(n)
    return found


@dataclass(frozen=True)
class Trouble:
    """An object's trouble: its first lasting symptom (`position`, at `onset`), how many
    symptoms of that shape it showed from then on, and its symptoms in the `SAYS_S` after
    the onset (what it said as the trouble began: a failing condition has no words, the
    Warning event beside it does)."""

    obj: ObjectRef
    onset: float
    position: int
    count: int
    said: tuple[int, ...]


SAYS_S = 5.0


def troubles(
    index: TimelineIndex,
    objs: Iterable[ObjectRef],
    since: float,
    until: float,
    *,
    settle_s: float,
) -> list[Trouble]:
    """Each object's first symptom in [`since`, `until`] after which it was not Ready
    again by `until` (a log line read up to `LOG_LAG_S` after a Ready counts as before it),
    and that began something (`_lone`: a symptom seen once, followed by others, with the
    object still Ready `settle_s` later, did not), earliest first."""
    out = []
    for obj in objs:
        positions = index.objects.get(obj, [])
        lo = bisect_left(positions, since, key=lambda p: index.ts[p])
        hi = bisect_right(positions, until + LOG_LAG_S, key=lambda p: index.ts[p])
        mine = [p for p in positions[lo:hi] if p in index.symptom_positions]
        if not mine:
            continue
        ready = index.ready.get(obj, [])
        r_lo = bisect_left(ready, since, key=lambda p: index.ts[p])
        r_hi = bisect_right(ready, until, key=lambda p: index.ts[p])
        readies = [
            index.ts[p]
            for p in ready[r_lo:r_hi]
            if (index.entries[p].get("condition") or {}).get("status") == "True"
        ]
        shapes = [_shape(index.entries[p]) for p in mine]
        first = next(
            (
                p
                for k, p in enumerate(mine)
                if index.ts[p] <= until
                and not any(r > index.ts[p] + _lag(index.entries[p]) for r in readies)
                and not _lone(index, obj, p, (shapes[k], shapes[k + 1 :]), until, settle_s)
            ),
            None,
        )
        if first is None:
            continue
        onset, shape = index.ts[first], _shape(index.entries[first])
        count = sum(
            1 for p, h in zip(mine, shapes, strict=True) if index.ts[p] >= onset and h == shape
        )
        said = tuple(p for p in mine if onset <= index.ts[p] <= onset + SAYS_S)
        out.append(Trouble(obj, onset, first, max(count, 1), said))
    out.sort(key=lambda t: (t.onset, str(t.obj)))
    return out


def _lone(
    index: TimelineIndex,
    obj: ObjectRef,
    position: int,
    shapes: tuple[str, list[str]],
    until: float,
    settle_s: float,
) -> bool:
    """Whether the symptom at `position` began nothing: its shape (`shapes[0]`) is not seen
    again among the later symptoms' (`shapes[1]`), one follows, and `obj` was still Ready
    `settle_s` after it (a timeout logged once while it kept serving is not where its
    trouble began)."""
    shape, later = shapes
    if shape in later or not later:
        return False
    settled = min(index.ts[position] + settle_s, until)
    return (index.ready_at(obj, settled) or {}).get("status") == "True"


def _lag(entry: Entry) -> float:
    return LOG_LAG_S if entry.get("type") == "log" else 0.0


def _shape(entry: Entry) -> str:
    if entry.get("type") == "log":
        return "log " + template_of(entry)
    return str(symptom_of(entry))


def words_of(entry: Entry) -> str:
    """What a symptom says: a log line, an exit's reason and last lines, a message."""
    parts: list[Any] = [entry.get("line"), entry.get("reason"), entry.get("message")]
    parts += list(entry.get("lines") or ())
    cond = entry.get("condition")
    if isinstance(cond, Mapping):
        parts.append(cond.get("message"))
    return "\n".join(str(p) for p in parts if isinstance(p, str) and p)


_SPLIT = re.compile(r"[=:,\s/\"']+")
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
GENERIC = frozenset(
    {"spec", "template", "args", "env", "data", "value", "name", "true", "false", "none"}
    | {"seconds", "resources", "status", "metadata"}
)
"""Setting names too common to say which setting an error is about."""


def tokens_of(change: Entry, obj: ObjectRef, *, values: bool = True) -> set[str]:
    """The words that name what a change changed. Without `values` (the troubled object's own
    change), the words of each setting's path (`readinessProbe.timeoutSeconds`: readiness,
    probe, timeout). With `values` (another object's), its name, the words of each
    setting's last name (`data.password`: password), and the pieces of its old value
    (`--maxmemory=512mb`: maxmemory, 512mb; `5432`): a client's error names the dependency,
    the port it still uses, the flag, not the dependency's probe (and a client that names
    the new value uses it, as asked). Markers of hidden values and
    words shorter than three letters (four for a path's) are left out, but the name."""
    found: set[str] = set()
    diff = change.get("diff") or {}
    for path in change_paths(change):
        segments = re.sub(r"\[\d+\]", "", path).split(".")
        for segment in segments if not values else segments[-1:]:
            found.update(w.lower() for w in _WORDS.findall(segment) if len(w) >= 4)
        if not values:
            continue
        pair = diff.get(path)
        for value in pair[:1] if isinstance(pair, list | tuple) else ():  # the old value
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                text = str(value)
                if text.startswith("(") and text.endswith(")"):
                    continue  # a hidden value's marker
                found.update(
                    w.lower().lstrip("-") for w in _SPLIT.split(text) if len(w.lstrip("-")) >= 3
                )
    found -= GENERIC
    if values:
        found.add(obj.name.lower())
    return found


def mentions(said: Iterable[Entry], change: Entry, obj: ObjectRef, *, values: bool = True) -> bool:
    """Whether the words of what was `said` (`words_of`) name something `change` (of `obj`)
    changed (`tokens_of`), as whole words, case aside. Without `values`, only the setting's
    name counts: an object's own lines say its own values all the time (a `UTC` stamp)."""
    text = "\n".join(words_of(e) for e in said).lower()
    if not text:
        return False
    return any(
        re.search(rf"(?<![\w-]){re.escape(token)}(?![\w-])", text)
        for token in tokens_of(change, obj, values=values)
    )


EXHAUSTION_WORDS = re.compile(
    r"out of memory|\boom\b|memoryerror|\bmemory\b|too many|exhausted|no space left"
    r"|cannot allocate|resource temporarily unavailable|slots are reserved",
    re.IGNORECASE,
)
"""Words with which programs say that a resource ran out."""
KILLED = frozenset({9, "9", "SIGKILL", "KILL"})
"""A kill no program asks for itself: the kernel's (a memory limit exceeded), or a person's."""


def exhausted(said: Iterable[Entry]) -> bool:
    """Whether what was `said` tells of a resource that ran out: an exit by SIGKILL (code
    137) or words that say so (`EXHAUSTION_WORDS`)."""
    for entry in said:
        if entry.get("type") == "exit" and (
            entry.get("signal") in KILLED or entry.get("exitCode") == 137
        ):
            return True
        if EXHAUSTION_WORDS.search(words_of(entry)):
            return True
    return False


_AMOUNT = re.compile(
    r"(?:--?[\w.-]+=)?(\d+(?:\.\d+)?)\s*(?:[kKmMgGtT]i?|[kKmMgGtT][bB]|[mM]|)",
)


def _amount(value: Any) -> tuple[str, float] | None:
    """A value as (its flag, if any; the number): `--max-connections=3` -> ('--max-connections=',
    3.0), `48Mi` -> ('', 48.0); None for what is not a count or a size."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return "", float(value)
    if not isinstance(value, str):
        return None
    match = _AMOUNT.fullmatch(value.strip())
    if match is None:
        return None
    return value.strip()[: match.start(1)], float(match.group(1))


_PORT = re.compile(r"port", re.IGNORECASE)


def changes_an_amount(change: Entry) -> bool:
    """Whether `change` set an amount: some path's old and new values are both counts or sizes
    (`_amount`) under the same flag, and they differ. A port is an address, not an amount:
    a path that names a port, and a value the change also set as a port (an argument
    `39809` beside `spec.ports[0]: 39809`), count for nothing."""
    pairs = [
        (path, pair)
        for path, pair in (change.get("diff") or {}).items()
        if isinstance(pair, list | tuple) and len(pair) == 2
    ]
    ports = {str(v) for path, pair in pairs if _PORT.search(path) for v in pair}
    for path, pair in pairs:
        if _PORT.search(path) or ports & {str(v) for v in pair}:
            continue
        old, new = _amount(pair[0]), _amount(pair[1])
        if old is not None and new is not None and old[0] == new[0] and old != new:
            return True
    return False
