"""The `Service` kind (setpoint.dev/v1alpha1, namespaced, short name `svc`) and its
controller: one address (`host:port`, a TCP listener inside the engine) that reaches the
Ready Processes a label selector picks, as a Kubernetes Service and kube-proxy do.

`spec`: `selector` (label -> value, required, non-empty: label equality, as a Kubernetes
Service), `port` (required), `host` ("127.0.0.1"), `targetPort` (optional; default: each
selected Process's `spec.ports[0]`).

`status`: `endpoints` ([{name, port}] of the Ready Processes, by name),
`readyEndpoints`, `observedGeneration`, condition `Ready` (True with at least one
endpoint; False with reason `NoReadyEndpoints`, or `ListenFailed` with the error, e.g.
the port is in use, when `Stalled` is True too; a listen that failed is tried again
every `LISTEN_RETRY_SECONDS` and on any change).

An *endpoint* is a Process in the Service's namespace whose labels match the selector,
whose `Ready` condition is True, which is not being deleted (no `deletionTimestamp`) and
which has a port (`targetPort`, or its `spec.ports[0]`). The proxy reads endpoints from
the manager's Process cache when each connection arrives, so traffic follows readiness
at the speed of the informer, not of a reconcile: a Process marked for deletion gets no
new connection from the moment the mark reaches the cache, before its child is even
signalled.

Each accepted connection goes to the next endpoint round-robin; a connect that fails
(refused, or not accepted within `CONNECT_TIMEOUT_SECONDS`) moves on to the next one,
each tried at most once, and if none accepts, the client connection is reset (RST, as
Kubernetes rejects a connection to a Service with no endpoints). Then bytes flow both
ways until both sides are done, with back-pressure, and a half-close is passed on (EOF
from the client -> `write_eof` to the backend, and vice versa); a reset on one side
resets the other.

Decisions are pure (`target_of`, `endpoints_of`, `rotation`, `service_status`); the
edge is `ServiceProxy` (one listener and its connections) and `ServiceController` (the
reconciler: one proxy per Service, opened, moved when host or port change, closed when
the Service goes; status written). The listeners live only in this engine's memory, so
deletion needs no finalizer: a Service that is gone (or being deleted) has its listener
closed; connections already in flight finish on their own. When the manager stops, every
listener closes and connections in flight get `SHUTDOWN_GRACE_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Invalid, NotFound, TerminalError
from setpoint.model import (
    READY,
    STALLED,
    Kind,
    Object,
    PrinterColumn,
    Schema,
    get_condition,
    remove_condition,
    set_condition,
)
from setpoint.model.meta import check_label_value, check_qualified_name
from setpoint.runtime.builder import request_for
from setpoint.runtime.cache import Cache
from setpoint.runtime.controller import Controller
from setpoint.runtime.lifecycle import is_deleting
from setpoint.runtime.manager import Manager
from setpoint.runtime.predicates import generation_changed
from setpoint.runtime.reconciler import Request, Result
from setpoint.store import Store
from setpoint.workloads.process import PROCESS

__all__ = [
    "BACKEND_HOST",
    "CONNECT_TIMEOUT_SECONDS",
    "LISTEN_RETRY_SECONDS",
    "SERVICE",
    "SHUTDOWN_GRACE_SECONDS",
    "Endpoint",
    "EndpointSchema",
    "ProxyStatistics",
    "ServiceController",
    "ServiceProxy",
    "ServiceSpecSchema",
    "ServiceStatusSchema",
    "Target",
    "endpoints_of",
    "rotation",
    "selects",
    "service_status",
    "services_selecting",
    "setup",
    "target_of",
]

log = logging.getLogger("setpoint.service")

BACKEND_HOST = "127.0.0.1"
"""Where endpoints are reached: Processes run on this machine."""
CONNECT_TIMEOUT_SECONDS = 1.0
"""How long a connect to one endpoint may take before the next one is tried."""
LISTEN_RETRY_SECONDS = 5.0
"""How soon a Service whose listen failed (port in use, say) tries again."""
SHUTDOWN_GRACE_SECONDS = 2.0
"""How long connections in flight may go on once the engine stops, before they are cut."""
CHUNK = 64 * 1024
"""Bytes read at once from either side of a connection."""

# -- the kind ------------------------------------------------------------------------


class ServiceSpecSchema(Schema):
    """Where to listen, and which Processes to send connections to."""

    selector: dict[str, str]
    port: int = Field(ge=1, le=65535)
    host: str = Field(default="127.0.0.1", min_length=1)
    target_port: int | None = Field(default=None, ge=1, le=65535)

    @field_validator("selector")
    @classmethod
    def _check_selector(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise PydanticCustomError(
                "empty_selector",
                "must name at least one label (an empty selector would select every Process)",
            )
        for key, label in value.items():
            try:
                check_qualified_name(key, "selector")
                check_label_value(label, f"selector.{key}")
            except Invalid as exc:
                raise PydanticCustomError("selector", "{msg}", {"msg": str(exc)}) from None
        return value

    @field_validator("host")
    @classmethod
    def _check_host(cls, value: str) -> str:
        if any(c.isspace() for c in value):
            raise PydanticCustomError("host", "must not contain spaces")
        return value


class EndpointSchema(Schema):
    """One Ready Process behind the Service, and the port connections go to."""

    name: str
    port: int


class ServiceStatusSchema(Schema):
    """What the controller observed (see the module docstring)."""

    endpoints: list[EndpointSchema] = Field(default_factory=list)
    ready_endpoints: int = 0
    observed_generation: int | None = None
    conditions: list[dict[str, Any]] = Field(default_factory=list)


SERVICE = Kind(
    "setpoint.dev/v1alpha1",
    "Service",
    spec=ServiceSpecSchema,
    status=ServiceStatusSchema,
    namespaced=True,
    plural="services",
    short_names=("svc",),
    columns=(
        PrinterColumn("PORT", "spec.port"),
        PrinterColumn("ENDPOINTS", "status.readyEndpoints"),
    ),
)
"""The `Service` kind."""


# -- decisions (pure) ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A Ready Process (`name`) and the port its connections go to."""

    name: str
    port: int


