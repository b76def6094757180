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


def test_the_operator_tests_of_testing_operators_run() -> None:
    """docs/testing-operators.md's example tests, run as their users run them: pytest on the
    directory, its conftest registering `setpoint_api`: the kr8s one and the kopf one. A stream
    left open past its event loop, or a client's warning about the server, fails them."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rxX",
         "-W", "error::pytest.PytestUnraisableExceptionWarning", "-W", "error::UserWarning",
         str(ROOT / "docs/examples/testing-operators")],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=ROOT,
    )  # fmt: skip
    summary = result.stdout.splitlines()[-1]
    assert result.returncode == 0, result.stdout + result.stderr
    assert summary.startswith("2 passed"), result.stdout
