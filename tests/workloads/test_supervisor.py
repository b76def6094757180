"""The process supervisor against real child processes: exits, stop, logs, state files, adoption.

Children are small `sys.executable -c` scripts. Tests wait on the supervisor's
own notifications (or a FIFO line, or a pidfd) under `asyncio.wait_for`, never
on the wall clock; every process is killed in a `finally` block.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import signal
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from supervisor_support import (
    TIMEOUT,
    Notifications,
    is_alive,
    kill,
    kill_group,
    listing,
    proc_starttime,
    proc_state,
    wait_pid_gone,
)

from setpoint.errors import AlreadyExists, Error, Invalid
from setpoint.testing import ManualClock
from setpoint.workloads.log_holder import LogTimes
from setpoint.workloads.supervisor import (
    Exit,
    ProcessSpec,
    Running,
    find_adoptable,
    start,
    stop,
    stray,
)

SLEEP_FOREVER = "import time\nwhile True: time.sleep(3600)"


def python(tmp_path: Path, code: str, **fields: object) -> ProcessSpec:
    return ProcessSpec(
        args=[sys.executable, "-c", textwrap.dedent(code)],
        log_dir=tmp_path / "logs",
        marker=f"test-{uuid.uuid4().hex}",
        **fields,  # type: ignore[arg-type]
    )


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


async def finish(running: Running) -> None:
    """Kill what is left of `running`'s group and wait for it (for `finally` blocks)."""
    kill_group(running.pgid)
    await asyncio.wait_for(running.wait(), TIMEOUT)


# --- exits -------------------------------------------------------------------------------


async def test_exit_code_is_reported(tmp_path: Path, state_dir: Path) -> None:
    running = await start("job-0", python(tmp_path, "raise SystemExit(3)"), state_dir)
    try:
        ended = await asyncio.wait_for(running.wait(), TIMEOUT)
        assert ended == Exit(code=3, signal=None, reason="exited with code 3")
    finally:
        await finish(running)


async def test_a_killed_process_is_noticed_at_once(tmp_path: Path, state_dir: Path) -> None:
    running = await start("web-0", python(tmp_path, SLEEP_FOREVER), state_dir, clock=ManualClock())
    try:
        assert running.pid > 0
        assert running.started_at == ManualClock().now()
        os.kill(running.pid, signal.SIGKILL)
        ended = await asyncio.wait_for(running.wait(), TIMEOUT)
        assert ended == Exit(code=None, signal=signal.SIGKILL, reason="killed by SIGKILL")
        # wait() can be asked again.
        assert await asyncio.wait_for(running.wait(), TIMEOUT) == ended
    finally:
        await finish(running)


async def test_a_missing_command_is_a_one_line_error(tmp_path: Path, state_dir: Path) -> None:
    spec = ProcessSpec(args=["nosuchcmd"], log_dir=tmp_path / "logs", marker="m")
    with pytest.raises(Invalid) as caught:
        await start("web-0", spec, state_dir)
    assert str(caught.value) == (
        "cannot start web-0: [Errno 2] No such file or directory: 'nosuchcmd'"
    )
    assert isinstance(caught.value, Error)
    assert listing(state_dir) == []  # nothing left behind


async def test_a_missing_cwd_is_a_one_line_error(tmp_path: Path, state_dir: Path) -> None:
    spec = python(tmp_path, "pass", cwd=tmp_path / "nowhere")
    with pytest.raises(Invalid, match=r"^cannot start web-0: \[Errno 2\] [^\n]*nowhere'$"):
        await start("web-0", spec, state_dir)


def test_spec_refuses_empty_args(tmp_path: Path) -> None:
    with pytest.raises(Invalid, match=r"^spec\.args: "):
        ProcessSpec(args=[], log_dir=tmp_path, marker="m")


async def test_a_name_that_is_not_a_file_name_is_refused(tmp_path: Path, state_dir: Path) -> None:
    with pytest.raises(Invalid, match=r"^metadata\.name: "):
        await start("../web", python(tmp_path, "pass"), state_dir)


# --- stop --------------------------------------------------------------------------------

# The child spawns a grandchild that ignores SIGTERM, then reports both are set up.
FAMILY = """
    import signal, subprocess, sys, time
    if {leader_ignores_term}:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    grandchild = subprocess.Popen([sys.executable, "-c",
        "import signal, time\\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
        "with open({notes!r}, 'w') as f: f.write('grandchild\\\\n')\\n"
        "while True: time.sleep(3600)"])
    with open({notes!r}, "w") as f:
        f.write(f"{{grandchild.pid}}\\n")
    while True:
        time.sleep(3600)
"""


