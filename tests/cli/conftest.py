"""Fixtures of the CLI tests: `cli` runs the real command line in a fresh directory and store."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_kit import CLI, GREETINGS, Running, marked_processes


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[CLI]:
    started: list[Running] = []
    kit = CLI(tmp_path)
    start = kit.start

    def tracked_start(*args: str) -> Running:
        running = start(*args)
        started.append(running)
        return running

    kit.start = tracked_start  # type: ignore[method-assign]
    yield kit
    for running in started:
        running.kill()


@pytest.fixture
def applied(cli: CLI) -> CLI:
    """`cli` with examples/hello/greeting.yaml applied (hello: lang=en, bonjour: lang=fr)."""
    cli.ok("apply", "-f", str(GREETINGS))
    return cli


@pytest.fixture
def token(tmp_path: Path) -> Iterator[str]:
    """A marker for the argv of every child a test starts; whatever carries it is killed
    (its whole group) after the test."""
    mark = f"setpoint-test-{os.getpid()}-{tmp_path.name}"
    yield mark
    for pid, _, _ in marked_processes(mark):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
