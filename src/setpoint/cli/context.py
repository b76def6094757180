"""What every verb shares: the resolved global options, finding and opening the store,
naming kinds and objects.

The store, unless --store, --server or SETPOINT_STORE names one, is `.setpoint/state.db`
in the nearest of the current directory and its parents that has a `.setpoint/` directory,
as git finds `.git` (`setpoint.cli.store_location.locate` decides, kubeconfigs included);
with none, writers (`apply`, `up`) create it in the current directory, and readers say
where they looked. Readers never create a store. A store behind an API server
(`http(s)://`) is opened with the context's `credentials`; the verbs in `LOCAL_VERBS` read
this machine's files and refuse it (`check_verb`). Names and namespaces given on the
command line are checked with the model's DNS-1123 rules before they reach a store or a
file path.

No argument parsing (that is `main.py`; `count` is a type for it) and no printing.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from setpoint.cli.store_location import DEFAULT_STORE as DEFAULT_STORE
from setpoint.cli.store_location import STORE_DIR, Location
from setpoint.cli.store_location import STORE_FILE as STORE_FILE
from setpoint.cli.store_location import find_store as find_store
from setpoint.cli.store_location import store_url_for as store_url_for
from setpoint.errors import Invalid, NotFound
from setpoint.model import Kind, Object, Registry, Selector
from setpoint.model.admission import INT64_MAX
from setpoint.model.meta import check_dns1123_label, check_dns1123_subdomain
from setpoint.store import open_reader, open_store, sqlite_path
from setpoint.store.urls import shown_url

if TYPE_CHECKING:
    from setpoint.store.base import Reader, Store
    from setpoint.store.http_wire import Credentials

LOCAL_VERBS = {
    "logs": "reads the children's log files",
    "up": "runs the engine and its children on this machine",
    "down": "stops the engine and its children on this machine",
    "timeline": "reads the timeline kept beside the store's file",
    "explain": "reads the timeline kept beside the store's file",
}
"""Verbs that need the store's machine, and why: against a server they are refused."""
STORELESS_VERBS = frozenset({"kubeconfig", "completion", "rca"})
"""Verbs that never open the store: they never ask a server for its kinds."""


@dataclass(frozen=True)
class Context:
    """Global options after defaults and environment were applied."""

    store_url: str
    namespace: str
    namespace_explicit: bool
    registry: Registry
    store_searched: tuple[str, ...] = ()
    """Where a `.setpoint/` was looked for and not found (empty if the store was named or found)."""
    credentials: Credentials | None = None
    """How to talk to the API server, when the store is one (`http(s)://`)."""

    def __post_init__(self) -> None:
        check_dns1123_label(self.namespace, "--namespace")

    @asynccontextmanager
    async def open_store(self, *, create: bool = False) -> AsyncIterator[Store]:
        """The store, closed on the way out. Only writers of desired state pass
        `create=True` (a SQLite file and its directory are then created if missing); for
        every other verb a missing store is `NotFound`, saying where it was looked for.
        Every write through it passes the admission webhooks configured in the store
        (`setpoint.runtime.webhooks`)."""
        try:
            store = await open_store(
                self.store_url, registry=self.registry, create=create, credentials=self.credentials
            )
        except NotFound as exc:
            raise NotFound(self._no_store(exc)) from None
        try:
            from setpoint.runtime.webhooks import install_webhooks

            await install_webhooks(store)  # every write of every verb passes them
            yield store
        finally:
            await store.close()

    @contextmanager
    def reader(self) -> Iterator[Reader]:
        """A synchronous `Reader` of the store, closed on the way out, for verbs that only
        read: no event loop, so no asyncio (`setpoint.store.open_reader`). A missing store
        is `NotFound`, saying where it was looked for, as `open_store`. A backend with no
        such reader (`memory://`) is read through its `Store` on an event loop of its own."""
        try:
            reader = open_reader(self.store_url, self.registry, self.credentials)
        except NotFound as exc:
            raise NotFound(self._no_store(exc)) from None
        if reader is None:
            reader = _StoreReader(self)
        try:
            yield reader
        finally:
            reader.close()

    @property
    def remote(self) -> bool:
        """The store is reached through an API server."""
        return self.store_url.startswith(("http://", "https://"))

    @property
    def store_shown(self) -> str:
        """The store's URL as messages show it: without its password (`shown_url`)."""
        return shown_url(self.store_url)

    def check_verb(self, verb: str) -> None:
        """`Invalid` if `verb` needs the store's machine (`LOCAL_VERBS`) and the store is
        behind a server."""
        if self.remote and verb in LOCAL_VERBS:
            raise Invalid(
                f"`setpoint {verb}` {LOCAL_VERBS[verb]}, so it needs a local store "
                f"(--store sqlite:///path.db, or run it where the store is), not the "
                f"server {self.store_shown}"
            )

    def require_store(self) -> None:
        """Raise `NotFound`, saying where it was looked for, if the store does not exist
        (for verbs that read files beside the store without opening it)."""
        if not self.store_url.startswith("sqlite:"):
            return
        path = sqlite_path(self.store_url)
        if not os.path.isfile(path):
            raise NotFound(self._no_store(NotFound(f"no store at {path}")))

    def _no_store(self, exc: NotFound) -> str:
        if self.store_searched:
            places = ", ".join(self.store_searched)
            return (
                f"no store found: no {STORE_DIR}/ in {places} (`setpoint apply` or "
                "`setpoint up` creates one here; --store or SETPOINT_STORE names another)"
            )
        return f"{exc}; check --store (or SETPOINT_STORE)"

    def namespace_of(self, kind: Kind) -> str | None:
        """The namespace to address objects of `kind` in: None when it is cluster-scoped."""
        return self.namespace if kind.namespaced else None


