"""One Service's proxy (I/O): a TCP listener whose every accepted connection goes to the
next endpoint round-robin, trying the next one when a connect fails, then relays bytes
both ways with back-pressure and half-closes passed on. It reads endpoints when each
connection arrives; it decides nothing about the Service's status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from setpoint.tasks import cancel_and_wait
from setpoint.workloads.service.plan import Endpoint, Target, rotation

log = logging.getLogger("setpoint.service")

BACKEND_HOST = "127.0.0.1"
"""Where endpoints are reached: Processes run on this machine."""
CONNECT_TIMEOUT_SECONDS = 1.0
"""How long a connect to one endpoint may take before the next one is tried."""
CHUNK = 64 * 1024
"""Bytes read at once from either side of a connection."""


@dataclass(frozen=True, slots=True)
class ProxyStatistics:
    """A snapshot of one Service's proxy: connections accepted, those closed because no
    endpoint accepted them (`failures`), connects to an endpoint that failed and moved
    on to the next (`retries`), and connections open now (`active`)."""

    connections: int
    failures: int
    retries: int
    active: int


class ProxyCounters:
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
        counters: ProxyCounters | None = None,
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
        await cancel_and_wait(pipes)


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
