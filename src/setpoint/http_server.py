"""Serving an ASGI app over HTTP with uvicorn, within limits, in the caller's event loop:
the one HTTP server of setpoint. The API (`setpoint.api.server.ApiServer`, for `setpoint
serve` and `setpoint up`) and a manager's health and metrics endpoints
(`setpoint.runtime.health`) both run on it. The protocol is uvicorn's httptools one
(llhttp, in C: h11's pure-Python parsing cost more CPU per request than the request itself).

    async with HttpServer(app, "127.0.0.1", 0) as server:
        print(server.url)          # the port the system chose
        await server.wait()        # until server.stop()

Limits (`ServerLimits`), each against a client that could otherwise exhaust the server:

* `max_connections`: uvicorn's `limit_concurrency`; beyond it new requests get a 503.
* `max_unauthenticated`: connections that have made no authenticated request yet (idle
  since they opened, or whose requests had no valid token); beyond it the oldest idle
  one (else the oldest) is closed to make room for the newcomer. So connections that
  need no token (idle TLS ones cost nothing but a handshake) cannot fill
  `max_connections` and starve clients with one. Whether a request was authenticated is
  the app's to say: `HttpServer(authenticated=...)` is asked about the `state` of each
  request's ASGI scope once its response is complete (the API's app sets `state.user`).
  With no such test, no connection is ever authenticated.
* `header_timeout`: a request's headers must be complete this long after the connection
  was accepted (the TLS handshake counts: it must end within the same deadline) or the
  previous response ended; a trickle of header bytes (slowloris) or of handshake bytes is
  cut. uvicorn has no such limit of its own: `_protocol` adds it to its httptools
  protocol, and `_Server.startup` gives the handshake its deadline.
* `max_header_bytes`: the bytes of a request head still incomplete (as h11 counts them);
  beyond it the answer is a 431 and the connection is closed.
* `keep_alive_timeout`: an idle keep-alive connection is closed after it (and at once when
  the server stops: a TLS one without waiting for the client's goodbye).
* the request body's size and time limits are the app's, per request.

With `certificate` (a certificate file and its key file, PEM) it serves HTTPS. With
`client_ca` too, a client may present a certificate: one that CA did not sign fails the
handshake; the subject of one it signed, as (attribute, value) pairs such as
("commonName", "alice"), is in each request's ASGI scope under the key `subject_key`
names, for the app to authenticate.

Signals are left to the caller: the server never installs handlers of its own (`up`
has its own Ctrl-C rules). No business logic here, and nothing of setpoint's imported: it
sits at the bottom of the layers, so that the runtime may serve with it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["HttpServer", "ServerLimits"]

Authenticated = Callable[[Mapping[str, Any]], bool]
"""Whether a request was authenticated, told from its ASGI scope's `state` once answered."""


