"""docs/examples/dashboard.sh, the example docs/dashboard.md shows, runs and says what the
page would read."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from dashboard_kit import ROOT, TIMEOUT_S, missing


def test_the_dashboard_example_runs(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        missing("curl is not installed (the example reads the API with it)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETPOINT_", "KUBE"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(tmp_path)
    env["TMPDIR"] = str(tmp_path)
    result = subprocess.run(
        ["bash", str(ROOT / "docs/examples/dashboard.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT_S * 2,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:4] == [
        "content-security-policy: default-src 'self'; scrip",
        "['db', 'web']",
        "waiting for Process/db to be Ready",
        "403",
    ]
    assert lines[4].startswith("open https://127.0.0.1:")
    assert lines[4].endswith("tokens.csv")
