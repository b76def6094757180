"""Helpers for the Autoscaler tests: a scalable test kind, a real metrics server (a child
Python process serving a Prometheus exposition and a JSON document whose value the test
sets through a file), and waits on the store's watch."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from setpoint.engine import builtin_kinds
from setpoint.model import Kind, Object, Registry, ScaleSubresource, Schema
from setpoint.store import Store


class ScaledSpec(Schema):
    replicas: int = 1


class ScaledStatus(Schema):
    replicas: int = 0
    selector: str | None = None


SCALED = Kind(
    "test.setpoint.dev/v1",
    "Scaled",
    spec=ScaledSpec,
    status=ScaledStatus,
    plural="scaleds",
    scale=ScaleSubresource(),
)


def register(registry: Registry) -> None:
    """Add `Scaled` to `registry` (what `setpoint --kinds control_autoscaler_support` calls)."""
    registry.register(SCALED)


def kinds() -> Registry:
    """Every built-in kind and `Scaled`."""
    registry = builtin_kinds()
    register(registry)
    return registry


"""A kind with a scale subresource and nothing else: what the Autoscaler scales here."""

SERVER = r"""
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VALUE_FILE = sys.argv[1]

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        with open(VALUE_FILE) as f:
            value = f.read().strip()
        if self.path == "/metrics":
            body = (
                "# HELP app_requests_in_flight Requests being served.\n"
                "# TYPE app_requests_in_flight gauge\n"
                f'app_requests_in_flight{{handler="/"}} {value}\n'
                'app_requests_in_flight{handler="/health"} 1\n'
            ).encode()
            kind = "text/plain; version=0.0.4"
        elif self.path == "/stats":
            body = json.dumps({"app": {"inflight": float(value)}}).encode()
            kind = "application/json"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@dataclass
class MetricsServer:
    """The running server: `url(path)`, and `set(value)` to change what it reports."""

    port: int
    value_file: Path

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def set(self, value: float) -> None:
        tmp = self.value_file.with_suffix(".tmp")
        tmp.write_text(f"{value}\n")
        tmp.replace(self.value_file)


@asynccontextmanager
async def metrics_server(directory: Path, value: float) -> AsyncIterator[MetricsServer]:
    """Start the metrics server reporting `value`; stop it on exit."""
    script = directory / "metrics_server.py"
    script.write_text(SERVER)
    value_file = directory / "value"
    server = MetricsServer(0, value_file)
    server.set(value)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(value_file), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 10)
        server.port = int(line)
        yield server
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


def scaled(name: str, replicas: int) -> Object:
    return {
        "apiVersion": SCALED.api_version,
        "kind": SCALED.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas},
    }


def autoscaler(name: str, target: str, metric: dict[str, Any], **spec: Any) -> Object:
    body: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": SCALED.api_version, "kind": SCALED.kind, "name": target},
        "minReplicas": 1,
        "maxReplicas": 20,
        "metric": metric,
    }
    body.update(spec)
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Autoscaler",
        "metadata": {"name": name, "namespace": "default"},
        "spec": body,
    }


async def wait_for(
    store: Store,
    api_version: str,
    kind: str,
    name: str,
    predicate: Callable[[Object], bool],
    *,
    within: float = 10.0,
) -> Object:
    """The object `name` once `predicate` holds for it, seen through the store's watch."""
    async with asyncio.timeout(within):
        _, revision = await store.list(api_version, kind, namespace="default")
        current = await store.get(api_version, kind, name, "default")
        if predicate(current):
            return current
        async for event in store.watch(api_version, kind, "default", since=revision):
            if event.object["metadata"]["name"] == name and predicate(event.object):
                return event.object
    raise AssertionError("the watch ended")  # pragma: no cover


def condition(obj: Object, type_: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions", []):
        if c["type"] == type_:
            return dict(c)
    return {}
