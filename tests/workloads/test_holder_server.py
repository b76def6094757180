"""The log holders' fork server, with real processes: one server per state directory forks
every holder; killed, it leaves its holders running and the next start has another; idle,
it exits and removes its socket; a server that is not ours is never used, and where no
server can be had a holder is started on its own.

Tests wait on lines children write, on pidfds, or on /proc and files (`eventually`), never
on the wall clock.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from supervisor_support import (
    TIMEOUT,
    Notifications,
    eventually,
    is_alive,
    kill,
    kill_group,
    proc_ppid,
    wait_pid_gone,
)

from setpoint.workloads import holders
from setpoint.workloads.procfs import _read_state
from setpoint.workloads.supervisor import ProcessSpec, Running, start, stop

# Says hello, then "line N" on each SIGUSR1 (telling the test through NOTES), until stopped.
TALKER = """
    import signal, sys, time
    said = 0
    def say(signum, frame):
        global said
        said += 1
        print(f"line {{said}}", flush=True)
        with open({notes!r}, "w") as f:
            f.write(f"said {{said}}\\n")
    signal.signal(signal.SIGUSR1, say)
    print("hello", flush=True)
    with open({notes!r}, "w") as f:
        f.write("ready\\n")
    while True:
        time.sleep(3600)
"""


@pytest.fixture
async def children() -> AsyncIterator[list[Running]]:
    """Children a test starts; each is stopped at the end."""
    started: list[Running] = []
    yield started
    for child in started:
        kill_group(child.pgid)
        await asyncio.wait_for(stop(child, grace=0), TIMEOUT)


async def talker(name: str, tmp_path: Path, notes: Notifications) -> Running:
    spec = ProcessSpec(
        args=[sys.executable, "-c", textwrap.dedent(TALKER.format(notes=str(notes.path)))],
        log_dir=tmp_path / "logs",
        marker=f"test-{uuid.uuid4().hex}",
    )
    running = await start(name, spec, tmp_path / "state")
    assert await notes.line() == "ready"
    return running


def holder_pid(name: str, state_dir: Path) -> int:
    record = _read_state(name, state_dir)
    assert record is not None
    return int(record["holder"]["pid"])


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def log_of(name: str, tmp_path: Path) -> str:
    return (tmp_path / "logs" / f"{name}.log").read_text()


async def test_one_server_forks_the_holders_of_a_state_directory(
    tmp_path: Path,
    notes: Notifications,
    children: list[Running],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(holders, "SERVER_IDLE_S", 600.0)  # still there at the end (killed)
    state_dir = tmp_path / "state"
    for n in range(3):
        children.append(await talker(f"web-{n}", tmp_path, notes))
    pids = [holder_pid(f"web-{n}", state_dir) for n in range(3)]
    assert len(set(pids)) == 3  # a holder of its own for each child
    servers = {proc_ppid(pid) for pid in pids}
    assert len(servers) == 1  # all forked by the one server
    (server,) = servers
    assert server is not None
    assert "--fork-server" in cmdline(server)
    assert comm(server) == "setpoint-forker"
    assert {comm(pid) for pid in pids} == {"setpoint-holder"}  # as `ps -o comm` shows them
    sock = (state_dir / holders.SERVER_SOCKET).lstat()
    assert stat.S_ISSOCK(sock.st_mode)
    assert stat.S_IMODE(sock.st_mode) == 0o600

    os.kill(children[1].pid, signal.SIGUSR1)
    assert await notes.line() == "said 1"
    await eventually(lambda: log_of("web-1", tmp_path) == "hello\nline 1\n")
    for child in children:
        await asyncio.wait_for(stop(child, grace=5), TIMEOUT)
        await asyncio.wait_for(child.wait_logs_closed(), TIMEOUT)
    for pid in pids:
        await wait_pid_gone(pid)
    assert is_alive(server)  # it serves the directory's next children
    kill(server)
    assert [log_of(f"web-{n}", tmp_path) for n in (0, 2)] == ["hello\n", "hello\n"]  # closed


async def test_a_killed_server_leaves_its_holders_and_the_next_start_has_another(
    tmp_path: Path, notes: Notifications, children: list[Running]
) -> None:
    state_dir = tmp_path / "state"
    first = await talker("web-0", tmp_path, notes)
    children.append(first)
    holder = holder_pid("web-0", state_dir)
    server = proc_ppid(holder)
    assert server is not None
    kill(server)
    await wait_pid_gone(server)

    assert is_alive(holder)  # the server's end is not its holders' end
    os.kill(first.pid, signal.SIGUSR1)
    assert await notes.line() == "said 1"
    await eventually(lambda: log_of("web-0", tmp_path) == "hello\nline 1\n")

    children.append(await talker("web-1", tmp_path, notes))
    other = proc_ppid(holder_pid("web-1", state_dir))
    assert other is not None
    assert other != server
    assert "--fork-server" in cmdline(other)
    await eventually(lambda: log_of("web-1", tmp_path) == "hello\n")

    await asyncio.wait_for(stop(first, grace=5), TIMEOUT)
    await asyncio.wait_for(first.wait_logs_closed(), TIMEOUT)
    await wait_pid_gone(holder)
    assert log_of("web-0", tmp_path) == "hello\nline 1\n"


async def test_an_idle_server_exits_and_removes_its_socket(
    tmp_path: Path, notes: Notifications, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(holders, "SERVER_IDLE_S", 0.2)
    state_dir = tmp_path / "state"
    child = await talker("web-0", tmp_path, notes)
    server = proc_ppid(holder_pid("web-0", state_dir))
    assert server is not None
    try:
        await asyncio.wait_for(stop(child, grace=5), TIMEOUT)
        await asyncio.wait_for(child.wait_logs_closed(), TIMEOUT)
    finally:
        kill_group(child.pgid)
    await wait_pid_gone(server)
    assert not (state_dir / holders.SERVER_SOCKET).exists()


async def test_a_stale_socket_file_is_replaced(
    tmp_path: Path, notes: Notifications, children: list[Running]
) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(state_dir / holders.SERVER_SOCKET))  # nobody listens on it
    stale.close()
    children.append(await talker("web-0", tmp_path, notes))
    server = proc_ppid(holder_pid("web-0", state_dir))
    assert server is not None
    assert "--fork-server" in cmdline(server)


async def test_with_no_server_to_be_had_a_holder_runs_on_its_own(
    tmp_path: Path, notes: Notifications, children: list[Running]
) -> None:
    state_dir = tmp_path / "state"
    (state_dir / holders.SERVER_SOCKET).mkdir(parents=True)  # in the way, and not removed
    children.append(await talker("web-0", tmp_path, notes))
    holder = holder_pid("web-0", state_dir)
    assert proc_ppid(holder) == os.getpid()
    assert str(tmp_path / "logs" / "web-0.log") in cmdline(holder)
    os.kill(children[0].pid, signal.SIGUSR1)
    assert await notes.line() == "said 1"
    await eventually(lambda: log_of("web-0", tmp_path) == "hello\nline 1\n")


LISTENER = """
import socket, sys
listener = socket.socket(fileno=int(sys.argv[1]))
listener.listen()
print("listening", flush=True)
conn, _ = listener.accept()
print("asked", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to listen as another user")
async def test_a_server_of_another_user_is_never_asked(
    tmp_path: Path, notes: Notifications, children: list[Running]
) -> None:
    outsider = shutil.which("python3", path="/usr/bin:/bin")
    if outsider is None:
        pytest.skip("no python3 another user may run")
    state_dir = tmp_path / "state"
    state_dir.mkdir(mode=0o700)
    bound = socket.socket(socket.AF_UNIX)
    bound.bind(str(state_dir / holders.SERVER_SOCKET))
    os.chmod(state_dir / holders.SERVER_SOCKET, 0o666)
    handed = bound.fileno()
    listener = subprocess.Popen(  # noqa: ASYNC220 - it answers one line, at once
        [outsider, "-c", LISTENER, str(handed)],  # it calls listen(): SO_PEERCRED names it
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        pass_fds=[handed],
        user=65534,
        cwd="/",
        env={},
    )
    bound.close()
    try:
        assert listener.stdout is not None
        assert listener.stdout.readline() == b"listening\n"
        children.append(await talker("web-0", tmp_path, notes))
        holder = holder_pid("web-0", state_dir)
        assert proc_ppid(holder) == os.getpid()  # started on its own, not asked of it
        assert listener.poll() is None
    finally:
        listener.kill()
        listener.wait()
