"""SQLite backend under failure: a failed log read ends watches with Gone (clients relist)
instead of silently stopping them; a dead writer fails writes instead of hanging them; a
failure while publishing a commit to watchers still answers its writers."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from setpoint.errors import Gone, StoreClosed
from setpoint.model import Kind, Registry
from setpoint.store import Store, open_store

API = "test.setpoint.dev/v1"


def registry() -> Registry:
    reg = Registry()
    reg.register(Kind(API, "Thing", "things"))
    return reg


def thing(name: str) -> dict[str, object]:
    return {"apiVersion": API, "kind": "Thing", "metadata": {"name": name}, "spec": {}}


async def test_a_failed_log_read_ends_watches_with_gone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    mine, other = await open_store(url, registry()), await open_store(url, registry())
    try:
        events = mine.watch(API, "Thing", since=await mine.revision())
        await mine.create(thing("mine"))
        assert (await asyncio.wait_for(anext(events), 5)).object["metadata"]["name"] == "mine"

        real = mine._log_after  # type: ignore[attr-defined]
        failures = iter([sqlite3.OperationalError("database is locked")])

        def flaky(conn: sqlite3.Connection, after: int) -> object:
            for exc in failures:
                raise exc
            return real(conn, after)

        mine._log_after = flaky  # type: ignore[attr-defined]
        first = asyncio.ensure_future(anext(events))
        await other.create(thing("from-another-process"))  # found by polling: reads the log
        with pytest.raises(Gone):
            await asyncio.wait_for(first, 5)

        # A new watch works: the dispatcher is alive and follows later writes.
        items, revision = await mine.list(API, "Thing")
        assert [o["metadata"]["name"] for o in items] == ["from-another-process", "mine"]
        again = mine.watch(API, "Thing", since=revision)
        await other.create(thing("later"))
        event = await asyncio.wait_for(anext(again), 5)
        assert event.object["metadata"]["name"] == "later"
        await again.aclose()
    finally:
        await mine.close()
        await other.close()


async def test_a_dead_writer_fails_writes(tmp_path: Path) -> None:
    store: Store = await open_store(f"sqlite:///{tmp_path}/state.db", registry())
    try:

        def broken(conn: sqlite3.Connection, batch: object) -> object:
            raise MemoryError("simulated crash of the writer thread")

        store._commit = broken  # type: ignore[attr-defined]
        with pytest.raises(StoreClosed, match="writer stopped"):
            await asyncio.wait_for(store.create(thing("a")), 5)
        with pytest.raises(StoreClosed):
            await store.create(thing("b"))
    finally:
        await store.close()


async def test_writers_are_answered_when_publishing_fails(tmp_path: Path) -> None:
    """A failure while publishing a committed batch to watchers never leaves its writers
    waiting: the write was committed, and its caller gets the object."""
    store: Store = await open_store(f"sqlite:///{tmp_path}/state.db", registry())
    loop = asyncio.get_running_loop()
    errors: list[object] = []
    loop.set_exception_handler(lambda _, context: errors.append(context.get("exception")))
    try:

        def broken(entries: object) -> None:
            raise RuntimeError("simulated failure of the fan-out")

        store._publish = broken  # type: ignore[attr-defined]
        created = await asyncio.wait_for(store.create(thing("a")), 5)
        assert created["metadata"]["name"] == "a"
        assert (await store.get(API, "Thing", "a"))["metadata"]["uid"] == created["metadata"]["uid"]
        assert any(isinstance(e, RuntimeError) for e in errors)
    finally:
        loop.set_exception_handler(None)
        await store.close()
