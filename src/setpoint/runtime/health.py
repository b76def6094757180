"""The health and metrics endpoints: a small HTTP/1.1 server on asyncio, with no web framework.

`serve()` answers three paths, as a controller-runtime manager does:

* ``GET /healthz``: 200 ``ok`` while `healthz()` is true (the process is alive
  and should not be restarted); otherwise 500 with a one-line reason.
* ``GET /readyz``: the same for `readyz()` (the process can take work).
* ``GET /metrics``: `metrics()`'s bytes, as ``text/plain; version=0.0.4``
  (the Prometheus text format, e.g. `setpoint.runtime.metrics.Metrics.render`).

Any other path is 404; another method on one of these paths is 405 (HEAD is
answered as GET without a body, as HTTP requires). A request that is not
HTTP/1.x, or whose head is too long, is 400; a client that sends no complete
head within `client_timeout` seconds gets 408. Every response closes the connection.
A check that raises is logged and answered with 500; no request can stop the
server.

Deciding the response (`_respond`) does no I/O; `serve` only reads the request
head, calls `_respond`, and writes. The checks are called on the event loop,
so they must be quick and must not block.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from http import HTTPStatus
from urllib.parse import urlsplit

__all__ = ["METRICS_CONTENT_TYPE", "serve", "split_address"]

log = logging.getLogger("setpoint.health")

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_TEXT_CONTENT_TYPE = "text/plain; charset=utf-8"

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")

MAX_LINE = 8192
"""Longest request line or header line accepted, in bytes."""
MAX_HEADERS = 100
"""Most header lines accepted in one request."""


@dataclass(frozen=True, slots=True)
class _Endpoints:
    """What the server reports: two checks and the metrics text."""

    healthz: Callable[[], bool]
    readyz: Callable[[], bool]
    metrics: Callable[[], bytes]


@dataclass(frozen=True, slots=True)
class _Response:
    status: HTTPStatus
    body: bytes
    content_type: str = _TEXT_CONTENT_TYPE
    headers: tuple[tuple[str, str], ...] = field(default=())

    def encode(self, *, head_only: bool = False) -> bytes:
        """The response as sent: status line, headers, blank line, then the body
        (left out for HEAD; Content-Length still gives its size)."""
        lines = [
            f"HTTP/1.1 {self.status.value} {self.status.phrase}",
            f"Content-Type: {self.content_type}",
            f"Content-Length: {len(self.body)}",
            "Connection: close",
            "X-Content-Type-Options: nosniff",
            *(f"{name}: {value}" for name, value in self.headers),
        ]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head if head_only else head + self.body


class _BadRequest(Exception):
    """The request head is not HTTP/1.x; the message says why (it is sent as the 400 body)."""


def _text(status: HTTPStatus, message: str, *headers: tuple[str, str]) -> _Response:
    return _Response(status, (message + "\n").encode(), headers=headers)


def _parse_request_line(line: bytes) -> tuple[str, str]:
    """``METHOD TARGET HTTP/1.x`` -> (method, path without the query). Raises `_BadRequest`."""
    try:
        decoded = line.decode("ascii").rstrip("\r\n")
    except UnicodeDecodeError:
        raise _BadRequest("request line is not ASCII") from None
    parts = decoded.split(" ")
    if len(parts) != 3 or not all(parts):
        raise _BadRequest("request line must be: METHOD TARGET HTTP/1.1")
    method, target, version = parts
    if not _TOKEN.fullmatch(method):
        raise _BadRequest(f"bad method {method[:20]!r}")
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise _BadRequest(f"unsupported protocol {version[:20]!r}: use HTTP/1.1")
    try:
        url = urlsplit(target)
    except ValueError:
        raise _BadRequest("bad request target") from None
    if not target.startswith("/") and url.scheme not in ("http", "https"):
        raise _BadRequest("request target must be a path, e.g. /healthz")
    return method, url.path or "/"


def _respond(method: str, path: str, endpoints: _Endpoints) -> _Response:
    """The response to `method path`. Calls the check or `metrics` that `path` names."""
    if path not in ("/healthz", "/readyz", "/metrics"):
        return _text(HTTPStatus.NOT_FOUND, f"no such path {path[:200]!r}: try /healthz, /readyz")
    if method not in ("GET", "HEAD"):
        return _text(
            HTTPStatus.METHOD_NOT_ALLOWED, f"{method} not allowed: use GET", ("Allow", "GET, HEAD")
        )
    if path == "/metrics":
        try:
            body = endpoints.metrics()
        except Exception as exc:
            log.exception("metrics failed")
            return _text(HTTPStatus.INTERNAL_SERVER_ERROR, f"metrics failed: {type(exc).__name__}")
        return _Response(HTTPStatus.OK, body, METRICS_CONTENT_TYPE)
    name = path[1:]
    check = endpoints.healthz if name == "healthz" else endpoints.readyz
    try:
        ok = check()
    except Exception as exc:
        log.exception("%s check raised", name)
        return _text(HTTPStatus.INTERNAL_SERVER_ERROR, f"{name} check raised {type(exc).__name__}")
    if not ok:
        return _text(HTTPStatus.INTERNAL_SERVER_ERROR, f"{name} check failed")
    return _Response(HTTPStatus.OK, b"ok")


async def serve(
    host: str | None,
    port: int,
    *,
    healthz: Callable[[], bool],
    readyz: Callable[[], bool],
    metrics: Callable[[], bytes],
    client_timeout: float = 10.0,
) -> asyncio.Server:
    """Start answering /healthz, /readyz and /metrics on `host:port` and return the server.

    `port` 0 picks a free port: read it from ``server.sockets[0].getsockname()[1]``.
    `host` None or "" listens on every interface. `client_timeout` is how long a
    client has to send its request head, and then to take the response.
    Stop it with ``server.close(); await server.wait_closed()``.
    """
    endpoints = _Endpoints(healthz=healthz, readyz=readyz, metrics=metrics)
    handler = partial(_handle, endpoints=endpoints, client_timeout=client_timeout)
    return await asyncio.start_server(handler, host, port, limit=MAX_LINE)


def split_address(address: str) -> tuple[str, int]:
    """``"host:port"`` (``"[::1]:8081"`` for IPv6; ``":8081"`` for every interface)
    -> (host, port). Raises `ValueError` naming what is wrong."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"address {address!r} must be HOST:PORT with PORT in 0-65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port_text)