@dataclass(frozen=True, slots=True)
class Target:
    """What one Service says: where it listens (`host`, `port`) and what it selects
    (Processes in `namespace` with every label of `selector`, reached on `target_port`
    or, when None, on each Process's `spec.ports[0]`)."""

    namespace: str
    selector: tuple[tuple[str, str], ...]
    host: str
    port: int
    target_port: int | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def selector_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.selector)


def target_of(obj: Object) -> Target:
    """The `Target` of a Service object in wire form (validated: fields present)."""
    spec = obj["spec"]
    target_port = spec.get("targetPort")
    return Target(
        namespace=obj["metadata"].get("namespace") or "",
        selector=tuple(sorted((str(k), str(v)) for k, v in spec["selector"].items())),
        host=str(spec.get("host") or "127.0.0.1"),
        port=int(spec["port"]),
        target_port=None if target_port is None else int(target_port),
    )


def selects(selector: Iterable[tuple[str, str]], labels: Mapping[str, str] | None) -> bool:
    """Whether `labels` has every label of `selector` (an empty selector selects nothing)."""
    labels = labels or {}
    pairs = list(selector)
    return bool(pairs) and all(labels.get(k) == v for k, v in pairs)


def _is_ready(obj: Object) -> bool:
    cond = get_condition(obj.get("status"), READY)
    return cond is not None and cond.get("status") == "True" and not is_deleting(obj)


def endpoints_of(processes: Iterable[Object], target: Target) -> list[Endpoint]:
    """The endpoints of `target` among `processes` (see the module docstring), by name."""
    found = []
    for obj in processes:
        meta = obj["metadata"]
        if (meta.get("namespace") or "") != target.namespace:
            continue
        if not selects(target.selector, meta.get("labels")) or not _is_ready(obj):
            continue
        port = target.target_port
        if port is None:
            ports = (obj.get("spec") or {}).get("ports") or []
            if not ports:
                continue
            port = int(ports[0])
        found.append(Endpoint(meta["name"], port))
    return sorted(found, key=lambda e: e.name)


