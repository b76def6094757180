"""The chain example's migration: bring the db's schema to version 1 (idempotent), then exit.

python3 migrate.py DB_PORT
"""

import socket
import sys

with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5) as conn:
    stream = conn.makefile("rw")
    stream.write("VERSION\n")
    stream.flush()
    version = int(stream.readline())
    if version < 1:
        stream.write("MIGRATE 1\n")
        stream.flush()
        assert stream.readline().strip() == "OK"
        print("migrated the schema from 0 to 1", flush=True)
    else:
        print(f"schema already at {version}: nothing to do", flush=True)