def _nobody(state: Mapping[str, Any]) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Per-connection limits of the HTTP server; see the module docstring."""

    max_connections: int = 1024
    max_unauthenticated: int = 512
    """Keep it below `max_connections`: the rest is for clients with a token."""
    header_timeout: float = 10.0
    max_header_bytes: int = 64 * 1024
    keep_alive_timeout: int = 5
    shutdown_timeout: int = 2
    """On stop, requests still running after this long (watches) are cancelled."""


_HEADERS_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: 35\r\n"
    b"connection: close\r\n\r\n"
    b"the request's headers are too large"
)


def _protocol(
    limits: ServerLimits, authenticated: Authenticated, subject_key: str
) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol (llhttp, in C) with a deadline on each request's
    headers (counted from the connection's accept for the first), a limit on their size,
    and a cap on the connections that made no authenticated request yet."""
    strangers = _Strangers(limits.max_unauthenticated)

    class LimitedProtocol(HttpToolsProtocol):
        _deadline: asyncio.TimerHandle | None = None
        _in_head = True
        """No request's head is complete yet: between requests, or within a head."""
        _head_bytes = 0
        _known = False
        """One of its requests was authenticated (it is no stranger)."""
        _subject: tuple[tuple[str, str], ...] | None = None
        """The subject of the client certificate the handshake verified, if one was given."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # Made when the connection is accepted, before its TLS handshake.
            self._accepted = self.loop.time()

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self.transport = _HeadWithBody(transport, self.loop)  # type: ignore[assignment]
            self._subject = _client_subject(transport.get_extra_info("peercert"))
            self._arm(self._accepted + limits.header_timeout)
            strangers.add(self)

        def data_received(self, data: bytes) -> None:
            if self._in_head:
                self._head_bytes += len(data)
            super().data_received(data)
            # As h11 counts: bytes read while the head is still incomplete (a chunk that
            # completes a head does not count against it).
            too_large = self._in_head and self._head_bytes > limits.max_header_bytes
            if too_large and not self.transport.is_closing():
                self.transport.write(_HEADERS_TOO_LARGE)
                self.transport.close()

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._head_bytes = 0
            self.transport.expect_head()  # type: ignore[attr-defined]
            if self._subject is not None:
                self.scope[subject_key] = self._subject  # type: ignore[literal-required]
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head = True

        def on_response_complete(self) -> None:
            self.is_known()
            super().on_response_complete()
            self._arm(self.loop.time() + limits.header_timeout)

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            strangers.remove(self)
            super().connection_lost(exc)

        def shutdown(self) -> None:
            """On the server's stop, an idle connection is cut at once: closing a TLS one
            politely waits for the client's goodbye, which a kept-alive client that reads
            nothing (kr8s or kopf between requests) never sends, and the stop with it."""
            if self.is_idle():
                self.cut()
            else:
                super().shutdown()

        def is_known(self) -> bool:
            """Whether a request on this connection was authenticated (then it leaves the
            strangers for good)."""
            if (
                not self._known
                and self.scope is not None
                and authenticated(self.scope.get("state", {}))
            ):
                self._known = True
                strangers.remove(self)
            return self._known

        def is_idle(self) -> bool:
            """Between requests: no request's response is being made."""
            return self.cycle is None or self.cycle.response_complete

        def cut(self) -> None:
            """Close at once: a TLS connection does not wait for the client's goodbye."""
            if self.scheme == "https":
                self.transport.abort()
            elif not self.transport.is_closing():
                self.transport.close()

        def _arm(self, at: float) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            if not self.transport.is_closing():
                self._deadline = self.loop.call_at(at, self._expire)

        def _expire(self) -> None:
            # A request whose head was read has a cycle whose response is not complete.
            self._deadline = None
            if self.is_idle() and not self.transport.is_closing():
                self.cut()

    return LimitedProtocol


def _client_subject(peercert: Any) -> tuple[tuple[str, str], ...] | None:
    """The (attribute, value) pairs of a verified peer certificate's subject (the form
    `ssl.SSLSocket.getpeercert` gives: a tuple of relative names, each of pairs)."""
    if not peercert:
        return None
    return tuple(
        (str(attribute), str(value))
        for relative_name in peercert.get("subject", ())
        for attribute, value in relative_name
    )


class _Connection(Protocol):
    def is_known(self) -> bool: ...
    def is_idle(self) -> bool: ...
    def cut(self) -> None: ...


