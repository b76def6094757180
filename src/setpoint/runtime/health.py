"""The health and metrics endpoints of a manager: a small Starlette app, served by the server
the API runs on (`setpoint.http_server`: uvicorn, with its limits).

`health_app()` answers three paths, as a controller-runtime manager does:

* ``GET /healthz``: 200 ``ok`` while `healthz()` is true (the process is alive
  and should not be restarted); otherwise 500 with a one-line reason.
* ``GET /readyz``: the same for `readyz()` (the process can take work).
* ``GET /metrics``: `metrics()`'s bytes, as ``text/plain; version=0.0.4``
  (the Prometheus text format, e.g. `setpoint.runtime.metrics.Metrics.render`).

Any other path is 404, naming the paths there are; another method on one of these paths
is 405 (HEAD is answered as GET without a body, as HTTP requires). A check that raises is
logged and answered with 500 naming the exception's type (its message goes to the log
only); no request can stop the server. What the server itself refuses (a request that is
not HTTP/1.x: 400; a head too large: 431; a head not complete within
`ServerLimits.header_timeout`: the connection is closed) is `setpoint.http_server`'s.

`serve()` starts the app on a port and returns the running `HttpServer`. The checks are
called on the event loop, so they must be quick and must not block. uvicorn and Starlette
are imported only when the endpoints are served.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from setpoint.http_server import HttpServer, ServerLimits

__all__ = ["METRICS_CONTENT_TYPE", "health_app", "serve", "split_address"]

log = logging.getLogger("setpoint.health")

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_PATHS = ("/healthz", "/readyz", "/metrics")
_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}


def health_app(
    *,
    healthz: Callable[[], bool],
    readyz: Callable[[], bool],
    metrics: Callable[[], bytes],
) -> Starlette:
    """The ASGI app that answers /healthz, /readyz and /metrics (see the module docstring)."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route

    def text(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
        return PlainTextResponse(message + "\n", status, headers={**_HEADERS, **(headers or {})})

    def answer(name: str, passes: Callable[[], bool]) -> Response:
        try:
            ok = passes()
        except Exception as exc:
            log.exception("%s check raised", name)
            return text(500, f"{name} check raised {type(exc).__name__}")
        if not ok:
            return text(500, f"{name} check failed")
        return PlainTextResponse("ok", headers=_HEADERS)

    # async endpoints, so that the checks run on the event loop (Starlette would run a
    # plain function in a thread): they are quick and read the manager's state.
    async def healthz_route(request: Request) -> Response:
        return answer("healthz", healthz)

    async def readyz_route(request: Request) -> Response:
        return answer("readyz", readyz)

    async def metrics_route(request: Request) -> Response:
        try:
            body = metrics()
        except Exception as exc:
            log.exception("metrics failed")
            return text(500, f"metrics failed: {type(exc).__name__}")
        return Response(body, media_type=METRICS_CONTENT_TYPE, headers=_HEADERS)

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            return text(405, f"{request.method} not allowed: use GET", {"Allow": "GET, HEAD"})
        path = request.url.path[:200]
        return text(exc.status_code, f"no such path {path!r}: try {', '.join(_PATHS)}")

    return Starlette(
        routes=[
            Route("/healthz", healthz_route, methods=["GET"]),
            Route("/readyz", readyz_route, methods=["GET"]),
            Route("/metrics", metrics_route, methods=["GET"]),
        ],
        exception_handlers={HTTPException: refused},
    )


async def serve(
    host: str | None,
    port: int,
    *,
    healthz: Callable[[], bool],
    readyz: Callable[[], bool],
    metrics: Callable[[], bytes],
    limits: ServerLimits | None = None,
) -> HttpServer:
    """Start answering /healthz, /readyz and /metrics on `host:port` and return the server.

    `port` 0 picks a free port (the server's `port` says which). `host` None or "" listens
    on every IPv4 interface. Stop it with ``await server.close()``.
    """
    from setpoint.http_server import HttpServer

    app = health_app(healthz=healthz, readyz=readyz, metrics=metrics)
    server = HttpServer(app, host or "0.0.0.0", port, limits, name="health-server")
    await server.start()
    return server


def split_address(address: str) -> tuple[str, int]:
    """``"host:port"`` (``"[::1]:8081"`` for IPv6; ``":8081"`` for every interface)
    -> (host, port). Raises `ValueError` naming what is wrong."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"address {address!r} must be HOST:PORT with PORT in 0-65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port_text)
