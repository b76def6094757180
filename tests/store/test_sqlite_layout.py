"""A SQLite store file of an older layout (a log without the `writer` column) opens and keeps
working: its history has no known writer, and what is written after names its own."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

from setpoint.store import open_store
from setpoint.store.base import Actor, WriteOptions

sys.path.insert(0, str(Path(__file__).parents[1] / "conformance"))
from conformance_kit import API, close_watch, make_registry, take, widget

ALICE = Actor("alice", "kubectl", "kubectl/v1.31.0")


async def test_an_older_file_opens_and_its_new_writes_name_their_writer(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    store = await open_store(f"sqlite:///{path}", make_registry())
    created = await store.create(widget("old"))
    await store.close()
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE log DROP COLUMN writer")  # as an older setpoint left it
    conn.close()

    store = await open_store(f"sqlite:///{path}", make_registry())
    try:
        events = store.watch(API, "Widget", since=0)
        try:
            await store.update(dict(created, spec={"size": 2}), options=WriteOptions(actor=ALICE))
            old, new = await take(events, 2)
        finally:
            await close_watch(events)
        assert (old.type, old.verb, old.actor) == ("ADDED", None, None)
        assert (new.type, new.verb, new.actor) == ("MODIFIED", "update", ALICE)
        assert (await store.get(API, "Widget", "old"))["spec"]["size"] == 2
    finally:
        await store.close()
