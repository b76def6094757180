"""The CLI says in one line that setpoint runs on Linux only, on any other platform, before
any verb runs; pyproject says so too (its classifier)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_cli_refuses_another_platform_in_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import sys; sys.platform = 'darwin'; import setpoint.cli.main"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr == "setpoint runs on Linux only (this is darwin)\n"


def test_pyproject_says_linux_only() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "Operating System :: POSIX :: Linux" in project["classifiers"]
    assert not any(
        c.startswith("Operating System :: OS Independent") for c in project["classifiers"]
    )