async def _read_head(reader: asyncio.StreamReader) -> bytes | None:
    """The request line, after reading (and dropping) the headers up to the blank line.

    None if the client closed without sending anything. Raises `_BadRequest`.
    """
    line = b""
    for _ in range(MAX_HEADERS):  # RFC 9112: ignore empty lines before the request line
        line = await _read_line(reader)
        if not line:
            return None
        if line not in (b"\r\n", b"\n"):
            break
    else:
        raise _BadRequest("no request line")
    for _ in range(MAX_HEADERS):
        header = await _read_line(reader)
        if header in (b"\r\n", b"\n"):
            return line
        if not header.endswith(b"\n"):
            raise _BadRequest("connection closed before the end of the request head")
        if b":" not in header or header[:1] in (b" ", b"\t"):
            raise _BadRequest("malformed header line")
    raise _BadRequest(f"more than {MAX_HEADERS} header lines")


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readline()
    except ValueError:  # the line is longer than the stream's limit
        raise _BadRequest(f"request line or header longer than {MAX_LINE} bytes") from None


async def _handle(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    endpoints: _Endpoints,
    client_timeout: float,
) -> None:
    try:
        method = ""
        try:
            async with asyncio.timeout(client_timeout):
                line = await _read_head(reader)
            if line is None:
                return
            method, path = _parse_request_line(line)
        except _BadRequest as exc:
            response = _text(HTTPStatus.BAD_REQUEST, f"bad request: {exc}")
        except TimeoutError:
            response = _text(HTTPStatus.REQUEST_TIMEOUT, "no request received in time")
        else:
            response = _respond(method, path, endpoints)
        writer.write(response.encode(head_only=method == "HEAD"))
        async with asyncio.timeout(client_timeout):
            await writer.drain()
    except (ConnectionError, TimeoutError):
        writer.transport.abort()
    except Exception:
        log.exception("health endpoint: unexpected error; connection dropped")
        writer.transport.abort()
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
