"""The webapp example's web server: records visits in PostgreSQL, says when it cannot serve,
exports Prometheus metrics, and stops without dropping a request.

    python3 app.py --port PORT --db-port DB_PORT [--db-name webapp] [--version V]

* `/` records a visit (the replica and the User-Agent) and answers 200 naming the replica
  (`$REPLICA`), the app's version (`--version`, else `$APP_VERSION`) and the visit's number;
  503 and the reason when the database cannot take it. `/?sleep=S` answers S seconds later
  (at most 60): a slow request, to watch `webapp_requests_in_flight` rise.
* `/healthz` answers 200 only when the database answers and its schema version (the
  highest version in `schema_migrations`) is at least `NEEDS_SCHEMA`; else 503 with one line
  naming the reason (`db: Connection refused`, `schema 1 < 2`). It is cheap: a query may
  take a second (a connection attempt two, the least libpq allows), and a refused
  connection answers at once.
* `/metrics`: Prometheus text; `webapp_requests_in_flight` (requests to `/` being served)
  and `webapp_requests_total` by path and status code.
* SIGTERM (or SIGINT): go on serving for `DRAIN_SECONDS` (the load balancer takes the replica
  out meanwhile), then stop accepting, finish the requests in flight, and exit 0.

Each request opens its own database connection and closes it: no idle connection outlives a
request, so none is left broken when PostgreSQL restarts, and none lingers at its shutdown.
"""

from __future__ import annotations

import argparse
import http.server
import os
import signal
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass

try:
    import psycopg
    from prometheus_client import (
        CONTENT_TYPE_LATEST,
        CollectorRegistry,
        Counter,
        Gauge,
        disable_created_metrics,
        generate_latest,
    )
except ModuleNotFoundError as missing:  # an interpreter without the example's dependencies
    sys.exit(
        f"app.py: {missing.name} is not installed for {sys.executable}: run the example with"
        " ./dev or the environment it builds (.venv/bin/setpoint), or pip install"
        " 'psycopg[binary]' prometheus-client"
    )

NEEDS_SCHEMA = 2
"""The schema version this app's queries need (migrations/002_*.sql adds `user_agent`)."""
DRAIN_SECONDS = 0.5
MAX_SLEEP_SECONDS = 60.0
DB_TIMEOUT_SECONDS = 1


@dataclass(frozen=True)
class Settings:
    """What the handlers need to know, from the command line and the environment."""

    db_port: int
    db_name: str
    replica: str
    version: str


disable_created_metrics()  # no `_created` series: Prometheus does not need them here
registry = CollectorRegistry()
IN_FLIGHT = Gauge(
    "webapp_requests_in_flight", "Requests to / being served right now.", registry=registry
)
REQUESTS = Counter(
    "webapp_requests",
    "Requests answered, by path and status code.",
    ["path", "code"],
    registry=registry,
)


def connect(settings: Settings) -> psycopg.Connection[tuple[object, ...]]:
    """A fresh connection to the app's database, for one request."""
    return psycopg.connect(
        host="127.0.0.1",
        port=settings.db_port,
        user="postgres",
        dbname=settings.db_name,
        connect_timeout=DB_TIMEOUT_SECONDS,
        options=f"-c statement_timeout={DB_TIMEOUT_SECONDS * 1000}",
        autocommit=True,
    )


def db_reason(error: Exception) -> str:
    """`db: <the gist of the error>` (`db: Connection refused`), on one line."""
    lines = str(error).strip().splitlines() or [type(error).__name__]
    gist = lines[0].rsplit(" failed: ", 1)[-1].removeprefix("FATAL:").strip()
    return f"db: {gist}"


def health(settings: Settings) -> tuple[int, str]:
    """(200, "ok") when the database answers with a schema new enough, else (503, reason)."""
    try:
        with connect(settings) as conn:
            try:
                rows = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations")
                schema = int(str(rows.fetchall()[0][0]))
            except psycopg.errors.UndefinedTable:
                schema = 0
    except psycopg.Error as error:
        return 503, db_reason(error)
    if schema < NEEDS_SCHEMA:
        return 503, f"schema {schema} < {NEEDS_SCHEMA}"
    return 200, "ok"


