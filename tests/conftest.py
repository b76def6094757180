"""Fixtures shared by every test directory: the session's PostgreSQL and etcd servers, and
the order and grouping of the tests for pytest-xdist's workers.

`postgresql_server` starts one throwaway cluster (tests/postgresql_server.py) and
`etcd_server` one throwaway etcd member (tests/etcd_server.py), each for the whole session,
for the conformance suite's backends and the tests of those stores. When a server is not
installed, a test that needs it is skipped with the reason, except in CI (`CI=true`), where
it fails. With several workers, each worker's session has servers of its own (free ports,
its own temporary directory): nothing is shared between workers but the machine.

The group `xdist_group("wall-clock")` (marked in the test modules) holds the PostgreSQL
hammer test, which keeps both cores busy for a minute by design, and the tests that bound a
handover in wall-clock seconds (within the lease duration + 1 s): one worker runs them one
after another, so no such bound is measured beside the hammer.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import etcd_server as etcd
import postgresql_server as postgresql


@pytest.hookimpl(tryfirst=True)  # before xdist reads the `xdist_group` marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Group and order the tests for several workers (pytest-xdist, as `./dev test` runs them:
    `--dist loadgroup --no-loadscope-reorder` hands them out in this order, a group at once).

    The tests of a module that share a module-scoped fixture (an API server, a dashboard's
    server, a PostgreSQL cluster) go to one worker, so that the fixture is made once, not once
    per worker. The longest work goes first (the tests marked `slow`, then those groups), so
    that none starts last and ends the run alone while the other workers idle. In one process
    (`-n 0`) only the order changes."""
    grouped = set()
    for item in items:
        if isinstance(item, pytest.Function) and any(
            definition.scope == "module"
            for definitions in item._fixtureinfo.name2fixturedefs.values()
            for definition in definitions
        ):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
            grouped.add(item)
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None, item not in grouped))


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
