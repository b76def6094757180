"""The timeline of an `etcd://` store, kept in that etcd cluster beside the store's objects.

`EtcdTimeline` has the public interface of `setpoint.insight.timeline.Timeline`
(`setpoint.insight.timeline_base.TimelineBackend`: appending, the recorder's checkpoint and
claim, retention, queries oldest first) and the same entries;
`Timeline.of_store` returns one for an `etcd://host:port?prefix=/p/` URL. Its keys live
under `<prefix>timeline/` (T below), never under the store's object keys (`<prefix>o/`):

    T e/<ts>/<tag>/<i>          an entry's JSON; <ts> is 16 hex digits that sort as the
                                 float `ts` does, <tag> names the batch (the clock's
                                 milliseconds, then random bits), <i> its place in the batch
    T o/<kind>/<name>/<ts>/<tag>/<i>   the same entry again, filed under its object (kind and
                                 name percent-encoded): one object's history is one range
    T s/<key>                    the checkpoint's last view of one object
    T checkpoint                 {"revision": N, "applying": null or a batch's tag}
    T recording                  {"recorder": id, "until": t} (`claim_recording`)
    T newest                     the newest `ts` of the last batch written (`_newest`)
    T p/<tag>, T p/<tag>/<rest>  a large batch, staged: <rest> is the key it goes to

A time window is a key range of `e/` (or of one object's `o/`), read at one revision. An
etcd Range costs as much as the keys between its ends, whatever its limit, so a long range
is read in slices of time of about a page each (`_between`), and `limit` reads windows
back from the newest entry (or `until`), doubling, so that etcd never sorts (`_newest`).

Writes. etcd takes at most 128 operations and about 1.5 MiB per request, so:

* A batch that fits in one transaction (`_MAX_OPS`, `_MAX_BYTES`) is one transaction that
  commits only if `checkpoint` is still as read (its mod revision): entries, views and
  checkpoint at once, or nothing.
* A larger batch with a checkpoint (or `after`) is first staged under `p/<tag>/`, in as
  many transactions as it takes, where no reader looks. The commit point is one
  transaction that sets `checkpoint` to the new revision with `"applying": <tag>`, only if
  `checkpoint` is still as read and the staging is whole (its marker key exists). Then the
  staged keys are copied into place and the staging removed (each step only while
  `checkpoint` is still that commit). A batch that lost the race removes its staging and
  raises `CheckpointMoved`: two recorders never both record one stretch. A writer that
  died after its commit is finished by the next one (copying is idempotent); meanwhile
  `checkpoint()` reads the staged views over the placed ones. Staging left by a writer that
  died before its commit (or had no answer to it) is invisible, and `prune` removes it
  after `_STALE_STAGING_S`, only while no batch commits meanwhile.
* A batch with neither (plain `append`) goes in chunks as they fit: each chunk is whole,
  a batch whose process dies half-way is half there.

Retention (`prune`) reads the oldest `e/` keys as queries do and deletes them a chunk at a
time, with their `o/` copies (one range per object in the chunk: its copies carry the same
suffixes). etcd keeps the deleted values until the cluster is compacted (the store
compacts as `?history=N` says, or the operator's `--auto-compaction-*`).

I/O: a synchronous gRPC channel of its own with setpoint's generated KV stub
(`setpoint.store.etcd_api`, the `setpoint[etcd]` extra); thread-safe (one lock). What goes
into entries is decided by `setpoint.insight.recorder`.
"""

from __future__ import annotations

import math
import random
import struct
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import grpc
import orjson

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Error, Invalid, StoreUnavailable
from setpoint.insight.recording import served
from setpoint.insight.timeline_base import Checkpoint, CheckpointMoved, Entry, object_of
from setpoint.store.etcd import CALL_TIMEOUT, prefix_end
from setpoint.store.etcd_api import etcdserverpb_pb2 as pb
from setpoint.store.etcd_api import etcdserverpb_pb2_grpc as pb_grpc
from setpoint.store.urls import shown_url

