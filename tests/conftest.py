"""Fixtures shared by every test directory: the session's PostgreSQL and etcd servers.

`postgresql_server` starts one throwaway cluster (tests/postgresql_server.py) and
`etcd_server` one throwaway etcd member (tests/etcd_server.py), each for the whole session,
for the conformance suite's backends and the tests of those stores. When a server is not
installed, a test that needs it is skipped with the reason, except in CI (`CI=true`), where
it fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import etcd_server as etcd
import postgresql_server as postgresql


def unavailable(reason: str) -> None:
    """Skip the test for a server this machine lacks, with `reason`; fail instead in CI."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: every backend must run)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgresql_server() -> Iterator[postgresql.PostgresServer]:
    reason = postgresql.missing()
    if reason is not None:
        unavailable(f"PostgreSQL: {reason}")
    with postgresql.PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[etcd.EtcdServer]:
    reason = etcd.missing()
    if reason is not None:
        unavailable(f"etcd: {reason}")
    with etcd.EtcdServer() as server:
        yield server
