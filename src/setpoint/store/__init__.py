"""The store: every actor reads and writes resources here and nowhere else.

    store = await open_store("sqlite:///state.db")   # or "memory://"

The contract (revisions, compare-and-swap, ordered resumable watch, durability, and the
`WriteOptions` every write takes: a dry run, the `Actor` who writes) is in
`setpoint.store.base`; each backend keeps it, and tests/conformance/
checks that they do.

URLs
    memory://                           in this process only, not durable
    sqlite:///relative/path.db          a file (four slashes for an absolute path)
    sqlite:////abs/path.db?sync=normal  options: history=N revisions of watch history
                                        kept (default 10000); sync=full (default,
                                        fsync per commit) | normal | off
    postgresql://user@host:port/db      a PostgreSQL database that any number of processes
                                        and hosts share (also postgres://; needs the
                                        `setpoint[postgresql]` extra); options history= and
                                        sync= as above, any other is libpq's (sslmode=...)
    etcd://host:port?prefix=/setpoint/  an etcd v3 cluster that any number of processes and
                                        hosts share, keys under `prefix` (the default shown;
                                        needs the `setpoint[etcd]` extra); history= as above,
                                        sync= accepted (etcd always syncs)
    http://127.0.0.1:8443               a server speaking the Kubernetes API (`setpoint
    https://host:port                   serve`), with `credentials=` (a bearer token, how
                                        to check its certificate): `setpoint.store.http`

`open_store(url, create=False)` is how readers open a store: one that does not exist
is `NotFound`, never created empty. `open_reader(url, registry)` gives a short-lived
reader synchronous reads without an event loop (`setpoint get` imports no asyncio).
Both learn the kinds the store's CustomResourceDefinitions define (`setpoint.store.kinds`);
`read_kinds(url, registry)` does only that.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple, cast
from urllib.parse import parse_qs, urlencode, urlsplit

from setpoint import lazy
from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Invalid, NotFound
from setpoint.store.urls import shown_url

if TYPE_CHECKING:
    from setpoint.errors import AlreadyExists, Conflict, Gone, StoreClosed, UnknownKind
    from setpoint.model import Registry
    from setpoint.store.base import Actor, EventType, Reader, Store, WatchEvent, WriteOptions
    from setpoint.store.http_wire import Credentials
    from setpoint.store.postgresql import Sync as PgSync
    from setpoint.store.rules import FOREGROUND_DELETION, ORPHAN

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "setpoint.errors": ("AlreadyExists", "Conflict", "Gone", "StoreClosed", "UnknownKind"),
        "setpoint.store.base": ("Actor", "EventType", "Store", "WatchEvent", "WriteOptions"),
        "setpoint.store.rules": ("FOREGROUND_DELETION", "ORPHAN"),
    },
)

__all__ = [
    "FOREGROUND_DELETION",
    "ORPHAN",
    "Actor",
    "AlreadyExists",
    "Conflict",
    "EventType",
    "Gone",
    "Invalid",
    "NotFound",
    "Store",
    "StoreClosed",
    "UnknownKind",
    "WatchEvent",
    "WriteOptions",
    "open_store",
    "read_kinds",
]


async def open_store(
    url: str,
    registry: Registry | None = None,
    *,
    clock: Clock = SYSTEM_CLOCK,
    create: bool = True,
    credentials: Credentials | None = None,
) -> Store:
    """Open the store at `url` (see the module docstring for URLs); `Invalid` naming the
    field `store` for a URL that is not one. With `create=False` a store that does not
    exist yet is `NotFound` instead of being created: readers never create state.
    `credentials` are for a server (`http(s)://`): the server's store is never created."""
    scheme, options = _parse(url)
    if scheme in HTTP_SCHEMES:
        from setpoint.store.http import HttpStore

        return await HttpStore(url, registry, credentials).open()
    history = _int_option(options.pop("history", "10000"), "history")
    if scheme == "memory":
        _no_more(options, url)
        from setpoint.store.memory import MemoryStore

        return MemoryStore(registry, clock=clock, history=history)
    if scheme == "sqlite":
        path, sync = _sqlite(url, options, create=create)
        from setpoint.store.sqlite import SqliteStore, Sync

        store = SqliteStore(path, registry, clock=clock, history=history, sync=cast(Sync, sync))
        return await store.open()
    opening = _Opening(registry, clock, history, create)
    if scheme in ("postgresql", "postgres"):
        return await _postgresql(url, options, opening)
    if scheme == "etcd":
        return await _etcd(url, options, opening)
    raise Invalid(
        f"{shown_url(url)!r}: unknown store; want memory://, sqlite:///path.db, postgresql://host/db,"
        " etcd://host:port or http(s)://host:port",
        field="store",
    )


