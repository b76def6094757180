"""docs/examples/kubectl.sh, the example docs/api.md shows, runs with the real kubectl; the
roles file docs/api.md shows is one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from api_kit import TIMEOUT, kubectl_binary

from setpoint.api.auth import parse_roles
from setpoint.engine.kinds import builtin_kinds

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
        'process.setpoint.dev "web" deleted from default namespace',  # kubectl 1.37's words
    ]
    assert "kubectl label process web tier=front" in (ROOT / "docs/api.md").read_text()


def test_the_roles_file_example_is_a_roles_file() -> None:
    text = (ROOT / "docs/api.md").read_text()
    example = text.split("```yaml\n# roles.yaml\n", 1)[1].split("```", 1)[0]
    roles = parse_roles(yaml.safe_load(example), "docs/api.md", builtin_kinds())
    role = roles["process-reader"]
    kinds = builtin_kinds()
    assert role.may("list", kinds.resolve("processes"))
    assert role.may("create", kinds.resolve("jobs"))
    assert not role.may("create", kinds.resolve("processes"))
    assert not role.may("get", kinds.resolve("secrets"))
    assert "may run commands as the\nengine's user" in text
