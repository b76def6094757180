"""The `etcd://host:port` backend: objects held by an etcd v3 cluster, which orders every write.

    etcd://127.0.0.1:2379?prefix=/setpoint/

Layout: every object is one key, `<prefix>o/<apiVersion>/<kind>/<namespace>/<name>` (an
empty namespace for cluster-scoped kinds), its value the object's JSON without
`resourceVersion`, with the verb and actor of the write that put it as one more member at
its end (`STORED_WRITER`, `encoded_writer`), stripped on every read (a
value without it, written before, has no known writer). A delete that removes the key
leaves no value: its event names no verb or actor. The key `<prefix>store` marks the
store (its creation revision is the store's birth). etcd's store-wide revision is the
store's revision, and an object's `resourceVersion` is its key's mod revision, set on
every read.

Writes: read the key, `decide` (`setpoint.store.rules`), then one transaction that commits
only if the key's mod revision is still the one decided on (0: absent); when another writer
came first, its answer carries the key's new state and the write is decided again. Every
write touches one key, so one transaction is one revision. Watches are etcd watches on the
kind's (or the whole store's) key range from `since`, with the previous value (a DELETED
event carries the object's last stored state); one that loses its connection resumes
after the last revision it yielded. Compaction is etcd's (for the whole cluster): a watch
from before it is `Gone`, unless the store was born after it (then nothing lost was ours);
`?history=N` compacts to N revisions behind once 2N have piled up since etcd's compaction
revision (learnt when the store is opened). A call the server cannot answer (down,
restarting) fails with `StoreUnavailable`; the store reconnects by itself.

Its watches do not pass through the shared fan-out, so its dependency index
(`setpoint.store.dependency_index`) learns the edges when first needed (one list per kind
that declares them) and from this process's own writes: a `dependsOn` cycle closed through
an edge another process wrote after that is refused only once the store is reopened.

It speaks etcd's gRPC API through setpoint's own generated messages and stubs
(`setpoint.store.etcd_api`), which need the `setpoint[etcd]` extra (grpcio, protobuf); the
`setpoint.store` package imports this module only for an `etcd://` URL. It does not know the
other backends and keeps no state of its own outside etcd (but that index, a cache).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import grpc
from grpc import aio

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Error, Gone, Invalid, NotFound, StoreClosed, StoreUnavailable
from setpoint.model import Object, Registry, Selector, codec
from setpoint.model.crd import CRD
from setpoint.model.wellknown import STORED_WRITER
from setpoint.store.backend import Backend
from setpoint.store.base import EventType, WatchEvent
from setpoint.store.etcd_api import etcdserverpb_pb2 as etcdserverpb
from setpoint.store.etcd_api import etcdserverpb_pb2_grpc as etcdserverpb_grpc
from setpoint.store.etcd_api import mvccpb_pb2 as mvccpb
from setpoint.store.kinds import learn_kinds
from setpoint.store.rules import Key, Write, decide, encode, key_of, not_found, stamp
from setpoint.store.watchers import (
    EncodedEvent,
    LogEntry,
    WatchFilter,
    decoded_writer,
    encoded_writer,
    matcher,
)

log = logging.getLogger("setpoint.store.etcd")

T = TypeVar("T")

CALL_TIMEOUT = 30.0
"""Seconds any one call to etcd may take before it fails with `StoreUnavailable`."""
_RETRY_FIRST, _RETRY_MAX = 0.05, 1.0
"""A watch that lost its connection tries again after these many seconds (doubling)."""
_CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", -1),  # a page of large objects
    ("grpc.max_send_message_length", -1),
    # Back within a second of the server (gRPC's default waits up to two minutes).
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    # Notice a server that vanished without closing the connection (a host that died).
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
)
_UNAVAILABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
LAYOUT = 1
"""The key layout this module writes, recorded in the store's marker: a store marked with a
newer one is refused rather than misread."""


def prefix_end(prefix: bytes) -> bytes:
    """The end of the key range of every key starting with `prefix` (etcd's range_end)."""
    end = bytearray(prefix)
    while end and end[-1] == 0xFF:
        end.pop()
    end[-1] += 1
    return bytes(end)


class EtcdStore(Backend):
    """A `Store` on the etcd cluster at `address` ("host:port"), its keys under `prefix`."""

    _reads_log = False  # `_history` is never called (each watch is an etcd watch)

    def __init__(
        self,
        address: str,
        registry: Registry | None = None,
        *,
        prefix: str = "/setpoint/",
        clock: Clock = SYSTEM_CLOCK,
        history: int = 10_000,
    ) -> None:
        self.registry = registry if registry is not None else Registry()
        self.address = address
        self.prefix = prefix
        self._objects = f"{prefix}o/".encode()
        self._marker = f"{prefix}store".encode()
        self._clock = clock
        self._history_size = history
        self._compacted = 0  # etcd's compaction revision, as last learnt (or an upper bound)
        self._birth = 0  # the marker's creation revision: no object of ours is older
        self._closed = False

    async def open(self, *, create: bool = True) -> EtcdStore:
        """Connect, and mark the store if new (`NotFound` instead when `create` is False)."""
        self._channel = aio.insecure_channel(self.address, options=_CHANNEL_OPTIONS)
        self._kv = etcdserverpb_grpc.KVStub(self._channel)  # type: ignore[no-untyped-call]
        self._watch = etcdserverpb_grpc.WatchStub(self._channel)  # type: ignore[no-untyped-call]
        try:
            marker = await self._range(self._marker)
            if not marker.kvs and not create:
                raise NotFound(
                    f"no store at etcd://{self.address} under {self.prefix!r} (it does not"
                    " exist, and reading never creates one)"
                )
            if not marker.kvs:
                value = codec.encode({"store": "setpoint", "layout": LAYOUT})
                await self._call(
                    self._kv.Txn,
                    etcdserverpb.TxnRequest(
                        compare=[_mod_revision_is(self._marker, 0)],
                        success=[_put(self._marker, value)],
                    ),
                )
                marker = await self._range(self._marker)
            layout = codec.decode(marker.kvs[0].value).get("layout", LAYOUT)
            if layout > LAYOUT:
                raise Invalid(
                    f"the store at etcd://{self.address} under {self.prefix!r} has key layout"
                    f" {layout}, newer than this setpoint's ({LAYOUT}): upgrade setpoint",
                    field="store",
                )
            self._birth = marker.kvs[0].create_revision
            self._compacted = await self._compaction_revision()
            self.registry.register(CRD)
            crds, _ = await self.list(CRD.api_version, CRD.kind)
            learn_kinds(self.registry, crds)  # kinds as data (`setpoint.store.kinds`)
        except BaseException:
            await self._channel.close()
            raise
        return self

    # -- calls ----------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")

    async def _call(self, method: Callable[..., Awaitable[T]], request: Any) -> T:
        """One unary call, with etcd's failures turned into the store's errors."""
        self._check_open()
        try:
            return await method(request, timeout=CALL_TIMEOUT)
        except aio.AioRpcError as exc:
            self._fail(exc)
        except asyncio.CancelledError:
            if self._closed_under_us():
                raise StoreClosed("the store was closed during the call") from None
            raise

    def _closed_under_us(self) -> bool:
        """Whether a call's CancelledError came from closing the store (its channel), not
        from cancelling the task that made the call."""
        task = asyncio.current_task()
        return self._closed and task is not None and not task.cancelling()

    def _fail(self, exc: aio.AioRpcError) -> NoReturn:
        code, details = exc.code(), exc.details() or ""
        if self._closed or code == grpc.StatusCode.CANCELLED:
            raise StoreClosed("the store is closed") from None
        if code in _UNAVAILABLE:
            raise StoreUnavailable(
                f"etcd at {self.address} did not answer ({details}); retry (the store"
                " reconnects by itself)"
            ) from None
        if "compacted" in details:
            raise Gone(f"the revision asked for was compacted ({details}); relist") from None
        if "too large" in details:
            raise Invalid(f"etcd refused the request: {details}") from None
        raise Error(f"etcd: {details}") from None

    async def _range(self, key: bytes, **options: Any) -> Any:
        response = await self._call(self._kv.Range, etcdserverpb.RangeRequest(key=key, **options))
        return response

    def _key(self, key: Key) -> bytes:
        return self._objects + "/".join(key).encode()

    def _kind_range(self, api_version: str, kind: str, namespace: str | None) -> bytes:
        """The prefix of every key of `kind` (in `namespace`, unless None)."""
        start = f"{api_version}/{kind}/" + ("" if namespace is None else f"{namespace}/")
        return self._objects + start.encode()

    # -- writes -----------------------------------------------------------------

    async def _execute(self, write: Write) -> Object:
        key = self._key(write.key)
        # A create needs no read first: when the key exists, the refused transaction's
        # answer carries it, and deciding again says AlreadyExists.
        found = None if write.op == "create" else await self._range(key)
        kv = found.kvs[0] if found is not None and found.kvs else None
        while True:
            current = None if kv is None else _object(kv.value, kv.mod_revision)
            change = decide(write, current, self._clock.now())
            if change is None:
                assert current is not None
                return current
            request = etcdserverpb.TxnRequest(
                compare=[_mod_revision_is(key, 0 if kv is None else kv.mod_revision)],
                success=[_delete(key) if change.type == "DELETED" else _put(key, b"")],
                failure=[etcdserverpb.RequestOp(request_range=etcdserverpb.RangeRequest(key=key))],
            )
            if change.type != "DELETED":
                change.object["metadata"].pop("resourceVersion", None)
                request.success[0].request_put.value = _with_writer(encode(change.object), write)
            response = await self._call(self._kv.Txn, request)
            if response.succeeded:
                break
            kvs = response.responses[0].response_range.kvs
            kv = kvs[0] if kvs else None
        revision = response.header.revision
        await self._keep_history(revision)
        return stamp(change, revision).object

    def _open_watch(self, create: Any) -> Any:
        """A gRPC Watch call of one etcd watch (`create`: a WatchCreateRequest)."""

        async def requests() -> AsyncIterator[Any]:
            yield etcdserverpb.WatchRequest(create_request=create)
            await asyncio.Event().wait()  # a watch stream ends when its requests do

        return self._watch.Watch(requests())

    async def _compaction_revision(self) -> int:
        """etcd's compaction revision, or the store's birth when that is older (etcd tells
        it only to a watch that asks for older history: a watch of the marker from revision
        1 gets either that or the marker's creation)."""
        call = self._open_watch(etcdserverpb.WatchCreateRequest(key=self._marker, start_revision=1))
        try:
            async with asyncio.timeout(CALL_TIMEOUT):
                async for response in call:
                    if response.compact_revision:
                        return int(response.compact_revision)
                    if response.events:
                        return self._birth
        except aio.AioRpcError as exc:
            self._fail(exc)
        except TimeoutError:
            raise StoreUnavailable(f"etcd at {self.address} did not answer a watch") from None
        finally:
            call.cancel()
        raise StoreUnavailable(f"etcd at {self.address} ended a watch")

    async def _keep_history(self, revision: int) -> None:
        """Keep about `history` revisions: compact once twice that many have piled up."""
        if revision - self._compacted > 2 * self._history_size:
            await self.compact(revision - self._history_size)

    async def compact(self, revision: int) -> None:
        revision = min(revision, await self.revision())
        with contextlib.suppress(Gone):  # compacted there or further already (elsewhere)
            await self._call(self._kv.Compact, etcdserverpb.CompactionRequest(revision=revision))
        self._compacted = max(self._compacted, revision)

    # -- reads ------------------------------------------------------------------

    async def revision(self) -> int:
        response = await self._range(self._marker, count_only=True)
        revision: int = response.header.revision
        return revision

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = "default"
    ) -> Object:
        key = key_of(self.registry.get(api_version, kind), name, namespace)
        response = await self._range(self._key(key))
        if not response.kvs:
            raise not_found(key)
        kv = response.kvs[0]
        return _object(kv.value, kv.mod_revision)

    async def list_pages(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
        *,
        page_size: int = 500,
    ) -> AsyncIterator[tuple[builtins.list[Object], int]]:
        """Pages of one etcd range, every page read at the first page's revision."""
        self._check_open()
        self.registry.get(api_version, kind)
        matches = matcher(label_selector)
        start = self._kind_range(api_version, kind, namespace)
        end, revision = prefix_end(start), 0
        while True:
            response = await self._range(start, range_end=end, limit=page_size, revision=revision)
            revision = revision or response.header.revision
            page = [_object(kv.value, kv.mod_revision) for kv in response.kvs]
            yield [o for o in page if matches(o["metadata"].get("labels"))], revision
            if not response.more or not response.kvs:
                return
            start = response.kvs[-1].key + b"\0"

    # -- watch ------------------------------------------------------------------

    def watch(
        self,
        api_version: str | None,
        kind: str | None,
        namespace: str | None = None,
        since: int | None = None,
        label_selector: str | Selector | None = None,
    ) -> AsyncIterator[WatchEvent]:
        if kind is not None:
            self.registry.get(api_version or "", kind)
        wanted = WatchFilter(api_version, kind, namespace, Selector.of(label_selector))
        keys = (
            self._objects if kind is None else self._kind_range(api_version or "", kind, namespace)
        )
        return self._events(keys, wanted, since)

    async def watch_encoded(
        self,
        api_version: str | None,
        kind: str | None,
        namespace: str | None = None,
        since: int | None = None,
        label_selector: str | Selector | None = None,
    ) -> AsyncIterator[EncodedEvent]:
        """`watch`, each object encoded (`EncodedWatches`): etcd's events are decoded to be
        filtered, so this saves its consumers nothing but keeps them on one path."""
        async for event in self.watch(api_version, kind, namespace, since, label_selector):
            yield EncodedEvent(event.type, codec.encode(event.object), event.revision)

    async def _events(
        self, keys: bytes, wanted: WatchFilter, since: int | None
    ) -> AsyncIterator[WatchEvent]:
        """Every change after `since` (None: from now) to the keys under `keys`, in order;
        after a lost connection, etcd is asked again for what follows the last one seen."""
        self._check_open()
        last = await self.revision() if since is None else since
        # etcd refuses a watch from before its compaction revision C; `since` < C is Gone
        # for us, so ask from `last` itself (not last + 1) and drop that revision's events.
        start = max(last, 1)
        labels = bool(wanted.selector.requirements)
        delay = _RETRY_FIRST
        while True:
            try:
                async with contextlib.aclosing(self._etcd_watch(keys, start, labels)) as batches:
                    async for entries in batches:
                        delay = _RETRY_FIRST
                        if isinstance(entries, int):  # compacted: etcd's history starts there
                            # None of what is gone was ours if the store was born at C - 1 or
                            # later (another store on this cluster compacted it).
                            if self._birth < entries - 1:
                                raise Gone(
                                    f"too old resource version: {last} (etcd's history starts"
                                    f" at {entries}); relist"
                                )
                            start = entries
                            break
                        for entry in entries:
                            if entry.revision <= last:
                                continue
                            last = entry.revision
                            event = wanted.event(entry)
                            if event is not None:
                                event.object["metadata"]["resourceVersion"] = str(entry.revision)
                                yield event
                        start = last + 1
            except StoreClosed:
                return
            except StoreUnavailable as exc:
                if delay == _RETRY_FIRST:  # once per outage, not at every retry
                    log.warning("watch of %s lost etcd (%s); resuming after %d", keys, exc, last)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)
            if self._closed:
                return

    async def _etcd_watch(
        self, keys: bytes, start: int, labels: bool
    ) -> AsyncGenerator[list[LogEntry] | int, None]:
        """The entries of one etcd watch from `start`, a response at a time (with their
        labels if `labels`); ends when the store closes. When etcd's history starts after
        `start`, its one item is the revision it starts at (etcd's compaction revision).
        Raises `StoreUnavailable` when the stream breaks."""
        self._check_open()
        create = etcdserverpb.WatchCreateRequest(
            key=keys, range_end=prefix_end(keys), start_revision=start, prev_kv=True
        )
        call = self._open_watch(create)
        try:
            async for response in call:
                if response.compact_revision:
                    yield response.compact_revision
                    return
                if response.canceled:
                    raise Error(f"etcd cancelled the watch: {response.cancel_reason}")
                if response.events:
                    yield [self._entry(event, labels) for event in response.events]
        except aio.AioRpcError as exc:
            if self._closed or exc.code() == grpc.StatusCode.CANCELLED:
                return
            self._fail(exc)
        except asyncio.CancelledError:
            if self._closed_under_us():
                return
            raise
        finally:
            call.cancel()
        if not self._closed:  # the server ended the stream: it is going away
            raise StoreUnavailable(f"etcd at {self.address} ended the watch")

    def _entry(self, event: Any, labels: bool) -> LogEntry:
        """A log entry of an etcd event: its data the stored JSON (no resourceVersion), its
        kind and namespace read from the key; the labels decoded only if `labels`."""
        api_version, kind, namespace, _ = event.kv.key[len(self._objects) :].decode().rsplit("/", 3)
        revision = event.kv.mod_revision
        if event.type == mvccpb.Event.DELETE:
            type_: EventType = "DELETED"
            data, _ = _without_writer(event.prev_kv.value)
            prev, writer = data, None  # the writer of the value before, not of the delete
        else:
            type_ = "ADDED" if event.kv.create_revision == revision else "MODIFIED"
            data, writer = _without_writer(event.kv.value)
            prev = event.prev_kv.value
        verb, actor = decoded_writer(writer)
        return LogEntry(
            revision,
            type_,
            api_version,
            kind,
            namespace,
            data,
            _labels(data) if labels else None,
            _labels(prev) if labels and prev else None,
            verb,
            actor,
        )

    async def _history(self, after: int) -> builtins.list[LogEntry]:
        """Never called: `watch` (overridden) reads history and live changes from one etcd
        watch, which has no end of history to stop at."""
        raise NotImplementedError("each watch of an etcd store is an etcd watch")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._channel.close()