class _Opening(NamedTuple):
    """What `open_store` was asked besides the URL, for a backend that opens a server's
    database: the registry, the clock, the history to keep, whether to create the store.
    (A NamedTuple: `setpoint get` imports this module, and `dataclasses` costs it.)"""

    registry: Registry | None
    clock: Clock
    history: int
    create: bool


async def _postgresql(url: str, options: dict[str, str], opening: _Opening) -> Store:
    """Open a `postgresql://` store: our options taken out, the rest left to libpq."""
    sync = _sync_option(options)
    try:
        from setpoint.store.postgresql import PostgresStore
    except ImportError as exc:  # not installed, or installed without a libpq to use
        if not (exc.name or "psycopg").startswith("psycopg"):
            raise
        raise Invalid(
            f"{shown_url(url)!r}: the PostgreSQL store needs its driver (psycopg), which is not"
            " installed: install setpoint with the postgresql extra"
            " (pip install 'setpoint[postgresql]')",
            field="store",
        ) from None
    store = PostgresStore(
        _conninfo(url, options),
        opening.registry,
        clock=opening.clock,
        history=opening.history,
        sync=cast("PgSync", sync),
    )
    return await store.open(create=opening.create)


def postgres_conninfo(url: str) -> str:
    """The libpq connection string of a `postgresql://` store URL: setpoint's own options
    (`history`, `sync`) taken out, the rest left to libpq."""
    _, options = _parse(url)
    options.pop("history", None)
    options.pop("sync", None)
    return _conninfo(url, options)


def _conninfo(url: str, options: dict[str, str]) -> str:
    return urlsplit(url)._replace(query=urlencode(options)).geturl()


async def _etcd(url: str, options: dict[str, str], opening: _Opening) -> Store:
    """Open an `etcd://host:port?prefix=/p/` store."""
    parts = urlsplit(url)
    prefix = options.pop("prefix", "/setpoint/")
    _sync_option(options)  # accepted for every durable backend's URLs
    _no_more(options, url)
    if not parts.hostname or parts.path not in ("", "/") or not prefix.endswith("/"):
        raise Invalid(f"{shown_url(url)!r}: want etcd://host:port?prefix=/a/prefix/", field="store")
    try:
        from setpoint.store.etcd import EtcdStore
    except ImportError as exc:
        if not (exc.name or "grpc").startswith(("grpc", "google")):
            raise
        raise Invalid(
            f"{shown_url(url)!r}: the etcd store needs its gRPC client (grpcio and protobuf),"
            " which is not installed: install setpoint with the etcd extra"
            " (pip install 'setpoint[etcd]')",
            field="store",
        ) from None
    except Exception as exc:
        unusable = _etcd_client_unusable(url, exc)
        if unusable is None:
            raise
        raise unusable from None
    try:
        port = parts.port or 2379
    except ValueError:
        raise Invalid(f"{shown_url(url)!r}: the port is not a number", field="store") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    address = f"{host}:{port}"
    store = EtcdStore(
        address, opening.registry, prefix=prefix, clock=opening.clock, history=opening.history
    )
    return await store.open(create=opening.create)


def _etcd_client_unusable(url: str, exc: Exception) -> Invalid | None:
    """What importing the etcd store's generated stubs raised, as one line when it is one of
    their known refusals: grpcio older than they need (a RuntimeError) or protobuf (a
    VersionError), each checked as they are imported; or protobuf's process-wide registry
    already holding etcd's message names, from another etcd client's stubs loaded in this
    process (a TypeError). None for anything else."""
    reason = str(exc).split(". ")[0]
    if type(exc).__name__ == "VersionError" or (
        isinstance(exc, RuntimeError) and "grpcio>=" in reason
    ):
        return Invalid(
            f"{shown_url(url)!r}: the etcd store's gRPC client is older than it needs"
            f" ({reason}): pip install --upgrade 'setpoint[etcd]'",
            field="store",
        )
    if isinstance(exc, TypeError) and "duplicate symbol" in reason:
        return Invalid(
            f"{shown_url(url)!r}: the etcd store cannot load its gRPC messages beside another"
            f" etcd client's, loaded in this process ({reason}): use one of them per process",
            field="store",
        )
    return None


