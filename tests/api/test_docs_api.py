"""docs/examples/kubectl.sh, the example docs/api.md shows, runs with the real kubectl."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from api_kit import TIMEOUT, kubectl_binary

ROOT = Path(__file__).resolve().parents[2]


def test_the_kubectl_example_runs(tmp_path: Path) -> None:
    kubectl_binary()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETPOINT_", "KUBE"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(tmp_path)
    env["TMPDIR"] = str(tmp_path)
    result = subprocess.run(
        ["bash", str(ROOT / "docs/examples/kubectl.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT * 2,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "process.setpoint.dev/web created",
        "process.setpoint.dev/web",
        "process.setpoint.dev/web labeled",
        "front",
        'process.setpoint.dev "web" deleted',
    ]
    assert "kubectl label process web tier=front" in (ROOT / "docs/api.md").read_text()
