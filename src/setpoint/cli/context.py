"""What every verb shares: the resolved global options, finding and opening the store,
naming kinds and objects.

The store, unless --store or SETPOINT_STORE names one, is `.setpoint/state.db` in the
nearest of the current directory and its parents that has a `.setpoint/` directory, as
git finds `.git` (`find_store`); with none, writers (`apply`, `up`) create it in the
current directory, and readers say where they looked. Readers never create a store.
Names and namespaces given on the command line are checked with the model's DNS-1123
rules before they reach a store or a file path.

No argument parsing (that is `main.py`; `count` is a type for it) and no printing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from setpoint.errors import Invalid, NotFound
from setpoint.model import Kind, Registry
from setpoint.model.admission import INT64_MAX
from setpoint.model.meta import check_dns1123_label, check_dns1123_subdomain
from setpoint.store import open_store, sqlite_path
from setpoint.store.base import Store

STORE_DIR = ".setpoint"
STORE_FILE = "state.db"
DEFAULT_STORE = f"sqlite:///{STORE_DIR}/{STORE_FILE}"
"""The store when neither --store nor SETPOINT_STORE says otherwise and no `.setpoint/`
is found in the current directory or a parent (relative to the cwd)."""


def find_store(start: Path) -> tuple[str | None, tuple[Path, ...]]:
    """The URL of the store in `.setpoint/` of `start` or its nearest parent (None if no
    directory has one), and the directories searched, nearest first."""
    searched: list[Path] = []
    for directory in (start, *start.parents):
        searched.append(directory)
        if (directory / STORE_DIR).is_dir():
            return f"sqlite:///{directory / STORE_DIR / STORE_FILE}", tuple(searched)
    return None, tuple(searched)


def store_url_for(given: str | None, start: Path) -> tuple[str, tuple[Path, ...]]:
    """The store to use: `given` (from --store or SETPOINT_STORE) if any, else the one
    `find_store` finds, else `DEFAULT_STORE`; and where it was looked for (empty when
    `given` or found)."""
    if given:
        return given, ()
    found, searched = find_store(start)
    return (found, ()) if found else (DEFAULT_STORE, searched)


@dataclass(frozen=True)
class Context:
    """Global options after defaults and environment were applied."""

    store_url: str
    namespace: str
    namespace_explicit: bool
    registry: Registry
    store_searched: tuple[Path, ...] = ()
    """Where a `.setpoint/` was looked for and not found (empty if the store was named or found)."""

    def __post_init__(self) -> None:
        check_dns1123_label(self.namespace, "--namespace")

    @asynccontextmanager
    async def open_store(self, *, create: bool = False) -> AsyncIterator[Store]:
        """The store, closed on the way out. Only writers of desired state pass
        `create=True` (a SQLite file and its directory are then created if missing); for
        every other verb a missing store is `NotFound`, saying where it was looked for."""
        try:
            store = await open_store(self.store_url, registry=self.registry, create=create)
        except NotFound as exc:
            raise NotFound(self._no_store(exc)) from None
        try:
            yield store
        finally:
            await store.close()

    def require_store(self) -> None:
        """Raise `NotFound`, saying where it was looked for, if the store does not exist
        (for verbs that read files beside the store without opening it)."""
        if not self.store_url.startswith("sqlite:"):
            return
        path = Path(sqlite_path(self.store_url))
        if not path.is_file():
            raise NotFound(self._no_store(NotFound(f"no store at {path}")))

    def _no_store(self, exc: NotFound) -> str:
        if self.store_searched:
            places = ", ".join(str(p) for p in self.store_searched)
            return (
                f"no store found: no {STORE_DIR}/ in {places} (`setpoint apply` or "
                "`setpoint up` creates one here; --store or SETPOINT_STORE names another)"
            )
        return f"{exc}; check --store (or SETPOINT_STORE)"

    def namespace_of(self, kind: Kind) -> str | None:
        """The namespace to address objects of `kind` in: None when it is cluster-scoped."""
        return self.namespace if kind.namespaced else None


def count(text: str) -> int:
    """A whole number from 0 to 2**63-1 (`--limit`, `--tail`): an argparse `type`."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: want a whole number") from None
    if not 0 <= number <= INT64_MAX:
        raise argparse.ArgumentTypeError(f"{text[:30]!r}: want a number from 0 to {INT64_MAX}")
    return number


def check_name(name: str, field: str = "NAME") -> str:
    """`name` if it is a valid object name (a DNS-1123 subdomain), else `Invalid`."""
    return check_dns1123_subdomain(name, field)


def kind_and_names(
    registry: Registry, kind_arg: str, names: Sequence[str]
) -> tuple[Kind, list[str]]:
    """Resolve `KIND NAME...` or `KIND/NAME...` (all arguments in the second form); every
    name is checked (`check_name`)."""
    kind, out = _kind_and_names(registry, kind_arg, names)
    for name in out:
        check_name(name)
    return kind, out


def _kind_and_names(
    registry: Registry, kind_arg: str, names: Sequence[str]
) -> tuple[Kind, list[str]]:
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