_WRITER = b',"' + STORED_WRITER.encode() + b'":'
"""Where a stored value's writer begins (`_with_writer`). Within the JSON of an object it
can only be a member name (a quote inside a string is escaped), so the last one is ours."""


def _with_writer(data: bytes, write: Write) -> bytes:
    """The stored value: the object's JSON with the write's verb and actor as its last
    member."""
    return b"".join(
        (data[:-1], _WRITER, encoded_writer(write.op, write.options.actor).encode(), b"}")
    )


def _without_writer(value: bytes) -> tuple[bytes, bytes | None]:
    """(the object's JSON, its writer's) of a stored value (None: written before writers
    were kept)."""
    at = value.rfind(_WRITER)
    if at < 0:
        return value, None
    return value[:at] + b"}", value[at + len(_WRITER) : -1]


def _object(value: bytes, revision: int) -> Object:
    obj: Object = codec.decode(_without_writer(value)[0])
    obj["metadata"]["resourceVersion"] = str(revision)
    return obj


def _labels(value: bytes) -> dict[str, str] | None:
    labels: dict[str, str] | None = codec.decode(value)["metadata"].get("labels")
    return labels


def _mod_revision_is(key: bytes, revision: int) -> etcdserverpb.Compare:
    return etcdserverpb.Compare(
        key=key,
        target=etcdserverpb.Compare.MOD,
        result=etcdserverpb.Compare.EQUAL,
        mod_revision=revision,
    )


def _put(key: bytes, value: bytes) -> etcdserverpb.RequestOp:
    return etcdserverpb.RequestOp(request_put=etcdserverpb.PutRequest(key=key, value=value))


def _delete(key: bytes) -> etcdserverpb.RequestOp:
    return etcdserverpb.RequestOp(request_delete_range=etcdserverpb.DeleteRangeRequest(key=key))
