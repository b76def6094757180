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

Every write (`create`, `update`, `update_status`, `patch`, `delete`) takes one keyword,
`options: WriteOptions` (default `NO_OPTIONS`):

* `dry_run`: the write is decided against the current state exactly as a real one (the
  same `setpoint.store.rules.prepare` and `decide`, the same refusals), and the call returns
  the object as it would be; nothing is written and no revision is used.
* `actor`: who writes (`Actor`: the authenticated user, the field manager, the client's
  User-Agent). Every backend keeps it, with the verb (the write's method name), in the
  log row of the revision it writes, and hands both to watchers (`WatchEvent.verb` and
  `.actor`; None for history written before they were kept, `actor` None for a write
  that named none).
* `record_fields`: the fields an `update` or `patch` changes become the actor's manager's
  (its `Update` entry in `metadata.managedFields`, `setpoint.model.managed_fields`),
  decided in the write on the object as validated and as stored. A write whose actor
  names a manager records them on an object that has managed fields already, with or
  without it. An `update_status` that records fields keeps the `managedFields` its object
  carries (a server-side apply of the status brings its manager's entry); any other status
  write keeps the stored ones.

No backend code lives here.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from setpoint.model import Object, Registry, Selector

EventType = Literal["ADDED", "MODIFIED", "DELETED"]
Verb = Literal["create", "update", "update_status", "patch", "delete"]
"""The store method that made a write."""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who makes a write: `user`, the authenticated user (`user@host` for the CLI on its own
    store); `manager`, the field manager (`fieldManager`, else the User-Agent's product, as
    `setpoint.model.managed_fields.manager_of` names it; a controller's name); `agent`, the
    client's User-Agent. Any may be None (not known)."""

    user: str | None = None
    manager: str | None = None
    agent: str | None = None

    def name(self) -> str:
        """How the timeline names it: the user, else the manager, else `unknown`."""
        return self.user or self.manager or "unknown"


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """How to make one write (see the module docstring)."""

    dry_run: bool = False
    actor: Actor | None = None
    record_fields: bool = False


NO_OPTIONS = WriteOptions()
"""A real write by an unnamed writer."""


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One change: `object` is the object as that revision left it (for DELETED, its last
    state); `verb` and `actor` say how and by whom it was written (None: not known)."""

    type: EventType
    object: Object
    revision: int
    verb: Verb | None = None
    actor: Actor | None = None


class Store(Protocol):
    """What controllers, the CLI and the API server use; see the module docstring."""

    registry: Registry

    async def create(self, obj: Object, *, options: WriteOptions = NO_OPTIONS) -> Object: ...

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

    async def update(self, obj: Object, *, options: WriteOptions = NO_OPTIONS) -> Object: ...

    async def update_status(self, obj: Object, *, options: WriteOptions = NO_OPTIONS) -> Object: ...

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Any,
        namespace: str | None = "default",
        patch_type: str = "merge",
        *,
        options: WriteOptions = NO_OPTIONS,
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
        options: WriteOptions = NO_OPTIONS,
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
