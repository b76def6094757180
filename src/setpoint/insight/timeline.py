"""The timeline's storage: an append-only, indexed record of what happened, kept in the
store's own database so every engine, host and reader of a store shares it.

Each entry is one JSON object (the format `setpoint explain` reads):

    {"ts": 1700000000.5, "type": "change", "object": {"kind", "name", "namespace"}, ...}

with `type` one of `write` (the audit trail: who wrote what, `setpoint.insight.recorder`),
`change`, `condition`, `event`, `exit`, `log`, `edge` (an edge
names its `from` and `to` objects instead of `object`); readers ignore types and
fields they do not know. Rows live in the table

    timeline(id INTEGER PRIMARY KEY, ts REAL, type TEXT, kind TEXT, namespace TEXT,
             name TEXT, body BLOB)

(`setpoint_timeline` on PostgreSQL) indexed on `ts` and on `(kind, namespace, name, ts)`,
so a time window and one object's history are both range scans. `Timeline.of_store` opens
the one that goes with a store: in the SQLite store's file (`timeline_path_for`; WAL,
`busy_timeout`, a file it opens made mode 0600), in the PostgreSQL store's database (a
sync psycopg connection), in the etcd store's cluster (`setpoint.insight.timeline_etcd`),
each on a connection of its own with one short transaction per batch, so the store's
writer is never held up for long. `Timeline.memory()` is the same in memory. What differs
between the SQL databases is in `_Dialect`.

The recorder's resume point (`checkpoint`: the last store revision it recorded and what it
last saw of each object) is kept in two side tables and written in the same transaction as
the entries it explains, only if it is still the one the recorder read (`after`:
`CheckpointMoved` otherwise). `claim_recording` is a live recorder's word that it keeps the
timeline, so there is one at a time and readers know when to catch up themselves.

JSON Lines (`dump_jsonl`): one entry per line, exactly as `query` returns them;
`setpoint timeline -o jsonl` writes it and `setpoint explain --timeline FILE` reads it
(`setpoint.insight.entries.read_timeline`).

This module does I/O (databases, files); what goes into entries is decided by
`setpoint.insight.recorder`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlencode, urlsplit

import orjson

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Invalid, StoreUnavailable
from setpoint.files import ensure_private_dir, make_private, sqlite_files
from setpoint.insight.recording import served
from setpoint.insight.timeline_base import Checkpoint as Checkpoint
from setpoint.insight.timeline_base import CheckpointMoved as CheckpointMoved
from setpoint.insight.timeline_base import Entry as Entry
from setpoint.insight.timeline_base import TimelineBackend as TimelineBackend
from setpoint.insight.timeline_base import object_of as object_of
from setpoint.store import postgres_conninfo, sqlite_path
from setpoint.store.urls import shown_url

_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS timeline (
    id INTEGER PRIMARY KEY, ts REAL NOT NULL, type TEXT NOT NULL, kind TEXT NOT NULL,
    namespace TEXT NOT NULL, name TEXT NOT NULL, body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS timeline_ts ON timeline (ts);
CREATE INDEX IF NOT EXISTS timeline_object ON timeline (kind, namespace, name, ts);
CREATE TABLE IF NOT EXISTS timeline_seen (key TEXT PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS timeline_meta (key TEXT PRIMARY KEY, value REAL NOT NULL);
DROP TABLE IF EXISTS timeline_actors;
"""

_POSTGRES_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS setpoint_timeline (
    id BIGSERIAL PRIMARY KEY, ts DOUBLE PRECISION NOT NULL, type TEXT NOT NULL,
    kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, body BYTEA NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS setpoint_timeline_ts ON setpoint_timeline (ts)",
    """CREATE INDEX IF NOT EXISTS setpoint_timeline_object
    ON setpoint_timeline (kind, namespace, name, ts)""",
    """CREATE TABLE IF NOT EXISTS setpoint_timeline_seen (
    key TEXT PRIMARY KEY, body BYTEA NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS setpoint_timeline_meta (
    key TEXT PRIMARY KEY, value DOUBLE PRECISION NOT NULL)""",
)

_PRUNE_CHUNK = 20_000

TYPES = ("write", "change", "condition", "event", "exit", "log", "edge")
"""The entry types the recorder writes (readers must accept others too)."""


def timeline_path_for(store_url: str) -> Path | None:
    """The database file holding the timeline of the SQLite store at `store_url`: the
    store's own file; None for other stores (see `Timeline.of_store`)."""
    if urlsplit(store_url).scheme != "sqlite":
        return None
    return Path(sqlite_path(store_url))


