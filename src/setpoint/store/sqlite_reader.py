"""Synchronous reads of a `sqlite:///path.db` store file: the read SQL the backend
(`setpoint.store.sqlite`) shares, and `SqliteReader`, the `Reader` short-lived readers use.

A `SqliteReader` is one connection and nothing else: no writer thread, no reader pool, no
event loop, so a command that only reads (`setpoint get`) imports no asyncio. Each `list`
is one read transaction (a WAL snapshot) and returns the revision it read at, as the
backend's does; it never writes, creates or changes the file (the backend, opened by a
writer, keeps the schema and the file's mode). Errors are the backend's: a file that is not
a store is `Invalid` (field `store`), a failed read `Error`.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from setpoint.errors import Error, Invalid
from setpoint.model import Object, Registry, Selector, codec
from setpoint.model.crd import CRD
from setpoint.store.keys import key_of, not_found
from setpoint.store.kinds import learn_kinds

if TYPE_CHECKING:
    import builtins

REVISION = "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'log'), 0)"
"""The store's revision: the last `log` revision ever given (compaction keeps it)."""

GET = "SELECT data FROM objects WHERE api_version=? AND kind=? AND namespace=? AND name=?"
"""One object by its key (`rules.key_of`)."""


def list_query(
    api_version: str, kind: str, namespace: str | None, *, as_bytes: bool = False
) -> tuple[str, tuple[str, ...]]:
    """The SQL and arguments that select the objects of a kind (in one namespace, unless
    None), in the order `list` returns them: their JSON as text, or (`as_bytes`) as the
    UTF-8 bytes stored."""
    column = "CAST(data AS BLOB)" if as_bytes else "data"
    query = f"SELECT {column} FROM objects WHERE api_version=? AND kind=?"
    args: tuple[str, ...] = (api_version, kind)
    if namespace is not None:
        query, args = query + " AND namespace=?", (*args, namespace)
    return query + " ORDER BY namespace, name", args


def read_crds(conn: sqlite3.Connection) -> builtins.list[Object]:
    """Every stored `CustomResourceDefinition` (`setpoint.store.kinds` learns their kinds)."""
    query, args = list_query(CRD.api_version, CRD.kind, None)
    return [codec.decode(data) for (data,) in conn.execute(query, args).fetchall()]


def revision_now(conn: sqlite3.Connection) -> int:
    revision: int = conn.execute(REVISION).fetchone()[0]
    return revision


class SqliteReader:
    """A `Reader` of the store file at `path`, which must exist (`open_reader` checks)."""

    def __init__(self, path: str, registry: Registry) -> None:
        self.registry = registry
        try:
            self._conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
            revision_now(self._conn)  # the file is a store (a database, with the log table)
            self._conn.execute("SELECT 1 FROM objects LIMIT 0")
            learn_kinds(registry, read_crds(self._conn))
        except sqlite3.Error as exc:
            raise Invalid(f"cannot open {path!r} as a SQLite store: {exc}", field="store") from None

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = "default"
    ) -> Object:
        key = key_of(self.registry.get(api_version, kind), name, namespace)
        try:
            row = self._conn.execute(GET, key).fetchone()
        except sqlite3.Error as exc:
            raise Error(f"sqlite: {exc}") from exc
        if row is None:
            raise not_found(key)
        obj: Object = codec.decode(row[0])
        return obj

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
    ) -> tuple[builtins.list[Object], int]:
        self.registry.get(api_version, kind)
        matches = Selector.of(label_selector).matches
        query, args = list_query(api_version, kind, namespace)
        try:
            self._conn.execute("BEGIN")
            try:
                revision = revision_now(self._conn)
                rows = self._conn.execute(query, args).fetchall()
            finally:
                self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise Error(f"sqlite: {exc}") from exc
        items = [codec.decode(data) for (data,) in rows]
        return [o for o in items if matches(o["metadata"].get("labels"))], revision

    def close(self) -> None:
        self._conn.close()
