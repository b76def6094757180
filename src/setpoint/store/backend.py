"""What every backend shares above its storage: turning `Store` calls into `Write`
requests, and serving `watch` (and `watch_encoded`, objects left as JSON bytes) from the
shared fan-out.

A backend subclasses `Backend` and supplies `_execute` (run one write in a
transaction, keeping `write.op` and `write.options.actor` with its log row), `_history`
(the log after a revision) and the reads. One that publishes through the shared fan-out
passes every entry to `_learn_committed` too, so that CRDs written by any process define
kinds in this one (`setpoint.store.kinds`) and its dependency index sees every process's
edges (`setpoint.store.dependency_index`); a write made here is learnt as soon as it
returns. (etcd serves each watch from etcd itself: it learns the CRDs when opened, the edges
when first needed, and both from its own writes.)

Every write passes the dependency index's `admit` first, in `_write`: a write that would
close a `dependsOn` cycle is refused there, nothing written. A dry run is admitted the same
way but never reaches `_execute`: `_write` decides it on the object as `get` reads it and
returns what it would write, learning nothing.

Admission webhooks (`setpoint.store.webhooks`), once a caller is installed in `webhooks`,
see a write that their rules match before any of that: `_write` reads the object, decides
the write on it, lets the webhooks change or refuse what it would leave, and writes that,
pinned to the version it read (again from the top, a few times, if it changed meanwhile for
a patch or a delete). A store with no webhook configured pays one check per write.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any

from setpoint.clock import Clock
from setpoint.errors import Conflict, NotFound
from setpoint.model import Object, Registry, Selector, codec
from setpoint.model.webhooks import is_configuration
from setpoint.store.base import NO_OPTIONS, WatchEvent, WriteOptions
from setpoint.store.dependency_index import DependencyIndex
from setpoint.store.kinds import is_crd, learn_change
from setpoint.store.rules import Write, decide, encode, key_of, prepare
from setpoint.store.watchers import EncodedEvent, LogEntry, Watchers, WatchFilter
from setpoint.store.webhooks import WebhookAdmission, attributes

ADMISSION_ATTEMPTS = 5
"""How often a patch or delete is admitted anew when its object changed during admission."""


def encoded_matching(
    encoded: builtins.list[bytes], label_selector: str | Selector | None
) -> builtins.list[bytes]:
    """The encoded objects whose labels `label_selector` matches (all of them, undecoded,
    when it is empty)."""
    selector = Selector.of(label_selector)
    if not selector.requirements:
        return encoded
    return [
        data for data in encoded if selector.matches(codec.decode(data)["metadata"].get("labels"))
    ]


class Backend(ABC):
    registry: Registry
    _watchers: Watchers
    _clock: Clock

    @abstractmethod
    async def _execute(self, write: Write) -> Object:
        """Decide and commit one write; return the object as written."""

    @abstractmethod
    async def _history(self, after: int) -> list[LogEntry]:
        """Retained log entries after `after`, in order; `Gone` if compacted past it."""

    @abstractmethod
    async def revision(self) -> int: ...

    @abstractmethod
    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = "default"
    ) -> Object: ...

    @abstractmethod
    def list_pages(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
        *,
        page_size: int = 500,
    ) -> AsyncIterator[tuple[list[Object], int]]: ...

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
    ) -> tuple[list[Object], int]:
        items: list[Object] = []
        revision = 0
        async for page, page_revision in self.list_pages(
            api_version, kind, namespace, label_selector, page_size=1_000_000
        ):
            items.extend(page)
            revision = page_revision
        return items, revision

    async def list_encoded(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
    ) -> tuple[builtins.list[bytes], int]:
        """`list`, each object encoded; a backend holding the JSON as stored overrides it."""
        items, revision = await self.list(api_version, kind, namespace, label_selector)
        return [codec.encode(obj) for obj in items], revision

    _reads_log = True
    """Whether `_history` reads the revision log (etcd has none: its watches are etcd's)."""

    @cached_property
    def _dependencies(self) -> DependencyIndex:
        return DependencyIndex(self.registry, self, log=self._reads_log)

    webhooks: WebhookAdmission | None = None
    """The admission webhooks writes pass (None: none; `setpoint.store.webhooks`)."""

    async def _write(self, write: Write) -> Object:
        """`_write_admitted` once the admission webhooks that match the write admitted it
        (see the module docstring)."""
        webhooks = self.webhooks
        if webhooks is None or not webhooks.concerns(write):
            return await self._write_admitted(write)
        for attempt in range(1, ADMISSION_ATTEMPTS + 1):
            admitted = await self._admit_by_webhooks(webhooks, write)
            try:
                return await self._write_admitted(admitted)
            except Conflict:
                if write.op not in ("patch", "delete") or attempt == ADMISSION_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    async def _admit_by_webhooks(self, webhooks: WebhookAdmission, write: Write) -> Write:
        """`write` as the webhooks admit it: its object as they changed it, pinned to the
        version of the object decided on; raises what they refuse."""
        current = await self._current(write)
        change = decide(write, current, self._clock.now())
        proposed = change.object if change is not None else current
        admitted = await webhooks.admit(
            attributes(write, proposed, current), self._namespace_labels
        )
        if write.op == "delete":
            assert current is not None
            meta = current["metadata"]
            pinned = {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}
            return replace(write, preconditions={**(write.preconditions or {}), **pinned})
        assert admitted is not None
        if admitted is not proposed:  # a webhook changed it: check it as any write
            if write.op == "update_status":
                admitted["status"] = write.kind.validate_status(admitted.get("status"))
            else:
                write.kind.validate(admitted)
        if write.op == "create":
            return replace(write, obj=admitted)
        assert current is not None
        admitted["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return replace(write, admitted=admitted)

    async def _namespace_labels(self, namespace: str) -> dict[str, str]:
        """The labels of the `Namespace` object of that name, when the registry has the kind
        and the object exists (else none: webhooks see only its name label)."""
        if not self.registry.registered("v1", "Namespace"):
            return {}
        try:
            obj = await self.get("v1", "Namespace", namespace, None)
        except NotFound:
            return {}
        labels = obj["metadata"].get("labels")
        return labels if isinstance(labels, dict) else {}

    async def _current(self, write: Write) -> Object | None:
        api_version, kind, namespace, name = write.key
        try:
            return await self.get(api_version, kind, name, namespace or None)
        except NotFound:
            return None

    async def _write_admitted(self, write: Write) -> Object:
        """`_execute` once the dependency index admits the write (no `dependsOn` cycle);
        then a CRD's kind and the object's edges are learnt (or forgotten) at once. A dry
        run is admitted and decided, never executed nor learnt."""
        admitted = await self._dependencies.admit(write)
        try:
            if write.options.dry_run:
                return await self._dry_run(write)
            written = await self._execute(write)
        finally:
            self._dependencies.done(admitted)
        meta = written["metadata"]
        gone = not meta.get("finalizers") and (
            write.op == "delete" or bool(meta.get("deletionTimestamp"))
        )
        if write.op != "update_status":  # a status write changes no edge
            self._dependencies.learn(write.kind, written, gone=gone)
        if is_crd(write.kind.api_version, write.kind.kind):
            learn_change(self.registry, written, deleted=gone)
        if self.webhooks is not None:
            self.webhooks.learn_entry(
                write.kind.api_version, write.kind.kind, written, deleted=gone
            )
        return written

    async def _dry_run(self, write: Write) -> Object:
        """The object as `write` would leave it, decided by `decide` on the object as it is
        (refused as the write would be, the size limit too); nothing written."""
        current = await self._current(write)
        change = decide(write, current, self._clock.now())
        if change is None:
            assert current is not None
            return current
        encode(change.object)
        return change.object

    def _learn_committed(self, entries: Sequence[LogEntry]) -> None:
        """Learn from committed `entries` (whoever wrote them): the kinds of the CRDs among
        them, and the dependency edges of the objects of kinds that declare them."""
        for entry in entries:
            if is_crd(entry.api_version, entry.kind):
                obj = codec.decode(entry.data)
                learn_change(self.registry, obj, deleted=entry.type == "DELETED")
            if self.webhooks is not None and is_configuration(entry.api_version, entry.kind):
                obj = codec.decode(entry.data)
                self.webhooks.learn(obj, deleted=entry.type == "DELETED")
        self._dependencies.learn_entries(entries)

    async def create(self, obj: Object, *, options: WriteOptions = NO_OPTIONS) -> Object:
        return await self._write(prepare(self.registry, "create", obj, options))

    async def update(self, obj: Object, *, options: WriteOptions = NO_OPTIONS) -> Object:
        return await self._write(prepare(self.registry, "update", obj, options))

    async def update_status(self, obj: Object, *, options: WriteOptions = NO_OPTIONS) -> Object:
        return await self._write(prepare(self.registry, "update_status", obj, options))

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
    ) -> Object:
        k = self.registry.get(api_version, kind)
        key = key_of(k, name, namespace)
        write = Write("patch", key, k, patch=patch, patch_type=patch_type, options=options)
        return await self._write(write)

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
        k = self.registry.get(api_version, kind)
        key = key_of(k, name, namespace)
        preconditions = {"uid": uid, "resourceVersion": resource_version}
        write = Write(
            "delete",
            key,
            k,
            propagation=propagation_policy,
            preconditions={f: v for f, v in preconditions.items() if v is not None},
            options=options,
        )
        return await self._write(write)

    def watch(
        self,
        api_version: str | None,
        kind: str | None,
        namespace: str | None = None,
        since: int | None = None,
        label_selector: str | Selector | None = None,
    ) -> AsyncIterator[WatchEvent]:
        wanted = self._watch_filter(api_version, kind, namespace, label_selector)
        return self._watchers.watch(self._history, self.revision, wanted, since)

    def watch_encoded(
        self,
        api_version: str | None,
        kind: str | None,
        namespace: str | None = None,
        since: int | None = None,
        label_selector: str | Selector | None = None,
    ) -> AsyncIterator[EncodedEvent]:
        """`watch`, each object left as the log keeps it (`EncodedWatches`)."""
        wanted = self._watch_filter(api_version, kind, namespace, label_selector)
        return self._watchers.watch_encoded(self._history, self.revision, wanted, since)

    def _watch_filter(
        self,
        api_version: str | None,
        kind: str | None,
        namespace: str | None,
        label_selector: str | Selector | None,
    ) -> WatchFilter:
        if kind is not None:
            self.registry.get(api_version or "", kind)
        return WatchFilter(api_version, kind, namespace, Selector.of(label_selector))
