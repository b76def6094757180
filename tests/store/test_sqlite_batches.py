"""Group commit in the SQLite store: writes that wait together are decided in order in one
transaction, and each keeps its own outcome. Another connection holds the file's write lock
while one write waits for it in the writer and the others queue up behind, so they reach the
writer as one batch (more rows than one multi-row statement carries); then the state, the
log and a watch are checked."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from setpoint.errors import AlreadyExists, Conflict, Invalid, NotFound
from setpoint.store import open_store
from setpoint.store import sqlite as sqlite_backend

sys.path.insert(0, str(Path(__file__).parents[1] / "conformance"))
from conformance_kit import API, TIMEOUT, close_watch, make_registry, note, rv, take, widget

MANY = 600
"""Creates in the batch: more than two statements' worth of rows (`_MAX_ROWS`)."""


async def _until(condition: Callable[[], bool]) -> None:
    """Wait until `condition()` holds (the writer thread's progress has no event to await)."""
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, "the writes never queued"
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("variables", [None, 999], ids=["this-sqlite", "sqlite-before-3.32"])
async def test_one_batch_decides_in_order_and_fails_only_its_own_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variables: int | None
) -> None:
    """`variables`: the most bound variables a statement may have, lowered on the store's
    connections to what SQLite allowed before 3.32 (the store must cut its statements)."""
    if variables is not None:
        connect = sqlite_backend._connect

        def limited(*args: Any) -> sqlite3.Connection:
            conn = connect(*args)
            conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, variables)
            return conn

        monkeypatch.setattr(sqlite_backend, "_connect", limited)
    path = tmp_path / "state.db"
    store = await open_store(f"sqlite:///{path}", make_registry())
    try:
        x = await store.create(widget("x", 1))
        y = await store.create(widget("y", 1))
        since = await store.revision()
        events = store.watch(API, "Widget", since=since)
        lock = sqlite3.connect(path, isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")  # the writer waits for it, the writes queue up
        try:
            first = asyncio.ensure_future(store.create(widget("first", 1)))
            await _until(lambda: len(store._batch) == 1)  # type: ignore[attr-defined]
            calls: list[Any] = [
                *(store.create(widget(f"a-{i:04d}", i)) for i in range(MANY)),
                store.create(widget("twice", 1)),
                store.create(widget("twice", 2)),  # AlreadyExists: the first is in the batch
                store.update(dict(x, spec={"size": 2})),
                store.update(dict(x, spec={"size": 3})),  # Conflict: stale after the one above
                store.delete(API, "Widget", "y"),
                store.create(widget("y", 5)),  # a new y, after the old one is gone
                store.update(dict(y, spec={"size": 9})),  # Conflict: the old y's version
                store.create(note("huge", "z" * (2 * 1024 * 1024))),  # Invalid: too large
                store.create(widget("after-huge", 7)),
            ]
            results = asyncio.gather(first, *calls, return_exceptions=True)
            await _until(lambda: store._writes.qsize() == len(calls))  # type: ignore[attr-defined]
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        first_written, *outcomes = await asyncio.wait_for(results, TIMEOUT)

        created, rest = outcomes[:MANY], outcomes[MANY:]
        assert all(isinstance(o, dict) for o in created)
        twice, twice_again, x2, x3, y_gone, y_new, y_stale, huge, after = rest
        assert isinstance(twice, dict)
        assert isinstance(twice_again, AlreadyExists)
        assert isinstance(x2, dict)
        assert isinstance(x3, Conflict)
        assert isinstance(y_gone, dict)
        assert isinstance(y_new, dict)
        assert isinstance(y_stale, Conflict)
        assert isinstance(huge, Invalid)
        assert isinstance(after, dict)
        assert y_new["metadata"]["uid"] != y["metadata"]["uid"]

        written = [first_written, *(o for o in outcomes if isinstance(o, dict))]
        revisions = sorted(rv(o) for o in written)
        assert revisions == list(range(since + 1, since + 1 + len(written)))  # no gap
        assert await store.revision() == revisions[-1]

        # The watch sees every write once, in revision order, as each caller got it.
        seen = await take(events, len(written))
        assert [e.revision for e in seen] == revisions
        by_revision = {rv(o): o for o in written}
        for event in seen:
            if event.type != "DELETED":
                assert event.object == by_revision[event.revision]
        assert [e.type for e in seen if e.object["metadata"]["name"] == "y"] == [
            "DELETED",
            "ADDED",
        ]
    finally:
        await close_watch(events)
        await store.close()

    # What the batch left is what a fresh open of the file reads.
    again = await open_store(f"sqlite:///{path}", make_registry())
    try:
        items, _ = await again.list(API, "Widget")
        sizes = {o["metadata"]["name"]: o["spec"]["size"] for o in items}
        assert len(sizes) == MANY + 5  # and first, twice, x, y, after-huge
        assert (sizes["twice"], sizes["x"], sizes["y"], sizes["after-huge"]) == (1, 2, 5, 7)
        assert all(sizes[f"a-{i:04d}"] == i for i in range(MANY))
        with pytest.raises(NotFound):
            await again.get(API, "Note", "huge")
    finally:
        await again.close()
