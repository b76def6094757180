"""Fixtures of the client tests: `served`, one API server with the Widget CRD per test
module (each test uses names and labels of its own), and `compacting`, a server of its own
for one test whose store keeps only 3 revisions of history (`clients_kit`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from clients_kit import World, compacting_server, serving

from setpoint.testing import ApiServer


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[ApiServer, World]]:
    with serving() as both:
        yield both


@pytest.fixture
def compacting() -> Iterator[tuple[ApiServer, World]]:
    with compacting_server() as both:
        yield both
