"""Helpers for the Service tests: a world with the real Process and Service controllers,
small HTTP and echo servers to run as Processes, a client that opens one new connection
per request, and waiting for an object's stored state through the store's watch."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from process_support import condition, process, process_controller, python

from setpoint.model import Object
from setpoint.store import Store
from setpoint.testing import Harness, wait_for
from setpoint.workloads.process import PROCESS, ProcessSettings
from setpoint.workloads.service import SERVICE, ServiceController
from setpoint.workloads.service import setup as setup_services

HTTP_BACKEND = """
    import os, signal, sys, threading, time
    from http.server import BaseHTTPRequestHandler, HTTPServer
    from socketserver import ThreadingMixIn

    port, name, unready = int(sys.argv[1]), sys.argv[2], sys.argv[3]

    class Server(ThreadingMixIn, HTTPServer):
        daemon_threads = False  # server_close() waits for the requests in flight
        allow_reuse_address = True

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/healthz" and os.path.exists(unready):
                code, body = 503, b"not ready"
            else:
                code, body = 200, name.encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = Server(("127.0.0.1", port), Handler)

    def drain(*_):
        # Graceful: keep serving a little (a connection may still be on its way),
        # then stop accepting and finish the requests in flight.
        def later():
            time.sleep(0.5)
            server.shutdown()
        threading.Thread(target=later).start()

    signal.signal(signal.SIGTERM, drain)
    server.serve_forever(poll_interval=0.05)
    server.server_close()
"""
"""argv[1:]: port, name (the body of every answer), a path whose existence fails /healthz."""

ECHO_BACKEND = """
    import socket, sys
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(sys.argv[1])))
    s.listen()
    while True:
        c, _ = s.accept()
        total = 0
        while data := c.recv(65536):
            total += len(data)
        c.sendall(f"got {total} bytes".encode())
        c.close()
"""
"""argv[1]: port. Reads each connection to EOF, then answers how many bytes it got."""


def http_backend(name: str, port: int, unready: Path, **spec: Any) -> Object:
    """A Process serving HTTP on `port`, Ready while `unready` does not exist."""
    obj = process(
        name,
        python(HTTP_BACKEND, str(port), name, str(unready)),
        ports=[port],
        readinessProbe={
            "httpGet": {"path": "/healthz", "port": port},
            "periodSeconds": 1,
            "failureThreshold": 1,
        },
        terminationGracePeriodSeconds=5,
        **spec,
    )
    obj["metadata"]["labels"] = {"app": "web"}
    return obj


def echo_backend(name: str, port: int) -> Object:
    obj = process(
        name,
        python(ECHO_BACKEND, str(port)),
        ports=[port],
        readinessProbe={"tcpSocket": {"port": port}, "periodSeconds": 1},
    )
    obj["metadata"]["labels"] = {"app": "echo"}
    return obj


def service(name: str, port: int, selector: dict[str, str], **spec: Any) -> Object:
    return {
        "apiVersion": SERVICE.api_version,
        "kind": SERVICE.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": selector, "port": port, **spec},
    }


def ready(obj: Object | None) -> bool:
    return condition(obj, "Ready").get("status") == "True"


def endpoint_names(obj: Object | None) -> list[str]:
    return [e["name"] for e in ((obj or {}).get("status") or {}).get("endpoints") or []]


async def http_get(port: int) -> tuple[int, str]:
    """GET / through a new connection to `port`: (status code, body); (0, "") when the
    connection is closed without an answer. Raises OSError if it cannot connect."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET / HTTP/1.0\r\nHost: service\r\n\r\n")
        await writer.drain()
        data = await reader.read()
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    if not head:
        return 0, ""
    return int(head.split()[1]), body.decode()


async def wait_for_service(
    store: Store, name: str, predicate: Callable[[Object | None], bool]
) -> Object:
    obj = await wait_for(store, SERVICE, name, predicate)
    assert obj is not None
    return obj


async def wait_for_process(
    store: Store, name: str, predicate: Callable[[Object | None], bool]
) -> Object | None:
    return await wait_for(store, PROCESS, name, predicate)


@dataclass
class ServiceWorld:
    harness: Harness
    services: ServiceController
    tmp: Path

    @property
    def store(self) -> Store:
        return self.harness.store


@asynccontextmanager
async def service_world(tmp_path: Path) -> AsyncIterator[ServiceWorld]:
    """A started harness with the real Process and Service controllers; every child is
    stopped at the end."""
    async with Harness() as harness:
        processes = process_controller(
            harness.manager, ProcessSettings(tmp_path / "state", tmp_path / "logs")
        )
        services = cast(ServiceController, setup_services(harness.manager).reconciler)
        await harness.start()
        try:
            yield ServiceWorld(harness, services, tmp_path)
        finally:
            await harness.stop()
            await processes.stop_all(grace=0)
