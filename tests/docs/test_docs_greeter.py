"""docs/examples/greeter.py, the controller file docs/controllers.md runs with `setpoint run`,
runs as the docs say."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_greeter_file_runs_under_setpoint_run(tmp_path: Path) -> None:
    """docs/examples/greeter.py, as docs/controllers.md runs it: `setpoint run` in one
    process, `setpoint apply` and `get` in others, on one SQLite file; Ctrl-C ends it (0)."""
    store = f"sqlite:///{tmp_path / 'state.db'}"
    greeter = str(ROOT / "docs/examples/greeter.py")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "setpoint", "--store", store, "--kinds", greeter, *args]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)

    applied = cli("apply", "-f", str(ROOT / "docs/examples/greeter.yaml"))
    assert applied.returncode == 0, applied.stderr
    controller = subprocess.Popen(
        [sys.executable, "-m", "setpoint", "--store", store, "run", greeter],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        status: dict[str, object] = {}
        while status.get("greeting") != "Hello, world! Hello, world!":
            assert time.monotonic() < deadline, f"not greeted within 60 s: {status}"
            got = cli("get", "greeter", "first", "-o", "json")
            status = json.loads(got.stdout).get("status") or {} if got.returncode == 0 else {}
        assert status == {"greeting": "Hello, world! Hello, world!", "observedGeneration": 1}
        controller.send_signal(signal.SIGINT)
        assert controller.wait(timeout=60) == 0
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()