class _Strangers:
    """The connections that made no authenticated request yet, oldest first; see
    `ServerLimits.max_unauthenticated`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._connections: dict[_Connection, None] = {}  # in the order they came

    def add(self, newcomer: _Connection) -> None:
        """Count `newcomer`; beyond the limit, close the oldest idle stranger (else the
        oldest) other than the newcomer."""
        self._connections[newcomer] = None
        while len(self._connections) > self.limit:
            victim = self._oldest_but(newcomer)
            if victim is None:
                return
            self.remove(victim)
            victim.cut()

    def remove(self, connection: _Connection) -> None:
        self._connections.pop(connection, None)

    def _oldest_but(self, newcomer: _Connection) -> _Connection | None:
        oldest = None
        for connection in list(self._connections):
            if connection is newcomer or connection.is_known():  # known: no longer counted
                continue
            if connection.is_idle():
                return connection
            oldest = oldest or connection
        return oldest


class _HeadWithBody:
    """A transport that holds a response's head until the next write, so that head and
    body leave in one send: uvicorn writes them apart, which cost two sends (two packets,
    two wake-ups of the reader) per response. Only the first write after a request's head
    was read (`expect_head`) is held, and never past the current step of the event loop
    (a streaming response's head) nor past `close`; a stream's chunks (a watch's events)
    go out as they are written."""

    HELD_BYTES = 64 * 1024

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._head_next = False

    def expect_head(self) -> None:
        """The next write is a response's head: hold it for its body."""
        self._head_next = True

    def write(self, data: bytes) -> None:
        head, self._head_next = self._head_next, False
        if self._held is not None:
            data, self._held = self._held + data, None
            self._transport.write(data)
        elif head and len(data) <= self.HELD_BYTES:
            self._held = data
            self._loop.call_soon(self._flush)
        else:
            self._transport.write(data)

    def _flush(self) -> None:
        if self._held is not None:
            data, self._held = self._held, None
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)  # get_extra_info, set_protocol...


class _Server(uvicorn.Server):
    """uvicorn's server on the sockets given, with a deadline on each TLS handshake."""

    def __init__(self, config: uvicorn.Config, limits: ServerLimits) -> None:
        super().__init__(config)
        self.limits = limits

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # the caller handles signals

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's, for the sockets `HttpServer` bound, with the handshake's deadline:
        the head's (a protocol is made when a connection is accepted, and counts its
        head's deadline from then, so a handshake and a head share one deadline)."""
        config = self.config
        assert sockets is not None

        def create_protocol(_loop: asyncio.AbstractEventLoop | None = None) -> asyncio.Protocol:
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config,
                server_state=self.server_state,
                app_state=self.lifespan.state,
                _loop=_loop,
            )

        loop = asyncio.get_running_loop()
        tls: dict[str, Any] = {}
        if config.ssl is not None:
            tls = {"ssl": config.ssl, "ssl_handshake_timeout": self.limits.header_timeout}
        self.servers = [
            await loop.create_server(create_protocol, sock=sock, backlog=config.backlog, **tls)
            for sock in sockets
        ]
        self.started = True


class HttpServer:
    """An ASGI app served on `host:port` (port 0: one the system picks) in this event
    loop; see the module docstring."""

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: ServerLimits | None = None,
        *,
        certificate: tuple[Path, Path] | None = None,
        client_ca: Path | None = None,
        authenticated: Authenticated = _nobody,
        subject_key: str = "client_subject",
        name: str = "http-server",
    ) -> None:
        if client_ca is not None and certificate is None:
            raise ValueError("a client CA needs TLS: certificates are checked in its handshake")
        self.limits = limits or ServerLimits()
        self.host = host
        self.name = name
        self.https = certificate is not None
        self._socket = _bind(host, port)
        self.port: int = self._socket.getsockname()[1]
        cert, key = certificate if certificate is not None else (None, None)
        config = uvicorn.Config(
            app,
            http=_protocol(self.limits, authenticated, subject_key),
            lifespan="off",
            log_level="warning",
            access_log=False,
            limit_concurrency=self.limits.max_connections,
            timeout_keep_alive=self.limits.keep_alive_timeout,
            timeout_graceful_shutdown=self.limits.shutdown_timeout,
            server_header=False,
            proxy_headers=False,  # no proxy in front: X-Forwarded-* are not read
            ssl_certfile=str(cert) if cert else None,
            ssl_keyfile=str(key) if key else None,
            ssl_ca_certs=str(client_ca) if client_ca else None,
            ssl_cert_reqs=ssl.CERT_OPTIONAL if client_ca else ssl.CERT_NONE,
        )
        self._server = _Server(config, self.limits)
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "https" if self.https else "http"
        return f"{scheme}://{host}:{self.port}"

    async def start(self) -> None:
        """Start serving; returns once the server accepts connections."""
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]), name=self.name)
        while not self._server.started:
            if self._task.done():
                await self._task  # it failed to start: raise why
                raise OSError(f"the server on {self.url} did not start")
            await asyncio.sleep(0.01)

    def stop(self) -> None:
        """Ask the server to stop (in-flight requests get `shutdown_timeout`)."""
        self._server.should_exit = True

    async def wait_forever(self) -> int:
        """Serve until cancelled (or the server stops by itself: then 1)."""
        await self.wait()
        return 1

    async def wait(self) -> None:
        """Until the server stopped (cancelling the waiter does not stop the server)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def close(self) -> None:
        """Stop serving, wait until the server stopped, and let go of the port."""
        self.stop()
        try:
            await self.wait()
        finally:
            self._socket.close()

    async def __aenter__(self) -> HttpServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP said explicitly: asyncio sets TCP_NODELAY on accepted connections only
    # then; without it each response on a kept-alive connection waits ~40 ms (Nagle and
    # delayed ACKs).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(False)
    return sock