def rotation(endpoints: Sequence[Endpoint], turn: int) -> list[Endpoint]:
    """`endpoints` in the order connection number `turn` tries them: round-robin, the
    next one first, each once."""
    if not endpoints:
        return []
    start = turn % len(endpoints)
    return [*endpoints[start:], *endpoints[:start]]


def service_status(
    previous: Mapping[str, Any] | None,
    target: Target,
    endpoints: Sequence[Endpoint],
    *,
    generation: int,
    listen_error: str | None,
    now: float,
) -> dict[str, Any]:
    """The status a Service should have: `previous` (kept for its conditions' transition
    times) updated with `endpoints` and whether listening failed (`listen_error`)."""
    status: dict[str, Any] = {
        "conditions": [dict(c) for c in (previous or {}).get("conditions") or []]
    }
    shown = [] if listen_error is not None else list(endpoints)
    status["endpoints"] = [{"name": e.name, "port": e.port} for e in shown]
    status["readyEndpoints"] = len(shown)
    status["observedGeneration"] = generation
    if listen_error is not None:
        for type_, value in ((STALLED, True), (READY, False)):
            set_condition(status, type_, value, reason="ListenFailed", message=listen_error,
                          now=now, observed_generation=generation)  # fmt: skip
        return status
    remove_condition(status, STALLED)
    if shown:
        count = f"{len(shown)} ready endpoint{'s' if len(shown) != 1 else ''}"
        set_condition(status, READY, True, reason="EndpointsReady",
                      message=f"listening on {target.address}; {count}",
                      now=now, observed_generation=generation)  # fmt: skip
    else:
        set_condition(status, READY, False, reason="NoReadyEndpoints",
                      message=f"listening on {target.address}; no Ready Process "
                      f"matches {target.selector_text}",
                      now=now, observed_generation=generation)  # fmt: skip
    return status


def services_selecting(services: Cache) -> Callable[[Object], Iterable[Request]]:
    """Map a Process to the Services (from the `services` cache) that select it."""

    def mapper(process: Object) -> Iterable[Request]:
        meta = process["metadata"]
        namespace = meta.get("namespace") or ""
        labels = meta.get("labels") or {}
        for svc in services.list(namespace):
            selector = (svc.get("spec") or {}).get("selector") or {}
            if selects(selector.items(), labels):
                yield request_for(svc)

    return mapper


# -- the proxy (I/O) -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProxyStatistics:
    """A snapshot of one Service's proxy: connections accepted, those closed because no
    endpoint accepted them (`failures`), connects to an endpoint that failed and moved
    on to the next (`retries`), and connections open now (`active`)."""

    connections: int
    failures: int
    retries: int
    active: int


