"""The supervisor under faults, with real processes: an engine SIGKILLed while its child
talks, a log holder killed, a restart from another directory, daemonizing grandchildren.

The engine is a separate Python process (`ENGINE`) that starts one child through the
supervisor, prints its pid, then obeys commands on its stdin; the test SIGKILLs it to
play an engine crash. Tests wait on lines the processes write, on pidfds, or on a file's
contents (`eventually`), never on the wall clock.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
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
    proc_state,
    wait_pid_gone,
)

from setpoint.workloads.supervisor import (
    Adopted,
    ProcessSpec,
    find_adoptable,
    last_line,
    start,
    stop,
)

ENGINE = """
import asyncio, sys
from pathlib import Path
from setpoint.workloads import reaper, supervisor

async def main():
    log_dir, state_dir, marker, code, subreaper = sys.argv[1:6]
    if subreaper.startswith("subreaper"):
        assert supervisor.become_subreaper()
    if subreaper == "subreaper+pidfd":  # exits learnt as the engine learns them
        assert reaper.watch_exits_by_pidfd() or sys.version_info >= (3, 12)
    spec = supervisor.ProcessSpec(
        args=[sys.executable, "-c", code], log_dir=Path(log_dir), marker=marker
    )
    running = await supervisor.start("web-0", spec, Path(state_dir))
    print(running.pid, flush=True)
    loop = asyncio.get_running_loop()
    while True:
        command = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
        if command == "reap":
            print(*supervisor.reap_orphans(), flush=True)
        elif command == "stop":
            ended = await supervisor.stop(running, grace=5)
            print(ended.reason, flush=True)
        else:
            return

