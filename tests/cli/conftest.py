"""Fixtures of the CLI tests: `cli` runs the real command line in a fresh directory and store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_kit import CLI, GREETINGS, Running


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