def timeline_url_of(store: object) -> str | None:
    """The store URL whose timeline (`Timeline.of_store`) goes with an open `store`: its
    SQLite file's, its PostgreSQL database's, its etcd cluster's; None for a store that
    keeps none."""
    path = getattr(store, "path", None)
    if isinstance(path, str) and path != ":memory:":
        return f"sqlite:///{path}"
    conninfo = getattr(store, "conninfo", None)
    if isinstance(conninfo, str):
        return conninfo
    address, prefix = getattr(store, "address", None), getattr(store, "prefix", None)
    if isinstance(address, str) and isinstance(prefix, str):
        return f"etcd://{address}?{urlencode({'prefix': prefix})}"
    return None


@dataclass(frozen=True, slots=True)
class _Dialect:
    """What differs between the databases a timeline lives in: table names, the parameter
    mark, upserts."""

    table: str
    mark: str
    upsert: str  # "INSERT OR REPLACE INTO" or "INSERT INTO ... ON CONFLICT" (see `_upsert`)

    def sql(self, text: str) -> str:
        """`text` with `{t}` the entries' table and `?` this database's parameter mark."""
        return text.replace("{t}", self.table).replace("?", self.mark)

    def upsert_sql(self, table: str, columns: str) -> str:
        marks = ", ".join([self.mark] * len(columns.split(", ")))
        if self.upsert == "replace":
            return f"INSERT OR REPLACE INTO {table} ({columns}) VALUES ({marks})"
        first, rest = columns.split(", ", 1)
        updates = ", ".join(f"{c} = excluded.{c}" for c in rest.split(", "))
        return (
            f"INSERT INTO {table} ({columns}) VALUES ({marks}) "
            f"ON CONFLICT ({first}) DO UPDATE SET {updates}"
        )


_SQLITE = _Dialect("timeline", "?", "replace")
_POSTGRES = _Dialect("setpoint_timeline", "%s", "on conflict")