_MAX_OPS = 128
"""etcd's default `--max-txn-ops`: the operations one transaction may hold."""
_MAX_BYTES = 1 << 20
"""The keys and values one transaction carries at most (etcd's default
`--max-request-bytes` is 1.5 MiB; the rest is room for the request's framing)."""
_PAGE = 500
"""Keys read per Range call."""
_PLAIN_RANGE = 4 * _PAGE
"""Keys left in a range up to which it is read in plain pages (see `_between`)."""
_PRUNE_CHUNK = 1_000
"""Entries deleted per step of `prune`."""
_STALE_STAGING_S = 3600.0
"""Seconds after which `prune` removes a batch's staging that never committed."""
_FIRST_WINDOW_S = 60.0
"""Seconds of the first window `query(limit=)` reads back from its end (then twice as far,
...), and of the first slice of a long range (`_between`)."""
_CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)
_UNAVAILABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}

Op = tuple[bytes, bytes | None]
"""One write: a key and its value (None: delete the key)."""


class EtcdTimeline:
    """A timeline in the etcd cluster at `address` ("host:port"), under `<prefix>timeline/`
    (see the module docstring): a `TimelineBackend`, as `Timeline` is. Open with
    `of_url` (or `Timeline.of_store`)."""

    def __init__(
        self, address: str, *, prefix: str = "/setpoint/", clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.address = address
        self._clock = clock
        self._lock = threading.Lock()
        self._root = f"{prefix}timeline/".encode()
        self._entries = self._root + b"e/"
        self._objects = self._root + b"o/"
        self._seen = self._root + b"s/"
        self._staging = self._root + b"p/"
        self._meta = self._root + b"checkpoint"
        self._claim = self._root + b"recording"
        self._newest_key = self._root + b"newest"
        self._channel = grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)
        self._kv = pb_grpc.KVStub(self._channel)  # type: ignore[no-untyped-call]

    @classmethod
    def of_url(cls, store_url: str, *, clock: Clock = SYSTEM_CLOCK) -> EtcdTimeline:
        """The timeline of the store at `etcd://host:port?prefix=/p/` (prefix: /setpoint/)."""
        parts = urlsplit(store_url)
        prefix = parse_qs(parts.query).get("prefix", ["/setpoint/"])[-1]
        if not parts.hostname or parts.path not in ("", "/") or not prefix.endswith("/"):
            raise Invalid(
                f"{shown_url(store_url)!r}: want etcd://host:port?prefix=/a/prefix/",
                field="store",
            )
        try:
            port = parts.port or 2379
        except ValueError:
            raise Invalid(
                f"{shown_url(store_url)!r}: the port is not a number", field="store"
            ) from None
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        return cls(f"{host}:{port}", prefix=prefix, clock=clock)

    # -- calls ------------------------------------------------------------------------

    def _call(self, method: Any, request: Any) -> Any:
        try:
            return method(request, timeout=CALL_TIMEOUT)
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            details = (exc.details() if isinstance(exc, grpc.Call) else None) or str(exc)
            if code in _UNAVAILABLE:
                raise StoreUnavailable(
                    f"etcd at {self.address} did not answer ({details}); retry"
                ) from None
            if "too large" in details or "too many operations" in details:
                raise Invalid(f"etcd refused the timeline's request: {details}") from None
            raise Error(f"etcd: {details}") from None

    def _get(self, key: bytes) -> tuple[Any, int]:
        """(the value at `key` as JSON, or None; its mod revision, 0 if absent)."""
        found = self._call(self._kv.Range, pb.RangeRequest(key=key))
        if not found.kvs:
            return None, 0
        return orjson.loads(found.kvs[0].value), int(found.kvs[0].mod_revision)

    def _scan(self, start: bytes, end: bytes, revision: int = 0) -> Iterator[Any]:
        """Every key-value in [start, end), in key order, read in pages at one revision."""
        while True:
            page = self._call(
                self._kv.Range,
                pb.RangeRequest(key=start, range_end=end, limit=_PAGE, revision=revision),
            )
            revision = revision or page.header.revision
            yield from page.kvs
            if not page.more or not page.kvs:
                return
            start = page.kvs[-1].key + b"\0"

    def _txn(self, compare: list[pb.Compare], ops: Iterable[Op | pb.RequestOp]) -> Any:
        success = [op if isinstance(op, pb.RequestOp) else _request(*op) for op in ops]
        return self._call(self._kv.Txn, pb.TxnRequest(compare=compare, success=success))

    # -- writing ----------------------------------------------------------------------

    def append(self, entry: Entry) -> None:
        self.append_many([entry])

    def append_many(
        self,
        entries: Iterable[Entry],
        checkpoint: Checkpoint | None = None,
        *,
        after: int | None = None,
    ) -> int:
        """Append `entries` (and record `checkpoint`); return how many. With `after`, only
        if the saved checkpoint's revision is still `after` (0: none saved); else nothing
        is written and `CheckpointMoved` is raised. With a checkpoint or `after` the batch
        is written whole or not at all, however large (see the module docstring)."""
        tag = self._tag()
        ops: list[Op] = []
        newest: float | None = None
        for i, entry in enumerate(entries):
            body, about = _encoded(entry)
            suffix = f"{_ts_key(entry['ts'])}/{tag}/{i:06x}".encode()
            ops.append((self._entries + suffix, body))
            ops.append((self._object_prefix(about) + suffix, body))
            newest = max(float(entry["ts"]), newest if newest is not None else -math.inf)
        count = len(ops) // 2
        if newest is not None:  # where `query(limit=)` starts looking (a hint: `_newest`)
            ops.append((self._newest_key, orjson.dumps(newest)))
        for key, value in ops:
            if len(key) + len(value or b"") > _MAX_BYTES // 2:
                raise Invalid(f"an entry of {len(value or b'')} bytes is too large for etcd")
        with self._lock:
            if checkpoint is None and after is None:
                for chunk in _chunks(ops, _MAX_OPS):
                    self._txn([], chunk)
                return count
            if checkpoint is not None:
                ops += [
                    (self._seen + _quoted(key), None if view is None else orjson.dumps(view))
                    for key, view in checkpoint.seen.items()
                ]
            while not self._commit(ops, checkpoint, after):
                pass
        return count

    def _commit(self, ops: list[Op], checkpoint: Checkpoint | None, after: int | None) -> bool:
        """One try at writing `ops` with `checkpoint`: True when done, False when
        `checkpoint` moved but `after` allows trying again; `CheckpointMoved` when not."""
        meta, meta_rev = self._settled_meta()
        saved = int(meta["revision"]) if meta is not None and meta["revision"] is not None else 0
        if after is not None and saved != after:
            raise CheckpointMoved(
                f"the timeline's checkpoint moved from revision {after} to {saved}"
            )
        revision = checkpoint.revision if checkpoint is not None else (saved or None)
        unchanged = _compare(self._meta, pb.Compare.MOD, mod_revision=meta_rev)
        if _fits(ops, extra=1):
            done = [*ops, (self._meta, _meta(revision, None))] if checkpoint is not None else ops
            return bool(self._txn([unchanged], done).succeeded)
        tag = self._tag()
        marker = self._staging + tag.encode()
        staged = marker + b"/"
        self._txn([], [(marker, b"")])
        try:
            for chunk in _chunks([(staged + k[len(self._root) :], v or b"") for k, v in ops]):
                self._txn([], chunk)
        except BaseException:
            self._drop_staging(marker)
            raise
        # No answer here (a timeout) may still be a commit: the staging then stays, for the
        # next writer to put in place, or for `prune` to remove once stale if it was not.
        whole = _compare(marker, pb.Compare.VERSION, result=pb.Compare.GREATER, version=0)
        committed = self._txn([unchanged, whole], [(self._meta, _meta(revision, tag))])
        if not committed.succeeded:
            self._drop_staging(marker)
            return False
        self._apply(tag, int(committed.header.revision))
        return True

    def _settled_meta(self) -> tuple[Any, int]:
        """The checkpoint's meta and its mod revision, once no committed batch is still
        being put in place (finishing one that a writer left half-way)."""
        while True:
            meta, mod = self._get(self._meta)
            if meta is None or meta.get("applying") is None:
                return meta, mod
            self._apply(str(meta["applying"]), mod)

    def _apply(self, tag: str, meta_rev: int) -> None:
        """Put the staged keys of the committed batch `tag` in place, then remove its
        staging, each step only while the checkpoint is still its commit (`meta_rev`)."""
        marker = self._staging + tag.encode()
        staged = marker + b"/"
        unchanged = _compare(self._meta, pb.Compare.MOD, mod_revision=meta_rev)
        placed: list[Op] = [
            (self._root + kv.key[len(staged) :], kv.value or None)
            for kv in self._scan(staged, prefix_end(staged))
        ]
        for chunk in _chunks(placed):
            if not self._txn([unchanged], chunk).succeeded:
                return  # finished by another writer, and the checkpoint moved on since
        meta, _ = self._get(self._meta)
        done: list[Op | pb.RequestOp] = [
            (self._meta, _meta(meta["revision"] if meta else None, None)),
            _delete_range(staged, prefix_end(staged)),
            (marker, None),
        ]
        self._txn([unchanged], done)

    def _drop_staging(self, marker: bytes, guard: list[pb.Compare] | None = None) -> None:
        """Remove a batch's staging (only if `guard` holds)."""
        staged = marker + b"/"
        self._txn(guard or [], [_delete_range(staged, prefix_end(staged)), (marker, None)])

    def _tag(self) -> str:
        """A batch's name: the clock's milliseconds (so later batches sort later), then
        random bits (so two writers never share one)."""
        millis = max(0, int(self._clock.now() * 1000)) & 0xFFFF_FFFF_FFFF
        return f"{millis:012x}{random.getrandbits(32):08x}"

    def _object_prefix(self, about: Mapping[str, Any]) -> bytes:
        kind, name = str(about.get("kind") or ""), str(about.get("name") or "")
        return self._objects + f"{_quote(kind)}/{_quote(name)}/".encode()

    def revision(self) -> int:
        """The store revision recorded up to (the checkpoint's; 0 when there is none)."""
        with self._lock:
            meta, _ = self._get(self._meta)
        return int(meta["revision"]) if meta is not None and meta["revision"] is not None else 0

    def checkpoint(self) -> Checkpoint | None:
        """The last checkpoint saved with `append_many`, or None if there is none."""
        with self._lock:
            found = self._call(self._kv.Range, pb.RangeRequest(key=self._meta))
            if not found.kvs:
                return None
            meta = orjson.loads(found.kvs[0].value)
            if meta["revision"] is None:
                return None
            at = int(found.header.revision)
            seen = {
                unquote(kv.key[len(self._seen) :].decode()): orjson.loads(kv.value)
                for kv in self._scan(self._seen, prefix_end(self._seen), at)
            }
            if meta.get("applying") is not None:  # a batch not yet in place: its views win
                staged = self._staging + f"{meta['applying']}/s/".encode()
                for kv in self._scan(staged, prefix_end(staged), at):
                    key = unquote(kv.key[len(staged) :].decode())
                    if kv.value:
                        seen[key] = orjson.loads(kv.value)
                    else:
                        seen.pop(key, None)
        return Checkpoint(int(meta["revision"]), seen)

    def claim_recording(self, recorder: int, until: float, *, force: bool = False) -> bool:
        """Say that `recorder` keeps this timeline up to date until `until`, and return
        True; or return False, saying nothing, while another recorder's word still holds
        (unless `force`). See `Timeline.claim_recording`."""
        with self._lock:
            while True:
                word, mod = self._get(self._claim)
                holder = word.get("recorder") if word else None
                held_until = float(word.get("until") or 0.0) if word else 0.0
                held = holder not in (None, recorder) and held_until > self._clock.now()
                if held and not force:
                    return False
                said = orjson.dumps({"recorder": recorder, "until": until})
                unchanged = _compare(self._claim, pb.Compare.MOD, mod_revision=mod)
                if self._txn([unchanged], [(self._claim, said)]).succeeded:
                    return True

    def recording(self) -> bool:
        """Whether a live recorder said it keeps this timeline up to date now."""
        with self._lock:
            word, _ = self._get(self._claim)
        return word is not None and float(word.get("until") or 0.0) > self._clock.now()

    def prune(self, max_age_s: float | None, max_entries: int | None) -> int:
        """Delete entries older than `max_age_s` seconds (by the clock) and all but the newest
        `max_entries`, a chunk at a time; return how many went. Also removes the staging of
        batches that never committed, once stale."""
        if max_age_s is not None and max_age_s < 0:
            raise Invalid("must be >= 0", field="max_age_s")
        if max_entries is not None and max_entries < 0:
            raise Invalid("must be >= 0", field="max_entries")
        deleted = 0
        if max_age_s is not None:
            deleted += self._delete_oldest(self._clock.now() - max_age_s, None)
        if max_entries is not None:
            excess = self.count() - max_entries
            if excess > 0:
                deleted += self._delete_oldest(None, excess)
        self._drop_stale_staging()
        return deleted

    def _delete_oldest(self, before: float | None, most: int | None) -> int:
        """Delete the oldest entries, those before `before` (None: any), at most `most`
        (None: all), a chunk at a time; return how many went."""
        deleted, chunk = 0, list[Any]()
        for kv in self._between(self._entries, None, before):
            if most is not None and deleted + len(chunk) >= most:
                break
            chunk.append(kv)
            if len(chunk) == _PRUNE_CHUNK:
                deleted, chunk = deleted + self._delete(chunk), []
        return deleted + (self._delete(chunk) if chunk else 0)

    def _delete(self, kvs: list[Any]) -> int:
        """Delete the entries `kvs` (a run of `e/` keys, oldest first), their object copies
        first (one range per object: its copies carry the same suffixes); return how many
        went."""
        spans: dict[bytes, tuple[bytes, bytes]] = {}  # object prefix -> (first, last)
        for kv in kvs:
            suffix = kv.key[len(self._entries) :]
            where = self._object_prefix(object_of(orjson.loads(kv.value)))
            first, _ = spans.get(where, (suffix, suffix))
            spans[where] = (first, suffix)
        copies = [
            _delete_range(where + first, where + last + b"\0")
            for where, (first, last) in spans.items()
        ]
        with self._lock:
            for chunk in _chunks(copies):
                self._txn([], chunk)
            gone = self._txn([], [_delete_range(kvs[0].key, kvs[-1].key + b"\0")])
        return int(gone.responses[0].response_delete_range.deleted)

    def _drop_stale_staging(self) -> None:
        with self._lock:
            meta, mod = self._get(self._meta)
            applying = (meta or {}).get("applying")
            # Each removal only while no batch committed since `meta` was read: one that did
            # may be among those found, however old its staging.
            guard = [_compare(self._meta, pb.Compare.MOD, mod_revision=mod)]
            stale = int((self._clock.now() - _STALE_STAGING_S) * 1000)
            found = self._call(
                self._kv.Range,
                pb.RangeRequest(
                    key=self._staging, range_end=prefix_end(self._staging), keys_only=True
                ),
            )
            tags = {kv.key[len(self._staging) :].split(b"/", 1)[0].decode() for kv in found.kvs}
            for tag in tags:
                if tag != applying and int(tag[:12], 16) < stale:
                    self._drop_staging(self._staging + tag.encode(), guard)

    # -- reading ----------------------------------------------------------------------

    def query(
        self,
        *,
        object: Mapping[str, Any] | None = None,
        since: float | None = None,
        until: float | None = None,
        types: Collection[str] | None = None,
        limit: int | None = None,
    ) -> list[Entry]:
        """Entries oldest first, optionally only about `object` ({"kind", "name", and
        "namespace" unless any}), at `since` <= ts < `until`, of `types`; with `limit`, the
        newest `limit` of those. Each as `recording.served` gives it (an earlier version's
        env file digests hidden)."""
        base = self._entries if object is None else self._object_prefix(object)
        namespace = None if object is None else object.get("namespace")
        wanted = None if types is None else set(types)

        def keep(entry: Entry) -> bool:
            if wanted is not None and entry.get("type") not in wanted:
                return False
            return namespace is None or str(object_of(entry).get("namespace") or "") == (
                namespace or ""
            )

        with self._lock:
            if limit is None:
                return [
                    entry
                    for kv in self._between(base, since, until)
                    if keep(entry := served(orjson.loads(kv.value)))
                ]
            if limit <= 0:
                return []
            return self._newest(base, since, until, keep, limit)

    def _between(self, base: bytes, since: float | None, until: float | None) -> Iterator[Any]:
        """Every key-value under `base` at `since` <= ts < `until`, in key order, at one
        revision. An etcd Range costs as much as the keys between its ends, whatever its
        limit, so paging a long range would cost the square of its length: a first page
        says how many keys are left (its count); past `_PLAIN_RANGE` of them the rest is
        read in slices of time sized to about a page each, and after an empty slice
        another such page finds the next key, however far."""
        start = base + (_ts_key(since).encode() if since is not None else b"")
        end = base + _ts_key(until).encode() if until is not None else prefix_end(base)
        at, width = 0, _FIRST_WINDOW_S
        while True:
            page = self._call(
                self._kv.Range,
                pb.RangeRequest(key=start, range_end=end, limit=_PAGE, revision=at),
            )
            at = at or int(page.header.revision)
            yield from page.kvs
            if not page.more or not page.kvs:
                return
            start = page.kvs[-1].key + b"\0"
            if page.count <= _PLAIN_RANGE:
                yield from self._scan(start, end, at)
                return
            low = _ts_of(page.kvs[-1].key[len(base) :])
            while True:
                high = max(low + width, math.nextafter(low, math.inf))
                last = high == math.inf or (until is not None and high >= until)
                stop = end if last else base + _ts_key(high).encode()
                got = 0
                for kv in self._scan(start, stop, at):
                    got += 1
                    yield kv
                if last:
                    return
                start, low = stop, high
                if got == 0:
                    break  # a first page again
                width = width / 2 if got > _PAGE else width * 2 if got < _PAGE // 2 else width

    def _newest(
        self,
        base: bytes,
        since: float | None,
        until: float | None,
        keep: Callable[[Entry], bool],
        limit: int,
    ) -> list[Entry]:
        """The newest `limit` entries under `base` at `since` <= ts < `until` that `keep`
        keeps, oldest first: read in windows back from the newest entry's time (or
        `until`, if earlier), each twice as long as the one before, so that etcd reads
        about as much as is returned (it would read a whole range to sort it descending).
        The first window reaches to the end, so the newest time, saved by the last batch
        written, need only be a hint: a later batch with older entries, or a prune, makes
        a window longer or shorter, no answer different. After an empty window, one Range
        asks whether anything is older."""
        start = base + (_ts_key(since).encode() if since is not None else b"")
        high = base + _ts_key(until).encode() if until is not None else prefix_end(base)
        hint = self._call(self._kv.Range, pb.RangeRequest(key=self._newest_key))
        at = int(hint.header.revision)
        newest = float(orjson.loads(hint.kvs[0].value)) if hint.kvs else self._clock.now()
        top = newest if until is None else min(until, newest)
        width = _FIRST_WINDOW_S
        found: list[Entry] = []
        while len(found) < limit and high > start:
            low = max(base + _ts_key(top - width).encode(), start)
            kvs = list(self._scan(low, high, at))
            window = [entry for kv in kvs if keep(entry := served(orjson.loads(kv.value)))]
            if not kvs and low > start:
                older = pb.RangeRequest(key=start, range_end=low, limit=1, revision=at)
                if not self._call(self._kv.Range, older).kvs:
                    break
            found[:0] = window
            high, width = low, width * 2
        return found[-limit:]

    def count(self) -> int:
        with self._lock:
            found = self._call(
                self._kv.Range,
                pb.RangeRequest(
                    key=self._entries, range_end=prefix_end(self._entries), count_only=True
                ),
            )
        return int(found.count)

    def close(self) -> None:
        with self._lock:
            self._channel.close()

    def __enter__(self) -> EtcdTimeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- keys and requests ---------------------------------------------------------------