asyncio.run(main())
"""


class Engine:
    """A separate engine process running one child, `web-0`."""

    def __init__(self, process: asyncio.subprocess.Process, child: int) -> None:
        self.process = process
        self.child = child

    @staticmethod
    async def start(
        code: str,
        log_dir: Path | str,
        state_dir: Path | str,
        *,
        cwd: Path | None = None,
        subreaper: bool = False,
        pidfd_watcher: bool = False,
    ) -> Engine:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            ENGINE,
            str(log_dir),
            str(state_dir),
            f"test-{uuid.uuid4().hex}",
            textwrap.dedent(code),
            ("subreaper+pidfd" if pidfd_watcher else "subreaper") if subreaper else "-",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=cwd,
        )
        return Engine(process, int(await Engine._line(process)))

    @staticmethod
    async def _line(process: asyncio.subprocess.Process) -> str:
        assert process.stdout is not None
        return (await asyncio.wait_for(process.stdout.readline(), TIMEOUT)).decode().strip()

    async def command(self, command: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{command}\n".encode())
        return await self._line(self.process)

    async def crash(self) -> None:
        """SIGKILL the engine (its child and the child's log holder live on)."""
        if self.process.returncode is None:
            self.process.kill()
        await asyncio.wait_for(self.process.wait(), TIMEOUT)


@pytest.fixture
async def engines() -> AsyncIterator[list[Engine]]:
    """Engines a test starts; each is SIGKILLed, with its child's group, at the end."""
    started: list[Engine] = []
    yield started
    for engine in started:
        kill_group(engine.child)
        await engine.crash()


def holder_pid(state_dir: Path) -> int:
    return int(json.loads((state_dir / "web-0.json").read_text())["holder"]["pid"])


def line_numbers(log: Path) -> list[int]:
    return [int(line.split()[1]) for line in log.read_text().splitlines()]


async def adopt_and_stop(state_dir: Path) -> None:
    adopted = find_adoptable("web-0", state_dir)
    assert isinstance(adopted, Adopted)
    await asyncio.wait_for(stop(adopted, grace=5), TIMEOUT)
    await asyncio.wait_for(adopted.wait_logs_closed(), TIMEOUT)


# --- output while the engine is down ----------------------------------------------------

# On SIGUSR1 it writes LINES numbered lines of 100 bytes (far more than a pipe holds),
# as fast as it can, then says "done"; it sleeps until stopped.
CHATTY = """
    import os, signal
    signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGUSR1}})
    with open({notes!r}, "w") as f:
        f.write("ready\\n")
    while True:
        signal.sigwait({{signal.SIGUSR1}})
        for i in range({lines}):
            os.write(1, b"line %07d %s\\n" % (i, b"x" * 86))
        with open({notes!r}, "w") as f:
            f.write("done\\n")
"""
LINES = 20_000


async def test_a_child_keeps_writing_while_its_engine_is_down(
    tmp_path: Path, notes: Notifications, engines: list[Engine]
) -> None:
    code = CHATTY.format(notes=str(notes.path), lines=LINES)
    engine = await Engine.start(code, tmp_path / "logs", tmp_path / "state")
    engines.append(engine)
    assert await notes.line() == "ready"
    await engine.crash()

    os.kill(engine.child, signal.SIGUSR1)
    # 2 MB of output with no engine: the child is never stuck on a full pipe.
    assert await notes.line(within=30) == "done"
    log = tmp_path / "logs" / "web-0.log"
    await eventually(lambda: (last_line(log) or "").startswith(f"line {LINES - 1:07d} "), 30)

    await adopt_and_stop(tmp_path / "state")
    assert line_numbers(log) == list(range(LINES))  # none lost, none twice, in order


async def test_a_killed_log_holder_is_replaced(
    tmp_path: Path, notes: Notifications, engines: list[Engine]
) -> None:
    state_dir = tmp_path / "state"
    code = CHATTY.format(notes=str(notes.path), lines=LINES)
    # While the engine runs (here: this test), the child's next holder takes over at once.
    spec = ProcessSpec(
        args=[sys.executable, "-c", textwrap.dedent(code)],
        log_dir=tmp_path / "logs",
        marker=f"test-{uuid.uuid4().hex}",
    )
    running = await start("web-0", spec, state_dir)
    try:
        assert await notes.line() == "ready"
        first = holder_pid(state_dir)
        kill(first)
        await wait_pid_gone(first)
        await eventually(lambda: holder_pid(state_dir) != first)  # replaced, and recorded
        assert is_alive(holder_pid(state_dir))
        os.kill(running.pid, signal.SIGUSR1)
        assert await notes.line(within=30) == "done"
        log = tmp_path / "logs" / "web-0.log"
        await eventually(lambda: (last_line(log) or "").startswith(f"line {LINES - 1:07d} "), 30)
        await asyncio.wait_for(stop(running, grace=5), TIMEOUT)
        await asyncio.wait_for(running.wait_logs_closed(), TIMEOUT)
        assert line_numbers(log) == list(range(LINES))
    finally:
        kill_group(running.pid)

    # With the engine down too, the child waits on its full pipe until an engine adopts
    # it and starts a holder; then nothing written meanwhile is missing.
    (tmp_path / "logs" / "web-0.log").unlink()
    engine = await Engine.start(code, tmp_path / "logs", state_dir)
    engines.append(engine)
    assert await notes.line() == "ready"
    await engine.crash()
    holder = holder_pid(state_dir)
    kill(holder)
    await wait_pid_gone(holder)
    os.kill(engine.child, signal.SIGUSR1)
    adopted = find_adoptable("web-0", state_dir)
    assert adopted is not None
    assert holder_pid(state_dir) != holder  # a new one, recorded
    assert await notes.line(within=30) == "done"
    await asyncio.wait_for(stop(adopted, grace=5), TIMEOUT)
    await asyncio.wait_for(adopted.wait_logs_closed(), TIMEOUT)
    assert line_numbers(tmp_path / "logs" / "web-0.log") == list(range(LINES))


# --- logs after a move -----------------------------------------------------------------

ADOPTEE = """
    import signal, time
    def hello(signum, frame):
        print("after adoption", flush=True)
        with open({notes!r}, "w") as f:
            f.write("said hello\\n")
    signal.signal(signal.SIGUSR1, hello)
    print("before adoption", flush=True)
    with open({notes!r}, "w") as f:
        f.write("ready\\n")
    while True:
        time.sleep(3600)
"""


async def test_output_stays_in_its_log_after_a_restart_from_another_directory(
    tmp_path: Path, notes: Notifications, engines: list[Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    code = ADOPTEE.format(notes=str(notes.path))
    engine = await Engine.start(code, "logs", "state", cwd=first)  # relative, as `up` gives
    engines.append(engine)
    assert await notes.line() == "ready"
    await engine.crash()

    monkeypatch.chdir(second)
    adopted = find_adoptable("web-0", first / "state")
    assert adopted is not None
    os.kill(engine.child, signal.SIGUSR1)
    assert await notes.line() == "said hello"
    await asyncio.wait_for(stop(adopted, grace=5), TIMEOUT)
    await asyncio.wait_for(adopted.wait_logs_closed(), TIMEOUT)

    log = first / "logs" / "web-0.log"
    assert log.read_text().splitlines() == ["before adoption", "after adoption"]
    assert not (second / "logs").exists()


# --- escaped grandchildren -------------------------------------------------------------

# Two grandchildren leave the child's process group with setsid and ignore SIGTERM; the
# second also clears its environment (so it carries no marker).
ESCAPING = """
    import subprocess, sys, time
    daemon = (
        "import os, signal, time\\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
        "open({notes!r}, 'w').write(f'{{os.getpid()}}\\\\n')\\n"
        "while True: time.sleep(3600)"
    )
    subprocess.Popen([sys.executable, "-c", daemon], start_new_session=True)
    subprocess.Popen([sys.executable, "-c", daemon], start_new_session=True, env={{}})
    while True:
        time.sleep(3600)
"""


async def test_stop_kills_grandchildren_that_left_the_group(
    tmp_path: Path, notes: Notifications
) -> None:
    spec = ProcessSpec(
        args=[sys.executable, "-c", textwrap.dedent(ESCAPING.format(notes=str(notes.path)))],
        log_dir=tmp_path / "logs",
        marker=f"test-{uuid.uuid4().hex}",
    )
    running = await start("web-0", spec, tmp_path / "state")
    escaped: list[int] = []
    try:
        escaped = [int(await notes.line()), int(await notes.line())]
        assert all(os.getpgid(pid) != running.pgid for pid in escaped)

        ended = await asyncio.wait_for(stop(running, grace=5), TIMEOUT)

        assert ended.signal == signal.SIGTERM
        assert [pid for pid in escaped if is_alive(pid)] == []  # nothing of it is left
    finally:
        for pid in escaped:
            kill(pid)
        kill_group(running.pid)


# The child double-forks two daemons (setsid in between), as a daemonizing program does:
# their parents exit, so they are re-parented to the nearest subreaper.
DAEMONIZING = """
    import os, time
    def daemon():
        first = os.fork()
        if first == 0:
            os.setsid()
            if os.fork() == 0:
                with open({notes!r}, "w") as f:
                    f.write(f"{{os.getpid()}}\\n")
                while True:
                    time.sleep(3600)
            os._exit(0)
        os.waitpid(first, 0)
    daemon()
    daemon()
    while True:
        time.sleep(3600)
"""


@pytest.mark.parametrize("pidfd_watcher", [False, True], ids=["thread-watcher", "pidfd-watcher"])
async def test_a_subreaper_engine_stops_and_reaps_daemonized_grandchildren(
    tmp_path: Path, notes: Notifications, engines: list[Engine], pidfd_watcher: bool
) -> None:
    code = DAEMONIZING.format(notes=str(notes.path))
    engine = await Engine.start(
        code, tmp_path / "logs", tmp_path / "state", subreaper=True, pidfd_watcher=pidfd_watcher
    )
    engines.append(engine)
    daemons = [int(await notes.line()), int(await notes.line())]
    try:
        engine_pid = engine.process.pid
        assert [proc_ppid(pid) for pid in daemons] == [engine_pid, engine_pid]
        assert sorted(map(int, (await engine.command("reap")).split())) == sorted(daemons)

        # One exits by itself: the engine reaps it (no zombie is left).
        kill(daemons[0])
        await eventually(lambda: proc_state(daemons[0]) is None)

        # The other is stopped with its child, and reaped; the child's exit was not stolen.
        assert await engine.command("stop") == "killed by SIGTERM"
        assert proc_state(daemons[1]) is None
        zombies = [
            pid
            for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
            if proc_ppid(pid) == engine_pid and proc_state(pid) == "Z"
        ]
        assert zombies == []
    finally:
        for pid in daemons:
            kill(pid)
