"""Fixtures of the dashboard tests: `served` is one real `setpoint serve` with the examples
applied (per module; tests use objects of their own when they change them)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from dashboard_kit import Served, chromium, serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    chromium()
    running = serve(Path(tmp_path_factory.mktemp("dashboard")))
    try:
        yield running
    finally:
        running.stop()
