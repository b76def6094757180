"""The store: every actor reads and writes resources here and nowhere else.

    store = await open_store("sqlite:///state.db")   # or "memory://"

The contract (revisions, compare-and-swap, ordered resumable watch, durability)
is in `setpoint.store.base`; each backend keeps it, and tests/conformance/
checks that they do.

URLs
    memory://                           in this process only, not durable
    sqlite:///relative/path.db          a file (four slashes for an absolute path)
    sqlite:////abs/path.db?sync=normal  options: history=N revisions of watch history
                                        kept (default 10000); sync=full (default,
                                        fsync per commit) | normal | off

`open_store(url, create=False)` is how readers open a store: one that does not exist
is `NotFound`, never created empty.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, cast
from urllib.parse import parse_qs, urlsplit

from setpoint import lazy
from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Invalid, NotFound

if TYPE_CHECKING:
    from setpoint.errors import AlreadyExists, Conflict, Gone, StoreClosed, UnknownKind
    from setpoint.model import Registry
    from setpoint.store.base import EventType, Store, WatchEvent
    from setpoint.store.rules import FOREGROUND_DELETION, ORPHAN

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "setpoint.errors": ("AlreadyExists", "Conflict", "Gone", "StoreClosed", "UnknownKind"),
        "setpoint.store.base": ("EventType", "Store", "WatchEvent"),
        "setpoint.store.rules": ("FOREGROUND_DELETION", "ORPHAN"),
    },
)

__all__ = [
    "FOREGROUND_DELETION",
    "ORPHAN",
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
    "open_store",
]


async def open_store(
    url: str,
    registry: Registry | None = None,
    *,
    clock: Clock = SYSTEM_CLOCK,
    create: bool = True,
) -> Store:
    """Open the store at `url` (see the module docstring for URLs); `Invalid` naming the
    field `store` for a URL that is not one. With `create=False` a store that does not
    exist yet is `NotFound` instead of being created: readers never create state."""
    try:
        parts = urlsplit(url)
        options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    except ValueError as exc:
        raise Invalid(f"{url!r}: not a URL ({exc})", field="store") from None
    history = _int_option(options.pop("history", "10000"), "history")
    if parts.scheme == "memory":
        _no_more(options, url)
        from setpoint.store.memory import MemoryStore

        return MemoryStore(registry, clock=clock, history=history)
    if parts.scheme == "sqlite":
        path = sqlite_path(url)
        sync = options.pop("sync", "full")
        if sync not in ("full", "normal", "off"):
            raise Invalid(f"sync={sync!r}: want full, normal or off", field="store")
        _no_more(options, url)
        if not create and not os.path.exists(path):  # noqa: ASYNC240
            where = os.path.abspath(path)  # noqa: ASYNC240
            raise NotFound(
                f"no store at {where} (it does not exist, and reading never creates one)"
            )
        from setpoint.store.sqlite import SqliteStore, Sync

        store = SqliteStore(path, registry, clock=clock, history=history, sync=cast(Sync, sync))
        return await store.open()
    raise Invalid(f"{url!r}: unknown store; want memory:// or sqlite:///path.db", field="store")


def sqlite_path(url: str) -> str:
    """The file of a `sqlite:///relative.db` or `sqlite:////abs.db` URL; `Invalid` otherwise."""
    _, separator, rest = url.partition("://")
    path = rest.split("?", 1)[0]
    if not separator or not path.startswith("/") or path == "/":
        raise Invalid(
            f"{url!r}: want sqlite:///relative/path.db or sqlite:////abs/path.db", field="store"
        )
    path = path[1:]
    if path == ":memory:" or path.startswith("file:") or "\0" in path:
        raise Invalid(
            f"{url!r}: want a file path (for a store in memory, use memory://)", field="store"
        )
    if path.endswith("/"):
        raise Invalid(f"{url!r}: want the path of a file, not of a directory", field="store")
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
        raise Invalid(f"{url!r}: unknown option(s) {', '.join(sorted(options))}", field="store")
