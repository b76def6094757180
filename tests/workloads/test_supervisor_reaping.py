"""An adopted child's end, with real processes: `stop` returns only once the child is
reaped, not merely exited, so a daemon started again at once does not take its
predecessor's zombie for a live owner of its lock file (PostgreSQL's `postmaster.pid`:
`kill(pid, 0)` succeeds on a zombie).

The child's parent is a separate process (`LAZY_PARENT`, as init is for a child whose
engine died) that reaps it only `REAP_DELAY` seconds after it exits; the test learns of
the exit through the adopted handle's pidfd, never by sleeping.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap
import uuid
from pathlib import Path

from supervisor_support import TIMEOUT, Notifications, kill, kill_group, proc_ppid, proc_state

from setpoint.workloads.supervisor import Adopted, find_adoptable, stop

REAP_DELAY = 1.0
"""How late the parent reaps (init was seen to take about a second); well under the
supervisor's bound of five seconds."""

# Starts the child in a session of its own, with the marker, and records it as the
# supervisor does; then reaps it only REAP_DELAY seconds after SIGCHLD says it exited.
LAZY_PARENT = """
    import json, os, signal, subprocess, sys, time
    state_dir, marker, notes, delay = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    code = "import time\\nwhile True: time.sleep(3600)"
    child = subprocess.Popen(
        [sys.executable, "-c", code], start_new_session=True, env={"SETPOINT_MARKER": marker}
    )
    # Popen returns once the exec began; its environment is readable a moment later.
    deadline = time.monotonic() + 30
    while marker.encode() not in open(f"/proc/{child.pid}/environ", "rb").read():
        assert time.monotonic() < deadline, "the child's environment never showed"
    raw = open(f"/proc/{child.pid}/stat", "rb").read()
    starttime = int(raw[raw.rindex(b")") + 2 :].split()[19])
    record = {"name": "web-0", "pid": child.pid, "pgid": child.pid, "starttime": starttime,
              "startedAt": time.time(), "marker": marker, "argv": [sys.executable]}
    with open(os.path.join(state_dir, "web-0.json"), "w") as f:
        json.dump(record, f)
    with open(notes, "w") as f:
        f.write(f"{child.pid}\\n")
    signal.sigwait({signal.SIGCHLD})
    time.sleep(delay)  # the late reaper this test is about
    os.waitpid(child.pid, 0)
"""


async def test_a_stopped_adopted_child_is_reaped_when_stop_returns(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    notes = Notifications(tmp_path / "notes")
    parent = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        textwrap.dedent(LAZY_PARENT),
        str(state_dir),
        f"test-{uuid.uuid4().hex}",
        str(notes.path),
        str(REAP_DELAY),
    )
    pid = 0
    try:
        pid = int(await notes.line())
        assert proc_ppid(pid) == parent.pid  # not this process: it cannot reap the child
        adopted = find_adoptable("web-0", state_dir)
        assert isinstance(adopted, Adopted)

        kill(pid)
        await asyncio.wait_for(adopted.wait(), TIMEOUT)  # learnt at once, through the pidfd
        # Its parent reaps it only REAP_DELAY seconds later: until then it is a zombie.
        await asyncio.wait_for(stop(adopted, grace=0), TIMEOUT)

        assert proc_state(pid) is None  # gone from /proc: a restart may take its lock file
        assert not (state_dir / "web-0.json").exists()
    finally:
        notes.close()
        if pid:
            kill_group(pid)
        if parent.returncode is None:
            parent.kill()
        await parent.wait()
