"""Private files: `setpoint.files` makes directories 0700 and files 0600, and tightens the
ones an earlier version left wider; the SQLite store's files and a supervised child's log
and state files are private (they hold Secrets' values and everything a child prints)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from setpoint.files import ensure_private_dir, make_private, open_private
from setpoint.model import Registry
from setpoint.store.sqlite import SqliteStore
from setpoint.workloads import supervisor
from setpoint.workloads.secret import SECRET


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def lax_umask() -> object:
    """A umask that would leave new files world-readable (0644) and directories 0755."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_a_private_dir_is_made_0700_and_an_existing_one_tightened(tmp_path: Path) -> None:
    made = ensure_private_dir(tmp_path / "a" / ".setpoint")
    assert mode(made) == 0o700
    assert mode(tmp_path / "a") == 0o755  # parents are not ours to change
    old = tmp_path / "old"
    old.mkdir(mode=0o755)
    ensure_private_dir(old)
    assert mode(old) == 0o700


def test_a_private_file_is_made_0600_and_an_existing_one_tightened(tmp_path: Path) -> None:
    os.close(open_private(tmp_path / "new", os.O_WRONLY))
    assert mode(tmp_path / "new") == 0o600
    old = tmp_path / "old"
    old.write_text("x")
    old.chmod(0o644)
    os.close(open_private(old, os.O_WRONLY | os.O_APPEND))
    assert mode(old) == 0o600
    make_private(tmp_path / "missing")  # nothing there: nothing to do


async def test_the_sqlite_store_files_and_the_directory_it_makes_are_private(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    project.mkdir(mode=0o755)
    path = project / ".setpoint" / "state.db"
    registry = Registry()
    registry.register(SECRET)
    store = await SqliteStore(str(path), registry).open()
    try:
        await store.create({"apiVersion": SECRET.api_version, "kind": SECRET.kind,
                            "metadata": {"name": "s"}, "stringData": {"k": "value"}})  # fmt: skip
        assert mode(path.parent) == 0o700
        assert mode(project) == 0o755  # an existing directory is left alone
        for name in ("state.db", "state.db-wal", "state.db-shm"):
            assert mode(path.parent / name) == 0o600, name
    finally:
        await store.close()


async def test_an_existing_world_readable_store_is_tightened_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    await (await SqliteStore(str(path)).open()).close()
    path.chmod(0o644)
    store = await SqliteStore(str(path)).open()
    await store.close()
    assert mode(path) == 0o600


async def test_a_childs_log_and_state_files_are_private(tmp_path: Path) -> None:
    logs, state = tmp_path / "logs", tmp_path / "run"
    old_log = logs / "default_web.log"
    logs.mkdir(mode=0o755)
    old_log.write_text("from an earlier version\n")
    old_log.chmod(0o644)
    old_backup = logs / "default_web.log.1"
    old_backup.write_text("older still\n")
    old_backup.chmod(0o644)
    spec = supervisor.ProcessSpec(
        args=[sys.executable, "-c", "print('hello', flush=True)"], log_dir=logs, marker="m"
    )
    child = await supervisor.start("default_web", spec, state)
    try:
        assert mode(state) == 0o700
        assert mode(logs) == 0o700
        assert mode(state / "default_web.json") == 0o600
        assert mode(old_log) == 0o600
        assert mode(old_backup) == 0o600
        await child.wait()
        await child.wait_logs_closed()
    finally:
        await supervisor.stop(child, grace=0)
    assert "hello" in old_log.read_text()
