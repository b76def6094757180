"""The `Store` contract every backend keeps (DESIGN.md section 3), and its watch event.

* One monotonically increasing revision per store; every write takes the next
  one, and an object's `metadata.resourceVersion` is the revision that last wrote it.
* `update` is compare-and-swap on `resourceVersion` (stale: `Conflict`);
  `create` of an existing name is `AlreadyExists`.
* `list` returns the items and the revision they were read at (`list_encoded` the same,
  each item as its JSON);
  `watch(since=rev)` yields every change after `rev`, in revision order, with no
  gaps and no duplicates, then streams live. A `since` older than the retained
  history raises `Gone`: relist and watch from the list's revision.
* A write is durable when its call returns.

No backend code lives here.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from setpoint.model import Object, Registry, Selector

EventType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One change: `object` is the object as that revision left it (for DELETED, its last state)."""

    type: EventType
    object: Object
    revision: int


class Store(Protocol):
    """What controllers, the CLI and the API server use; see the module docstring."""

    registry: Registry

    async def create(self, obj: Object) -> Object: ...

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = "default"
    ) -> Object: ...

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
    ) -> tuple[list[Object], int]: ...

    async def list_encoded(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
    ) -> tuple[builtins.list[bytes], int]:
        """`list` with each object as its JSON (`setpoint.model.codec.encode`), for callers
        that pass objects on rather than read them (the API server's lists): a backend that
        stores that JSON hands it over undecoded."""
        ...

    def list_pages(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
        *,
        page_size: int = 500,
    ) -> AsyncIterator[tuple[builtins.list[Object], int]]:
        """`list` a page at a time, every page read from the same snapshot and carrying its
        revision (at least one page, perhaps empty). For callers that must not hold every
        object decoded at once, like an informer filling its cache."""
        ...

    async def update(self, obj: Object) -> Object: ...

    async def update_status(self, obj: Object) -> Object: ...

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Any,
        namespace: str | None = "default",
        patch_type: str = "merge",
    ) -> Object: ...

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = "default",
        *,
        propagation_policy: str = "Background",
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> Object:
        """Delete now, or (with finalizers) mark for deletion. Foreground: dependents go first;
        Orphan: dependents are kept and lose their owner reference. `uid` and
        `resource_version` are preconditions: `Conflict` unless the object still has them."""
        ...

    def watch(
        self,
        api_version: str | None,
        kind: str | None,
        namespace: str | None = None,
        since: int | None = None,
        label_selector: str | Selector | None = None,
    ) -> AsyncIterator[WatchEvent]: ...

    async def revision(self) -> int: ...

    async def compact(self, revision: int) -> None: ...

    async def close(self) -> None: ...


class Reader(Protocol):
    """Synchronous reads of a store, for short-lived readers that need no event loop (the
    CLI's `get`): the same answers as `Store.get` and `Store.list`, read from one snapshot
    each. `setpoint.store.open_reader` opens one; `close` ends it."""

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = "default"
    ) -> Object: ...

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
    ) -> tuple[builtins.list[Object], int]: ...

    def close(self) -> None: ...
