"""Fixtures of the store conformance suite: every test here runs once per store backend.

To run the suite against a new backend, add one line to `BACKENDS`. Each store is
opened with a fresh `Registry` holding only the test kinds of `conformance_kit`.

The `http` backend is `HttpStore -> setpoint's API server (served.py) -> SQLite`: each
fresh SQLite store is served on a loopback port of its own. A test that cannot hold over
HTTP is skipped by name, with the reason, in `Backend.cannot`.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from conformance_kit import make_registry
from served import Servers

from setpoint.errors import StoreClosed
from setpoint.model import Registry


@dataclass(frozen=True)
class Backend:
    """How to reach one backend: `url(directory, server)` names a fresh, empty store."""

    name: str
    url: Callable[[Path, Any], str]
    durable: bool
    """Reopening the URL finds what was written: test_durability runs."""
    shared: bool
    """Stores opened on one URL at once are one store (processes, hosts): test_shared runs."""
    server: str | None = None
    """The session fixture of the server the backend needs (its value is `url`'s `server`);
    it skips the backend's tests when the server is not installed (fails them in CI)."""
    served: bool = False
    """The URL is served by an API server (`served.py`), which the store reaches over HTTP."""
    cannot: tuple[tuple[str, str], ...] = ()
    """(test name prefix, why it cannot hold on this backend): skipped, saying why."""


_SERVER_COMPACTS = "a client cannot compact: the API server owns its history (HttpStore.compact)"
_NO_WRITER_ON_THE_WIRE = (
    "a Kubernetes watch event carries no writer: the server's own store keeps it "
    "(tests/api/test_api_writers.py)"
)
_NO_WATCH_FROM_0 = (
    "watch(since=0) over the Kubernetes API is resourceVersion=0: the current state, then "
    "changes, not the history from revision 0 (served.py)"
)


BACKENDS = (
    Backend("memory", lambda d, _: "memory://", durable=False, shared=False),
    Backend("sqlite", lambda d, _: f"sqlite:///{d / 'state.db'}", durable=True, shared=True),
    Backend(
        "etcd",
        lambda d, server: server.new_url(),
        durable=True,
        shared=True,
        server="etcd_server",
        cannot=(
            (
                "test_a_cycle_closed_through_an_edge_the_other_opener_wrote",
                "etcd has no revision log to catch up from: an opener's dependency index learns "
                "another's edges only when it is built (setpoint.store.dependency_index)",
            ),
            (
                "test_the_actor_of_a_delete_that_removes",
                "etcd keeps the writer in the stored value, and a delete leaves none",
            ),
        ),
    ),
    Backend(
        "postgresql",
        lambda d, server: server.new_url(),
        durable=True,
        shared=True,
        server="postgresql_server",
    ),
    Backend(
        "http",
        lambda d, _: f"sqlite:///{d / 'state.db'}",
        durable=True,
        shared=True,
        served=True,
        cannot=(
            ("test_watch_before_the_compaction_mark_is_gone", _SERVER_COMPACTS),
            ("test_compaction_keeps_every_object", _SERVER_COMPACTS),
            ("test_the_actor_of_", _NO_WRITER_ON_THE_WIRE),
            ("test_relist_and_watch_from_the_list_revision_recovers", _SERVER_COMPACTS),
            ("test_a_live_watcher_keeps_streaming_across_compaction", _SERVER_COMPACTS),
            ("test_compaction_mark_survives_a_restart", _SERVER_COMPACTS),
            ("test_history_parameter_bounds_the_retained_history", _NO_WATCH_FROM_0),
            ("test_acknowledged_writes_survive_kill_9", _NO_WATCH_FROM_0),
            (
                "test_delete_without_finalizers_removes_at_once",
                "the API server answers a delete that removed the object with a Status (its uid), "
                "not the object's last state, so HttpStore.delete returns only its identity",
            ),
        ),
    ),
)


def with_params(url: str, **params: Any) -> str:
    """`url` with query parameters added (`history=5`, `sync="off"`)."""
    if not params:
        return url
    return url + ("&" if "?" in url else "?") + urlencode(params)


class StoreFactory:
    """Opens stores of one backend for one test and closes them all afterwards."""

    def __init__(
        self, backend: Backend, registry: Registry, root: Path, request: pytest.FixtureRequest
    ) -> None:
        self.backend = backend
        self.server = request.getfixturevalue(backend.server) if backend.server else None
        self.registry = registry
        self.root = root
        self._counter = itertools.count()
        self._opened: list[Any] = []
        self._servers = Servers(registry) if backend.served else None

    def new_url(self, **params: Any) -> str:
        """The URL of a fresh, empty store (each call a different one)."""
        directory = self.root / f"store-{next(self._counter)}"
        directory.mkdir()
        url = with_params(self.backend.url(directory, self.server), **params)
        return self._servers.serve(url) if self._servers is not None else url

    async def open(self, url: str | None = None) -> Any:
        from setpoint.store import open_store

        store = await open_store(url or self.new_url(), registry=self.registry)
        self._opened.append(store)
        return store

    async def close_all(self) -> None:
        for store in self._opened:
            with contextlib.suppress(StoreClosed):
                await store.close()
        self._opened.clear()
        if self._servers is not None:
            self._servers.stop_all()


@pytest.fixture
def registry() -> Registry:
    return make_registry()


def _chosen(request: pytest.FixtureRequest) -> Backend:
    """The backend of this test, skipped (saying why) if the test cannot hold on it."""
    chosen: Backend = request.param
    for prefix, why in chosen.cannot:
        if request.node.name.startswith(prefix):
            pytest.skip(f"{chosen.name}: {why}")
    return chosen


@pytest.fixture(params=BACKENDS, ids=lambda b: b.name)
def backend(request: pytest.FixtureRequest) -> Backend:
    return _chosen(request)


@pytest.fixture(params=[b for b in BACKENDS if b.durable], ids=lambda b: b.name)
def durable_backend(request: pytest.FixtureRequest) -> Backend:
    return _chosen(request)


@pytest.fixture(params=[b for b in BACKENDS if b.shared], ids=lambda b: b.name)
def shared_backend(request: pytest.FixtureRequest) -> Backend:
    return _chosen(request)


@pytest.fixture
async def stores(
    backend: Backend, registry: Registry, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[StoreFactory]:
    factory = StoreFactory(backend, registry, tmp_path, request)
    yield factory
    await factory.close_all()


@pytest.fixture
async def durable_stores(
    durable_backend: Backend, registry: Registry, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[StoreFactory]:
    factory = StoreFactory(durable_backend, registry, tmp_path, request)
    yield factory
    await factory.close_all()


@pytest.fixture
async def shared_stores(
    shared_backend: Backend, registry: Registry, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[StoreFactory]:
    factory = StoreFactory(shared_backend, registry, tmp_path, request)
    yield factory
    await factory.close_all()


@pytest.fixture
async def store(stores: StoreFactory) -> Any:
    """A fresh, empty store of the backend under test."""
    return await stores.open()