class Timeline:
    """An append-only timeline in one database: a SQLite file (or memory), or the PostgreSQL
    database of a `postgresql://` store.

    Thread-safe: one connection guarded by a lock, so the recorder may write from a
    worker thread while the event loop stays free. Open with `open`, `of_store` or `memory`.
    """

    def __init__(
        self, conn: Any, dialect: _Dialect = _SQLITE, *, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self._conn = conn
        self._dialect = dialect
        self._clock = clock
        self._lock = threading.Lock()
        if dialect is _SQLITE:
            self._conn.executescript(_SQLITE_SCHEMA)
        else:
            for statement in _POSTGRES_SCHEMA:
                self._conn.execute(statement)
        self._seen_table = f"{dialect.table}_seen"
        self._meta_table = f"{dialect.table}_meta"

    @classmethod
    def open(cls, url_or_path: str | Path, *, clock: Clock = SYSTEM_CLOCK) -> TimelineBackend:
        """The timeline of a store URL (`of_store`) or in the SQLite file at a path
        (created if missing)."""
        text = str(url_or_path)
        if "://" in text:
            return cls.of_store(text, clock=clock)
        return cls._sqlite_file(Path(text), clock=clock)

    @classmethod
    def of_store(cls, store_url: str, *, clock: Clock = SYSTEM_CLOCK) -> TimelineBackend:
        """The timeline kept with the store at `store_url`, shared by every process and host
        that uses the store: in the SQLite store's file, in the PostgreSQL store's database
        (tables `setpoint_timeline*`), in the etcd store's cluster (keys under its prefix:
        `setpoint.insight.timeline_etcd`); for `memory://` a fresh one in memory. Other
        stores keep none: `Invalid`."""
        scheme = urlsplit(store_url).scheme
        if scheme == "memory":
            return cls.memory(clock=clock)
        if scheme in ("postgresql", "postgres"):
            return cls._postgres(store_url, clock=clock)
        if scheme == "etcd":
            try:
                from setpoint.insight.timeline_etcd import EtcdTimeline
            except ImportError as exc:
                if not (exc.name or "grpc").startswith(("grpc", "google")):
                    raise
                raise Invalid(
                    f"{shown_url(store_url)!r}: the etcd timeline needs the etcd extra"
                    " (pip install 'setpoint[etcd]')",
                    field="store",
                ) from None
            return EtcdTimeline.of_url(store_url, clock=clock)
        path = timeline_path_for(store_url)
        if path is None:
            raise Invalid(
                f"{shown_url(store_url)!r}: this store keeps no timeline (sqlite:///, "
                "postgresql:// and etcd:// stores do)",
                field="store",
            )
        return cls._sqlite_file(path, clock=clock)

    @classmethod
    def _sqlite_file(cls, path: Path, *, clock: Clock) -> Timeline:
        if not path.parent.is_dir():
            ensure_private_dir(path.parent)
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA journal_mode=WAL")
        make_private(*sqlite_files(path))  # 0600, before an entry is written
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA cache_size=-32768")  # 32 MiB: the indexes' hot pages stay put
        return cls(conn, clock=clock)

    @classmethod
    def _postgres(cls, store_url: str, *, clock: Clock) -> Timeline:
        import psycopg  # the postgresql extra, as the store itself needs

        try:
            conn = psycopg.connect(postgres_conninfo(store_url), autocommit=True)
        except psycopg.OperationalError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreUnavailable(f"{shown_url(store_url)}: {first}") from None
        return cls(conn, _POSTGRES, clock=clock)

    @classmethod
    def memory(cls, *, clock: Clock = SYSTEM_CLOCK) -> Timeline:
        """A timeline in memory, gone when closed."""
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        return cls(conn, clock=clock)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One transaction, the lock held (SQLite: taking the write lock at once)."""
        with self._lock:
            if self._dialect is not _SQLITE:
                with self._conn.transaction():
                    yield
                return
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            self._conn.cursor().executemany(sql, rows)

    def _one(self, sql: str, args: tuple[Any, ...] = ()) -> Any:
        return self._conn.execute(self._dialect.sql(sql), args).fetchone()

    # -- writing ------------------------------------------------------------------

    def append(self, entry: Entry) -> None:
        self.append_many([entry])

    def append_many(
        self,
        entries: Iterable[Entry],
        checkpoint: Checkpoint | None = None,
        *,
        after: int | None = None,
    ) -> int:
        """Append `entries` (and record `checkpoint`) in one transaction; return how many.
        With `after`, only if the saved checkpoint's revision is still `after` (0: none
        saved); else nothing is written and `CheckpointMoved` is raised: two recorders
        never both record one stretch of the store's history."""
        rows = [_row(e) for e in entries]
        insert = self._dialect.sql(
            "INSERT INTO {t} (ts, type, kind, namespace, name, body) VALUES (?, ?, ?, ?, ?, ?)"
        )
        with self._transaction():
            if after is not None:
                row = self._one(f"SELECT value FROM {self._meta_table} WHERE key = 'revision'")
                saved = int(row[0]) if row is not None else 0
                if saved != after:
                    raise CheckpointMoved(
                        f"the timeline's checkpoint moved from revision {after} to {saved}"
                    )
            self._many(insert, rows)
            if checkpoint is not None:
                self._save_checkpoint(checkpoint)
        return len(rows)

    def _save_checkpoint(self, checkpoint: Checkpoint) -> None:
        gone = [(k,) for k, v in checkpoint.seen.items() if v is None]
        kept = [(k, orjson.dumps(v)) for k, v in checkpoint.seen.items() if v is not None]
        self._many(self._dialect.sql(f"DELETE FROM {self._seen_table} WHERE key = ?"), gone)
        self._many(self._dialect.upsert_sql(self._seen_table, "key, body"), kept)
        self._set_meta("revision", checkpoint.revision)

    def _set_meta(self, key: str, value: float) -> None:
        self._conn.execute(self._dialect.upsert_sql(self._meta_table, "key, value"), (key, value))

    def revision(self) -> int:
        """The store revision recorded up to (the checkpoint's; 0 when there is none)."""
        with self._lock:
            row = self._one(f"SELECT value FROM {self._meta_table} WHERE key = 'revision'")
        return int(row[0]) if row is not None else 0

    def checkpoint(self) -> Checkpoint | None:
        """The last checkpoint saved with `append_many`, or None if there is none."""
        with self._lock:
            row = self._one(f"SELECT value FROM {self._meta_table} WHERE key = 'revision'")
            if row is None:
                return None
            seen = {
                key: orjson.loads(body)
                for key, body in self._conn.execute(f"SELECT key, body FROM {self._seen_table}")
            }
        return Checkpoint(int(row[0]), seen)

    def claim_recording(self, recorder: int, until: float, *, force: bool = False) -> bool:
        """Say that `recorder` (a number it drew) keeps this timeline up to date until
        `until` (a time by the clock), and return True; or return False, saying nothing,
        while another recorder's word still holds. One live recorder per timeline: a second
        engine's recorder stands by until the first one's word runs out (unless `force`)."""
        with self._transaction():
            if self._dialect is _POSTGRES:  # two claims in one database wait for each other
                self._conn.execute(f"LOCK TABLE {self._meta_table} IN SHARE ROW EXCLUSIVE MODE")
            rows = dict(
                self._conn.execute(
                    f"SELECT key, value FROM {self._meta_table} "
                    "WHERE key IN ('recorder', 'recording_until')"
                ).fetchall()
            )
            holder, held_until = rows.get("recorder"), rows.get("recording_until")
            held = holder not in (None, recorder) and (held_until or 0.0) > self._clock.now()
            if held and not force:
                return False
            self._set_meta("recorder", recorder)
            self._set_meta("recording_until", until)
        return True

    def recording(self) -> bool:
        """Whether a live recorder said it keeps this timeline up to date now."""
        with self._lock:
            row = self._one(f"SELECT value FROM {self._meta_table} WHERE key = 'recording_until'")
        return row is not None and float(row[0]) > self._clock.now()

    def prune(self, max_age_s: float | None, max_entries: int | None) -> int:
        """Delete entries older than `max_age_s` seconds (by the clock) and all but the newest
        `max_entries`; return how many went. Deletes in short transactions."""
        if max_age_s is not None and max_age_s < 0:
            raise Invalid("must be >= 0", field="max_age_s")
        if max_entries is not None and max_entries < 0:
            raise Invalid("must be >= 0", field="max_entries")
        deleted = 0
        if max_age_s is not None:
            cutoff = self._clock.now() - max_age_s
            deleted += self._delete_chunks(
                "DELETE FROM {t} WHERE id IN (SELECT id FROM {t} WHERE ts < ? LIMIT ?)",
                (cutoff,),
            )
        if max_entries is not None:
            with self._lock:
                row = self._one(
                    "SELECT id FROM {t} ORDER BY id DESC LIMIT 1 OFFSET ?", (max_entries,)
                )
            if row is not None:
                deleted += self._delete_chunks(
                    "DELETE FROM {t} WHERE id IN "
                    "(SELECT id FROM {t} WHERE id <= ? ORDER BY id LIMIT ?)",
                    (row[0],),
                )
        return deleted

    def _delete_chunks(self, sql: str, args: tuple[Any, ...]) -> int:
        total = 0
        while True:
            with self._lock:
                count: int = self._conn.execute(
                    self._dialect.sql(sql), (*args, _PRUNE_CHUNK)
                ).rowcount
            total += count
            if count < _PRUNE_CHUNK:
                return total

    # -- reading ------------------------------------------------------------------

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
        where: list[str] = []
        args: list[Any] = []
        if object is not None:
            where += ["kind = ?", "name = ?"]
            args += [object.get("kind"), object.get("name")]
            if object.get("namespace") is not None:
                where.append("namespace = ?")
                args.append(object.get("namespace") or "")
        if since is not None:
            where.append("ts >= ?")
            args.append(since)
        if until is not None:
            where.append("ts < ?")
            args.append(until)
        if types is not None:
            kinds = list(types)
            where.append(f"type IN ({', '.join('?' * len(kinds))})")
            args += kinds
        sql = "SELECT body FROM {t}"
        if where:
            sql += " WHERE " + " AND ".join(where)
        if limit is not None:
            sql += " ORDER BY ts DESC, id DESC LIMIT ?"
            args.append(max(0, limit))
        else:
            sql += " ORDER BY ts, id"
        with self._lock:
            bodies = [row[0] for row in self._conn.execute(self._dialect.sql(sql), args)]
        if limit is not None:
            bodies.reverse()
        return [served(orjson.loads(body)) for body in bodies]

    def count(self) -> int:
        with self._lock:
            row = self._one("SELECT count(*) FROM {t}")
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Timeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _row(entry: Mapping[str, Any]) -> tuple[float, str, str, str, str, bytes]:
    ts = entry.get("ts")
    if not isinstance(ts, int | float) or isinstance(ts, bool):
        raise Invalid("want seconds since the epoch", field="ts")
    type_ = entry.get("type")
    if not isinstance(type_, str) or not type_:
        raise Invalid("required", field="type")
    about = object_of(entry)
    return (
        float(ts),
        type_,
        str(about.get("kind") or ""),
        str(about.get("namespace") or ""),
        str(about.get("name") or ""),
        orjson.dumps(entry),
    )


# -- JSON Lines -----------------------------------------------------------------------


def dump_jsonl(entries: Iterable[Mapping[str, Any]], out: IO[bytes]) -> int:
    """Write `entries` one JSON object per line; return how many."""
    count = 0
    for entry in entries:
        out.write(orjson.dumps(entry) + b"\n")
        count += 1
    return count
