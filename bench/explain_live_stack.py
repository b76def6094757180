"""The second stack bench/explain_live.py runs beside the webapp, for the fault kinds that
need what the webapp does not have: a `cache` Process (a small TCP server written here)
that reads an env file (`cache.env`: its port) and a Secret (`cache-config`: `maxKeys`),
holds some memory under a `resources.limits.memory`, and is reached through the Service
`cache` by the Deployment `api` (two replicas of a small HTTP server whose `/healthz` asks
the cache through the Service; it declares `dependsOn` the cache Process and the Service,
each `Ready`).

`stage(world)` writes the two programs and the env file into the staged copy and returns
the manifests (the Secret apart: bench/chaos.py's readiness check lists only the kinds it
knows). It decides nothing and judges nothing.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

from recovery import free_port

from setpoint.testing import free_port_range

CACHE_HOLDS_MIB = 40
"""What the cache holds resident once started: under its limit, over a lowered one."""
CACHE_LIMIT = "256Mi"
DEMAND = 4
"""The api's demand (work units, in the file the Autoscaler's metric reads)."""
CAPACITY = 2
"""What one api replica serves: DEMAND / CAPACITY replicas are needed, the Autoscaler's
target per replica."""
SECRET_NAME = "cache-config"
ENV_FILE = "examples/webapp/cache.env"

CACHE = f"""
    # The cache of bench/explain_live.py's second stack: a line in, PONG out.
    import os, socket, sys

    port = os.environ.get("CACHE_PORT", "")
    max_keys = os.environ.get("CACHE_MAX_KEYS", "")
    if not max_keys.isdigit() or int(max_keys) < 1:
        print(f"FATAL: CACHE_MAX_KEYS={{max_keys!r}} is not a positive number of keys", flush=True)
        sys.exit(2)
    if not port.isdigit():
        print(f"FATAL: CACHE_PORT={{port!r}} is not a port", flush=True)
        sys.exit(2)
    table = [bytes([n % 251]) * (1 << 20) for n in range({CACHE_HOLDS_MIB})]
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", int(port)))
    server.listen(64)
    print(f"cache listening on {{port}} with {{int(max_keys)}} keys", flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            conn.settimeout(1.0)
            try:
                conn.recv(64)
                conn.sendall(b"PONG\\n")
            except OSError:
                pass
"""

API = """
    # An api replica of bench/explain_live.py's second stack: /healthz asks the cache.
    import argparse, socket
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cache-port", type=int, required=True)
    parser.add_argument("--peers", type=lambda t: range(int(t.split("-")[0]),
                                                      int(t.split("-")[1]) + 1), required=True)
    parser.add_argument("--demand", required=True)
    parser.add_argument("--capacity", type=float, required=True)
    args = parser.parse_args()

    def load() -> str | None:
        # Overloaded when the demand (a file: work units) over the replicas that answer
        # on the Deployment's ports is more than one replica's capacity.
        try:
            demand = float(open(args.demand).read().strip() or 0)
        except (OSError, ValueError):
            return None
        up = 0
        for port in args.peers:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                up += 1
            except OSError:
                pass
        if demand / max(up, 1) > args.capacity:
            return f"overloaded: demand {demand:g} on {up} replicas of capacity {args.capacity:g}"
        return None

    def cache() -> str | None:
        try:
            with socket.create_connection(("127.0.0.1", args.cache_port), timeout=1.0) as c:
                c.sendall(b"PING\\n")
                if c.recv(16).startswith(b"PONG"):
                    return None
                return "cache: no PONG"
        except OSError as error:
            return f"cache: {error.strerror or error}"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            why = (cache() or load()) if self.path == "/healthz" else None
            code = 404 if self.path not in ("/", "/healthz") else (503 if why else 200)
            body = (why or "ok").encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    print(f"api listening on {args.port}", flush=True)
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()
"""


BACKOFF = {"initialSeconds": 1, "maxSeconds": 5}
"""The cache's and the api's crash-loop back-off: short, so that a healed fault heals soon."""


def stage(
    base: Path, reset_after_s: float, taken: tuple[int, int]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Write the cache, the api, the env file and the demand file under `base` (the staged
    repository root), on free ports outside the webapp's range `taken`; (the manifests of
    Process cache, Service cache and Deployment api, which bench/chaos.py checks for
    readiness; the Secret and the Autoscaler, which it does not know)."""
    webapp = base / "examples" / "webapp"
    (webapp / "cache.py").write_text(textwrap.dedent(CACHE).lstrip())
    (webapp / "api.py").write_text(textwrap.dedent(API).lstrip())
    while True:
        cache_port, service_port, first = free_port(), free_port(), free_port_range(19)
        ports = {cache_port, service_port, *range(first, first + 19)}
        if not ports & set(range(taken[0], taken[1] + 1)) and len(ports) == 21:
            break
    (base / ENV_FILE).write_text(f"# the cache's settings\nCACHE_PORT={cache_port}\n")
    demand = base / "examples" / "webapp" / "demand"
    demand.write_text(f"{DEMAND}\n")
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET_NAME},
        "stringData": {"maxKeys": "1000"},
    }
    cache = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "cache", "labels": {"app": "cache"}},
        "spec": {
            "args": [sys.executable, "examples/webapp/cache.py"],
            "envFile": [ENV_FILE],
            "env": {
                "CACHE_MAX_KEYS": {
                    "valueFrom": {"secretKeyRef": {"name": SECRET_NAME, "key": "maxKeys"}}
                },
            },
            "ports": [cache_port],
            "resources": {"limits": {"memory": CACHE_LIMIT}},
            "readinessProbe": {"tcpSocket": {"port": cache_port}, "periodSeconds": 1},
            "backoff": {**BACKOFF, "resetAfterSeconds": reset_after_s},
        },
    }
    service = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Service",
        "metadata": {"name": "cache"},
        "spec": {"selector": {"app": "cache"}, "port": service_port},
    }
    api = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Deployment",
        "metadata": {"name": "api"},
        "spec": {
            "replicas": 2,
            "portRange": {"start": first, "end": first + 18},
            "selector": {"matchLabels": {"app": "api"}},
            "dependsOn": [
                {"kind": "Process", "name": "cache", "condition": "Ready"},
                {"kind": "Service", "name": "cache", "condition": "Ready"},
            ],
            "template": {
                "metadata": {"labels": {"app": "api"}},
                "spec": {
                    "args": [
                        sys.executable,
                        "examples/webapp/api.py",
                        "--port",
                        "$(PORT)",
                        "--cache-port",
                        str(service_port),
                        "--peers",
                        f"{first}-{first + 18}",
                        "--demand",
                        str(demand),
                        "--capacity",
                        str(CAPACITY),
                    ],
                    "readinessProbe": {
                        "httpGet": {"path": "/healthz", "port": "$(PORT)"},
                        "periodSeconds": 1,
                    },
                    "backoff": {**BACKOFF, "resetAfterSeconds": reset_after_s},
                },
            },
        },
    }
    read = f"print(open({str(demand)!r}).read().strip())"
    autoscaler = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Autoscaler",
        "metadata": {"name": "api"},
        "spec": {
            "scaleTargetRef": {"kind": "Deployment", "name": "api"},
            "minReplicas": 1,
            "maxReplicas": 4,
            "metric": {
                "command": {"args": [sys.executable, "-c", read]},
                "target": CAPACITY,
                "targetType": "AverageValue",
            },
            "periodSeconds": 1,
            "behavior": {
                "scaleDown": {"stabilizationWindowSeconds": 0},
                "scaleUp": {"stabilizationWindowSeconds": 0},
            },
        },
    }
    return [cache, service, api], [secret, autoscaler]
