"""The API's HTTP server: `setpoint.http_server.HttpServer` (uvicorn, with its limits) told
which requests were authenticated (the app's `request.state.user`), with the dashboard's
login beside it. `setpoint serve` and `setpoint up` share it.

    async with ApiServer(create_app(store, auth=auth), "127.0.0.1", 0) as server:
        print(server.url)          # the port the system chose
        await server.wait()        # until server.stop()

A connection counts as authenticated (for `ServerLimits.max_unauthenticated`) once the app
set a request's `state.user` to a user other than `setpoint.api.auth.ANONYMOUS` (the app
does when a token is valid, or when it checks no tokens at all). With `tls`
(`setpoint.api.tls`) it serves HTTPS: kubectl sends bearer tokens only over HTTPS; with
`client_ca` too, a client certificate that CA signed authenticates
(`setpoint.api.auth.CLIENT_SUBJECT`). No business logic here.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from setpoint.api.auth import ANONYMOUS, CLIENT_SUBJECT, User
from setpoint.api.tls import TlsFiles
from setpoint.http_server import HttpServer, ServerLimits

if TYPE_CHECKING:
    from setpoint.api.login import LoginCodes

__all__ = ["ApiServer", "ServerLimits", "run_api_loop", "serve"]

T = TypeVar("T")


def _authenticated(state: Mapping[str, Any]) -> bool:
    user = state.get("user")
    return isinstance(user, User) and user is not ANONYMOUS


class ApiServer(HttpServer):
    """The API app served on `host:port` (port 0: one the system picks) in this event loop;
    see the module docstring."""

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: ServerLimits | None = None,
        *,
        tls: TlsFiles | None = None,
        client_ca: Path | None = None,
    ) -> None:
        super().__init__(
            app,
            host,
            port,
            limits,
            certificate=(tls.cert, tls.key) if tls is not None else None,
            client_ca=client_ca,
            authenticated=_authenticated,
            subject_key=CLIENT_SUBJECT,
            name="api-server",
        )
        self.tls = tls
        self.login: LoginCodes | None = None
        """The dashboard's one-step login, when `serving.serve_api` serves one."""
        self.login_user: User | None = None
        """Whom the login link `up` and `serve` print logs in."""

    async def __aenter__(self) -> ApiServer:
        await self.start()
        return self


def run_api_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to its end on the event loop an API-only server (`setpoint serve`) runs
    on: uvloop's (libuv), whose sockets and timers cost the server less CPU per request
    than asyncio's own loop. `setpoint up` keeps asyncio's loop: its engine supervises
    processes (pidfds, subprocesses), proven on that loop."""
    import uvloop

    return uvloop.run(main)


async def serve(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 0,
    limits: ServerLimits | None = None,
    *,
    tls: TlsFiles | None = None,
) -> None:
    """Serve `app` until cancelled."""
    async with ApiServer(app, host, port, limits, tls=tls) as server:
        await server.wait()
