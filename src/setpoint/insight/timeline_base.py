"""What every timeline shares, whatever keeps it: an entry's type, the recorder's checkpoint,
the refusal of a checkpoint that moved (`CheckpointMoved`, defined in `setpoint.errors`
with every error), and the interface (`TimelineBackend`) that the SQL
timeline (`setpoint.insight.timeline.Timeline`) and the etcd one
(`setpoint.insight.timeline_etcd.EtcdTimeline`) both have, which the recorder and the
readers use. Both modules import this one and neither imports the other at module level
(`Timeline.of_store` imports the etcd one when asked for it).

No I/O: definitions only.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, Self

from setpoint.errors import CheckpointMoved as CheckpointMoved

Entry = dict[str, Any]
"""One timeline entry (see `setpoint.insight.timeline`)."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where the recorder stands: the store `revision` it recorded up to, and its last view
    of each object by key (`None` in an update: the object is gone)."""

    revision: int
    seen: Mapping[str, Any]


def object_of(entry: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object an entry is about (an edge's `from`)."""
    found = entry.get("object") or entry.get("from") or {}
    return found if isinstance(found, Mapping) else {}


class TimelineBackend(Protocol):
    """A timeline as the recorder and the readers use it (`Timeline` documents each method):
    thread-safe, synchronous."""

    def append(self, entry: Entry) -> None: ...

    def append_many(
        self,
        entries: Iterable[Entry],
        checkpoint: Checkpoint | None = None,
        *,
        after: int | None = None,
    ) -> int: ...

    def revision(self) -> int: ...

    def checkpoint(self) -> Checkpoint | None: ...

    def claim_recording(self, recorder: int, until: float, *, force: bool = False) -> bool: ...

    def recording(self) -> bool: ...

    def prune(self, max_age_s: float | None, max_entries: int | None) -> int: ...

    def query(
        self,
        *,
        object: Mapping[str, Any] | None = None,
        since: float | None = None,
        until: float | None = None,
        types: Collection[str] | None = None,
        limit: int | None = None,
    ) -> list[Entry]: ...

    def count(self) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...
