"""Private files: `setpoint.files` makes directories 0700 and files 0600, and tightens the
ones an earlier version left wider (only inside a `.setpoint/`); the SQLite store's files
and a supervised child's log and state files are private (they hold Secrets' values and
everything a child prints). Another user of the machine cannot make setpoint write
elsewhere: a planted symbolic link, FIFO, file or directory of theirs is refused."""

from __future__ import annotations

import asyncio
import fcntl
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from setpoint.cli.background import start_engine
from setpoint.files import (
    ensure_private_dir,
    make_private,
    open_private,
    others_may_read,
    read_secret,
    write_private,
)
from setpoint.model import Registry
from setpoint.store.sqlite import SqliteStore
from setpoint.workloads import supervisor
from setpoint.workloads.secret import SECRET

NOBODY = 65534
"""Another user: files a local attacker planted belong to them."""
root_only = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to give a file to another user (os.chown)"
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def lax_umask() -> object:
    """A umask that would leave new files world-readable (0644) and directories 0755."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_a_private_dir_is_made_0700_and_only_a_setpoint_one_tightened(tmp_path: Path) -> None:
    made = ensure_private_dir(tmp_path / "a" / ".setpoint")
    assert mode(made) == 0o700
    assert mode(tmp_path / "a") == 0o755  # parents are not ours to change
    old = tmp_path / "old" / ".setpoint"
    (old / "run").mkdir(mode=0o755, parents=True)
    old.chmod(0o755)
    ensure_private_dir(old / "run")
    assert (mode(old), mode(old / "run")) == (0o755, 0o700)
    ensure_private_dir(old)
    assert mode(old) == 0o700
    # A directory the user named (the store's, `/tmp`) is not setpoint's to change.
    theirs = tmp_path / "data"
    theirs.mkdir(mode=0o755)
    ensure_private_dir(theirs)
    assert mode(theirs) == 0o755
    assert mode(ensure_private_dir(tmp_path / "new")) == 0o700  # one it makes is private


def test_a_private_dir_that_is_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    (tmp_path / ".setpoint").symlink_to(elsewhere)
    for private in (tmp_path / ".setpoint", tmp_path / ".setpoint" / "tls"):
        with pytest.raises(PermissionError, match="symbolic link") as refused:
            ensure_private_dir(private)
        assert refused.value.filename == str(tmp_path / ".setpoint")
    assert mode(elsewhere) == 0o755
    real = tmp_path / "project" / ".setpoint"
    real.mkdir(parents=True)
    (real / "logs").symlink_to(elsewhere)
    with pytest.raises(PermissionError, match="symbolic link"):
        ensure_private_dir(real / "logs")


@root_only
def test_a_private_dir_of_another_user_is_refused(tmp_path: Path) -> None:
    planted = tmp_path / ".setpoint"
    planted.mkdir()
    planted.chmod(0o777)
    os.chown(planted, NOBODY, NOBODY)
    with pytest.raises(PermissionError, match=f"another user \\(uid {NOBODY}"):
        ensure_private_dir(planted / "tls")
    assert not (planted / "tls").exists()  # nothing made in it
    with pytest.raises(PermissionError, match="another user"):
        ensure_private_dir(planted)
    assert mode(planted) == 0o777  # not ours: not changed


def test_no_file_is_written_through_a_symbolic_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    victim.chmod(0o644)
    link = tmp_path / "planted"
    link.symlink_to(victim)
    with pytest.raises(PermissionError, match="symbolic link") as refused:
        open_private(link, os.O_WRONLY | os.O_TRUNC)
    assert refused.value.filename == str(link)
    with pytest.raises(PermissionError, match="symbolic link"):
        write_private(link, b"secret key")
    make_private(link)  # a link's target is not ours to change
    assert (victim.read_text(), mode(victim)) == ("precious\n", 0o644)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["planted", "victim"]  # no temp file


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "state.json"
    os.mkfifo(fifo)
    with pytest.raises(PermissionError, match="not a regular file"):
        open_private(fifo, os.O_WRONLY)
    with pytest.raises(PermissionError, match="not a regular file"):
        write_private(fifo, b"{}")


def test_a_file_replaced_whole_is_private_and_the_old_one_is_never_opened(tmp_path: Path) -> None:
    target = tmp_path / "kubeconfig"
    write_private(target, b"one")
    target.chmod(0o644)
    held = target.open()  # the old file stays as it was: replaced by rename, not rewritten
    write_private(target, b"two")
    assert (target.read_text(), mode(target), held.read()) == ("two", 0o600, "one")
    held.close()


@root_only
def test_a_file_of_another_user_is_neither_truncated_nor_written(tmp_path: Path) -> None:
    theirs = tmp_path / "engine.log"
    theirs.write_text("theirs\n")
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(PermissionError, match="another user"):
        open_private(theirs, os.O_WRONLY | os.O_TRUNC)
    assert theirs.read_text() == "theirs\n"


def test_a_secret_file_others_may_change_is_refused(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("t,alice,admin\n")
    tokens.chmod(0o644)
    assert read_secret(tokens, what="token file") == "t,alice,admin\n"
    assert others_may_read(tokens)
    tokens.chmod(0o620)
    with pytest.raises(PermissionError, match=r"writable by other users \(mode 0620\).*chmod 600"):
        read_secret(tokens, what="token file")
    if os.geteuid() == 0:
        tokens.chmod(0o600)
        os.chown(tokens, NOBODY, NOBODY)
        with pytest.raises(PermissionError, match="token file belongs to another user"):
            read_secret(tokens, what="token file")


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
    logs, state = tmp_path / ".setpoint" / "logs", tmp_path / ".setpoint" / "run"
    old_log = logs / "default_web.log"
    logs.mkdir(mode=0o755, parents=True)
    old_log.write_text("from an earlier version\n")
    old_log.chmod(0o644)
    old_backup = logs / "default_web.log.1"
    old_backup.write_text("older still\n")
    old_backup.chmod(0o644)
    # A child that stays: one that ends at once is never recorded (nothing to adopt).
    hello = "import time; print('hello', flush=True); time.sleep(600)"
    spec = supervisor.ProcessSpec(args=[sys.executable, "-c", hello], log_dir=logs, marker="m")
    child = await supervisor.start("default_web", spec, state)
    try:
        assert mode(state) == 0o700
        assert mode(logs) == 0o700
        assert mode(state / "default_web.json") == 0o600
        assert mode(old_log) == 0o600
        assert mode(old_backup) == 0o600
        async with asyncio.timeout(60):  # its line, appended to the tightened log
            while "hello" not in old_log.read_text():  # noqa: ASYNC110 - a file it writes
                await asyncio.sleep(0.01)
    finally:
        await supervisor.stop(child, grace=0)
    await child.wait_logs_closed()


@pytest.mark.parametrize("planted", ["run/default_web.json", "logs/default_web.log"])
async def test_a_child_is_not_started_over_a_planted_symbolic_link(
    tmp_path: Path, planted: str
) -> None:
    """A link where the supervisor writes the child's state or log: refused, the victim as
    it was, no child started."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    workspace = tmp_path / ".setpoint"
    for directory in ("run", "logs"):
        (workspace / directory).mkdir(parents=True)
    (workspace / planted).symlink_to(victim)
    ran = tmp_path / "ran"
    spec = supervisor.ProcessSpec(  # a child that ends at once is refused too (it was run)
        args=["touch", str(ran)], log_dir=workspace / "logs", marker="m"
    )
    with pytest.raises(PermissionError, match="symbolic link") as refused:
        await supervisor.start("default_web", spec, workspace / "run")
    assert refused.value.filename == str(workspace / planted)
    assert victim.read_text() == "precious\n"
    assert not ran.exists()


async def test_the_background_engine_log_is_not_written_through_a_symbolic_link(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    log = tmp_path / "engine.log"
    log.symlink_to(victim)
    with pytest.raises(PermissionError, match="symbolic link"):
        await start_engine(["--version"], log, within=60)
    assert victim.read_text() == "precious\n"


def test_tightening_a_file_keeps_the_locks_this_process_holds_on_it(tmp_path: Path) -> None:
    """SQLite holds its database's locks as POSIX locks, which closing any descriptor
    opened on the file drops: `make_private` must not open it (two engines on one store
    died of SIGBUS when it did)."""
    database = tmp_path / "state.db"
    database.write_text("x")
    database.chmod(0o644)
    with database.open("r+") as held:
        fcntl.lockf(held, fcntl.LOCK_EX)
        make_private(database)
        other = subprocess.run(
            [sys.executable, "-c", LOCK_NOW, str(database)], capture_output=True, text=True
        )
    assert mode(database) == 0o600
    assert other.stdout == "locked by another process\n", other.stderr


LOCK_NOW = """
import fcntl, sys
with open(sys.argv[1], "r+") as f:
    try:
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print("locked by another process")
    else:
        print("free")
"""
