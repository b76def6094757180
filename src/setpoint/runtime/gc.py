"""The garbage collector: deletes objects whose owners are gone, and carries out Foreground
and Orphan deletions, across every registered kind, as the Kubernetes garbage collector does.

* Background: an object all of whose owners (`metadata.ownerReferences`) are gone is
  deleted. An owner is gone when no object of its kind and name exists, or one exists
  with another uid. While any owner remains, the object stays, and references to owners
  that are gone are removed from it.
* Foreground: an owner being deleted with the `foregroundDeletion` finalizer has its
  dependents deleted first (with Foreground propagation, so the deletion cascades). A
  dependent that has another owner is kept and loses its reference to this one. Once no
  dependent with `blockOwnerDeletion: true` remains, the finalizer is removed and the
  owner goes.
* Orphan: an owner being deleted with the `orphan` finalizer has its reference removed
  from every dependent; then the finalizer is removed and the owner goes.

How: a graph of every object's owner references (uid -> node, owner uid -> dependent uids)
is built from a list of every kind and kept current by one watch of every kind. Each
change puts the uids of the owners it concerns on a work queue, so a burst collapses;
workers decide from the graph which objects to look at and re-read each from the store
before they write, so a stale graph costs a wasted look, never a wrong deletion. A watch
that expires (`Gone`) is followed by a fresh list. Every step is idempotent: an object
already gone is fine.

Run one `GarbageCollector` per store (leader-only where there are several engines):
`manager.add_runnable(GarbageCollector(store).run)`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Conflict, Error, Gone, NotFound, StoreClosed, UnknownKind
from setpoint.model import Object, Registry
from setpoint.runtime.lifecycle import is_deleting, remove_finalizer
from setpoint.runtime.queue import ShutDown, WorkQueue
from setpoint.store import FOREGROUND_DELETION, ORPHAN, Store, WatchEvent
from setpoint.tasks import cancel_and_wait

log = logging.getLogger("setpoint.gc")

_GC_FINALIZERS = frozenset((FOREGROUND_DELETION, ORPHAN))
_MAX_CONFLICTS = 10
"""Compare-and-swap retries of one write before the owner goes back on the queue."""


@dataclass(frozen=True, slots=True)
class _Ref:
    uid: str
    block: bool  # blockOwnerDeletion


@dataclass(frozen=True, slots=True)
class _Node:
    """What the graph keeps of one object: where to find it, whom it names as owners, and
    which of the collector's finalizers it is waiting on (only while it is being deleted)."""

    api_version: str
    kind: str
    namespace: str | None
    name: str
    revision: int
    owners: tuple[_Ref, ...]
    waiting_on: frozenset[str]

    @classmethod
    def of(cls, obj: Object) -> _Node:
        meta = obj["metadata"]
        owners = tuple(
            _Ref(ref["uid"], bool(ref.get("blockOwnerDeletion")))
            for ref in meta.get("ownerReferences") or ()
        )
        waiting_on = (
            _GC_FINALIZERS.intersection(meta.get("finalizers") or ())
            if is_deleting(obj)
            else frozenset()
        )
        return cls(
            obj["apiVersion"],
            obj["kind"],
            meta.get("namespace") or None,
            meta["name"],
            int(meta.get("resourceVersion") or 0),
            owners,
            waiting_on,
        )

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


class _Graph:
    """Owner references of every object, by uid. Owner uids are indexed whether or not an
    object with that uid is known: an unknown one is an owner that is gone (or not yet
    seen)."""

    def __init__(self) -> None:
        self.nodes: dict[str, _Node] = {}
        self.dependents: dict[str, set[str]] = {}

    def put(self, uid: str, node: _Node) -> _Node | None:
        """Record `node`; return the node it replaced."""
        old = self.remove(uid)
        self.nodes[uid] = node
        for ref in node.owners:
            self.dependents.setdefault(ref.uid, set()).add(uid)
        return old

    def remove(self, uid: str) -> _Node | None:
        old = self.nodes.pop(uid, None)
        if old is not None:
            for ref in old.owners:
                deps = self.dependents.get(ref.uid)
                if deps is not None:
                    deps.discard(uid)
                    if not deps:
                        del self.dependents[ref.uid]
        return old

    def dependents_of(self, owner: str) -> list[tuple[str, _Node]]:
        return [(uid, self.nodes[uid]) for uid in sorted(self.dependents.get(owner, ()))]

    def blocking(self, owner: str) -> Iterator[_Node]:
        """Dependents whose reference to `owner` has blockOwnerDeletion."""
        for _, node in self.dependents_of(owner):
            if any(ref.uid == owner and ref.block for ref in node.owners):
                yield node


