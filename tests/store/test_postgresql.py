"""The `postgresql://` store beyond the conformance suite: opening (URLs, a missing driver, a
missing store), compaction in bounded batches, and surviving a restart of the real server:
a call in flight fails with `StoreUnavailable`, watchers resume where they were and miss or
repeat nothing, and the store writes again once the server is back.

The restart tests run their own server (tests/postgresql_server.py), not the session's.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from postgresql_server import PostgresServer, missing
from setpoint.errors import AlreadyExists, Invalid, NotFound, StoreUnavailable
from setpoint.store import open_store

sys.path.insert(0, str(Path(__file__).parents[1] / "conformance"))
from conformance_kit import (
    API,
    TIMEOUT,
    by_key,
    close_watch,
    make_registry,
    replay,
    rv,
    take,
    take_until,
    widget,
)

pytestmark = pytest.mark.usefixtures("postgresql_server")


async def wait_for(check: Callable[[], bool], within: float) -> None:
    """Return once `check()` (run in a thread: it may block) holds; fail after `within` s."""
    deadline = asyncio.get_running_loop().time() + within
    while not await asyncio.to_thread(check):
        assert asyncio.get_running_loop().time() < deadline, f"not within {within}s: {check}"
        await asyncio.sleep(0.02)


@pytest.fixture
def url(postgresql_server: PostgresServer) -> str:
    return postgresql_server.new_url()


@pytest.fixture
async def stores() -> AsyncIterator[list[Any]]:
    opened: list[Any] = []
    yield opened
    for store in opened:
        await store.close()


async def opened(stores: list[Any], url: str, **kwargs: Any) -> Any:
    store = await open_store(url, make_registry(), **kwargs)
    stores.append(store)
    return store


async def test_both_schemes_open_the_same_store(url: str, stores: list[Any]) -> None:
    a = await opened(stores, url)
    b = await opened(stores, url.replace("postgresql://", "postgres://", 1))
    created = await a.create(widget("w1"))
    assert await b.get(API, "Widget", "w1") == created


async def test_reading_never_creates_a_store(
    url: str, postgresql_server: PostgresServer, stores: list[Any]
) -> None:
    with pytest.raises(NotFound, match="reading never creates"):
        await open_store(url, make_registry(), create=False)
    with pytest.raises(NotFound, match="does not exist"):
        await open_store(postgresql_server.url("no_such_db"), make_registry(), create=False)
    await opened(stores, url)
    assert (await (await opened(stores, url, create=False)).list(API, "Widget"))[0] == []


async def test_bad_options_name_the_store_field(url: str) -> None:
    with pytest.raises(Invalid, match="store: sync='fast'"):
        await open_store(url + "?sync=fast", make_registry())
    with pytest.raises(Invalid, match="store: not a PostgreSQL connection URL"):
        await open_store(url + "?no_such_libpq_option=1", make_registry())


async def test_a_missing_driver_names_the_extra(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "setpoint.store.postgresql")
    with pytest.raises(Invalid, match=r"setpoint\[postgresql\]"):
        await open_store(url, make_registry())


async def test_an_unreachable_server_is_retryable() -> None:
    from postgresql_server import free_port

    with pytest.raises(StoreUnavailable, match="cannot be reached"):
        await open_store(f"postgresql://postgres@127.0.0.1:{free_port()}/x", make_registry())


def log_rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM setpoint_log").fetchone()
        assert row is not None
        return int(row[0])


async def test_a_store_of_schema_1_is_migrated_and_keeps_working(
    url: str, stores: list[Any]
) -> None:
    """A store an older setpoint made (no `writer` in the log, schema 1) opens: its history
    names no writer, new writes do, and the schema is 2 once."""
    from setpoint.store.base import Actor, WriteOptions

    store = await opened(stores, url)
    created = await store.create(widget("old"))
    await store.close()
    with psycopg.connect(url.split("?", 1)[0], autocommit=True) as conn:
        conn.execute("ALTER TABLE setpoint_log DROP COLUMN writer")
        conn.execute("UPDATE setpoint_meta SET value = 1 WHERE key = 'schema'")

    alice = Actor("alice", "kubectl", "kubectl/v1.31.0")
    store = await opened(stores, url)
    again = await opened(stores, url)  # another process: it finds schema 2
    events = store.watch(API, "Widget", since=0)
    try:
        await again.update(dict(created, spec={"size": 2}), options=WriteOptions(actor=alice))
        old, new = await take(events, 2)
    finally:
        await close_watch(events)
    assert (old.verb, old.actor) == (None, None)
    assert (new.verb, new.actor) == ("update", alice)
    with psycopg.connect(url.split("?", 1)[0]) as conn:
        row = conn.execute("SELECT value FROM setpoint_meta WHERE key = 'schema'").fetchone()
    assert row == (2,)


async def test_compaction_deletes_the_history_it_does_not_keep(url: str, stores: list[Any]) -> None:
    keep = 100
    store = await opened(stores, url + f"?history={keep}")
    for start in range(0, 1000, 100):
        await asyncio.gather(*(store.create(widget(f"w{i}")) for i in range(start, start + 100)))
    # The mark moves inside the write that passes it; the rows go in batches behind it.
    await wait_for(lambda: log_rows(url) <= 2 * keep, within=TIMEOUT * 3)
    await store.compact(await store.revision())
    assert log_rows(url) == 0
    assert len((await store.list(API, "Widget"))[0]) == 1000


# -- a restart of the server ----------------------------------------------------------------


@pytest.fixture(scope="module")
def own_server() -> Iterator[PostgresServer]:
    if (reason := missing()) is not None:
        pytest.skip(reason)  # (the session fixture, used above, fails instead in CI)
    with PostgresServer() as server:
        yield server


def waiting_on_a_lock(server: PostgresServer) -> bool:
    with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        ).fetchone()
        return row is not None and row[0] > 0


async def test_a_write_in_flight_when_the_server_stops_fails_retryably(
    own_server: PostgresServer, stores: list[Any]
) -> None:
    url = own_server.new_url()
    store = await opened(stores, url)
    await store.create(widget("before"))
    # Hold the revision row so that the next write waits in the server: it is in flight.
    blocker = await psycopg.AsyncConnection.connect(url)
    await blocker.execute("SELECT 1 FROM setpoint_meta WHERE key = 'revision' FOR UPDATE")
    in_flight = asyncio.create_task(store.create(widget("in-flight")))
    await wait_for(lambda: waiting_on_a_lock(own_server), within=TIMEOUT)
    try:
        await asyncio.to_thread(own_server.stop)
        with pytest.raises(StoreUnavailable, match="may or may not have been committed"):
            await in_flight
        with pytest.raises(StoreUnavailable):  # and calls made while it is down
            await store.create(widget("while-down"))
        with pytest.raises(StoreUnavailable):
            await store.get(API, "Widget", "before")
    finally:
        await blocker.close()
        if own_server.process is None:
            await asyncio.to_thread(own_server.start)
    # Once it is back, the same store works again, first call included.
    after = await store.create(widget("after"))
    assert (await store.get(API, "Widget", "after")) == after
    names = {o["metadata"]["name"] for o in (await store.list(API, "Widget"))[0]}
    assert names == {"before", "after"}  # the blocked write was rolled back with its session


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fast", "immediate"])
async def test_watchers_resume_across_a_server_restart(
    own_server: PostgresServer, stores: list[Any], mode: str
) -> None:
    """Writers keep writing (retrying what failed) while the server restarts; a watcher in
    the writing store and one in another store see every revision once, in order."""
    url = own_server.new_url()
    writer = await opened(stores, url)
    other = await opened(stores, url)
    start = await writer.revision()
    local = writer.watch(API, "Widget", since=start)
    remote = other.watch(API, "Widget", since=start)
    acked: dict[int, str] = {}
    failures: list[BaseException] = []
    restarted = asyncio.Event()

    async def write(task: int) -> None:
        i = 0
        while not restarted.is_set() or i < 40:
            name = f"t{task}-{i}"
            try:
                acked[rv(await writer.create(widget(name)))] = name
            except StoreUnavailable as exc:
                failures.append(exc)
                await asyncio.sleep(0.05)  # back off while the server is away
                continue
            except AlreadyExists:  # a create that failed may have been committed: read it
                acked[rv(await writer.get(API, "Widget", name))] = name
            i += 1

    writers = asyncio.gather(*(write(t) for t in range(4)))
    try:
        await wait_for(lambda: len(acked) >= 50, within=TIMEOUT * 3)
        await asyncio.to_thread(own_server.restart, mode)
        restarted.set()
        await asyncio.wait_for(writers, TIMEOUT * 6)
        end = await writer.revision()
        seen_local = await take_until(local, end, TIMEOUT * 3)
        seen_remote = await take_until(remote, end, TIMEOUT * 3)
    finally:
        writers.cancel()
        await close_watch(local)
        await close_watch(remote)
    revisions = list(range(start + 1, end + 1))
    assert [e.revision for e in seen_local] == revisions
    assert [e.revision for e in seen_remote] == revisions
    assert [e.object for e in seen_remote] == [e.object for e in seen_local]
    for revision, name in acked.items():  # each acknowledged write is where it said it was
        assert seen_local[revision - start - 1].object["metadata"]["name"] == name
    assert replay(seen_local) == by_key((await other.list(API, "Widget"))[0])
    assert all("cannot be reached" in str(f) for f in failures)
