"""The store's index of dependency edges, so that a write closing a `dependsOn` cycle is
refused in the store's admission, for every writer (the CLI, kubectl, a Python client, the
dashboard), without listing anything per write.

The edges are what objects of the kinds that declare them (`Kind.depends_on`: Process, Job
and Deployment; a user's kind may too) depend on, as `setpoint.model.dependency_graph`
reads them. `Backend` keeps one `DependencyIndex` per open store:

* `admit(write)`, at the start of `Backend._write`, before anything is carried out: the
  edges the written object will have (create, update: from the object; a patch that may
  touch the field: the object as read now, patched; status writes and deletes add none).
  If one of them closes a cycle it raises `Invalid` (field: the kind's `depends_on`, e.g.
  `spec.dependsOn`; message `dependsOn cycle: Process/a -> Process/b -> Process/a; remove
  one of these dependencies`) and nothing is written. Otherwise it returns a token under
  which the new edges count as pending until `done(token)`: two writes of this process
  that would close a cycle together cannot both pass (the later one is refused, even if
  the earlier then fails).
* `learn(kind, obj, gone=...)` records a committed object's edges: this process's writes at
  once (`Backend._write`), and every committed entry the backend publishes
  (`learn_entries`, from `Backend._learn_committed`), which for memory, SQLite and
  PostgreSQL are other processes' writes too. Each node keeps the revision that gave it its
  edges, so an older change arriving late never undoes a newer one.

The index is built at the first write that declares an edge: one list of each kind that
declares edges (again for a kind registered later); until then it learns nothing and costs
nothing. Before each check it catches up with
the revision log after the last revision it has learnt whole, if the store's revision is
past it (`Backend._history`: the few writes the fan-out has not published yet; a log
compacted past it means a relist). Never a list per write. A cycle found in the index is
confirmed before the write is refused: each node on it, and the writing object as stored,
is read again (`get`) and the search rerun, so a stale edge never refuses a write, and
only the edges a write adds (not those already stored) can have it refused: a cycle
already stored does not block other changes to its objects.

What it cannot catch: two writers in different processes closing one cycle at the same
instant may both pass, each checked before the other's write was committed (Kubernetes has
no such check at all). etcd has no revision log to catch up from and serves watches from
etcd itself, not the shared fan-out: its index learns the store as listed when built and
this process's own writes after that, so a cycle closed through an edge another process
wrote since is caught only once the store is reopened. The index reads through the backend
it belongs to; it writes nothing.
"""

from __future__ import annotations

import asyncio
import builtins
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, Protocol

from setpoint.errors import Gone, Invalid, NotFound
from setpoint.model import Kind, Object, Registry, apply_patch, codec
from setpoint.model.dependency_graph import (
    Node,
    closing_path,
    cycle_message,
    declaring_kind,
    dependencies_of,
    node_of,
)
from setpoint.store.rules import Write
from setpoint.store.watchers import LogEntry


class _Reads(Protocol):
    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = "default"
    ) -> Object: ...

    async def list(
        self, api_version: str, kind: str, namespace: str | None = None
    ) -> tuple[list[Object], int]: ...

    async def _history(self, after: int) -> builtins.list[LogEntry]: ...

    async def revision(self) -> int: ...


class _Edges(NamedTuple):
    revision: int
    targets: frozenset[Node]