def visit(settings: Settings, user_agent: str) -> tuple[int, str]:
    """Record a visit: (200, greeting) or (503, the database's reason)."""
    try:
        with connect(settings) as conn:
            row = conn.execute(
                "INSERT INTO visits (replica, user_agent) VALUES (%s, %s) RETURNING id",
                [settings.replica, user_agent],
            ).fetchone()
    except psycopg.Error as error:
        return 503, db_reason(error)
    number = row[0] if row else "?"
    return 200, f"hello from {settings.replica} (version {settings.version}): visit {number}"


class Handler(http.server.BaseHTTPRequestHandler):
    """Routes GET requests; every answer is one line of text (or the metrics)."""

    settings: Settings  # set on the subclass made by `make_server`
    timeout = 10  # seconds a connection may take to send its request

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/metrics":
            self.answer(200, generate_latest(registry), CONTENT_TYPE_LATEST)
        elif url.path == "/healthz":
            status, text = health(self.settings)
            self.answer(status, f"{text}\n".encode())
        elif url.path == "/":
            IN_FLIGHT.inc()
            try:
                self.home(urllib.parse.parse_qs(url.query).get("sleep", ["0"])[0])
            finally:
                IN_FLIGHT.dec()
        else:
            self.answer(404, b"not found\n")

    def home(self, sleep: str) -> None:
        try:
            seconds = min(max(float(sleep), 0.0), MAX_SLEEP_SECONDS)
        except ValueError:
            self.answer(400, f"sleep: {sleep!r} is not a number of seconds\n".encode())
            return
        status, text = visit(self.settings, self.headers.get("User-Agent", ""))
        time.sleep(seconds)
        self.answer(status, f"{text}\n".encode())

    def answer(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        path = urllib.parse.urlsplit(self.path).path
        REQUESTS.labels(path if path in {"/", "/healthz", "/metrics"} else "other", status).inc()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        quiet = self.path in {"/healthz", "/metrics"} and str(code) == "200"
        if not quiet:  # probes and scrapes every second would drown the log
            super().log_request(code, size)

    def log_message(self, format: str, *args: object) -> None:
        print(f"{self.settings.replica} {format % args}", flush=True)


class Server(http.server.ThreadingHTTPServer):
    """A thread per request; closing the server waits for the requests in flight."""

    daemon_threads = False
    block_on_close = True


def make_server(port: int, settings: Settings) -> Server:
    handler = type("BoundHandler", (Handler,), {"settings": settings})
    return Server(("127.0.0.1", port), handler)


def serve_until_stopped(server: Server) -> int:
    """Serve until SIGTERM or SIGINT, then drain: the signal's name."""
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)  # threads started now inherit it
    serving = threading.Thread(target=server.serve_forever, name="serve")
    serving.start()
    received = signal.sigwait(stop_signals)
    print(f"{signal.Signals(received).name}: draining", flush=True)
    time.sleep(DRAIN_SECONDS)  # still serving while the load balancer takes us out
    server.shutdown()  # stop accepting
    server.server_close()  # close the socket, wait for the requests in flight
    serving.join()
    print("stopped", flush=True)
    return received


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--db-port", type=int, required=True)
    parser.add_argument("--db-name", default="webapp")
    parser.add_argument("--version", default=os.environ.get("APP_VERSION", "1"))
    args = parser.parse_args()
    settings = Settings(
        db_port=args.db_port,
        db_name=args.db_name,
        replica=os.environ.get("REPLICA", "web"),
        version=args.version,
    )
    server = make_server(args.port, settings)
    print(
        f"{settings.replica} (version {settings.version}) listening on "
        f"http://127.0.0.1:{args.port}/, database {settings.db_name} on port {settings.db_port}",
        flush=True,
    )
    serve_until_stopped(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
