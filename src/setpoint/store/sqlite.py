"""The `sqlite:///path.db` backend: the embedded default, durable, shared by processes.

Layout (after kine): `objects` holds each object's current JSON; `log` holds one
row per change, and its `revision` is the store's revision; its `writer` column keeps the
write's verb and actor (`encoded_writer`; NULL in rows written before it was added, which
opening a file of an older layout does, `_migrate`). A write inserts its `log` row and
upserts `objects` in one transaction.

Writes are group-committed: one writer thread owns the writing connection, drains
every pending write into one transaction with one fsync, then resolves each
caller's future; each compare-and-swap is checked inside that transaction, so a
conflict fails only its own write. A batch reads the objects it touches in one query and
writes its log rows and objects in a few multi-row statements, not a few per write.
Durability: WAL with `synchronous=FULL` (`?sync=normal` survives a killed process but not a
power cut; `?sync=off` neither).

Files: the database (and its `-wal` and `-shm`) is mode 0600, tightened when opened if an
earlier version left it wider; a directory the store has to make for it is 0700
(`setpoint.files`); an existing directory is left as it is.

Watchers in this process are fed from the writer after commit. Changes written by
other processes are found by polling `PRAGMA data_version` (a free check, on a connection
and thread of its own, never on the event loop) and reading the log after the last
published revision: every `poll_interval` seconds while the database changes, twice as long
after each quiet poll up to `POLL_IDLE` (an idle engine wakes a few times a second, not a
hundred).

Kinds as data (`setpoint.store.kinds`): opening learns the kinds of the stored CRDs; every
published CRD change (this process's or another's) is learnt; while open, the registry's
`refresh` rereads the CRDs (one query) when a lookup misses.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import logging
import os
import queue
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Error, Gone, Invalid, StoreClosed
from setpoint.files import ensure_private_dir, make_private, sqlite_files
from setpoint.model import Object, Registry, Selector, codec
from setpoint.store.backend import Backend, encoded_matching
from setpoint.store.kinds import learn_kinds
from setpoint.store.rules import Change, Key, Write, decide, encode, key_of, not_found, stamp
from setpoint.store.sqlite_reader import GET, list_query, read_crds, revision_now
from setpoint.store.watchers import (
    LogEntry,
    Watchers,
    encoded_labels,
    encoded_writer,
    matcher,
)

log = logging.getLogger("setpoint.store.sqlite")

Sync = Literal["full", "normal", "off"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    api_version TEXT NOT NULL, kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    revision INTEGER NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (api_version, kind, namespace, name)
);
CREATE TABLE IF NOT EXISTS log (
    revision INTEGER PRIMARY KEY AUTOINCREMENT,
    type TEXT NOT NULL, api_version TEXT NOT NULL, kind TEXT NOT NULL,
    namespace TEXT NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL,
    labels TEXT, prev_labels TEXT, writer TEXT
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('compacted', 0);
"""

_REVISION_AND_COMPACTED = (
    "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'log'), 0),"
    " (SELECT value FROM meta WHERE key = 'compacted')"
)
_LOG_COLUMNS = "revision, type, api_version, kind, namespace, data, labels, prev_labels, writer"
_MAX_BATCH = 1000
_MAX_ROWS = 256
"""The most rows one multi-row statement carries, fewer when the SQLite library allows fewer
bound variables (999 before 3.32)."""

_LOG_INSERT = (
    "INSERT INTO log (revision, type, api_version, kind, namespace, name, data, labels,"
    " prev_labels, writer) VALUES {}"
)
_OBJECTS_UPSERT = (
    "INSERT INTO objects VALUES {} ON CONFLICT DO UPDATE"
    " SET revision=excluded.revision, data=excluded.data"
)
_OBJECTS_DELETE = "DELETE FROM objects WHERE api_version=? AND kind=? AND namespace=? AND name=?"
_OBJECTS_READ = (
    "SELECT k.column1, k.column2, k.column3, k.column4, o.data FROM (VALUES {}) AS k"
    " JOIN objects AS o ON o.api_version=k.column1 AND o.kind=k.column2"
    " AND o.namespace=k.column3 AND o.name=k.column4"
)


@functools.cache
def _statement(template: str, rows: int, width: int) -> str:
    """`template` with `rows` rows of `width` parameters in place of `{}`."""
    row = "(" + ",".join("?" * width) + ")"
    return template.format(",".join([row] * rows))


_Row = TypeVar("_Row", bound=tuple[Any, ...])


