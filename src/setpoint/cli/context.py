"""What every verb shares: the resolved global options, opening the store, naming kinds.

No argument parsing (that is `main.py`) and no printing.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from setpoint.errors import Invalid
from setpoint.model import Kind, Registry
from setpoint.store import open_store
from setpoint.store.base import Store

DEFAULT_STORE = "sqlite:///.setpoint/state.db"
"""The store when neither --store nor SETPOINT_STORE says otherwise (relative to the cwd)."""


@dataclass(frozen=True)
class Context:
    """Global options after defaults and environment were applied."""

    store_url: str
    namespace: str
    namespace_explicit: bool
    registry: Registry

    @asynccontextmanager
    async def open_store(self) -> AsyncIterator[Store]:
        """The store, closed on the way out (a SQLite file's directory is created if missing)."""
        store = await open_store(self.store_url, registry=self.registry)
        try:
            yield store
        finally:
            await store.close()

    def namespace_of(self, kind: Kind) -> str | None:
        """The namespace to address objects of `kind` in: None when it is cluster-scoped."""
        return self.namespace if kind.namespaced else None


def kind_and_names(
    registry: Registry, kind_arg: str, names: Sequence[str]
) -> tuple[Kind, list[str]]:
    """Resolve `KIND NAME...` or `KIND/NAME...` (all arguments in the second form)."""
    if "/" not in kind_arg:
        if any("/" in n for n in names):
            raise Invalid("there is no need to give a KIND when NAME is KIND/NAME")
        return registry.resolve(kind_arg), list(names)
    refs = [kind_arg, *names]
    kinds: list[Kind] = []
    out: list[str] = []
    for ref in refs:
        kind_name, _, name = ref.partition("/")
        if not kind_name or not name or "/" in name:
            raise Invalid(f"{ref!r}: want KIND/NAME, or KIND NAME...")
        kinds.append(registry.resolve(kind_name))
        out.append(name)
    if any(k != kinds[0] for k in kinds):
        raise Invalid("give objects of one kind at a time")
    return kinds[0], out


async def until_signalled(work: Awaitable[int]) -> int:
    """Run `work`; SIGINT or SIGTERM cancel it and make the answer 0 instead of an exception."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    stopped = False

    def stop() -> None:
        nonlocal stopped
        stopped = True
        task.cancel()

    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop)
            installed.append(sig)
    try:
        return await task
    except asyncio.CancelledError:
        if stopped:
            return 0
        raise
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
