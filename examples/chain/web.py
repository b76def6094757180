"""The chain example's web server: `/` greets, `/healthz` answers 200 only while the db is
reachable and its schema is migrated (503 and the reason otherwise).

    python3 web.py PORT DB_PORT
"""

import http.server
import socket
import sys

port, db_port = int(sys.argv[1]), int(sys.argv[2])


def db_version() -> int:
    with socket.create_connection(("127.0.0.1", db_port), timeout=1) as conn:
        stream = conn.makefile("rw")
        stream.write("VERSION\n")
        stream.flush()
        return int(stream.readline())


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/healthz":
            try:
                version = db_version()
                status, body = (200, "ok") if version >= 1 else (503, "schema not migrated")
            except OSError as exc:
                status, body = 503, f"db unreachable: {exc}"
        else:
            status, body = 200, "hello from the chain example"
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body.encode() + b"\n")

    def log_message(self, format: str, *args: object) -> None:
        print(f"{self.address_string()} {format % args}", flush=True)


with http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler) as server:
    print(f"web listening on http://127.0.0.1:{port}/", flush=True)
    server.serve_forever()