def _chunks(conn: sqlite3.Connection, rows: list[_Row], width: int) -> Iterator[list[_Row]]:
    """`rows` (of `width` values each) in runs of the most one statement may bind, then of
    powers of two: few statements, and few distinct texts for the statement cache."""
    most = min(_MAX_ROWS, conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width)
    at, size = 0, 1 << (most.bit_length() - 1)
    while at < len(rows):
        while size > len(rows) - at:
            size //= 2
        yield rows[at : at + size]
        at += size


def _insert(conn: sqlite3.Connection, template: str, rows: list[tuple[Any, ...]]) -> None:
    """Insert `rows` (all of one width) with multi-row statements."""
    if not rows:
        return
    width = len(rows[0])
    for chunk in _chunks(conn, rows, width):
        flat = [value for row in chunk for value in row]
        conn.execute(_statement(template, len(chunk), width), flat)


def _read_objects(conn: sqlite3.Connection, keys: set[Key]) -> dict[Key, str | bytes | None]:
    """The stored JSON of those of the objects of `keys` that exist, by key (one key: a
    plain primary-key read, the cheapest statement)."""
    found: dict[Key, str | bytes | None] = {}
    if len(keys) == 1:
        (key,) = keys
        row = conn.execute(GET, key).fetchone()
        if row is not None:
            found[key] = row[0]
        return found
    for chunk in _chunks(conn, list(keys), 4):
        flat = [part for key in chunk for part in key]
        for api_version, kind, namespace, name, data in conn.execute(
            _statement(_OBJECTS_READ, len(chunk), 4), flat
        ):
            found[(api_version, kind, namespace, name)] = data
    return found


def _rows(
    revision: int, change: Change, data: bytes, write: Write
) -> tuple[LogEntry, tuple[Any, ...], tuple[Any, ...] | None]:
    """The log entry of `change` written at `revision`, its `log` row, and the `objects`
    row it leaves (None: it deletes the object)."""
    api_version, kind, namespace, _ = change.key
    labels = change.object["metadata"].get("labels")
    text = data.decode()  # stored as TEXT, so the file reads well in the sqlite3 shell
    actor = write.options.actor
    log_row = (
        revision,
        change.type,
        *change.key,
        text,
        encoded_labels(labels),
        encoded_labels(change.prev_labels),
        encoded_writer(write.op, actor),
    )
    row = None if change.type == "DELETED" else (*change.key, revision, text)
    entry = LogEntry(
        revision,
        change.type,
        api_version,
        kind,
        namespace,
        data,
        labels,
        change.prev_labels,
        write.op,
        actor,
    )
    return entry, log_row, row


@dataclass(slots=True)
class _Pending:
    write: Write
    future: asyncio.Future[Object]
    result: Object | BaseException | None = None


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring a file of an older layout up to this one: the log's `writer` column (added
    empty: older history has no known writer)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(log)")}
    if "writer" not in columns:
        conn.execute("ALTER TABLE log ADD COLUMN writer TEXT")


def _connect(path: str, sync: Sync) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={sync.upper()}")
    return conn


POLL_IDLE = 0.1
"""The longest wait between two polls for other processes' writes, once nothing changed."""


