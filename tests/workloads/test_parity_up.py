"""process-compose parity through the real CLI: examples/process-compose end to end (`setpoint
up` starts `seed` once `server` has started, makes `server` Ready on its log line, starts
`client` once `server` is Ready and `seed` has Completed (it failed), and both got their
envFile's values), and `apply` refusing a bad condition or pattern, naming the field."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "process-compose"
WANTED = {"Process/server", "Process/client"}


def test_up_runs_the_process_compose_example(tmp_path: Path) -> None:
    manifest = (EXAMPLE / "setpoint.yaml").read_text()
    manifest = manifest.replace("python3", sys.executable).replace("time.sleep(2); ", "")
    (tmp_path / "examples" / "process-compose").mkdir(parents=True)
    (tmp_path / "examples" / "process-compose" / "app.env").write_text(
        (EXAMPLE / "app.env").read_text()
    )
    (tmp_path / "compose.yaml").write_text(manifest)
    up = subprocess.Popen(
        [sys.executable, "-m", "setpoint", "up", "compose.yaml"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    ready: set[str] = set()
    pids: set[int] = set()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 60
        assert up.stdout is not None
        for line in up.stdout:  # one line per status change; ends if `up` dies
            seen.append(line)
            if "ready=True" in line:
                ready.add(line.split()[0])
            if " pid=" in line and (pid := line.split(" pid=")[1].split()[0]).isdigit():
                pids.add(int(pid))
            if ready >= WANTED or time.monotonic() > deadline:
                break
        assert ready >= WANTED, "".join(seen)
        text = "".join(seen)
        assert "matched: server listening on port 8099" in text
        assert "Job/seed ready=False phase=Failed" in text
        logs = tmp_path / ".setpoint" / "logs"
        assert (logs / "default_seed.log").read_text() == "hello from app.env world\n"
        # client has no readiness probe: Ready once started, maybe before it printed.
        client_log = logs / "default_client.log"
        deadline = time.monotonic() + 60
        while not client_log.exists() or not client_log.read_text():
            assert time.monotonic() < deadline, "client printed nothing within 60 s"
            time.sleep(0.05)
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=30) == 0
        assert client_log.read_text() == "hello from app.env client\n"
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait()
            for pid in pids:  # children run in sessions of their own
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)


BAD_MANIFESTS = {
    "spec.dependsOn[0].condition: 'process_healthy' is not a condition: want one of Ready,"
    " Complete, Started, Completed; for process-compose's process_healthy, write Ready": """
spec:
  args: [sleep, "1"]
  dependsOn: [{kind: Process, name: db, condition: process_healthy}]
""",
    "spec.readinessProbe.logLine.pattern: not an RE2 regular expression: missing ):": """
spec:
  args: [sleep, "1"]
  readinessProbe: {logLine: {pattern: "port (\\\\d+"}}
""",
}


def test_apply_refuses_a_bad_condition_or_pattern_naming_the_field(tmp_path: Path) -> None:
    for i, (message, spec) in enumerate(BAD_MANIFESTS.items()):
        manifest = tmp_path / f"bad{i}.yaml"
        head = "apiVersion: setpoint.dev/v1alpha1\nkind: Process\nmetadata: {name: web}"
        manifest.write_text(head + spec)
        store = f"sqlite:///{tmp_path / 's.db'}"
        result = subprocess.run(
            [sys.executable, "-m", "setpoint", "--store", store, "apply", "-f", str(manifest)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 1
        assert message in result.stderr
        assert "nothing was applied" in result.stderr
