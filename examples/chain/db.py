"""A stand-in database for the chain example: a TCP server that answers `PING` with `PONG`
and `VERSION` with the schema version recorded in DATA_DIR/schema (0 when none).

    python3 db.py PORT DATA_DIR
"""

import pathlib
import socketserver
import sys

port, data = int(sys.argv[1]), pathlib.Path(sys.argv[2])
data.mkdir(parents=True, exist_ok=True)


class Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        for line in self.rfile:
            command = line.strip().decode()
            if command == "PING":
                self.wfile.write(b"PONG\n")
            elif command == "VERSION":
                schema = data / "schema"
                version = schema.read_text().strip() if schema.exists() else "0"
                self.wfile.write(f"{version}\n".encode())
            elif command.startswith("MIGRATE "):
                (data / "schema").write_text(command.split()[1])
                self.wfile.write(b"OK\n")


socketserver.ThreadingTCPServer.allow_reuse_address = True
with socketserver.ThreadingTCPServer(("127.0.0.1", port), Handler) as server:
    print(f"db listening on 127.0.0.1:{port}", flush=True)
    server.serve_forever()
