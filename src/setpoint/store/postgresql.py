"""The `postgresql://user@host:port/db` backend: one database shared by any number of
setpoint processes on any number of hosts. It keeps the contract of `setpoint.store.base`
with the write rules of `setpoint.store.rules`, as the SQLite backend does; it must not
decide anything those rules decide.

Layout (as the SQLite backend; the tables and statements are in
`setpoint.store.postgresql_statements`, with `Batch`, a batch's changes as their arguments):
`setpoint_objects` holds each object's current JSON,
`setpoint_log` one row per change (its `writer`: the write's verb and actor,
`encoded_writer`), and `setpoint_meta` the store's revision, its compaction mark and the
schema version. Opening a store of an older schema brings it up to this one (`MIGRATIONS`,
under the schema lock); a newer one is refused.

Revisions are assigned in commit order, by construction. A write transaction starts by
advancing the one `revision` row of `setpoint_meta` (UPDATE ... RETURNING), which locks it
until commit, and numbers its rows from it: two write transactions never overlap, a
revision is visible only once every lower one is, and there is no gap to fill (kine's
fault: ids taken at insert, visible at commit).

Writes are group-committed: one writer task per store takes every pending write of this
process as one batch. It reads the batch's objects (one round trip), decides each write in
order with `rules.decide` (a refused write fails alone), then sends in one pipeline: the
advance (the lock), a check that every object it read is still at the revision it read
(else the transaction aborts and the batch is decided again on a fresh read: another
process wrote one of them), the log rows and objects numbered by the server from the
advanced revision (the stored JSON is sent around a placeholder resourceVersion), a
NOTIFY, and the commit. So the lock is held only while the server runs those statements,
never while a client process waits for its turn on a CPU.

Watch: watchers in this process are fed from the writer after commit. Changes committed by
other processes are read from `setpoint_log` by revision, woken by LISTEN/NOTIFY (every
write transaction notifies `setpoint_log` with its last revision) or, should a notification
be missed, by a poll of the revision every `poll_interval` seconds. Each revision is
published once, in order, whoever wrote it.

Compaction: raising the mark is one small update (inside the write transaction when the
retained history grows past twice `history`, or by `compact`); the rows under it are then
deleted in batches of `_COMPACT_BATCH`, each its own short transaction that no writer
waits on, with a pause between batches.

Connections: the writer, a listener, and a small pool for reads, each opened again after
it breaks. A call in flight when the server goes away fails with `StoreUnavailable`
(retryable; a write may or may not have committed); watchers in this process pause and
resume from the last revision they were given, missing nothing and repeating nothing.
Durability: `sync=full` (default) commits with `synchronous_commit=on`; `sync=normal` or
`off` with `synchronous_commit=off` (a crash of the server may lose the last commits,
never reorder or corrupt them).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import select
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import psycopg
from psycopg import AsyncConnection

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Error, Gone, Invalid, NotFound, StoreClosed, StoreUnavailable
from setpoint.model import Object, Registry, Selector, codec
from setpoint.model.crd import CRD
from setpoint.store.backend import Backend
from setpoint.store.kinds import learn_kinds
from setpoint.store.postgresql_statements import (
    ADVANCE,
    CHANNEL,
    CHECK,
    COMPACTED,
    DELETE,
    GET,
    GET_MANY,
    HISTORY,
    INSERT_LOG,
    MIGRATIONS,
    NOTIFY,
    RAISE_MARK,
    REVISION,
    SCHEMA,
    SCHEMA_LOCK,
    SCHEMA_VERSION,
    UPSERT,
    Batch,
    columns,
)
from setpoint.store.rules import Key, Write, decide, encode, key_of, not_found, stamp
from setpoint.store.urls import shown_url
from setpoint.store.watchers import (
    LogEntry,
    Watchers,
    matcher,
)

log = logging.getLogger("setpoint.store.postgresql")

Sync = Literal["full", "normal", "off"]

_MAX_BATCH = 1000
_COMPACT_BATCH = 1000
_COMPACT_PAUSE = 0.005
"""Seconds between two compaction batches: the server's disk is the writers' in between."""
_POOL_SIZE = 8

_Unreachable = (psycopg.OperationalError, psycopg.InterfaceError)
"""What psycopg raises when the server cannot be reached or the connection broke."""


@dataclass(slots=True)
class _Pending:
    write: Write
    future: asyncio.Future[Object]
    result: Object | BaseException | None = None


def _unavailable(exc: BaseException, doing: str) -> StoreUnavailable:
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return StoreUnavailable(
        f"the PostgreSQL server cannot be reached ({doing}: {reason}); retry once it is back"
    )


def _stale(conn: AsyncConnection[Any] | None) -> bool:
    """Whether an idle connection is known to be gone without asking the server: closed, or
    its socket has something to read (an idle connection is sent nothing but the notice and
    end of file of a server shutting down, or of a backend terminated)."""
    if conn is None or conn.closed:
        return True
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)


class PostgresStore(Backend):
    def __init__(
        self,
        conninfo: str,
        registry: Registry | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        history: int = 10_000,
        sync: Sync = "full",
        poll_interval: float = 0.25,
    ) -> None:
        self.registry = registry if registry is not None else Registry()
        self.conninfo = conninfo
        try:
            info = psycopg.conninfo.conninfo_to_dict(conninfo)
        except psycopg.Error as exc:
            reason = " ".join(shown_url(str(exc)).split())
            raise Invalid(f"not a PostgreSQL connection URL: {reason}", field="store") from None
        self._where = f"postgresql://{info.get('host', '')}:{info.get('port', '')}/" + str(
            info.get("dbname", "")
        )
        """The server and database, without user or password, for messages."""
        self._clock = clock
        self._history_size = history
        self._sync = sync
        self._poll_interval = poll_interval
        self._writes: asyncio.Queue[_Pending | None] = asyncio.Queue()
        self._watchers = Watchers()
        self._notes: asyncio.Queue[tuple[int, list[LogEntry]] | None] = asyncio.Queue()
        self._wake_queued = False
        self._published = 0  # the last revision handed to watchers
        self._known = 0  # the last revision known to be committed (notified, polled)
        self._closed = False
        self._writer_conn: AsyncConnection[Any] | None = None
        self._idle: list[AsyncConnection[Any]] = []
        self._in_use = 0
        self._returned = asyncio.Condition()
        self._compact_wanted = asyncio.Event()
        self._compact_due = False
        self._token = uuid.uuid4().hex[:12]  # tells this store's notifications from others'
        self._placeholder = f"setpoint-revision-{uuid.uuid4().hex}"
        """The resourceVersion of a change until the server gives it its revision."""

    async def open(self, *, create: bool = True) -> PostgresStore:
        """Connect, make the tables unless they exist (`create`; else `NotFound`), start."""
        try:
            conn = await self._connect()
        except StoreUnavailable as exc:
            if "does not exist" in str(exc):
                raise NotFound(f"no store at {self._where}: {exc}") from None
            raise
        try:
            async with conn.transaction():
                exists = await (
                    await conn.execute("SELECT to_regclass('setpoint_meta')")
                ).fetchone()
                if exists is None or exists[0] is None:
                    if not create:
                        raise NotFound(
                            f"no store at {self._where} (the database holds no setpoint "
                            "tables, and reading never creates them)"
                        )
                    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                    for statement in SCHEMA:
                        await conn.execute(statement)
            row = await (
                await conn.execute("SELECT value FROM setpoint_meta WHERE key = 'schema'")
            ).fetchone()
            if row is not None and row[0] > SCHEMA_VERSION:
                raise Invalid(
                    f"the store at {self._where} has schema version {row[0]}; this setpoint "
                    f"knows up to {SCHEMA_VERSION}: upgrade setpoint",
                    field="store",
                )
            if row is not None and row[0] < SCHEMA_VERSION:
                await self._migrate(conn)
            self._published = await self._revision_on(conn)
        except _Unreachable as exc:
            await conn.close()
            raise _unavailable(exc, "opening the store") from None
        except psycopg.Error as exc:
            await conn.close()
            raise Invalid(f"cannot open {self._where} as a store: {exc}", field="store") from None
        except BaseException:
            await conn.close()
            raise
        self._idle.append(conn)
        self._tasks = [
            asyncio.create_task(self._write_loop(), name="setpoint-pg-writer"),
            asyncio.create_task(self._dispatch(), name="setpoint-pg-dispatch"),
            asyncio.create_task(self._listen(), name="setpoint-pg-listen"),
            asyncio.create_task(self._poll(), name="setpoint-pg-poll"),
            asyncio.create_task(self._compact_loop(), name="setpoint-pg-compact"),
        ]
        self.registry.register(CRD)
        crds, _ = await self.list(CRD.api_version, CRD.kind)
        learn_kinds(self.registry, crds)  # kinds as data (`setpoint.store.kinds`)
        return self

    @staticmethod
    async def _migrate(conn: AsyncConnection[Any]) -> None:
        """Bring the store's schema up to `SCHEMA_VERSION` (one transaction, under the schema
        lock, so processes opening it at once migrate it once)."""
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            found = await (
                await conn.execute("SELECT value FROM setpoint_meta WHERE key = 'schema'")
            ).fetchone()
            version = found[0] if found is not None else SCHEMA_VERSION
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[step]:
                    await conn.execute(statement)
            await conn.execute(
                "UPDATE setpoint_meta SET value = greatest(value, %s) WHERE key = 'schema'",
                (SCHEMA_VERSION,),
            )

    async def _connect(self) -> AsyncConnection[Any]:
        try:
            conn = await AsyncConnection.connect(self.conninfo, autocommit=True)
        except psycopg.OperationalError as exc:
            raise _unavailable(exc, "connecting") from None
        except psycopg.Error as exc:
            raise Invalid(f"cannot connect to {self._where}: {exc}", field="store") from None
        if self._sync != "full":
            await conn.execute("SET synchronous_commit = off")
        return conn

    # -- writes -----------------------------------------------------------------

    async def _execute(self, write: Write) -> Object:
        self._check_open()
        future: asyncio.Future[Object] = asyncio.get_running_loop().create_future()
        self._writes.put_nowait(_Pending(write, future))
        return await future

    async def _write_loop(self) -> None:
        """The writer: one transaction, one commit, for every write waiting."""
        while (first := await self._writes.get()) is not None:
            batch = [first]
            stop = False
            while len(batch) < _MAX_BATCH and not self._writes.empty():
                item = self._writes.get_nowait()
                if item is None:
                    stop = True
                    break
                batch.append(item)
            start, entries = await self._commit(batch)
            if self._compact_due:
                self._compact_due = False
                self._compact_wanted.set()
            if entries:
                self._notes.put_nowait((start, entries))  # ahead of what the callers do next
            for pending in batch:
                if pending.future.done():
                    continue
                if isinstance(pending.result, BaseException):
                    pending.future.set_exception(pending.result)
                else:
                    assert pending.result is not None
                    pending.future.set_result(pending.result)
            if stop:
                break

    async def _commit(self, batch: list[_Pending]) -> tuple[int, list[LogEntry]]:
        """Run `batch` in one transaction; each pending write gets its result (or error)."""
        try:
            if _stale(self._writer_conn):  # the server restarted since the last batch
                if self._writer_conn is not None:
                    await self._writer_conn.close()
                self._writer_conn = await self._connect()
            assert self._writer_conn is not None
            return await self._transaction(self._writer_conn, batch)
        except BaseException as exc:
            if isinstance(exc, _Unreachable):
                failure: BaseException = _unavailable(
                    exc, "writing; the write may or may not have been committed: read it again"
                )
                if self._writer_conn is not None:
                    await self._writer_conn.close()
                self._writer_conn = None
            elif isinstance(exc, Error):
                failure = exc
            elif isinstance(exc, psycopg.Error):
                failure = Error(f"postgresql: {exc}")
            else:
                failure = exc
            for pending in batch:
                pending.result = failure
            if not isinstance(exc, Exception):
                raise
            return 0, []

    async def _transaction(
        self, conn: AsyncConnection[Any], batch: list[_Pending]
    ) -> tuple[int, list[LogEntry]]:
        """Decide the batch on a fresh read, then write it in one round trip that takes the
        revision lock, checks that no object it read has changed since, and commits. If one
        has (another process wrote it), decide again."""
        while True:
            changes = await self._decide_batch(conn, batch)
            if not changes:
                return 0, []
            try:
                return await self._commit_changes(conn, changes)
            except psycopg.errors.DivisionByZero:  # the check: something changed under us
                continue

    async def _decide_batch(self, conn: AsyncConnection[Any], batch: list[_Pending]) -> Batch:
        """Each write decided, in order, on the objects as committed now (one read); every
        pending write gets its result, the changed ones with a placeholder revision."""
        now = self._clock.now()
        keys = list({p.write.key: None for p in batch})
        found = await conn.execute(GET_MANY, [list(column) for column in zip(*keys, strict=True)])
        stored: dict[Key, bytes | str | None] = dict.fromkeys(keys)
        read: dict[Key, int] = dict.fromkeys(keys, 0)
        for *key, revision, data in await found.fetchall():
            stored[tuple(key)], read[tuple(key)] = data, revision
        plan = Batch()
        for pending in batch:
            key = pending.write.key
            data = stored[key]
            current = None if data is None else codec.decode(data)
            try:
                change = decide(pending.write, current, now)
                if change is None:
                    pending.result = current
                    continue
                change.object["metadata"]["resourceVersion"] = self._placeholder
                encoded = encode(change.object)
                plan.add(change, encoded, self._placeholder, read[key], pending.write)
            except Exception as exc:  # this write alone fails; nothing of it is written
                pending.result = exc
                continue
            stored[key] = None if change.type == "DELETED" else encoded
            pending.result = change.object
        return plan

    async def _commit_changes(
        self, conn: AsyncConnection[Any], plan: Batch
    ) -> tuple[int, list[LogEntry]]:
        """One pipeline: lock and advance the revision, check what was read, write the rows
        numbered from the revision, notify, commit. The lock is held only while the server
        runs these statements, never while this process thinks."""
        n = len(plan.entries)
        history = self._history_size
        async with conn.pipeline(), conn.transaction():
            advanced = await conn.execute(ADVANCE, (n,))  # the lock, held until commit
            await conn.execute(CHECK, plan.check_columns())
            await conn.execute(INSERT_LOG, [n, n, *plan.log_columns()])
            if plan.upserts:
                await conn.execute(UPSERT, [n, n, *plan.upsert_columns()])
            if plan.deletes:
                await conn.execute(DELETE, columns(plan.deletes, 4))
            marked = await conn.execute(RAISE_MARK, (history, 2 * history))
            await conn.execute(NOTIFY, (CHANNEL, f" {self._token}"))
        last = (await advanced.fetchone() or (0,))[0]
        if await marked.fetchone() is not None:
            self._compact_due = True
        start = last - n
        entries = []
        for revision, (change, row) in enumerate(plan.entries, start + 1):
            stamp(change, revision)
            entries.append(row.numbered(revision))
        return start, entries

    # -- watch fan-out --------------------------------------------------------

    def _wake(self, revision: int | None = None) -> None:
        """Have the dispatcher read the log (another process may have written)."""
        if revision is not None:
            self._known = max(self._known, revision)
            if revision <= self._published:
                return
        if not self._wake_queued:
            self._wake_queued = True
            self._notes.put_nowait((-1, []))

    async def _dispatch(self) -> None:
        """Publish every committed revision once, in order, whoever wrote it."""
        while (note := await self._notes.get()) is not None:
            start, entries = note
            if not entries:
                self._wake_queued = False
            if not self._watchers.has_subscribers():
                # Nobody to give changes to: none is read. A watch that starts later reads its
                # own history, which holds every revision known here by then.
                self._published = max(self._published, self._known, *(e.revision for e in entries))
                continue
            if start > self._published or not entries:  # another process wrote in between
                try:
                    missing = await self._history(self._published)
                except Gone as exc:  # compacted past what watchers were given: they relist
                    log.warning("%s; watchers must relist", exc)
                    self._watchers.expire()
                    with contextlib.suppress(Error):
                        self._published = await self.revision()
                    continue
                except StoreClosed:
                    return
                except Error as exc:  # unreachable: the poll wakes us again once it is back
                    log.warning("cannot read the revision log (%s); will retry", exc)
                    continue
                self._publish([e for e in missing if not entries or e.revision <= start])
            self._publish(entries)

    def _publish(self, entries: list[LogEntry]) -> None:
        fresh = [e for e in entries if e.revision > self._published]
        if fresh and fresh[0].revision != self._published + 1:
            return  # a gap: wait until the log is read from `_published`
        if fresh:
            self._published = fresh[-1].revision
            self._watchers.publish(fresh)
            self._learn_committed(fresh)

    async def _listen(self) -> None:
        """Wake the dispatcher on every NOTIFY; reconnect (and catch up) when it breaks."""
        delay = 0.05
        while True:
            conn = None
            try:
                conn = await self._connect()
                await conn.execute(f"LISTEN {CHANNEL}")
                self._wake()  # whatever was written while nobody listened
                delay = 0.05
                async for note in conn.notifies():
                    revision, _, writer = note.payload.partition(" ")
                    if writer != self._token:  # this store's own writes reach the dispatcher
                        with contextlib.suppress(ValueError):  # directly from the writer
                            self._wake(int(revision))
            except (Error, psycopg.Error) as exc:  # the poll covers for it meanwhile
                log.debug("listener: %s; reconnecting", exc)
            finally:
                if conn is not None:
                    await conn.close()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _poll(self) -> None:
        """The fallback for a missed notification: look at the revision now and then."""
        while True:
            await asyncio.sleep(self._poll_interval)
            try:
                revision = await self.revision()
            except Error:
                continue
            self._wake(revision)

    # -- reads ------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A pooled connection (autocommit); one that broke is closed, not returned, and the
        call fails with `StoreUnavailable`."""
        self._check_open()
        async with self._returned:
            await self._returned.wait_for(lambda: self._idle or self._in_use < _POOL_SIZE)
            self._in_use += 1
            conn = self._idle.pop() if self._idle else None
        try:
            if _stale(conn):
                if conn is not None:
                    await conn.close()
                conn = await self._connect()
            assert conn is not None
            try:
                yield conn
            except _Unreachable as exc:
                await conn.close()
                raise _unavailable(exc, "reading") from None
            except psycopg.Error as exc:
                raise Error(f"postgresql: {exc}") from exc
        finally:
            async with self._returned:
                self._in_use -= 1
                if conn is not None and not conn.closed and not self._closed:
                    if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                        self._idle.append(conn)
                    else:
                        await conn.close()
                elif conn is not None:
                    await conn.close()
                self._returned.notify()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = "default"
    ) -> Object:
        key = key_of(self.registry.get(api_version, kind), name, namespace)
        async with self._connection() as conn:
            row = await (await conn.execute(GET, key)).fetchone()
        if row is None:
            raise not_found(key)
        obj: Object = codec.decode(row[0])
        return obj

    async def list_pages(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
        *,
        page_size: int = 500,
    ) -> AsyncIterator[tuple[builtins.list[Object], int]]:
        """One REPEATABLE READ transaction (one snapshot: the revision and the objects agree),
        read through a server-side cursor a page at a time."""
        self.registry.get(api_version, kind)
        matches = matcher(label_selector)
        query = "SELECT data FROM setpoint_objects WHERE api_version = %s AND kind = %s"
        args: tuple[str, ...] = (api_version, kind)
        if namespace is not None:
            query, args = query + " AND namespace = %s", (*args, namespace)
        query += " ORDER BY namespace, name"
        async with self._connection() as conn:
            await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                revision = await self._revision_on(conn)
                async with conn.cursor(name="setpoint_list") as cursor:
                    await cursor.execute(query, args)
                    first = True
                    while True:
                        rows = await cursor.fetchmany(page_size)
                        page = [codec.decode(data) for (data,) in rows]
                        page = [o for o in page if matches(o["metadata"].get("labels"))]
                        if page or first:
                            yield page, revision
                        first = False
                        if len(rows) < page_size:
                            break
            finally:
                if (
                    not conn.closed
                    and conn.info.transaction_status != psycopg.pq.TransactionStatus.UNKNOWN
                ):
                    with contextlib.suppress(*_Unreachable):
                        await conn.execute("COMMIT")

    async def _history(self, after: int) -> builtins.list[LogEntry]:
        """One statement (one snapshot, one round trip): the mark, and the rows after `after`."""
        async with self._connection() as conn:
            rows = await (await conn.execute(HISTORY, (after,))).fetchall()
        compacted = rows[0][0] if rows else 0
        if after < compacted:
            raise Gone(f"too old resource version: {after} (history starts after {compacted})")
        return [LogEntry.of_row(row[1:]) for row in rows if row[1] is not None]

    @staticmethod
    async def _revision_on(conn: AsyncConnection[Any]) -> int:
        row = await (await conn.execute(REVISION)).fetchone()
        return 0 if row is None else int(row[0])

    async def revision(self) -> int:
        async with self._connection() as conn:
            return await self._revision_on(conn)

    # -- compaction -------------------------------------------------------------

    async def compact(self, revision: int) -> None:
        """Raise the mark to `revision` (at most the store's), then delete what lies under it."""
        async with self._connection() as conn:
            await conn.execute(
                "UPDATE setpoint_meta SET value = greatest(value, least(%s,"
                f" ({REVISION}))) WHERE key = 'compacted'",
                (revision,),
            )
        await self._delete_compacted()

    async def _delete_compacted(self) -> None:
        """Delete the log rows at or under the mark, `_COMPACT_BATCH` at a time, each batch
        its own transaction: writers insert above the mark and never wait on these."""
        while True:
            async with self._connection() as conn:
                cursor = await conn.execute(
                    "DELETE FROM setpoint_log WHERE revision IN (SELECT revision FROM setpoint_log"
                    f" WHERE revision <= ({COMPACTED}) ORDER BY revision LIMIT %s)",
                    (_COMPACT_BATCH,),
                )
                if cursor.rowcount < _COMPACT_BATCH:
                    return
            await asyncio.sleep(_COMPACT_PAUSE)

    async def _compact_loop(self) -> None:
        while True:
            await self._compact_wanted.wait()
            self._compact_wanted.clear()
            try:
                await self._delete_compacted()
            except Error as exc:
                log.warning("compaction stopped (%s); the next write past the mark retries", exc)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._writes.put_nowait(None)
        await asyncio.gather(self._tasks[0], return_exceptions=True)
        self._notes.put_nowait(None)
        await asyncio.gather(self._tasks[1], return_exceptions=True)
        for task in self._tasks[2:]:
            task.cancel()
        await asyncio.gather(*self._tasks[2:], return_exceptions=True)
        self._watchers.close()
        async with self._returned:
            idle, self._idle = self._idle, []
        for conn in [*idle, *([self._writer_conn] if self._writer_conn else [])]:
            await conn.close()
