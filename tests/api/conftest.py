"""Fixtures of the API tests: `server` is a real `setpoint serve` (one per test module,
each test using names of its own), with kubectl pointed at it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from api_kit import Server, kubectl_binary, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    kubectl_binary()
    running = start_server(Path(tmp_path_factory.mktemp("api")))
    try:
        yield running
    finally:
        running.stop()