@pytest.mark.parametrize("leader_ignores_term", [True, False])
async def test_stop_kills_the_whole_group(
    tmp_path: Path, state_dir: Path, notes: Notifications, leader_ignores_term: bool
) -> None:
    code = FAMILY.format(leader_ignores_term=leader_ignores_term, notes=str(notes.path))
    running = await start("web-0", python(tmp_path, code), state_dir)
    grandchild = 0
    try:
        first, second = await notes.line(), await notes.line()
        grandchild = int(first if first != "grandchild" else second)
        assert is_alive(grandchild)

        ended = await asyncio.wait_for(stop(running, grace=0.3), TIMEOUT)

        if leader_ignores_term:
            assert ended.signal == signal.SIGKILL  # grace ran out
        else:
            assert ended.signal == signal.SIGTERM
        await wait_pid_gone(grandchild)  # the leftover member was killed too
        assert proc_state(grandchild) in (None, "Z")  # gone, or awaiting its new parent's reap
        assert not (state_dir / "web-0.json").exists()
    finally:
        if grandchild:
            kill(grandchild)
        await finish(running)


async def test_stop_after_the_process_exited_cleans_up(tmp_path: Path, state_dir: Path) -> None:
    running = await start("web-0", python(tmp_path, SLEEP_FOREVER), state_dir)
    try:
        assert (state_dir / "web-0.json").exists()
        os.kill(running.pid, signal.SIGKILL)
        await asyncio.wait_for(running.wait(), TIMEOUT)
        ended = await asyncio.wait_for(stop(running, grace=0.3), TIMEOUT)
        assert ended.signal == signal.SIGKILL
        assert listing(state_dir) == []
    finally:
        await finish(running)


# --- logs and environment ----------------------------------------------------------------


async def test_stdout_and_stderr_land_in_the_log(tmp_path: Path, state_dir: Path) -> None:
    code = """
        import sys
        print("to stdout", flush=True)
        print("to stderr", file=sys.stderr, flush=True)
        sys.stdout.write("no newline at the end")
    """
    running = await start("web-0", python(tmp_path, code), state_dir)
    try:
        assert (await asyncio.wait_for(running.wait(), TIMEOUT)).code == 0
        await asyncio.wait_for(running.wait_logs_closed(), TIMEOUT)
        text = (tmp_path / "logs" / "web-0.log").read_text()
        assert text == "to stdout\nto stderr\nno newline at the end"
    finally:
        await finish(running)


async def test_an_overlong_line_is_kept_whole(tmp_path: Path, state_dir: Path) -> None:
    code = "print('x' * 200_000); print('next')"  # past the stream reader's 64 KiB line limit
    running = await start("web-0", python(tmp_path, code), state_dir)
    try:
        await asyncio.wait_for(running.wait(), TIMEOUT)
        await asyncio.wait_for(running.wait_logs_closed(), TIMEOUT)
    finally:
        await finish(running)
    assert (tmp_path / "logs" / "web-0.log").read_text() == "x" * 200_000 + "\nnext\n"


async def test_logs_append_across_runs(tmp_path: Path, state_dir: Path) -> None:
    for n in range(2):
        running = await start("web-0", python(tmp_path, f"print('run {n}')"), state_dir)
        try:
            assert (await asyncio.wait_for(running.wait(), TIMEOUT)).code == 0
            await asyncio.wait_for(stop(running, grace=5), TIMEOUT)
        finally:
            await finish(running)
    assert (tmp_path / "logs" / "web-0.log").read_text() == "run 0\nrun 1\n"


async def test_logs_rotate_by_size_keeping_three(tmp_path: Path, state_dir: Path) -> None:
    code = """
        for i in range(100):
            print(f"line {i:04d}".ljust(19, "."))  # 20 bytes with the newline
    """
    before = time.time_ns()
    running = await start("web-0", python(tmp_path, code, max_log_bytes=100), state_dir)
    try:
        await asyncio.wait_for(running.wait(), TIMEOUT)
        await asyncio.wait_for(running.wait_logs_closed(), TIMEOUT)
    finally:
        await finish(running)
    after = time.time_ns()
    logs = tmp_path / "logs"
    files = ["web-0.log.3", "web-0.log.2", "web-0.log.1", "web-0.log"]
    assert sorted(p.name for p in logs.iterdir()) == sorted(
        [*files, *(f + ".times" for f in files)]  # each with its time index
    )
    kept = "".join((logs / n).read_text() for n in files)
    numbers = [int(line.split()[1].rstrip(".")) for line in kept.splitlines()]
    assert numbers == list(range(numbers[0], 100))  # the newest lines, in order, none lost
    assert all((logs / n).stat().st_size <= 120 for n in files)
    for name in files:  # every byte of each file has the time it was read at
        times = LogTimes((logs / name).stat().st_ino)
        times.feed((logs / f"{name}.times").read_bytes())
        assert times.offsets[0] == 0
        assert times.offsets == sorted(times.offsets)
        assert all(before <= t <= after for t in times.times)