def open_reader(
    url: str, registry: Registry, credentials: Credentials | None = None
) -> Reader | None:
    """A synchronous `Reader` of the existing store at `url` (`NotFound` if there is none),
    for a short-lived reader that needs no event loop; None for a backend that has no
    such reader (`memory://`): use `open_store`. The URL is checked as `open_store` checks it."""
    scheme, options = _parse(url)
    if scheme in HTTP_SCHEMES:
        from setpoint.store.http import HttpReader

        return HttpReader(url, registry, credentials)
    _int_option(options.pop("history", "10000"), "history")
    if scheme != "sqlite":
        return None
    path, _ = _sqlite(url, options, create=False)
    from setpoint.store.sqlite_reader import SqliteReader

    return SqliteReader(path, registry)


HTTP_SCHEMES = ("http", "https")
"""The schemes of a store reached through an API server."""


def read_kinds(url: str, registry: Registry) -> None:
    """Learn the kinds the CRDs of the store at `url` define, reading synchronously; nothing
    when there is no store there or its backend has no synchronous reader."""
    from setpoint.model.crd import CRD

    registry.register(CRD)
    try:
        reader = open_reader(url, registry)  # which learns them, as `open_store` does
    except (NotFound, Invalid):
        return
    if reader is not None:
        reader.close()


def _parse(url: str) -> tuple[str, dict[str, str]]:
    """The URL's scheme and its query options."""
    try:
        parts = urlsplit(url)
        return parts.scheme, {k: v[-1] for k, v in parse_qs(parts.query).items()}
    except ValueError as exc:
        raise Invalid(f"{shown_url(url)!r}: not a URL ({exc})", field="store") from None


def _sqlite(url: str, options: dict[str, str], *, create: bool) -> tuple[str, str]:
    """The database file and the `sync` option of a `sqlite:` URL (no other option left);
    `NotFound` if the file does not exist and may not be created."""
    path = sqlite_path(url)
    sync = _sync_option(options)
    _no_more(options, url)
    if not create and not os.path.exists(path):
        where = os.path.abspath(path)
        raise NotFound(f"no store at {where} (it does not exist, and reading never creates one)")
    return path, sync


def _sync_option(options: dict[str, str]) -> str:
    """The `sync` option taken out of `options` (full by default); `Invalid` if it is not
    full, normal or off."""
    sync = options.pop("sync", "full")
    if sync not in ("full", "normal", "off"):
        raise Invalid(f"sync={sync!r}: want full, normal or off", field="store")
    return sync


def sqlite_path(url: str) -> str:
    """The file of a `sqlite:///relative.db` or `sqlite:////abs.db` URL; `Invalid` otherwise."""
    _, separator, rest = url.partition("://")
    path = rest.split("?", 1)[0]
    if not separator or not path.startswith("/") or path == "/":
        raise Invalid(
            f"{shown_url(url)!r}: want sqlite:///relative/path.db or sqlite:////abs/path.db",
            field="store",
        )
    path = path[1:]
    if path == ":memory:" or path.startswith("file:") or "\0" in path:
        raise Invalid(
            f"{shown_url(url)!r}: want a file path (for a store in memory, use memory://)",
            field="store",
        )
    if path.endswith("/"):
        raise Invalid(
            f"{shown_url(url)!r}: want the path of a file, not of a directory", field="store"
        )
    return path


def _int_option(value: str, name: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise Invalid(f"{name}={value!r}: want a positive integer", field="store")
    return number


def _no_more(options: dict[str, str], url: str) -> None:
    if options:
        raise Invalid(
            f"{shown_url(url)!r}: unknown option(s) {', '.join(sorted(options))}", field="store"
        )