class GarbageCollector:
    """Kubernetes garbage-collector semantics for `store`; see the module docstring.

    `registry` (default: the store's) names the kinds listed at start; changes of any
    kind are watched. `workers` owners are worked on at once. `run()` once per instance.
    """

    def __init__(
        self,
        store: Store,
        *,
        registry: Registry | None = None,
        clock: Clock = SYSTEM_CLOCK,
        workers: int = 4,
        retry_delay: float = 1.0,
    ) -> None:
        self.store = store
        self.registry = registry if registry is not None else store.registry
        self.queue: WorkQueue[str] = WorkQueue(clock=clock)
        """Owner uids to look at."""
        self._clock = clock
        self._workers = max(1, workers)
        self._retry_delay = retry_delay
        self._graph = _Graph()
        self._synced = asyncio.Event()

    @property
    def synced(self) -> bool:
        """Whether the graph reflects the store (it does not while listing or relisting)."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        """Return once the graph has caught up with the store after the first list."""
        await self._synced.wait()

    async def run(self) -> None:
        """Collect garbage until cancelled or the store closes."""
        workers = [
            asyncio.create_task(self._work(), name=f"setpoint.gc-worker-{i}")
            for i in range(self._workers)
        ]
        try:
            while True:
                try:
                    await self._list_and_watch()
                    return  # the watch ended: the store closed
                except Gone:
                    log.info("garbage collector: watch history expired; relisting")
                except StoreClosed:
                    return
                except Error as exc:
                    log.warning("garbage collector: list/watch failed (%s); retrying", exc)
                    await self._clock.sleep(self._retry_delay)
        finally:
            self._synced.clear()
            self.queue.shutdown()
            await cancel_and_wait(workers)

    # -- the graph ----------------------------------------------------------------

    async def _list_and_watch(self) -> None:
        self._synced.clear()
        graph = _Graph()
        revisions: list[int] = []
        for kind in self.registry:
            items, revision = await self.store.list(kind.api_version, kind.kind)
            revisions.append(revision)
            for obj in items:
                graph.put(obj["metadata"]["uid"], _Node.of(obj))
        # Each kind is listed at its own revision. Watching from the smallest replays every
        # change after it, some of which a later list already holds: harmless, since the
        # graph ignores an event older than the version it has of that object, and workers
        # re-read what they act on. Taking store.revision() before listing would be as
        # correct, with more to replay. But until the watch passes the largest list revision
        # the graph is no snapshot (an object created after an early list is missing), and a
        # foreground owner must not lose its finalizer for want of a dependent not yet
        # seen: workers wait for `synced`. Every write takes the next revision, so when the
        # revisions differ, the watch yields an event at `high` itself.
        since = min(revisions) if revisions else await self.store.revision()
        high = max(revisions, default=since)
        self._graph = graph
        if since >= high:
            self._mark_synced()
        async for event in self.store.watch(None, None, since=since):
            self._apply(event)
            if not self.synced and event.revision >= high:
                self._mark_synced()

    def _mark_synced(self) -> None:
        """The graph is current: queue every owner that may have work waiting."""
        graph = self._graph
        for owner in list(graph.dependents):
            if owner not in graph.nodes:
                self.queue.add(owner)
        for uid, node in graph.nodes.items():
            if node.waiting_on:
                self.queue.add(uid)
        self._synced.set()

    def _apply(self, event: WatchEvent) -> None:
        obj = event.object
        uid = obj["metadata"]["uid"]
        graph = self._graph
        if event.type == "DELETED":
            old = graph.remove(uid)
            new = None
        else:
            new = _Node.of(obj)
            current = graph.nodes.get(uid)
            if current is not None and current.revision >= new.revision:
                return  # replayed after a list that already held a later version
            old = graph.put(uid, new)
        if not self.synced:
            return  # `_mark_synced` looks at everything
        for node in (old, new):
            for ref in node.owners if node is not None else ():
                owner = graph.nodes.get(ref.uid)
                if owner is None or owner.waiting_on:
                    self.queue.add(ref.uid)
        if new is None:
            if uid in graph.dependents:
                self.queue.add(uid)
        elif new.waiting_on:
            self.queue.add(uid)

    # -- the work -------------------------------------------------------------------

    async def _work(self) -> None:
        while True:
            try:
                uid = await self.queue.get()
            except ShutDown:
                return
            try:
                await self._synced.wait()
                await self._process(uid)
                self.queue.forget(uid)
            except asyncio.CancelledError:
                raise
            except Error as exc:
                log.warning("garbage collector: owner %s: %s; retrying", uid, exc)
                self.queue.add_rate_limited(uid)
            except Exception:
                log.exception("garbage collector: owner %s failed; retrying", uid)
                self.queue.add_rate_limited(uid)
            finally:
                self.queue.done(uid)

    async def _process(self, uid: str) -> None:
        """Level-based: look at owner `uid` as it is now and do what its dependents need."""
        node = self._graph.nodes.get(uid)
        if node is None:
            # Gone (or never seen): each dependent goes unless another owner remains.
            for dep_uid, dep in self._graph.dependents_of(uid):
                await self._attempt_to_delete(dep_uid, dep)
            return
        if not node.waiting_on:
            return
        owner = await self._get(node, uid)
        if owner is None:
            return  # gone meanwhile; its DELETED event queues it again
        waiting_on = _Node.of(owner).waiting_on
        if ORPHAN in waiting_on:
            await self._orphan_dependents(uid, node)
            if self.synced and uid not in self._graph.dependents:
                await self._remove_finalizer(uid, node, ORPHAN)
            return  # each dependent's change queues this owner again
        if FOREGROUND_DELETION in waiting_on:
            for dep_uid, dep in self._graph.dependents_of(uid):
                await self._attempt_to_delete(dep_uid, dep)
            # The graph, not the store, says which dependents remain: it is the only index
            # by owner. Dependents just deleted are still in it; their DELETED events queue
            # this owner again.
            if self.synced and next(self._graph.blocking(uid), None) is None:
                await self._remove_finalizer(uid, node, FOREGROUND_DELETION)

    async def _attempt_to_delete(self, uid: str, node: _Node) -> None:
        """Delete the object `uid` if none of its owners remains (Kubernetes'
        attemptToDeleteItem), re-reading it and each owner from the store."""
        for _ in range(_MAX_CONFLICTS):
            obj = await self._get(node, uid)
            if obj is None or is_deleting(obj):
                return  # gone, or going: its own deletion is under way
            refs = obj["metadata"].get("ownerReferences") or []
            if not refs:
                return
            states: dict[str, list[str]] = {"solid": [], "gone": [], "waiting": []}
            for ref in refs:
                states[await self._owner_state(obj, ref)].append(ref["uid"])
            solid, gone, waiting = states["solid"], states["gone"], states["waiting"]
            try:
                if solid:
                    # It stays; references to owners that are gone or deleting in the
                    # foreground no longer hold anything (and would block the latter).
                    if gone or waiting:
                        await self._without_owners(obj, {*gone, *waiting})
                    return
                if waiting:
                    if self._may_close_a_cycle(uid):
                        await self._unblock(obj, set(waiting))
                    await self._delete(obj, node, "Foreground")
                    return
                await self._delete(obj, node, _policy_of(obj))
                return
            except Conflict:
                continue
        raise Conflict(f"{node.describe()}: kept changing while the collector worked on it")

    async def _owner_state(self, dependent: Object, ref: dict[str, Any]) -> str:
        """`gone`, `waiting` (deleting, dependents first) or `solid` (exists, or cannot be
        looked up: an unregistered kind, or a namespaced owner of a cluster-scoped object,
        which Kubernetes never collects)."""
        namespace = dependent["metadata"].get("namespace") or None
        try:
            kind = self.registry.get(ref["apiVersion"], ref["kind"])
            if kind.namespaced and namespace is None:
                raise UnknownKind("a cluster-scoped object cannot have a namespaced owner")
            owner = await self.store.get(
                kind.api_version, kind.kind, ref["name"], namespace if kind.namespaced else None
            )
        except UnknownKind as exc:
            log.warning(
                "garbage collector: %s %r: owner reference to %s %r cannot be resolved (%s); "
                "it is kept",
                dependent["kind"],
                dependent["metadata"]["name"],
                ref["kind"],
                ref["name"],
                exc,
            )
            return "solid"
        except NotFound:
            return "gone"
        if owner["metadata"].get("uid") != ref["uid"]:
            return "gone"
        if is_deleting(owner) and FOREGROUND_DELETION in (
            owner["metadata"].get("finalizers") or ()
        ):
            return "waiting"
        return "solid"

    def _may_close_a_cycle(self, uid: str) -> bool:
        """Whether a dependent of `uid` is itself waiting for its dependents: then a
        Foreground deletion of `uid` could wait on an owner that waits on it (Kubernetes'
        heuristic)."""
        return any(
            FOREGROUND_DELETION in dep.waiting_on for _, dep in self._graph.dependents_of(uid)
        )

    async def _orphan_dependents(self, owner: str, node: _Node) -> None:
        for dep_uid, dep in self._graph.dependents_of(owner):
            for _ in range(_MAX_CONFLICTS):
                obj = await self._get(dep, dep_uid)
                if obj is None:
                    break
                try:
                    await self._without_owners(obj, {owner})
                    break
                except Conflict:
                    continue
            else:
                raise Conflict(f"{dep.describe()}: kept changing while orphaning it")
        log.info("garbage collector: orphaned the dependents of %s", node.describe())

    # -- writes -----------------------------------------------------------------------

    async def _get(self, node: _Node, uid: str) -> Object | None:
        """The object `node` names, as stored now; None if gone (or replaced by another
        with the same name)."""
        try:
            obj = await self.store.get(node.api_version, node.kind, node.name, node.namespace)
        except NotFound:
            return None
        return obj if obj["metadata"].get("uid") == uid else None

    async def _without_owners(self, obj: Object, owners: Collection[str]) -> None:
        """Remove the references to `owners` from `obj` (Conflict if it changed)."""
        meta = obj["metadata"]
        refs = meta.get("ownerReferences") or []
        kept = [ref for ref in refs if ref["uid"] not in owners]
        if len(kept) == len(refs):
            return
        meta["ownerReferences"] = kept
        try:
            await self.store.update(obj)
        except NotFound:
            return

    async def _unblock(self, obj: Object, owners: Collection[str]) -> None:
        refs = obj["metadata"].get("ownerReferences") or []
        changed = False
        for ref in refs:
            if ref["uid"] in owners and ref.get("blockOwnerDeletion"):
                ref["blockOwnerDeletion"] = False
                changed = True
        if changed:
            await self.store.update(obj)

    async def _delete(self, obj: Object, node: _Node, policy: str) -> None:
        # The uid precondition spares an object recreated under this name since `obj` was read.
        log.info("garbage collector: deleting %s (%s): no owner remains", node.describe(), policy)
        try:
            await self.store.delete(
                node.api_version,
                node.kind,
                node.name,
                node.namespace,
                propagation_policy=policy,
                uid=obj["metadata"]["uid"],
            )
        except (NotFound, Conflict):
            return

    async def _remove_finalizer(self, uid: str, node: _Node, finalizer: str) -> None:
        for _ in range(_MAX_CONFLICTS):
            obj = await self._get(node, uid)
            if obj is None or not remove_finalizer(obj, finalizer):
                return
            try:
                await self.store.update(obj)
            except NotFound:
                return
            except Conflict:
                continue
            log.info("garbage collector: %s: removed finalizer %s", node.describe(), finalizer)
            return
        raise Conflict(f"{node.describe()}: kept changing while removing finalizer {finalizer}")


def _policy_of(obj: Object) -> str:
    """How to delete an object nobody owns any more: as its own finalizers ask."""
    finalizers = obj["metadata"].get("finalizers") or ()
    if ORPHAN in finalizers:
        return "Orphan"
    if FOREGROUND_DELETION in finalizers:
        return "Foreground"
    return "Background"
