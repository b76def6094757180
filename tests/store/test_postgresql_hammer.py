"""The PostgreSQL store under kine's failing load, for real: 3 writer processes of 6 writers
(each with a connection of its own) x 60 objects each, writing as fast as they can for about
a minute, while 2 watcher processes check that every revision arrives exactly once and in
order and that a list at revision R holds every write at or below R (and nothing newer).
Then every acknowledged write is matched with the event at its revision.

A watcher that skipped a revision committed late with a lower number (insert order is not
commit order: kine's fault) fails it. Proven to bite: with the revision counter's row lock
taken away (revisions from a sequence instead), it fails within seconds.
`SETPOINT_HAMMER_SECONDS` changes the duration (bench/distributed.py runs it longer).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from postgresql_hammer import hammer

from postgresql_server import PostgresServer
from setpoint.store import open_store

SECONDS = float(os.environ.get("SETPOINT_HAMMER_SECONDS", "60"))


@pytest.mark.slow
@pytest.mark.timeout(SECONDS + 600)
@pytest.mark.xdist_group("wall-clock")  # not beside the hammer: tests/conftest.py
async def test_three_writer_processes_two_watcher_processes(
    postgresql_server: PostgresServer, tmp_path: Path
) -> None:
    url = postgresql_server.new_url("hammer")
    await (await open_store(url)).close()  # the tables, before the processes race to them
    outcome = await asyncio.to_thread(hammer, url, SECONDS, tmp_path)
    assert outcome.problems() == []
    assert outcome.final > 1000, "too few writes to prove anything"