async def test_env_is_minimal_and_carries_the_marker(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGINE_ONLY_SECRET", "x")
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    spec = python(tmp_path, code, env={"GREETING": "hello", "PATH": "/custom/bin"})
    running = await start("web-0", spec, state_dir)
    try:
        await asyncio.wait_for(running.wait(), TIMEOUT)
        await asyncio.wait_for(running.wait_logs_closed(), TIMEOUT)
    finally:
        await finish(running)
    env = json.loads((tmp_path / "logs" / "web-0.log").read_text())
    assert env["GREETING"] == "hello"
    assert env["PATH"] == "/custom/bin"
    assert env["SETPOINT_MARKER"] == spec.marker
    assert "ENGINE_ONLY_SECRET" not in env


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
async def test_runs_as_another_user_when_root(tmp_path: Path, state_dir: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    spec = ProcessSpec(
        # Not sys.executable: the test's interpreter may live where nobody cannot read.
        args=["/bin/sh", "-c", 'echo "$(id -u) $(id -g) $(id -G) $USER $HOME"'],
        log_dir=tmp_path / "logs",
        marker="m",
        user="nobody",
        cwd=Path("/"),
    )
    running = await start("db-0", spec, state_dir)
    try:
        assert (await asyncio.wait_for(running.wait(), TIMEOUT)).code == 0
        await asyncio.wait_for(running.wait_logs_closed(), TIMEOUT)
    finally:
        await finish(running)
    text = (tmp_path / "logs" / "db-0.log").read_text()
    uid, gid = nobody.pw_uid, nobody.pw_gid
    assert text == f"{uid} {gid} {gid} nobody {nobody.pw_dir}\n"  # no supplementary groups


async def test_another_user_is_refused_when_not_root(
    tmp_path: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nobody = pwd.getpwnam("nobody")
    monkeypatch.setattr(os, "geteuid", lambda: nobody.pw_uid)  # as if the engine were nobody
    spec = python(tmp_path, "pass", user="root")
    with pytest.raises(Invalid) as caught:
        await start("db-0", spec, state_dir)
    assert str(caught.value) == (
        "spec.user: cannot run as 'root': the engine runs as 'nobody', not root, and cannot"
        " switch users; drop spec.user (to run as 'nobody') or run the engine as root"
    )


async def test_naming_the_engine_own_user_is_allowed(tmp_path: Path, state_dir: Path) -> None:
    me = pwd.getpwuid(os.geteuid()).pw_name
    running = await start("web-0", python(tmp_path, "pass", user=me), state_dir)
    try:
        assert (await asyncio.wait_for(running.wait(), TIMEOUT)).code == 0
    finally:
        await finish(running)


async def test_an_unknown_user_is_refused(tmp_path: Path, state_dir: Path) -> None:
    spec = python(tmp_path, "pass", user="no-such-user-here")
    with pytest.raises(Invalid, match=r"^spec\.user: no user .no-such-user-here. on this machine"):
        await start("db-0", spec, state_dir)


# --- state file, adoption, strays --------------------------------------------------------


async def test_the_state_file_records_pid_and_start_time(tmp_path: Path, state_dir: Path) -> None:
    spec = python(tmp_path, SLEEP_FOREVER)
    running = await start("web-0", spec, state_dir)
    try:
        state = json.loads((state_dir / "web-0.json").read_text())
        assert state["pid"] == running.pid
        assert state["pgid"] == os.getpgid(running.pid) == running.pid
        assert state["starttime"] == proc_starttime(running.pid)
        assert state["marker"] == spec.marker
        assert state["argv"] == list(spec.args)
        assert [n for n in listing(state_dir) if n.endswith(".tmp")] == []
        # The running process is ours: not a stray.
        assert stray("web-0", state_dir) is False
        assert (state_dir / "web-0.json").exists()
    finally:
        await finish(running)


async def test_a_name_whose_process_still_runs_is_not_started_twice(
    tmp_path: Path, state_dir: Path
) -> None:
    running = await start("web-0", python(tmp_path, SLEEP_FOREVER), state_dir)
    try:
        with pytest.raises(AlreadyExists, match=rf"^cannot start web-0: pid {running.pid} "):
            await start("web-0", python(tmp_path, SLEEP_FOREVER), state_dir)
        assert json.loads((state_dir / "web-0.json").read_text())["pid"] == running.pid
    finally:
        await finish(running)


# A separate engine: starts the child, prints its pid, and dies without stopping it.
ENGINE = """
import asyncio, os, sys
from pathlib import Path
from setpoint.workloads.supervisor import ProcessSpec, start

async def main():
    spec = ProcessSpec(args=[sys.executable, "-c", sys.argv[4]], log_dir=Path(sys.argv[1]),
                       marker=sys.argv[3])
    running = await start("web-0", spec, Path(sys.argv[2]))
    print(running.pid, flush=True)
    os._exit(0)

asyncio.run(main())
"""

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


async def test_a_restarted_engine_adopts_its_child(
    tmp_path: Path, state_dir: Path, notes: Notifications
) -> None:
    marker = f"test-{uuid.uuid4().hex}"
    engine = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        ENGINE,
        str(tmp_path / "logs"),
        str(state_dir),
        marker,
        ADOPTEE.format(notes=str(notes.path)),
        stdout=asyncio.subprocess.PIPE,
    )
    pid = 0
    try:
        out, _ = await asyncio.wait_for(engine.communicate(), TIMEOUT)
        pid = int(out)
        assert await notes.line() == "ready"
        assert is_alive(pid)
        assert os.getppid() != pid

        adopted = find_adoptable("web-0", state_dir)
        assert adopted is not None
        assert (adopted.pid, adopted.pgid) == (pid, pid)
        os.kill(pid, signal.SIGUSR1)  # its output still reaches the log after adoption
        assert await notes.line() == "said hello"
        os.kill(pid, signal.SIGKILL)
        ended = await asyncio.wait_for(adopted.wait(), TIMEOUT)
        assert ended == Exit(code=None, signal=None, reason="exited (adopted; code unknown)")
        await asyncio.wait_for(adopted.wait_logs_closed(), TIMEOUT)
        log = (tmp_path / "logs" / "web-0.log").read_text()
        assert log.splitlines() == ["before adoption", "after adoption"]

        assert await asyncio.wait_for(stop(adopted, grace=0.3), TIMEOUT) == ended
        assert listing(state_dir) == []
    finally:
        if pid:
            kill_group(pid)
        if engine.returncode is None:
            engine.kill()
            await engine.wait()


async def test_stop_of_an_adopted_process_signals_its_group(
    tmp_path: Path, state_dir: Path, notes: Notifications
) -> None:
    marker = f"test-{uuid.uuid4().hex}"
    code = f"import time\nopen({str(notes.path)!r}, 'w').write('ready\\n')\n{SLEEP_FOREVER}"
    engine = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        ENGINE,
        str(tmp_path / "logs"),
        str(state_dir),
        marker,
        code,
        stdout=asyncio.subprocess.PIPE,
    )
    pid = 0
    try:
        out, _ = await asyncio.wait_for(engine.communicate(), TIMEOUT)
        pid = int(out)
        assert await notes.line() == "ready"
        adopted = find_adoptable("web-0", state_dir)
        assert adopted is not None
        ended = await asyncio.wait_for(stop(adopted, grace=5), TIMEOUT)
        assert ended.reason == "exited (adopted; code unknown)"
        await wait_pid_gone(pid)
        assert find_adoptable("web-0", state_dir) is None
    finally:
        if pid:
            kill_group(pid)
        if engine.returncode is None:
            engine.kill()
            await engine.wait()


def _fake_state(state_dir: Path, pid: int, starttime: int, marker: str) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    record = {"pid": pid, "pgid": pid, "starttime": starttime, "marker": marker, "argv": []}
    (state_dir / "web-0.json").write_text(json.dumps(record))


async def test_a_recycled_pid_is_not_adopted(state_dir: Path) -> None:
    me = os.getpid()
    _fake_state(state_dir, me, proc_starttime(me) + 1, "m")
    assert find_adoptable("web-0", state_dir) is None
    assert stray("web-0", state_dir) is True
    assert not (state_dir / "web-0.json").exists()
    assert is_alive(me)


async def test_a_process_without_the_marker_is_not_adopted(state_dir: Path) -> None:
    me = os.getpid()
    _fake_state(state_dir, me, proc_starttime(me), "not-in-my-environment")
    assert find_adoptable("web-0", state_dir) is None
    assert stray("web-0", state_dir) is True


async def test_stray_removes_a_dead_entry(tmp_path: Path, state_dir: Path) -> None:
    running = await start("web-0", python(tmp_path, SLEEP_FOREVER), state_dir)
    try:
        os.kill(running.pid, signal.SIGKILL)
        await asyncio.wait_for(running.wait(), TIMEOUT)
        assert (state_dir / "web-0.json").exists()
        assert find_adoptable("web-0", state_dir) is None
        assert stray("web-0", state_dir) is True
        assert listing(state_dir) == []
        assert stray("web-0", state_dir) is False  # nothing left to remove
    finally:
        await finish(running)


async def test_a_corrupt_state_file_is_a_stray(state_dir: Path) -> None:
    _fake_state(state_dir, 0, 0, "")
    (state_dir / "web-0.json").write_text("{not json")
    assert find_adoptable("web-0", state_dir) is None
    assert stray("web-0", state_dir) is True
