"""examples/webapp, part by part, against a real PostgreSQL: pg.py finds the binaries (or says
how to install them) and runs the server; migrate.py applies each migration once, even when
runs race; app.py's /healthz follows the database and the schema, / records visits, /metrics
counts requests in flight, and SIGTERM drains before exiting.

One server serves the module (`running_postgres`); each test works in a database of its own.
Waits are on conditions with deadlines; a slow request (`/?sleep=S`) stays in flight long
enough to be seen, and what is asserted is what the world shows, not how long it took.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from webapp_support import (
    APP,
    MIGRATE,
    MIGRATIONS,
    PG,
    App,
    Postgres,
    free_port,
    migrate,
    require_postgresql,
    run_script,
    running_app,
    running_postgres,
    wait_until,
)


@pytest.fixture(scope="module")
def postgres() -> Iterator[Postgres]:
    with running_postgres() as server:
        yield server


@pytest.fixture
def dbname() -> str:
    return f"webapp_{uuid.uuid4().hex[:12]}"


def schema_rows(server: Postgres, dbname: str) -> list[tuple[object, ...]]:
    with server.connect(dbname) as conn:
        return conn.execute(
            "SELECT version, name, applied_at FROM schema_migrations ORDER BY version"
        ).fetchall()


# -- pg.py ---------------------------------------------------------------------------------


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_pg_bin_without_postgresql_prints_how_to_install_it(tmp_path: Path) -> None:
    found = run_script(PG, "bin", "postgres", env={"PG_SEARCH_ROOT": str(tmp_path)})
    assert found.returncode == 2
    assert found.stdout == ""
    [line] = found.stderr.splitlines()
    assert "postgres not found" in line
    for command in (
        "apt-get install postgresql",
        "dnf install postgresql-server",
        "brew install postgresql",
    ):
        assert command in line


def test_pg_bin_looks_where_distributions_put_postgresql(tmp_path: Path) -> None:
    root = tmp_path / "root"
    env = {"PG_SEARCH_ROOT": str(root)}
    source_built = executable(root / "usr/local/pgsql/bin/postgres")
    assert run_script(PG, "bin", "postgres", env=env).stdout.strip() == str(source_built)
    for version in ("9.6", "15", "10"):  # 15 is the highest, though "9.6" sorts last as text
        executable(root / f"usr/lib/postgresql/{version}/bin/postgres")
    found = run_script(PG, "bin", "postgres", env=env)
    assert found.stdout.strip() == str(root / "usr/lib/postgresql/15/bin/postgres")
    on_path = executable(tmp_path / "path" / "postgres")
    found = run_script(PG, "bin", "postgres", env={**env, "PATH": str(on_path.parent)})
    assert found.stdout.strip() == str(on_path)


def test_pg_serve_refuses_a_directory_without_a_cluster(tmp_path: Path) -> None:
    served = run_script(PG, "serve", tmp_path / "nothing", "54321")
    assert served.returncode == 1
    assert served.stderr.strip().endswith(f"run `pg.py init {tmp_path / 'nothing'}`")


def test_pg_init_is_a_no_op_on_an_initialised_cluster(postgres: Postgres) -> None:
    version = (postgres.datadir / "PG_VERSION").read_text()
    again = run_script(PG, "init", postgres.datadir)
    assert again.returncode == 0
    assert "nothing to do" in again.stdout
    assert (postgres.datadir / "PG_VERSION").read_text() == version
    info = postgres.datadir.stat()
    assert stat.S_IMODE(info.st_mode) == 0o700
    if os.geteuid() == 0:  # PostgreSQL refuses root: the cluster belongs to postgres
        assert pwd.getpwuid(info.st_uid).pw_name == "postgres"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the cluster to the postgres user")
def test_pg_as_root_in_a_private_directory_keeps_the_cluster_where_postgres_reaches_it(
    tmp_path: Path,
) -> None:
    """`.setpoint/` is 0700, as are `mktemp -d` and root's home: the postgres user cannot
    reach a data directory there, so the cluster lives under its home, linked from there."""
    require_postgresql()
    private = tmp_path / ".setpoint"
    private.mkdir(mode=0o700)
    datadir = private / "webapp-pg"
    init = run_script(PG, "init", datadir, "--no-sync")
    cluster = datadir.resolve()
    try:
        assert init.returncode == 0, init.stdout + init.stderr
        assert datadir.is_symlink()
        assert cluster.parent == Path(pwd.getpwnam("postgres").pw_dir) / "setpoint"
        assert pwd.getpwuid(cluster.stat().st_uid).pw_name == "postgres"
        again = run_script(PG, "init", datadir)
        assert "nothing to do" in again.stdout, again.stdout + again.stderr
        server = Postgres(datadir=datadir, port=free_port(), log=tmp_path / "postgres.log")
        server.start()
        try:
            assert server.is_ready()
        finally:
            server.stop()
    finally:
        shutil.rmtree(cluster, ignore_errors=True)


# -- migrate.py ----------------------------------------------------------------------------


@pytest.mark.parametrize("script", [MIGRATE, APP], ids=["migrate", "app"])
def test_an_interpreter_without_psycopg_says_how_to_get_it(script: Path) -> None:
    """Run by a `python3` without the example's packages (no site-packages here: -S), a
    script says which interpreter lacks what and how to run it with them; no traceback."""
    ran = subprocess.run(
        [sys.executable, "-I", "-S", script, "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert ran.returncode == 1
    [line] = ran.stderr.splitlines()
    assert line.startswith(f"{script.name}: psycopg is not installed for {sys.executable}:")
    assert "./dev" in line
    assert "pip install 'psycopg[binary]'" in line


def test_migrate_applies_each_file_once(postgres: Postgres, dbname: str) -> None:
    first = migrate(postgres, dbname)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        f"created database {dbname}",
        "applied 001_create_visits.sql",
        "applied 002_add_visits_user_agent.sql",
    ]
    applied = schema_rows(postgres, dbname)
    assert [row[:2] for row in applied] == [
        (1, "001_create_visits.sql"),
        (2, "002_add_visits_user_agent.sql"),
    ]
    second = migrate(postgres, dbname)
    assert second.returncode == 0, second.stderr
    assert "applied" not in second.stdout
    assert schema_rows(postgres, dbname) == applied  # same rows, same applied_at


def test_concurrent_migrations_apply_each_file_once(postgres: Postgres, dbname: str) -> None:
    results: list[subprocess.CompletedProcess[str]] = []
    runs = [
        threading.Thread(target=lambda: results.append(migrate(postgres, dbname))) for _ in range(3)
    ]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    assert [r.returncode for r in results] == [0, 0, 0], [r.stderr for r in results]
    applied_lines = [
        line for r in results for line in r.stdout.splitlines() if line.startswith("applied")
    ]
    assert sorted(applied_lines) == [
        "applied 001_create_visits.sql",
        "applied 002_add_visits_user_agent.sql",
    ]
    assert [row[0] for row in schema_rows(postgres, dbname)] == [1, 2]


def test_a_failing_migration_is_rolled_back_and_reported(
    postgres: Postgres, dbname: str, tmp_path: Path
) -> None:
    shutil.copy(MIGRATIONS / "001_create_visits.sql", tmp_path)
    (tmp_path / "002_broken.sql").write_text(
        "CREATE TABLE half_done (id int);\nSELECT no_such_column FROM visits;\n"
    )
    failed = migrate(postgres, dbname, tmp_path)
    assert failed.returncode == 1
    [line] = failed.stderr.splitlines()
    assert line.startswith("migrate: 002_broken.sql: ")
    assert "no_such_column" in line
    assert [row[0] for row in schema_rows(postgres, dbname)] == [1]
    with postgres.connect(dbname) as conn:
        assert conn.execute("SELECT to_regclass('half_done')").fetchone() == (None,)


# -- app.py --------------------------------------------------------------------------------


def test_healthz_follows_the_schema_and_slash_records_a_visit(
    postgres: Postgres, dbname: str, tmp_path: Path
) -> None:
    only_first = tmp_path / "migrations"
    only_first.mkdir()
    shutil.copy(MIGRATIONS / "001_create_visits.sql", only_first)
    with running_app(postgres, dbname, tmp_path / "app.log", "web-7", "3.1") as app:
        status, body = app.get("/healthz")
        assert status == 503
        assert body.startswith("db: ")
        assert dbname in body  # the database does not exist yet
        assert migrate(postgres, dbname, only_first).returncode == 0
        assert app.get("/healthz") == (503, "schema 1 < 2\n")
        assert migrate(postgres, dbname).returncode == 0
        assert app.get("/healthz") == (200, "ok\n")
        status, body = app.get("/")
        assert status == 200
        assert body.startswith("hello from web-7 (version 3.1): visit ")
        with postgres.connect(dbname) as conn:
            rows = conn.execute("SELECT replica, user_agent FROM visits").fetchall()
        assert rows == [("web-7", f"Python-urllib/{sys.version_info[0]}.{sys.version_info[1]}")]


def test_healthz_follows_the_database_going_away_and_back(
    postgres: Postgres, dbname: str, tmp_path: Path
) -> None:
    assert migrate(postgres, dbname).returncode == 0
    with running_app(postgres, dbname, tmp_path / "app.log") as app:
        assert app.get("/healthz") == (200, "ok\n")
        postgres.stop()
        try:
            status, body = app.get("/healthz")
            assert status == 503
            assert body == "db: Connection refused\n"
            assert app.get("/")[0] == 503
        finally:
            postgres.start()
        assert app.get("/healthz") == (200, "ok\n")
        assert app.get("/")[0] == 200


def slow_request(app: App, seconds: float, answers: list[tuple[int, str]]) -> threading.Thread:
    thread = threading.Thread(target=lambda: answers.append(app.get(f"/?sleep={seconds}")))
    thread.start()
    return thread


def test_metrics_count_requests_in_flight(postgres: Postgres, dbname: str, tmp_path: Path) -> None:
    assert migrate(postgres, dbname).returncode == 0
    with running_app(postgres, dbname, tmp_path / "app.log") as app:
        in_flight = "webapp_requests_in_flight "
        assert app.metric(in_flight) == 0
        answers: list[tuple[int, str]] = []
        slow = [slow_request(app, 3, answers) for _ in range(2)]
        wait_until(lambda: app.metric(in_flight) == 2, 3, "two requests in flight")
        for thread in slow:
            thread.join()
        assert [status for status, _ in answers] == [200, 200]
        # the app counts a request out just after its answer is sent
        wait_until(lambda: app.metric(in_flight) == 0, 30, "no request in flight")
        total = 'webapp_requests_total{code="200",path="/"}'
        wait_until(lambda: app.metric(total) == 2, 30, "both requests counted")


def test_sigterm_finishes_the_request_in_flight_then_exits_0(
    postgres: Postgres, dbname: str, tmp_path: Path
) -> None:
    assert migrate(postgres, dbname).returncode == 0
    with running_app(postgres, dbname, tmp_path / "app.log", "web-drain") as app:
        answers: list[tuple[int, str]] = []
        slow = slow_request(app, 3, answers)
        wait_until(lambda: app.metric("webapp_requests_in_flight ") == 1, 3, "one in flight")
        app.process.send_signal(signal.SIGTERM)
        assert app.process.wait(timeout=30) == 0
        slow.join()
        [(status, body)] = answers
        assert status == 200
        assert body.startswith("hello from web-drain (version 1)")
        assert "SIGTERM: draining" in app.log.read_text()
