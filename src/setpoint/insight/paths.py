"""The verified path of a probable cause: from the object explained to the cause's object,
each step with the timeline entry that shows it (a `dependsOn`, `ownerReference` or `uses`
edge the recorder wrote from the objects' specs and metadata). A step no entry shows is
`unknown` (`Hop.entry` None): a path is shown as far as the timeline proves it, never
guessed.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from setpoint.insight.entries import Entry, ObjectRef
from setpoint.insight.index import Edge, TimelineIndex

FORWARD = {"dependsOn": "dependsOn", "ownerReference": "ownedBy", "uses": "uses"}
"""How a step reads along an edge (the source's side)."""
BACKWARD = {"dependsOn": "is depended on by", "ownerReference": "owns", "uses": "is used by"}
"""How a step reads against an edge (the target's side)."""


@dataclass(frozen=True)
class Hop:
    """One step of a path: `source` (nearer the object explained) to `target`, how they are
    related as `source` sees it, and the edge entry that shows it (None: unknown)."""

    source: ObjectRef
    target: ObjectRef
    relation: str
    entry: Entry | None

    @property
    def verified(self) -> bool:
        return self.entry is not None


def edges_by_pair(index: TimelineIndex, at: float) -> dict[frozenset[ObjectRef], Edge]:
    """The latest edge between each pair of objects recorded at or before `at`."""
    found: dict[frozenset[ObjectRef], Edge] = {}
    for edge in index.edges[: bisect_right(index.edge_ts, at)]:
        found[frozenset((edge.source, edge.target))] = edge
    return found


def verified_path(
    index: TimelineIndex,
    path: Sequence[ObjectRef],
    pairs: dict[frozenset[ObjectRef], Edge],
) -> tuple[Hop, ...]:
    """The hops of `path` (the object explained first), each with the edge entry between its
    two objects in `pairs` (`edges_by_pair`), or unknown."""
    hops = []
    for a, b in pairwise(path):
        edge = pairs.get(frozenset((a, b)))
        if edge is None:
            hops.append(Hop(a, b, "unknown", None))
            continue
        names = FORWARD if edge.source == a else BACKWARD
        relation = names.get(edge.relation, edge.relation)
        entry = index.entries[edge.position] if edge.position >= 0 else None
        hops.append(Hop(a, b, relation, entry))
    return tuple(hops)


def path_words(hops: Sequence[Hop], start: ObjectRef | None = None) -> str:
    """A path in one line: `Deployment/web dependsOn Process/db uses Secret/db-credentials`;
    an unknown step reads `-?->`; an empty path, the object alone (or `unknown`)."""
    if not hops:
        return str(start) if start is not None else "unknown"
    words = [str(hops[0].source)]
    for hop in hops:
        words += [hop.relation if hop.verified else "-?->", str(hop.target)]
    return " ".join(words)
