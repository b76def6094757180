"""The runnable examples in docs/ run and print what the docs say they print."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_first_controller_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "docs/examples/first_controller.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "first: Hello, world! Hello, world!",
        "second: Hello, setpoint! Hello, setpoint!",
    ]
