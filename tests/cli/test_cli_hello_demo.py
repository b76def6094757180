"""examples/hello/demo.py (`./dev demo`) runs by itself and shows every kind of watch event."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cli_kit import HELLO, TIMEOUT


def run_demo(directory: Path) -> list[str]:
    proc = subprocess.run(
        [sys.executable, str(HELLO / "demo.py")],
        capture_output=True,
        text=True,
        cwd=directory,
        timeout=TIMEOUT,
    )
    assert (proc.returncode, proc.stderr) == (0, ""), proc
    return proc.stdout.splitlines()


def test_demo_shows_added_modified_deleted_and_a_final_table(tmp_path: Path) -> None:
    lines = run_demo(tmp_path)
    events = [line.split()[1:3] for line in lines if line.strip().startswith("watch:")]
    assert events == [
        ["ADDED", "hello"],
        ["ADDED", "bonjour"],
        ["MODIFIED", "hello"],  # spec: repeat 2 -> 3
        ["MODIFIED", "hello"],  # status: Ready
        ["DELETED", "bonjour"],
    ]
    assert any("greeting.example.com/hello unchanged" in line for line in lines)
    assert any("generation=2" in line and "Ready=True" in line for line in lines)
    table = lines[lines.index(next(line for line in lines if "RESOURCEVERSION" in line)) :]
    assert table[1].split()[:2] == ["hello", "True"]
    assert (tmp_path / ".setpoint" / "demo.db").is_file()


def test_demo_starts_fresh_each_run(tmp_path: Path) -> None:
    def events(lines: list[str]) -> list[str]:
        return [line for line in lines if "watch:" in line]

    first = events(run_demo(tmp_path))
    assert "rv=1 " in first[0]
    assert events(run_demo(tmp_path)) == first  # same revisions: the old store was removed