def _ts_key(ts: float) -> str:
    """16 hex digits that sort as the float `ts` does (IEEE 754 bits, the sign flipped for
    positive numbers, all bits for negative ones)."""
    (bits,) = struct.unpack(">Q", struct.pack(">d", float(ts) + 0.0))  # -0.0 as 0.0
    bits = bits ^ 0xFFFF_FFFF_FFFF_FFFF if bits >> 63 else bits | (1 << 63)
    return f"{bits:016x}"


def _ts_of(key: bytes) -> float:
    """The time a key spells in its first 16 hex digits (`_ts_key` undone)."""
    bits = int(key[:16], 16)
    bits = bits & ~(1 << 63) if bits >> 63 else bits ^ 0xFFFF_FFFF_FFFF_FFFF
    (ts,) = struct.unpack(">d", struct.pack(">Q", bits))
    return float(ts)


def _quote(text: str) -> str:
    return quote(text, safe="")


def _quoted(text: str) -> bytes:
    return _quote(text).encode()


def _encoded(entry: Mapping[str, Any]) -> tuple[bytes, Mapping[str, Any]]:
    """(the entry's JSON, the object it is about), refusing it as `Timeline` does."""
    ts = entry.get("ts")
    if not isinstance(ts, int | float) or isinstance(ts, bool):
        raise Invalid("want seconds since the epoch", field="ts")
    type_ = entry.get("type")
    if not isinstance(type_, str) or not type_:
        raise Invalid("required", field="type")
    return orjson.dumps(entry), object_of(entry)