class _Counters:
    """Prometheus counters for every Service of one controller (labelled `service`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.connections = Counter(
            "setpoint_service_connections_total",
            "Connections accepted by a Service",
            ["service"],
            registry=registry,
        )
        self.failures = Counter(
            "setpoint_service_connection_failures_total",
            "Connections a Service closed because no endpoint accepted them",
            ["service"],
            registry=registry,
        )
        self.retries = Counter(
            "setpoint_service_connect_retries_total",
            "Connects to an endpoint that failed, after which the next endpoint was tried",
            ["service"],
            registry=registry,
        )


EndpointLookup = Callable[[Target], list[Endpoint]]


class ServiceProxy:
    """One Service's listener and its connections.

    `target` may be replaced at any time (a new selector or targetPort applies to the
    next connection); `lookup` returns the endpoints of a target now. `open()` starts
    listening (raises `OSError`); `close_listener()` stops accepting, leaving
    connections in flight to finish. The task of each connection in flight is in
    `connections` (a set the caller may share among proxies, to wait for them all).
    """

    def __init__(
        self,
        name: str,
        target: Target,
        lookup: EndpointLookup,
        *,
        connections: set[asyncio.Task[Any]] | None = None,
        counters: _Counters | None = None,
    ) -> None:
        self.name = name
        self.target = target
        self.connections: set[asyncio.Task[Any]] = set() if connections is None else connections
        self._lookup = lookup
        self._counters = counters
        self._server: asyncio.Server | None = None
        self._turn = 0
        self._accepted = 0
        self._failures = 0
        self._retries = 0
        self._active = 0
        if counters is not None:  # every series starts at zero
            for counter in (counters.connections, counters.failures, counters.retries):
                counter.labels(name)

    @property
    def listening(self) -> tuple[str, int] | None:
        """(host, port) listened on, or None once closed."""
        if self._server is None:
            return None
        return self.target.host, self.target.port

    def statistics(self) -> ProxyStatistics:
        return ProxyStatistics(self._accepted, self._failures, self._retries, self._active)

    async def open(self) -> None:
        self._server = await asyncio.start_server(
            self._handle, self.target.host, self.target.port, limit=CHUNK
        )

    def close_listener(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()

    async def _handle(
        self, client_reader: asyncio.StreamReader, client: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.connections.add(task)
        self._accepted += 1
        self._active += 1
        if self._counters is not None:
            self._counters.connections.labels(self.name).inc()
        backend: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            backend = await self._connect()
            if backend is None:
                self._failures += 1
                if self._counters is not None:
                    self._counters.failures.labels(self.name).inc()
                return
            await _relay(client_reader, client, *backend)
        finally:
            _reset_unless_closed(client)
            if backend is not None:
                _reset_unless_closed(backend[1])
            self._active -= 1
            if task is not None:
                self.connections.discard(task)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """A connection to the first endpoint, in round-robin order, that accepts one."""
        endpoints = rotation(self._lookup(self.target), self._turn)
        self._turn += 1
        for endpoint in endpoints:
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                    return await asyncio.open_connection(BACKEND_HOST, endpoint.port, limit=CHUNK)
            except (OSError, TimeoutError) as exc:
                self._retries += 1
                if self._counters is not None:
                    self._counters.retries.labels(self.name).inc()
                log.debug("service %s: endpoint %s:%d: %s", self.name, endpoint.name,
                         endpoint.port, exc or "connect timed out")  # fmt: skip
        log.info("service %s: no ready endpoint accepted a connection (%d tried)",
                 self.name, len(endpoints))  # fmt: skip
        return None


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy `reader` to `writer` until EOF (waiting whenever `writer` is full), then
    pass the EOF on."""
    while data := await reader.read(CHUNK):
        writer.write(data)
        await writer.drain()
    if writer.can_write_eof() and not writer.is_closing():
        writer.write_eof()


async def _relay(
    client_reader: asyncio.StreamReader,
    client: asyncio.StreamWriter,
    backend_reader: asyncio.StreamReader,
    backend: asyncio.StreamWriter,
) -> None:
    """Pipe both ways until both directions have ended, or either fails; then close both."""
    pipes = [
        asyncio.create_task(_pipe(client_reader, backend)),
        asyncio.create_task(_pipe(backend_reader, client)),
    ]
    try:
        done, _ = await asyncio.wait(pipes, return_when=asyncio.FIRST_EXCEPTION)
        failed = [t for t in done if not t.cancelled() and t.exception() is not None]
        if failed:  # a reset on one side: the other is reset too
            _reset(client)
            _reset(backend)
        else:
            for writer in (client, backend):
                writer.close()
    finally:
        for task in pipes:
            task.cancel()
        await asyncio.gather(*pipes, return_exceptions=True)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close the connection with a reset (RST), so the peer sees a failure, not an end."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _reset_unless_closed(writer: asyncio.StreamWriter) -> None:
    """Reset the connection if nothing closed it yet (no endpoint, or cut at shutdown)."""
    if not writer.is_closing():
        _reset(writer)


# -- the controller ------------------------------------------------------------------


Key = tuple[str, str]


