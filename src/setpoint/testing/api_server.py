"""An API server for testing operators and Kubernetes clients without a cluster: the server
`setpoint serve` runs (`setpoint.api.serving.serve_api`), on a temporary store of its own,
with a kubeconfig that kopf, kr8s, lightkube, pykube-ng and the official client load as it is.

    with ApiServer() as api:               # in a thread of its own: for any test
        kr8s.api(kubeconfig=str(api.kubeconfig))
    async with ApiServer() as api:         # in the caller's event loop
        async with api.connect() as store: # setpoint's own client (`HttpStore`)
            await store.create(widget)

Each server has its own temporary directory (mode 0700): the store (SQLite, `sync=off`:
nobody needs it after a power cut), the TLS certificate (a new EC key each time) and the
kubeconfig (mode 0600, with a new random admin token and the certificate as its
`certificate-authority-data`). It listens on a free loopback port over HTTPS, as `setpoint
serve` does by default; the CRDs of the registry's Python kinds are published, as `setpoint
serve` publishes them. No controllers run (a Process stays as written), as envtest's
kube-apiserver runs none.

On exit the server stops, the store is closed and the directory removed: no thread, socket,
file or directory is left behind. `with` runs the server in a thread with an event loop of
its own, so a test's own loop (or an operator running in it) and the server never wait on
each other; `async with` runs it in the caller's loop.

Nothing here is a fake, and nothing is used by setpoint itself outside tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import yaml

from setpoint.model import Registry
from setpoint.store import Store, open_store

__all__ = ["ApiServer"]

T = TypeVar("T")

START_TIMEOUT = 30.0
"""Seconds `with ApiServer()` waits for its thread to serve (spent only on a machine far too
busy); then `TimeoutError`, and the thread stops by itself once it has started."""


class ApiServer:
    """A real API server on a temporary store; a context manager, sync (`with`: a thread of
    its own) or async (`async with`: the caller's loop), entered once. See the module
    docstring.

    `registry`: the kinds the store knows (default: every built-in kind,
    `setpoint.engine.builtin_kinds()`); a CustomResourceDefinition created through the API
    adds its kind to it. `store_url`: serve this store instead of a new temporary one (it
    is left as it is on exit).

    Once entered: `url` (https://127.0.0.1:PORT), `token` (a bearer token of the admin
    role), `kubeconfig` (the path of a kubeconfig naming both), `certificate` (the path of
    the server's self-signed certificate, PEM: trust it to verify the server) and
    `directory` (the temporary directory that holds them). `connect()` opens setpoint's own
    client of it.
    """

    def __init__(self, *, registry: Registry | None = None, store_url: str | None = None) -> None:
        self._registry = registry
        self._store_url = store_url
        self._entered = False
        self._directory: Path | None = None
        self._token: str | None = None
        self._url: str | None = None
        self._exit_stack: contextlib.AsyncExitStack | None = None
        # The thread of `with`:
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._serving = threading.Event()
        self._given_up = False
        self._failure: BaseException | None = None
        self._stop: Callable[[], object] | None = None

    @property
    def url(self) -> str:
        return _running(self._url)

    @property
    def token(self) -> str:
        return _running(self._token)

    @property
    def directory(self) -> Path:
        return _running(self._directory)

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def certificate(self) -> Path:
        return self.directory / "tls" / "server.crt"

    @contextlib.asynccontextmanager
    async def connect(self, registry: Registry | None = None) -> AsyncIterator[Store]:
        """setpoint's client of this server (`setpoint.store.http.HttpStore`: the `Store`
        contract over the API), with its token, trusting its certificate; closed on the way
        out. It knows the kinds the server serves (as data, unless `registry` has them)."""
        from setpoint.store.http_wire import Credentials

        credentials = Credentials(token=self.token, ca_file=str(self.certificate))
        store = await open_store(self.url, registry, credentials=credentials)
        try:
            yield store
        finally:
            await store.close()

    # async with: in the caller's event loop

    async def __aenter__(self) -> ApiServer:
        if self._entered:
            raise RuntimeError("an ApiServer is entered once: make a new one")
        self._entered = True
        stack = contextlib.AsyncExitStack()
        try:
            await self._start(stack)
        except BaseException:
            await stack.aclose()
            raise
        self._exit_stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._exit_stack = self._exit_stack, None
        self._url = self._token = self._directory = None
        if stack is not None:
            await stack.aclose()

    async def _start(self, stack: contextlib.AsyncExitStack) -> None:
        from setpoint.api.serving import ServeOptions, serve_api
        from setpoint.engine import builtin_kinds
        from setpoint.runtime.namespaces import ensure_system_namespaces
        from setpoint.store.kinds import publish_kinds

        directory = Path(tempfile.mkdtemp(prefix="setpoint-api-"))  # mode 0700
        stack.callback(shutil.rmtree, directory, ignore_errors=True)
        registry = self._registry if self._registry is not None else builtin_kinds()
        url = self._store_url or f"sqlite:///{directory}/store.db?sync=off"
        store = await open_store(url, registry, create=True)
        stack.push_async_callback(store.close)
        await publish_kinds(store, store.registry)  # as `setpoint serve`: the Python kinds' CRDs
        await ensure_system_namespaces(store)
        kubeconfig = directory / "kubeconfig"
        options = ServeOptions(kubeconfig=kubeconfig, tls_directory=directory / "tls")
        server = await stack.enter_async_context(serve_api(store, options))
        config = yaml.safe_load(kubeconfig.read_text())
        self._token = config["users"][0]["user"]["token"]
        self._url = server.url
        self._directory = directory

    # with: in a thread with an event loop of its own

    def __enter__(self) -> ApiServer:
        if self._entered:
            raise RuntimeError("an ApiServer is entered once: make a new one")
        self._thread = threading.Thread(target=self._serve_in_thread, name="setpoint-api-server")
        self._thread.start()
        self._serving.wait(START_TIMEOUT)
        with self._lock:
            self._given_up = not self._serving.is_set()
        if self._given_up:
            raise TimeoutError(f"the API server did not start in {START_TIMEOUT:g} s")
        if self._failure is not None:
            self._thread.join()
            raise self._failure
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._stop is not None and self._thread is not None:
            self._stop()
            self._thread.join()
        if self._failure is not None and exc is None:
            raise self._failure

    def _serve_in_thread(self) -> None:
        from setpoint.api.server import run_api_loop

        try:
            run_api_loop(self._serve_until_stopped())
        except BaseException as exc:  # raised in the caller's thread
            self._failure = exc
        finally:
            self._serving.set()

    async def _serve_until_stopped(self) -> None:
        loop = asyncio.get_running_loop()
        stopped = asyncio.Event()
        async with self:
            with self._lock:
                if self._given_up:
                    return
                self._stop = lambda: loop.call_soon_threadsafe(stopped.set)
                self._serving.set()
            await stopped.wait()


def _running(value: T | None) -> T:
    if value is None:
        raise RuntimeError("the API server is not running: use it within `with ApiServer()`")
    return value
