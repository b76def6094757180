"""The PostgreSQL backend's tables and statements (`setpoint.store.postgresql` runs them),
and a batch of decided changes laid out as their array arguments (`Batch`: each row for
`unnest`, its stored text around a placeholder resourceVersion that the server replaces
with the revision it numbers the row with).

Pure: no connection, no psycopg. The layout and why each statement is shaped as it is are
in `setpoint.store.postgresql`'s docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from setpoint.errors import Error
from setpoint.store.base import Actor, EventType, Verb
from setpoint.store.rules import Change, Key, Write
from setpoint.store.watchers import LogEntry, encoded_labels, encoded_writer

SCHEMA_VERSION = 2
"""The layout this module reads and writes; a store with a newer one is refused."""
CHANNEL = "setpoint_log"
"""The NOTIFY channel every write transaction signals with its last revision."""

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS setpoint_objects (
    api_version text NOT NULL, kind text NOT NULL, namespace text NOT NULL, name text NOT NULL,
    revision bigint NOT NULL, data text NOT NULL,
    PRIMARY KEY (api_version, kind, namespace, name))""",
    """CREATE TABLE IF NOT EXISTS setpoint_log (
    revision bigint PRIMARY KEY,
    type text NOT NULL, api_version text NOT NULL, kind text NOT NULL,
    namespace text NOT NULL, name text NOT NULL, data text NOT NULL,
    labels text, prev_labels text, writer text)""",
    "CREATE TABLE IF NOT EXISTS setpoint_meta (key text PRIMARY KEY, value bigint NOT NULL)",
    f"""INSERT INTO setpoint_meta VALUES ('revision', 0), ('compacted', 0),
    ('schema', {SCHEMA_VERSION}) ON CONFLICT DO NOTHING""",
)
MIGRATIONS = {
    2: ("ALTER TABLE setpoint_log ADD COLUMN IF NOT EXISTS writer text",),
}
"""The statements that bring a store of schema version N - 1 to N."""
SCHEMA_LOCK = 0x5E7_9017
"""Advisory lock that serializes creating the schema (several processes open at once)."""

REVISION = "SELECT value FROM setpoint_meta WHERE key = 'revision'"
COMPACTED = "SELECT value FROM setpoint_meta WHERE key = 'compacted'"
_NOW = f"({REVISION}) AS m(value)"
"""The revision row as a table `m`: inside a write transaction, the revision it advanced to."""
GET = (
    "SELECT data FROM setpoint_objects"
    " WHERE api_version = %s AND kind = %s AND namespace = %s AND name = %s"
)
_KEYS = "unnest(%s::text[], %s::text[], %s::text[], %s::text[]"
GET_MANY = (
    "SELECT o.api_version, o.kind, o.namespace, o.name, o.revision, o.data"
    f" FROM setpoint_objects o JOIN {_KEYS}) AS k(a, b, c, d)"
    " ON o.api_version = k.a AND o.kind = k.b AND o.namespace = k.c AND o.name = k.d"
)
ADVANCE = "UPDATE setpoint_meta SET value = value + %s WHERE key = 'revision' RETURNING value"
CHECK = (  # a division by zero, aborting the transaction, if an object read has changed
    "SELECT 1 / (NOT EXISTS (SELECT FROM"
    f" {_KEYS}, %s::bigint[]) AS k(a, b, c, d, rev) LEFT JOIN setpoint_objects o"
    " ON o.api_version = k.a AND o.kind = k.b AND o.namespace = k.c AND o.name = k.d"
    " WHERE coalesce(o.revision, 0) <> k.rev))::int"
)
INSERT_LOG = (
    "INSERT INTO setpoint_log SELECT m.value - %s + k.off, k.type, k.a, k.b, k.c, k.d,"
    " k.pre || (m.value - %s + k.off)::text || k.post, k.labels, k.prev, k.writer"
    f" FROM {_NOW}, unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[],"
    " %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[])"
    " AS k(off, type, a, b, c, d, pre, post, labels, prev, writer)"
)
UPSERT = (
    "INSERT INTO setpoint_objects SELECT k.a, k.b, k.c, k.d, m.value - %s + k.off,"
    " k.pre || (m.value - %s + k.off)::text || k.post"
    f" FROM {_NOW}, {_KEYS}, %s::bigint[], %s::text[], %s::text[])"
    " AS k(a, b, c, d, off, pre, post)"
    " ON CONFLICT (api_version, kind, namespace, name)"
    " DO UPDATE SET revision = excluded.revision, data = excluded.data"
)
DELETE = (
    f"DELETE FROM setpoint_objects o USING {_KEYS}) AS k(a, b, c, d)"
    " WHERE o.api_version = k.a AND o.kind = k.b AND o.namespace = k.c AND o.name = k.d"
)
RAISE_MARK = (  # keep about `history` revisions: raise the mark when twice that piled up
    f"UPDATE setpoint_meta c SET value = m.value - %s FROM {_NOW}"
    " WHERE c.key = 'compacted' AND m.value - c.value > %s RETURNING c.value"
)
NOTIFY = f"SELECT pg_notify(%s, m.value::text || %s) FROM {_NOW}"
_LOG_COLUMNS = "revision, type, api_version, kind, namespace, data, labels, prev_labels, writer"
HISTORY = (  # the mark on every row; one row of NULLs when there is no row after `after`
    f"SELECT m.value, l.* FROM ({COMPACTED}) AS m(value) LEFT JOIN"
    f" (SELECT {_LOG_COLUMNS} FROM setpoint_log WHERE revision > %s) AS l ON true"
    " ORDER BY l.revision"
)


