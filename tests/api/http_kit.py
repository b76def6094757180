"""An API server in the test's own event loop, on a memory store, reached over loopback
with httpx; the store is at hand to check what was (not) written."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from setpoint.api.app import create_app
from setpoint.api.auth import Authenticator, Role, User
from setpoint.api.in_flight import InFlight
from setpoint.api.resources import ApiSettings
from setpoint.api.server import ApiServer, ServerLimits
from setpoint.api.tls import TlsFiles
from setpoint.api.watch import WatchCounts, WatchLimits
from setpoint.engine.kinds import builtin_kinds
from setpoint.store import open_store
from setpoint.store.base import Store

ADMIN = "admin-token"
VIEW = "view-token"
PROCESSES = "/apis/setpoint.dev/v1alpha1/namespaces/default/processes"
TIMEOUT = 60.0

QUICK = ApiSettings(
    body_timeout=1.0,
    watch=WatchLimits(max_buffered_bytes=256 * 1024, send_timeout=1.0, bookmark_interval=0.2),
)
"""Limits small enough that a test reaches them at once (a test waits for their effect,
never for a time)."""


@dataclass
class Api:
    store: Store
    server: ApiServer
    client: httpx.AsyncClient
    watches: WatchCounts
    in_flight: InFlight


@asynccontextmanager
async def running_api(
    settings: ApiSettings = QUICK,
    limits: ServerLimits | None = None,
    *,
    anonymous_read: bool = False,
    tls: TlsFiles | None = None,
) -> AsyncIterator[Api]:
    store = await open_store("memory://", builtin_kinds())
    auth = Authenticator(
        {ADMIN: User("admin", Role.ADMIN), VIEW: User("viewer", Role.VIEW)},
        anonymous_read=anonymous_read,
    )
    app = create_app(store, auth=auth, settings=settings)
    try:
        async with (
            ApiServer(app, limits=limits or ServerLimits(header_timeout=1.0), tls=tls) as server,
            httpx.AsyncClient(
                base_url=server.url,
                headers={"Authorization": f"Bearer {ADMIN}"},
                timeout=TIMEOUT,
                verify=client_context(tls) if tls is not None else True,
            ) as client,
        ):
            yield Api(store, server, client, app.state.watches, app.in_flight)
    finally:
        await store.close()


def client_context(tls: TlsFiles) -> ssl.SSLContext:
    """A client's TLS context trusting the server's certificate."""
    return ssl.create_default_context(cafile=str(tls.cert))


def process(name: str, *args: str, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": name, **metadata},
        "spec": {"args": list(args) or ["sleep", "1000"]},
    }
