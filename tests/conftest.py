"""Fixtures shared by every test directory: the session's etcd server.

`etcd_server` starts one throwaway etcd member (tests/etcd_server.py) for the whole session,
for the conformance suite's `etcd` backend and the tests of that store. When etcd is not
installed, a test that needs it is skipped with the reason, except in CI (`CI=true`), where
it fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from etcd_server import EtcdServer, missing


def unavailable(reason: str) -> None:
    """Skip the test for a server this machine lacks, with `reason`; fail instead in CI."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: every backend must run)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[EtcdServer]:
    reason = missing()
    if reason is not None:
        unavailable(f"etcd: {reason}")
    with EtcdServer() as server:
        yield server
