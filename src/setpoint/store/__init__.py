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
"""

from __future__ import annotations

from typing import cast
from urllib.parse import parse_qs, urlsplit

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import (
    AlreadyExists,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    StoreClosed,
    UnknownKind,
)
from setpoint.model import Registry
from setpoint.store.base import EventType, Store, WatchEvent
from setpoint.store.rules import FOREGROUND_DELETION, ORPHAN

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
    url: str, registry: Registry | None = None, *, clock: Clock = SYSTEM_CLOCK
) -> Store:
    """Open (creating if needed) the store at `url`; see the module docstring for URLs."""
    parts = urlsplit(url)
    options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    history = _int_option(options.pop("history", "10000"), "history")
    if parts.scheme == "memory":
        _no_more(options, url)
        from setpoint.store.memory import MemoryStore

        return MemoryStore(registry, clock=clock, history=history)
    if parts.scheme == "sqlite":
        path = url.split("://", 1)[1].split("?", 1)[0]
        if not path.startswith("/") or path == "/":
            raise Invalid(
                f"{url!r}: want sqlite:///relative/path.db or sqlite:////abs/path.db", field="store"
            )
        sync = options.pop("sync", "full")
        if sync not in ("full", "normal", "off"):
            raise Invalid(f"sync={sync!r}: want full, normal or off", field="store")
        _no_more(options, url)
        from setpoint.store.sqlite import SqliteStore, Sync

        store = SqliteStore(path[1:], registry, clock=clock, history=history, sync=cast(Sync, sync))
        return await store.open()
    raise Invalid(f"{url!r}: unknown store; want memory:// or sqlite:///path.db", field="store")


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