class ServiceController:
    """Keeps one `ServiceProxy` per Service listening where its spec says, and writes each
    Service's status (see the module docstring). `reconcile(request)` is the one entry
    point; `attach(manager)` wires it (what `setup` does)."""

    def __init__(
        self,
        store: Store,
        processes: Cache,
        *,
        clock: Clock = SYSTEM_CLOCK,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self._processes = processes
        self._counters = None if registry is None else _Counters(registry)
        self._proxies: dict[Key, ServiceProxy] = {}
        self._connections: set[asyncio.Task[Any]] = set()
        """Every connection in flight, through any proxy (listening or not)."""
        self.controller: Controller | None = None

    def endpoints(self, target: Target) -> list[Endpoint]:
        """The endpoints of `target` in the Process cache now."""
        if not target.selector:
            return []
        first = "=".join(target.selector[0])
        return endpoints_of(self._processes.by_index("label", first), target)

    def statistics(self, name: str, namespace: str = "default") -> ProxyStatistics | None:
        """The statistics of the Service's proxy, None if it has none (not listening)."""
        proxy = self._proxies.get((namespace, name))
        return None if proxy is None else proxy.statistics()

    # -- the reconciler --------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result | None:
        key = (request.namespace, request.name)
        try:
            obj = await self.store.get(
                SERVICE.api_version, SERVICE.kind, request.name, request.namespace or None
            )
        except NotFound:
            self._close(key)
            return None
        if is_deleting(obj):
            self._close(key)
            return None
        target = target_of(obj)
        listen_error = await self._listen(key, target)
        generation = int(obj["metadata"].get("generation", 1))
        previous = obj.get("status") or {}
        status = service_status(
            previous,
            target,
            self.endpoints(target),
            generation=generation,
            listen_error=listen_error,
            now=self.clock.now(),
        )
        if status != previous:
            obj["status"] = status
            await self.store.update_status(obj)
        if listen_error is not None:
            if self.controller is not None:
                self.controller.queue.add_after(request, LISTEN_RETRY_SECONDS)
            raise TerminalError(listen_error, reason="ListenFailed")
        return None

    async def _listen(self, key: Key, target: Target) -> str | None:
        """Make sure a proxy listens where `target` says; return why it cannot (or None)."""
        proxy = self._proxies.get(key)
        if proxy is not None and proxy.listening == (target.host, target.port):
            proxy.target = target
            return None
        self._close(key)
        proxy = ServiceProxy(
            f"{key[0]}/{key[1]}",
            target,
            self.endpoints,
            connections=self._connections,
            counters=self._counters,
        )
        try:
            await proxy.open()
        except OSError as exc:
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            return f"cannot listen on {target.address}: {reason}"
        self._proxies[key] = proxy
        log.info("service %s/%s: listening on %s", key[0], key[1], target.address)
        return None

    def _close(self, key: Key) -> None:
        proxy = self._proxies.pop(key, None)
        if proxy is None:
            return
        proxy.close_listener()
        log.info("service %s/%s: stopped listening on %s", key[0], key[1], proxy.target.address)

    # -- wiring and shutdown ---------------------------------------------------------

    def attach(self, manager: Manager) -> Controller:
        """Wire this reconciler into `manager`: its controller (which a Process change
        wakes for every Service selecting that Process, before and after the change),
        and a runnable that closes every listener when the manager stops."""
        services = manager.cache(SERVICE)
        controller = (
            manager.controller("service")
            .for_(SERVICE, predicates=[generation_changed])
            .watches(PROCESS, services_selecting(services))
            .max_concurrent(4)
            .complete(self)
        )
        self.controller = controller
        manager.add_runnable(self.close_on_stop)
        return controller

    async def close_on_stop(self) -> None:
        """Wait until cancelled (the manager stopping), then `close_all`."""
        try:
            await asyncio.Event().wait()
        finally:
            await self.close_all()

    async def close_all(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """Stop listening everywhere; give connections in flight `grace` seconds to end,
        then cut them."""
        for key in list(self._proxies):
            self._close(key)
        tasks = set(self._connections)
        if not tasks:
            return
        _, late = await asyncio.wait(tasks, timeout=grace)
        for task in late:
            task.cancel()
        if late:
            log.info("services: %d connections cut at shutdown", len(late))
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*late, return_exceptions=True)


def setup(manager: Manager) -> Controller:
    """Add the Service controller to `manager`; return the controller. Its metrics go to
    the manager's Prometheus registry (`setpoint_service_connections_total{service}`,
    `setpoint_service_connection_failures_total{service}`,
    `setpoint_service_connect_retries_total{service}`)."""
    reconciler = ServiceController(
        manager.store,
        manager.cache(PROCESS),
        clock=manager.clock,
        registry=None if manager.metrics is None else manager.metrics.registry,
    )
    return reconciler.attach(manager)