class DependencyIndex:
    """What each object of a kind that declares dependency edges depends on (the module
    docstring); `store` is the backend it reads from."""

    def __init__(self, registry: Registry, store: _Reads, *, log: bool = True) -> None:
        self._registry = registry
        self._store = store
        self._log = log
        self._seen = 0
        """Every committed change up to this revision is learnt."""
        self._edges: dict[Node, _Edges] = {}
        self._dependents: dict[Node, set[Node]] = {}
        """The same edges backwards: who depends on a node (the search walks these)."""
        self._pending: dict[int, tuple[Node, frozenset[Node]]] = {}
        self._tokens = itertools.count(1)
        self._listed: set[tuple[str, str]] = set()
        self._active = False
        """Whether the index is built (or being built): until a write declares an edge,
        nothing is learnt (the first listing will find it)."""
        self._listing = asyncio.Lock()
        self._declaring_kinds: tuple[int, dict[tuple[str, str], Kind]] = (-1, {})
        """`_declaring`'s answer, and the registry's `changes` it was computed at."""

    async def admit(self, write: Write) -> int | None:
        """Raise `Invalid` naming the cycle if `write` would close one; else the token of
        its pending edges (None: it adds none), for `done`."""
        kind = write.kind
        if kind.depends_on is None or write.op in ("delete", "update_status"):
            return None
        obj = await self._written(write)
        if obj is None:
            return None
        node = node_of(kind, obj)
        targets = dependencies_of(self._registry, kind, obj)
        if not targets:
            return None
        await self._list_declaring_kinds()
        await self._catch_up()
        path = await self._closed_cycle(node, targets)
        if path is not None:
            raise Invalid(cycle_message(path), field=kind.depends_on)
        token = next(self._tokens)
        self._pending[token] = (node, targets)
        return token

    def done(self, token: int | None) -> None:
        """The write `admit` returned `token` for has ended (written or failed)."""
        if token is not None:
            self._pending.pop(token, None)

    def learn(self, kind: Kind, obj: Object, *, gone: bool) -> None:
        """Record `obj` (of `kind`) as committed (`gone`: deleted), unless the index holds a
        newer revision of it."""
        if kind.depends_on is None or not self._active:
            return
        node = node_of(kind, obj)
        revision = int(obj["metadata"].get("resourceVersion") or 0)
        known = self._edges.get(node)
        if known is not None and known.revision >= revision:
            return
        targets = frozenset() if gone else dependencies_of(self._registry, kind, obj)
        self._set(node, None if gone else _Edges(revision, targets))

    def _set(self, node: Node, edges: _Edges | None) -> None:
        """Give `node` its `edges` (None: forget it), forwards and backwards."""
        old = self._edges.pop(node, None)
        new = edges.targets if edges is not None else frozenset()
        for target in old.targets - new if old is not None else ():
            dependents = self._dependents[target]
            dependents.discard(node)
            if not dependents:
                del self._dependents[target]
        for target in new - old.targets if old is not None else new:
            self._dependents.setdefault(target, set()).add(node)
        if edges is not None:
            self._edges[node] = edges

    def learn_entries(self, entries: Sequence[LogEntry]) -> None:
        """`learn` the objects of committed log `entries` (in revision order) whose kinds
        declare edges."""
        if not self._active:
            return
        if entries and entries[0].revision <= self._seen + 1:  # no gap: all seen up to the last
            self._seen = max(self._seen, entries[-1].revision)
        for entry in entries:
            if not self._registry.registered(entry.api_version, entry.kind):
                continue  # only kinds registered in Python declare edges
            kind = self._registry.get(entry.api_version, entry.kind)
            if kind.depends_on is not None:
                self.learn(kind, codec.decode(entry.data), gone=entry.type == "DELETED")

    async def _written(self, write: Write) -> Object | None:
        """The object as `write` would leave it, as far as its edges go; None when the write
        cannot change them (or will fail on its own). What admission webhooks admitted is
        what is written (`Write.admitted`)."""
        if write.admitted is not None:
            return write.admitted
        if write.op != "patch":
            return write.obj
        assert write.kind.depends_on is not None
        if not _may_touch(write.patch, write.patch_type, write.kind.depends_on):
            return None
        api_version, kind, namespace, name = write.key
        try:
            current = await self._store.get(api_version, kind, name, namespace or None)
            return apply_patch(current, write.patch, write.patch_type)
        except (NotFound, Invalid):
            return None  # the write itself says why

    async def _list_declaring_kinds(self) -> None:
        """List each kind that declares edges, once (the index's starting point)."""
        if all(key in self._listed for key in self._declaring()):
            return
        self._active = True
        async with self._listing:
            await self._list(key for key in self._declaring() if key not in self._listed)

    async def _list(self, keys: Iterable[tuple[str, str]]) -> None:
        revisions = []
        for key in keys:
            kind = self._registry.get(*key)
            items, revision = await self._store.list(kind.api_version, kind.kind)
            for item in items:
                self.learn(kind, item, gone=False)
            self._listed.add(key)
            revisions.append(revision)
        if revisions and len(self._listed) == len(revisions):  # the first listing
            self._seen = max(self._seen, min(revisions))

    async def _catch_up(self) -> None:
        """Learn what the log holds after the last revision learnt (another process's writes
        the fan-out has not published yet; on etcd, which has no such log, nothing); relist
        if the log no longer reaches back that far."""
        if not self._log or await self._store.revision() <= self._seen:
            return
        try:
            self.learn_entries(await self._store._history(self._seen))
        except Gone:
            async with self._listing:
                self._listed.clear()
                await self._list(list(self._declaring()))

    def _declaring(self) -> dict[tuple[str, str], Kind]:
        changes, kinds = self._declaring_kinds
        if changes != self._registry.changes:
            kinds = {(k.api_version, k.kind): k for k in self._registry if k.depends_on}
            self._declaring_kinds = (self._registry.changes, kinds)
        return kinds

    async def _closed_cycle(self, node: Node, targets: frozenset[Node]) -> list[Node] | None:
        """The cycle that `node`'s new edges to `targets` close, confirmed by reading every
        object on it (and `node` as stored: edges it already has close nothing new)."""
        confirmed: set[Node] = set()
        adding = targets
        while True:
            path = closing_path(self._dependents_of(), node, adding)
            if path is None:
                return None
            unread = [n for n in dict.fromkeys((node, *path[1:-1])) if n not in confirmed]
            if not unread:
                return path
            for stale in unread:
                stored = await self._reread(stale)
                confirmed.add(stale)
                if stale == node:
                    adding = targets - stored

    def _dependents_of(self) -> Callable[[Node], Iterable[Node]]:
        """The graph backwards, as a function: who depends on a node, by a committed edge or
        a pending one of a write in flight."""
        pending: dict[Node, set[Node]] = {}
        for node, targets in self._pending.values():
            for target in targets:
                pending.setdefault(target, set()).add(node)

        def dependents_of(node: Node) -> Iterable[Node]:
            committed = self._dependents.get(node, set())
            return committed | pending[node] if node in pending else committed

        return dependents_of

    async def _reread(self, node: Node) -> frozenset[Node]:
        """Read `node`'s object as stored now, learn it, and return its edges."""
        kind = declaring_kind(self._registry, node[0])
        if kind is None:
            return frozenset()
        try:
            obj = await self._store.get(kind.api_version, kind.kind, node[2], node[1] or None)
        except NotFound:
            self._set(node, None)
            return frozenset()
        self.learn(kind, obj, gone=False)
        return dependencies_of(self._registry, kind, obj)


def _may_touch(patch: Any, patch_type: str, path: str) -> bool:
    """Whether a patch may change the field at dotted `path` (a merge patch that does not
    reach it cannot; a JSON patch may)."""
    if patch_type != "merge":
        return True
    node = patch
    for part in path.split("."):
        if not isinstance(node, dict):
            return True  # replaces a parent with something else: the edges go
        if part not in node:
            return False
        node = node[part]
    return True
