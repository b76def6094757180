"""The webapp example's migrations: apply `migrations/NNN_name.sql` to the database in version
order, each once, each in a transaction of its own, then exit.

    python3 migrate.py DB_PORT [--dbname webapp] [--migrations DIR]

It creates the database when it is missing, and records every applied file in the
`schema_migrations` table (version, name, applied_at), so a second run applies nothing;
runs at the same time are safe: each holds an advisory lock while it migrates. The schema
version is the highest version applied. A failing file is rolled back, is not recorded,
and ends the run with exit code 1 and one line on stderr naming the file and the error.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

try:
    import psycopg
    from psycopg import errors, sql
except ModuleNotFoundError as missing:  # an interpreter without the example's dependencies
    sys.exit(
        f"migrate.py: {missing.name} is not installed for {sys.executable}: run the example with"
        " ./dev or the environment it builds (.venv/bin/setpoint), or pip install 'psycopg[binary]'"
    )

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
LOCK_KEY = 0x5E7901
"""The advisory lock every migrate run holds while it migrates (any constant, shared)."""
FILE_NAME = re.compile(r"(\d+)_[\w-]+\.sql")


class MigrationError(Exception):
    """Why the run stopped, in one line."""


def migration_files(directory: Path) -> list[tuple[int, Path]]:
    """(version, file) for every `NNN_name.sql` in `directory`, by version; MigrationError
    for a .sql file with another name or two files with one version."""
    found: dict[int, Path] = {}
    for path in sorted(directory.glob("*.sql")):
        if not (match := FILE_NAME.fullmatch(path.name)):
            raise MigrationError(f"{path}: a migration's name is NNN_name.sql (001_users.sql)")
        version = int(match[1])
        if version in found:
            raise MigrationError(f"{path} and {found[version]} have the same version {version}")
        found[version] = path
    return sorted(found.items())


def one_line(error: Exception) -> str:
    """The first line of a database error (psycopg's may run to several)."""
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


def connect(port: int, dbname: str) -> psycopg.Connection[tuple[object, ...]]:
    """A connection to `dbname` on 127.0.0.1:`port`, as the postgres role, in autocommit."""
    return psycopg.connect(
        host="127.0.0.1",
        port=port,
        user="postgres",
        dbname=dbname,
        autocommit=True,
        connect_timeout=5,
    )


def ensure_database(port: int, dbname: str) -> None:
    """CREATE DATABASE `dbname` unless it exists (a concurrent creator is no error)."""
    with connect(port, "postgres") as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [dbname]).fetchone()
        if exists:
            return
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
            print(f"created database {dbname}", flush=True)
        except (errors.DuplicateDatabase, errors.UniqueViolation):
            pass  # another run created it meanwhile


def migrate(port: int, dbname: str, directory: Path) -> list[str]:
    """Apply the files of `directory` not applied yet; the names of those applied."""
    files = migration_files(directory)
    ensure_database(port, dbname)
    applied_now: list[str] = []
    with connect(port, dbname) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", [LOCK_KEY])  # released when conn closes
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY,"
            " name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        for version, path in files:
            if version in done:
                continue
            try:
                with conn.transaction():
                    conn.execute(path.read_text())  # a whole file: several statements
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                        [version, path.name],
                    )
            except psycopg.Error as error:
                raise MigrationError(f"{path.name}: {one_line(error)} (rolled back)") from None
            print(f"applied {path.name}", flush=True)
            applied_now.append(path.name)
    return applied_now


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int, help="PostgreSQL's port on 127.0.0.1")
    parser.add_argument("--dbname", default="webapp")
    parser.add_argument("--migrations", type=Path, default=MIGRATIONS)
    args = parser.parse_args()
    try:
        applied = migrate(args.port, args.dbname, args.migrations)
    except MigrationError as error:
        print(f"migrate: {error}", file=sys.stderr, flush=True)
        return 1
    except (psycopg.Error, OSError) as error:
        print(
            f"migrate: database {args.dbname} on port {args.port}: {one_line(error)}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    if not applied:
        print(f"schema of {args.dbname} is up to date: nothing to apply", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