def _meta(revision: int | None, applying: str | None) -> bytes:
    return orjson.dumps({"revision": revision, "applying": applying})


def _fits(ops: list[Op], *, extra: int = 0) -> bool:
    size = sum(len(k) + len(v or b"") for k, v in ops)
    return len(ops) + extra <= _MAX_OPS and size <= _MAX_BYTES


def _chunks(ops: list[Any], most: int = _MAX_OPS) -> Iterator[list[Any]]:
    """`ops` in runs that each fit one transaction."""
    chunk: list[Any] = []
    size = 0
    for op in ops:
        length = len(op[0]) + len(op[1] or b"") if isinstance(op, tuple) else op.ByteSize()
        if chunk and (len(chunk) == most or size + length > _MAX_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(op)
        size += length
    if chunk:
        yield chunk


def _request(key: bytes, value: bytes | None) -> pb.RequestOp:
    if value is None:
        return pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=key))
    return pb.RequestOp(request_put=pb.PutRequest(key=key, value=value))


def _delete_range(start: bytes, end: bytes) -> pb.RequestOp:
    return pb.RequestOp(request_delete_range=pb.DeleteRangeRequest(key=start, range_end=end))


def _compare(
    key: bytes, target: Any, *, result: Any = pb.Compare.EQUAL, **value: Any
) -> pb.Compare:
    return pb.Compare(key=key, target=target, result=result, **value)
