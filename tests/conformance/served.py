"""A store served over the Kubernetes API for the conformance suite's `http` backend:
`setpoint.api.app.create_app` on a store of its own, under uvicorn, on a free loopback port,
in a thread with its own event loop (so the test's loop and the server's never wait on each
other). `Servers.serve(url)` starts one for the store at `url` and answers its address;
`Servers.stop_all()` stops them all (the conformance fixtures do, in a `finally`).

A served store starts at revision 2, not 0 (`SEED`: a Note created and deleted): over the
Kubernetes API `resourceVersion=0` means "the current state, then changes", so a watch
from revision 0 cannot be asked for, and a test's `since=await store.revision()` on a
fresh store must name a real revision.

Real server, real sockets, real SQLite: nothing here is a fake.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from typing import Any

from conformance_kit import API

from setpoint.model import Registry

SEED = {
    "apiVersion": API,
    "kind": "Note",
    "metadata": {"name": "seed", "namespace": "seed"},
    "spec": {},
}
"""Created and deleted in a fresh served store, so that its revision is not 0."""
START_TIMEOUT = 30.0
"""Seconds a server may take to start (never spent when all is well)."""


class Served:
    """One server, in a thread of its own, until `stop`; `settings` (`ApiSettings`) and
    `auth` (`Authenticator`) are `create_app`'s."""

    def __init__(
        self, store_url: str, registry: Registry, *, settings: Any = None, auth: Any = None
    ) -> None:
        self.store_url = store_url
        self.registry = registry
        self.settings = settings
        self.auth = auth
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted connections inherit it; without, each kept-alive request waits ~40 ms
        # for a delayed ACK (the response goes out in two writes).
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._started = threading.Event()
        self._failure: BaseException | None = None
        self._server: Any = None
        self._thread = threading.Thread(target=self._run, name=f"served {self.url}", daemon=True)
        self._thread.start()
        if not self._started.wait(START_TIMEOUT):
            raise RuntimeError(f"the server for {store_url} did not start in {START_TIMEOUT} s")
        if self._failure is not None:
            raise self._failure

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:
            self._failure = exc
        finally:
            self._started.set()

    async def _serve(self) -> None:
        import uvicorn

        from setpoint.api.app import create_app
        from setpoint.store import open_store

        store = await open_store(self.store_url, registry=self.registry)
        try:
            if await store.revision() == 0:
                await store.create(SEED)
                await store.delete(SEED["apiVersion"], SEED["kind"], "seed", "seed")
            app = create_app(store, auth=self.auth, settings=self.settings)
            config = uvicorn.Config(app, log_level="warning", lifespan="on")
            self._server = uvicorn.Server(config)
            # The socket listens already: a client that connects before uvicorn accepts
            # waits in its backlog, so the server is usable from here on.
            self._started.set()
            await self._server.serve(sockets=[self._sock])
        finally:
            await store.close()

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        self._thread.join(START_TIMEOUT)
        with contextlib.suppress(OSError):
            self._sock.close()


class Servers:
    """The servers one test started, by the store URL each serves."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._served: dict[str, Served] = {}

    def serve(self, store_url: str) -> str:
        """The address of a server of the store at `store_url` (started on first use, so
        opening a URL twice reaches one server, as a durable store is reopened)."""
        if store_url not in self._served:
            self._served[store_url] = Served(store_url, self.registry)
        return self._served[store_url].url

    def stop_all(self) -> None:
        for served in self._served.values():
            served.stop()
        self._served.clear()