class _StoreReader:
    """A `Reader` over the context's `Store`, run on an event loop of its own."""

    def __init__(self, ctx: Context) -> None:
        import asyncio  # here: only a store without a synchronous reader needs it

        self._runner = asyncio.Runner()
        self._store = self._runner.run(self._open(ctx))

    @staticmethod
    async def _open(ctx: Context) -> Store:
        try:
            return await open_store(ctx.store_url, registry=ctx.registry, create=False)
        except NotFound as exc:
            raise NotFound(ctx._no_store(exc)) from None

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = "default"
    ) -> Object:
        return self._runner.run(self._store.get(api_version, kind, name, namespace))

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
    ) -> tuple[builtins.list[Object], int]:
        return self._runner.run(self._store.list(api_version, kind, namespace, label_selector))

    def close(self) -> None:
        try:
            self._runner.run(self._store.close())
        finally:
            self._runner.close()


def credentials_of(location: Location) -> Credentials | None:
    """The credentials for the API server `location` names (None for a local store)."""
    if not location.remote:
        return None
    from setpoint.store.http_wire import Credentials  # here: only a server's client needs it

    return Credentials(
        token=location.token,
        ca_data=location.ca_data,
        ca_file=location.ca_file,
        client_cert=location.client_cert,
        client_key=location.client_key,
        insecure=location.insecure,
        source=location.source,
    )


def learn_served_kinds(ctx: Context) -> None:
    """Add the kinds the context's server serves to its registry (discovery), so that kinds
    defined only on the server (CustomResourceDefinitions, `--kinds` of `setpoint serve`)
    can be named: the registry's `refresh` when the store is a server."""
    from setpoint.store.http import HttpReader  # here: only a server's client needs httpx

    reader = HttpReader(ctx.store_url, ctx.registry, ctx.credentials)
    try:
        reader.discover()
    finally:
        reader.close()


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


KIND_HELP = "e.g. greeting, or greeting/hello"


def add_kind_and_names(
    p: argparse.ArgumentParser, *, kind_help: str | None = KIND_HELP, optional: bool = True
) -> None:
    """The `KIND NAME...` (or `KIND/NAME...`) arguments that `kind_and_names` reads, as
    `args.kind` and `args.names`; KIND may be left out unless `optional` is False."""
    p.add_argument("kind", nargs="?" if optional else None, metavar="KIND", help=kind_help)
    p.add_argument("names", nargs="*", metavar="NAME")


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
    import asyncio  # here: a verb that reads synchronously (`get`) needs none of these
    import signal

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
