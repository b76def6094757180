"""Fixtures of the store conformance suite: every test here runs once per store backend.

To run the suite against a new backend, add one line to `BACKENDS`. Each store is
opened with a fresh `Registry` holding only the test kinds of `conformance_kit`.
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


BACKENDS = (
    Backend("memory", lambda d, _: "memory://", durable=False, shared=False),
    Backend("sqlite", lambda d, _: f"sqlite:///{d / 'state.db'}", durable=True, shared=True),
    Backend(
        "etcd",
        lambda d, server: server.new_url(),
        durable=True,
        shared=True,
        server="etcd_server",
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

    def new_url(self, **params: Any) -> str:
        """The URL of a fresh, empty store (each call a different one)."""
        directory = self.root / f"store-{next(self._counter)}"
        directory.mkdir()
        return with_params(self.backend.url(directory, self.server), **params)

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


@pytest.fixture
def registry() -> Registry:
    return make_registry()


@pytest.fixture(params=BACKENDS, ids=lambda b: b.name)
def backend(request: pytest.FixtureRequest) -> Backend:
    chosen: Backend = request.param
    return chosen


@pytest.fixture(params=[b for b in BACKENDS if b.durable], ids=lambda b: b.name)
def durable_backend(request: pytest.FixtureRequest) -> Backend:
    chosen: Backend = request.param
    return chosen


@pytest.fixture(params=[b for b in BACKENDS if b.shared], ids=lambda b: b.name)
def shared_backend(request: pytest.FixtureRequest) -> Backend:
    chosen: Backend = request.param
    return chosen


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
