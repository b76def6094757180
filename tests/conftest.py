"""Fixtures shared by every test directory: the session's PostgreSQL server.

`postgresql_server` starts one throwaway cluster (tests/postgresql_server.py) for the whole
session, for the conformance suite's `postgresql` backend and the tests of that store. When
PostgreSQL is not installed, a test that needs it is skipped with the reason, except in CI
(`CI=true`), where it fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from postgresql_server import PostgresServer, missing


def unavailable(reason: str) -> None:
    """Skip the test for a server this machine lacks, with `reason`; fail instead in CI."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: every backend must run)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgresql_server() -> Iterator[PostgresServer]:
    reason = missing()
    if reason is not None:
        unavailable(f"PostgreSQL: {reason}")
    with PostgresServer() as server:
        yield server