@dataclass
class Batch:
    """The changes of one batch, decided, waiting for their revisions: each one's stored
    text around its placeholder resourceVersion, and the revision of every object it read."""

    entries: list[tuple[Change, Row]] = field(default_factory=list)
    read: dict[Key, int] = field(default_factory=dict)  # 0: it did not exist
    upserts: dict[Key, int] = field(default_factory=dict)  # key -> index of its last change
    deletes: list[Key] = field(default_factory=list)

    def add(
        self, change: Change, encoded: bytes, placeholder: str, read: int, write: Write
    ) -> None:
        pre, found, post = encoded.decode().partition(f'"{placeholder}"')
        if not found or placeholder in post:
            raise Error(f"the object holds this store's placeholder {placeholder!r}")
        labels = change.object["metadata"].get("labels")
        actor = write.options.actor
        row = Row(
            change.type,
            change.key,
            pre + '"',
            '"' + post,
            labels,
            change.prev_labels,
            write.op,
            actor,
            encoded_writer(write.op, actor),
        )
        self.read.setdefault(change.key, read)
        self.upserts.pop(change.key, None)
        if change.key in self.deletes:
            self.deletes.remove(change.key)
        if change.type == "DELETED":
            self.deletes.append(change.key)
        else:
            self.upserts[change.key] = len(self.entries)
        self.entries.append((change, row))

    def __bool__(self) -> bool:
        return bool(self.entries)

    def check_columns(self) -> list[list[Any]]:
        keys = list(self.read)
        return [*columns(keys, 4), [self.read[k] for k in keys]]

    def log_columns(self) -> list[list[Any]]:
        rows = [
            (
                i,
                r.type,
                *r.key,
                r.pre,
                r.post,
                encoded_labels(r.labels),
                encoded_labels(r.prev_labels),
                r.writer,
            )
            for i, (_, r) in enumerate(self.entries, 1)
        ]
        return columns(rows, 11)

    def upsert_columns(self) -> list[list[Any]]:
        rows = []
        for key, i in self.upserts.items():
            row = self.entries[i][1]
            rows.append((*key, i + 1, row.pre, row.post))
        return columns(rows, 7)


@dataclass(frozen=True, slots=True)
class Row:
    """A change's log row without its revision."""

    type: EventType
    key: Key
    pre: str
    post: str
    labels: dict[str, str] | None
    prev_labels: dict[str, str] | None
    verb: Verb
    actor: Actor | None
    writer: str  # `encoded_writer` of verb and actor

    def numbered(self, revision: int) -> LogEntry:
        data = f"{self.pre}{revision}{self.post}".encode()
        api_version, kind, namespace, _ = self.key
        return LogEntry(
            revision,
            self.type,
            api_version,
            kind,
            namespace,
            data,
            self.labels,
            self.prev_labels,
            self.verb,
            self.actor,
        )


def columns(rows: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Rows as `width` columns (arrays for unnest)."""
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[]] * width