class SqliteStore(Backend):
    def __init__(
        self,
        path: str,
        registry: Registry | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        history: int = 10_000,
        sync: Sync = "full",
        poll_interval: float = 0.01,
    ) -> None:
        self.registry = registry if registry is not None else Registry()
        self.path = path
        self._clock = clock
        self._history_size = history
        self._sync = sync
        self._poll_interval = poll_interval
        self._writes: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._batch: list[_Pending] = []  # the writer's batch in flight
        self._watchers = Watchers()
        self._notes: asyncio.Queue[tuple[int, list[LogEntry]] | None] = asyncio.Queue()
        self._published = 0  # the last revision handed to watchers
        self._dispatching = False  # the dispatcher is reading what other processes wrote
        self._committed = 0  # the last revision this process's writer committed
        self._closed = False
        self._local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._readers = ThreadPoolExecutor(2, thread_name_prefix="setpoint-sqlite-read")
        self._poller = ThreadPoolExecutor(1, thread_name_prefix="setpoint-sqlite-poll")
        self._poll_conn: sqlite3.Connection | None = None

    async def open(self) -> SqliteStore:
        self._loop = asyncio.get_running_loop()
        try:
            directory = os.path.dirname(os.path.abspath(self.path))  # noqa: ASYNC240
            if not os.path.isdir(directory):  # noqa: ASYNC240
                ensure_private_dir(directory)
            self._conn = _connect(self.path, self._sync)
            make_private(*sqlite_files(self.path))  # before anything is written to it
            self._conn.executescript(_SCHEMA)
            _migrate(self._conn)
            self._published = revision_now(self._conn)
            learn_kinds(self.registry, read_crds(self._conn))
        except (OSError, sqlite3.Error) as exc:
            raise Invalid(
                f"cannot open {self.path!r} as a SQLite store: {exc}", field="store"
            ) from None
        self._outer_refresh = self.registry.refresh
        self.registry.refresh = self._reread_kinds
        self._writer = threading.Thread(
            target=self._write_loop, name="setpoint-sqlite-writer", daemon=True
        )
        self._writer.start()
        self._tasks = [
            asyncio.create_task(self._dispatch(), name="setpoint-sqlite-dispatch"),
            asyncio.create_task(self._poll(), name="setpoint-sqlite-poll"),
        ]
        return self

    def _reread_kinds(self) -> None:
        """The registry's `refresh` while open: learn the CRDs as they are now stored."""
        if not self._closed:
            with contextlib.suppress(sqlite3.Error):
                learn_kinds(self.registry, read_crds(self._conn))

    # -- writes -----------------------------------------------------------------

    async def _execute(self, write: Write) -> Object:
        self._check_open()
        future: asyncio.Future[Object] = self._loop.create_future()
        self._writes.put(_Pending(write, future))
        return await future

    def _write_loop(self) -> None:
        """The writer thread: one transaction, one fsync, for every write waiting. If it
        dies, the store is closed and every waiting writer is told why."""
        try:
            self._serve_writes()
        except BaseException as exc:
            log.exception("the sqlite writer stopped; the store is closed")
            self._closed = True
            failure = StoreClosed(f"the store's writer stopped: {exc!r}")
            pending, self._batch = self._batch, []
            for item in pending:
                item.result = failure
            while True:
                try:
                    queued = self._writes.get_nowait()
                except queue.Empty:
                    break
                if queued is not None:
                    queued.result = failure
                    pending.append(queued)
            self._loop.call_soon_threadsafe(self._deliver, 0, [], pending)

    def _serve_writes(self) -> None:
        conn = _connect(self.path, self._sync)
        try:
            while True:
                first = self._writes.get()
                if first is None:
                    return
                batch = [first]
                stop = False
                while len(batch) < _MAX_BATCH:
                    try:
                        item = self._writes.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        stop = True
                        break
                    batch.append(item)
                self._batch = batch
                start, entries = self._commit(conn, batch)
                if entries:
                    self._committed = entries[-1].revision
                self._batch = []
                self._loop.call_soon_threadsafe(self._deliver, start, entries, batch)
                if stop:
                    return
        finally:
            conn.close()

    def _commit(
        self, conn: sqlite3.Connection, batch: list[_Pending]
    ) -> tuple[int, list[LogEntry]]:
        """One transaction for `batch`: read every object it touches in one query, decide
        each write in order (a later write of a key in the batch sees the earlier one), then
        write the log rows and the objects' final states in a few multi-row statements.

        Few statements, not a few per write: each statement lets go of the GIL, and a
        writer thread that lets go of it while the event loop is busy waits for it (up
        to the switch interval) once per statement."""
        now = self._clock.now()
        entries: list[LogEntry] = []
        log_rows: list[tuple[Any, ...]] = []
        final: dict[Key, tuple[Any, ...] | None] = {}  # key -> objects row, None: deleted
        try:
            conn.execute("BEGIN IMMEDIATE")
            start, compacted = conn.execute(_REVISION_AND_COMPACTED).fetchone()
            stored = _read_objects(conn, {pending.write.key for pending in batch})
            revision = start
            for pending in batch:
                write = pending.write
                try:
                    data = stored.get(write.key)
                    current = None if data is None else codec.decode(data)
                    change = decide(write, current, now)
                    if change is None:
                        pending.result = current
                        continue
                    stamp(change, revision + 1)
                    encoded = encode(change.object)
                except Exception as exc:  # this write alone fails; nothing of it was written
                    pending.result = exc
                    continue
                revision += 1
                entry, log_row, row = _rows(revision, change, encoded, write)
                entries.append(entry)
                log_rows.append(log_row)
                final[change.key] = row
                stored[change.key] = None if row is None else encoded
                pending.result = change.object
            _insert(conn, _LOG_INSERT, log_rows)
            _insert(conn, _OBJECTS_UPSERT, [row for row in final.values() if row is not None])
            gone = [key for key, row in final.items() if row is None]
            if gone:
                conn.executemany(_OBJECTS_DELETE, gone)
            if revision - compacted > 2 * self._history_size:  # keep about `history` revisions
                self._compact_in(conn, revision - self._history_size)
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            for pending in batch:
                pending.result = exc if isinstance(exc, Error) else Error(f"sqlite: {exc}")
            return 0, []
        return start, entries

    @staticmethod
    def _compact_in(conn: sqlite3.Connection, revision: int) -> None:
        conn.execute("DELETE FROM log WHERE revision <= ?", (revision,))
        conn.execute("UPDATE meta SET value = max(value, ?) WHERE key = 'compacted'", (revision,))

    def _deliver(self, start: int, entries: list[LogEntry], batch: list[_Pending]) -> None:
        """On the loop, after commit: publish the changes (ahead of anything the woken writers
        do next), then wake the writers. They follow what was published with no gap and
        nothing is waiting before them, as a rule: then they are published here, at once;
        else the dispatcher publishes them after what comes first."""
        in_order = start <= self._published and not self._dispatching and self._notes.empty()
        try:
            if entries and in_order:
                self._publish(entries)
            elif entries:
                self._notes.put_nowait((start, entries))
        finally:  # whatever publishing met, every writer of the batch has its answer
            self._answer(batch)

    @staticmethod
    def _answer(batch: list[_Pending]) -> None:
        """Give each writer of `batch` its result (the object written, or the error)."""
        for pending in batch:
            if pending.future.done():
                continue
            if isinstance(pending.result, BaseException):
                pending.future.set_exception(pending.result)
            else:
                assert pending.result is not None
                pending.future.set_result(pending.result)

    # -- watch fan-out --------------------------------------------------------

    async def _dispatch(self) -> None:
        """Publish every committed revision once, in order, whoever wrote it."""
        while (note := await self._notes.get()) is not None:
            start, entries = note
            if start > self._published or not entries:  # another process wrote in between
                self._dispatching = True  # until published: later batches queue behind
                try:
                    missing = await self._read(self._log_after, self._published)
                except StoreClosed:
                    return
                except Exception as exc:  # Gone (compacted first), or the read failed:
                    # what happened since `_published` is unknown, so every watcher relists.
                    log.warning("cannot read the revision log (%s); watchers must relist", exc)
                    self._watchers.expire()
                    with contextlib.suppress(sqlite3.Error):
                        self._published = revision_now(self._conn)
                    missing = []
                self._publish([e for e in missing if not entries or e.revision <= start])
            self._publish(entries)
            self._dispatching = False

    def _publish(self, entries: list[LogEntry]) -> None:
        fresh = [e for e in entries if e.revision > self._published]
        if fresh:
            self._published = fresh[-1].revision
            self._watchers.publish(fresh)
            self._learn_committed(fresh)

    async def _poll(self) -> None:
        seen = None
        interval = self._poll_interval
        while True:
            await asyncio.sleep(interval)
            try:
                version, newer = await self._loop.run_in_executor(self._poller, self._changed, seen)
            except sqlite3.Error as exc:
                log.warning("cannot poll the store for other processes' writes: %s", exc)
                continue
            if version == seen:
                interval = min(interval * 2, max(POLL_IDLE, self._poll_interval))
                continue
            seen, interval = version, self._poll_interval
            if newer:
                self._notes.put_nowait((0, []))

    def _changed(self, seen: int | None) -> tuple[int, bool]:
        """In the poll thread, on its own connection (`data_version` is per connection): the
        file's data version, and, if it is not `seen`, whether the store's revision is past
        what this process committed and published. Not on the loop: a statement lets go of
        the GIL, and taking it back from a busy writer thread could stall the loop."""
        if self._poll_conn is None:
            self._poll_conn = _connect(self.path, self._sync)
        version: int = self._poll_conn.execute("PRAGMA data_version").fetchone()[0]
        if version == seen:
            return version, False
        # Our own commits change data_version too; they reach the watchers directly.
        return version, revision_now(self._poll_conn) > max(self._committed, self._published)

    # -- reads ------------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = _connect(self.path, self._sync)
            self._reader_conns.append(conn)
        return conn

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")

    async def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        self._check_open()
        try:
            return await self._loop.run_in_executor(
                self._readers, lambda: fn(self._reader(), *args)
            )
        except sqlite3.Error as exc:
            raise Error(f"sqlite: {exc}") from exc

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = "default"
    ) -> Object:
        self._check_open()
        key = key_of(self.registry.get(api_version, kind), name, namespace)
        row = self._conn.execute(GET, key).fetchone()  # a primary-key read: microseconds
        if row is None:
            raise not_found(key)
        obj: Object = codec.decode(row[0])
        return obj

    async def list_encoded(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
    ) -> tuple[builtins.list[bytes], int]:
        """One read transaction (a WAL snapshot) in the reader pool; the JSON as stored,
        decoded only to match a label selector."""
        self._check_open()
        self.registry.get(api_version, kind)
        query, args = list_query(api_version, kind, namespace, as_bytes=True)

        def read(conn: sqlite3.Connection) -> tuple[builtins.list[bytes], int]:
            conn.execute("BEGIN")
            try:
                revision = revision_now(conn)
                rows = conn.execute(query, args).fetchall()
            finally:
                conn.execute("COMMIT")
            return encoded_matching([data for (data,) in rows], label_selector), revision

        listed: tuple[builtins.list[bytes], int] = await self._read(read)
        return listed

    async def list_pages(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
        *,
        page_size: int = 500,
    ) -> AsyncIterator[tuple[builtins.list[Object], int]]:
        """One read transaction (a WAL snapshot) on a connection of its own, fetched and
        decoded a page at a time in the reader pool."""
        self._check_open()
        self.registry.get(api_version, kind)
        matches = matcher(label_selector)
        query, args = list_query(api_version, kind, namespace)

        def start() -> tuple[sqlite3.Connection, sqlite3.Cursor, int]:
            conn = _connect(self.path, self._sync)
            conn.execute("BEGIN")
            revision = revision_now(conn)
            return conn, conn.execute(query, args), revision

        def fetch(cursor: sqlite3.Cursor) -> tuple[builtins.list[Object], bool]:
            rows = cursor.fetchmany(page_size)
            page = [codec.decode(data) for (data,) in rows]
            return [o for o in page if matches(o["metadata"].get("labels"))], len(rows) < page_size

        def finish(conn: sqlite3.Connection) -> None:
            conn.execute("COMMIT")
            conn.close()

        conn, cursor, revision = await self._loop.run_in_executor(self._readers, start)
        try:
            last = False
            first = True
            while not last:
                page, last = await self._loop.run_in_executor(self._readers, fetch, cursor)
                if page or first:
                    yield page, revision
                first = False
        finally:
            try:
                await self._loop.run_in_executor(self._readers, finish, conn)
            except RuntimeError:  # the store closed mid-iteration: the pool is gone
                finish(conn)

    def _log_after(self, conn: sqlite3.Connection, after: int) -> builtins.list[LogEntry]:
        conn.execute("BEGIN")
        try:
            compacted = conn.execute("SELECT value FROM meta WHERE key='compacted'").fetchone()[0]
            if after < compacted:
                raise Gone(f"too old resource version: {after} (history starts after {compacted})")
            rows = conn.execute(
                f"SELECT {_LOG_COLUMNS} FROM log WHERE revision > ? ORDER BY revision", (after,)
            ).fetchall()
        finally:
            conn.execute("COMMIT")
        return [LogEntry.of_row(row) for row in rows]

    async def _history(self, after: int) -> builtins.list[LogEntry]:
        entries: builtins.list[LogEntry] = await self._read(self._log_after, after)
        return entries

    async def revision(self) -> int:
        self._check_open()
        return revision_now(self._conn)

    async def compact(self, revision: int) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._compact_in(conn, min(revision, revision_now(conn)))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

        await self._read(run)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.registry.refresh == self._reread_kinds:
            self.registry.refresh = self._outer_refresh
        self._writes.put(None)
        await asyncio.to_thread(self._writer.join)
        self._notes.put_nowait(None)
        await asyncio.gather(self._tasks[0], return_exceptions=True)
        self._tasks[1].cancel()
        await asyncio.gather(self._tasks[1], return_exceptions=True)
        self._watchers.close()
        await asyncio.to_thread(self._readers.shutdown, True)
        await asyncio.to_thread(self._poller.shutdown, True)
        if self._poll_conn is not None:
            self._poll_conn.close()
        for conn in [*self._reader_conns, self._conn]:
            conn.close()
