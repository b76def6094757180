"""`HttpStore` and `HttpReader` against a real server, for what the conformance suite's
`http` backend does not reach: watches the server ends (resumed with nothing lost or
repeated), the merged watch of every kind, the writer of a write (its manager sent, its
user the token's), Status errors mapped back (the field of an
Invalid, Unauthorized and Forbidden naming the token), pages, and compaction refused.

The server is `setpoint.api.app` under uvicorn in a thread (tests/conformance/served.py)
on a SQLite store of the test's own.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))

from conformance_kit import API, close_watch, gadget, make_registry, note, take, widget
from served import Served

from setpoint.api.auth import Authenticator, Role, User
from setpoint.api.resources import ApiSettings
from setpoint.api.watch import WatchLimits
from setpoint.errors import Forbidden, Invalid, Unauthorized
from setpoint.store import open_reader, open_store
from setpoint.store.base import Actor, WriteOptions
from setpoint.store.http import HttpStore
from setpoint.store.http_wire import Credentials

TOKENS = {"edit-token": User("ed", Role.EDIT), "view-token": User("vi", Role.VIEW)}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A server whose watches end (cleanly) every 50 ms, and which knows two tokens."""
    settings = ApiSettings(watch=WatchLimits(max_timeout=0.05))
    server = Served(
        f"sqlite:///{tmp_path / 'state.db'}",
        make_registry(),
        settings=settings,
        auth=Authenticator(tokens=TOKENS),
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def store(served: Served) -> AsyncIterator[HttpStore]:
    opened = await open_store(
        served.url, make_registry(), credentials=Credentials(token="edit-token")
    )
    assert isinstance(opened, HttpStore)
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_watch_the_server_ends_resumes_from_the_last_revision(store: HttpStore) -> None:
    start = await store.revision()
    events = store.watch(API, "Widget", since=start)
    try:
        written = [await store.create(widget(f"w{i}")) for i in range(20)]
        got = await take(events, 20)
        assert [e.revision for e in got] == [int(o["metadata"]["resourceVersion"]) for o in written]
        more = await store.create(widget("after"))
        (last,) = await take(events, 1)
        assert last.object == more
    finally:
        await close_watch(events)


async def test_the_watch_of_every_kind_is_in_revision_order(store: HttpStore) -> None:
    start = await store.revision()
    events = store.watch(None, None, since=start)

    async def write(i: int) -> None:
        await store.create(widget(f"w{i}", namespace="a"))
        await store.create(gadget(f"g{i}"))
        await store.create(note(f"n{i}", {"i": i}, namespace="b"))

    try:
        await asyncio.gather(*(write(i) for i in range(8)))
        got = await take(events, 24)
        assert [e.revision for e in got] == list(range(start + 1, start + 25))
        assert sorted({e.object["kind"] for e in got}) == ["Gadget", "Note", "Widget"]
    finally:
        await close_watch(events)
    only_a = store.watch(None, None, namespace="a", since=start)
    try:
        got = await take(only_a, 8)
        assert {e.object["metadata"]["namespace"] for e in got} == {"a"}
    finally:
        await close_watch(only_a)


async def test_status_errors_become_the_store_errors(served: Served, store: HttpStore) -> None:
    with pytest.raises(Invalid) as invalid:
        await store.create(widget("bad", -1))
    assert invalid.value.field == "spec.size"
    viewer = HttpStore(served.url, make_registry(), Credentials(token="view-token"))
    stranger = HttpStore(served.url, make_registry(), Credentials(token="nope", source="x.yaml"))
    try:
        await viewer.open()
        assert (await viewer.list(API, "Widget"))[0] == []
        with pytest.raises(Forbidden, match="role"):
            await viewer.create(widget("w"))
        with pytest.raises(Unauthorized, match=r"token from x\.yaml"):
            await stranger.open()
    finally:
        await viewer.close()
        await stranger.close()
    with pytest.raises(Invalid, match="owns its history"):
        await store.compact(1)


async def test_pages_and_the_reader(served: Served, store: HttpStore) -> None:
    for i in range(5):
        await store.create(widget(f"w{i}"))
    pages = [page async for page in store.list_pages(API, "Widget", page_size=2)]
    assert [len(items) for items, _ in pages] == [2, 2, 1]
    assert len({revision for _, revision in pages}) == 1
    items, revision = await store.list(API, "Widget")
    assert revision == pages[0][1] == await store.revision()
    reader = open_reader(served.url, make_registry(), Credentials(token="view-token"))
    assert reader is not None
    try:
        assert reader.list(API, "Widget") == (items, revision)
        assert reader.get(API, "Widget", "w3") == items[3]
    finally:
        reader.close()


async def test_a_write_names_its_manager_and_the_server_names_its_user(
    store: HttpStore, tmp_path: Path
) -> None:
    """The server's own store keeps the token's user, whatever user the client names, the
    manager the client sends (`fieldManager`, or its User-Agent `setpoint`) and its agent."""
    local = await open_store(f"sqlite:///{tmp_path / 'state.db'}", make_registry())
    try:
        events = local.watch(API, "Widget", since=await local.revision())
        try:
            claimed = WriteOptions(actor=Actor("someone-else", "tuner", "other-agent"))
            made = await store.create(widget("w"), options=claimed)
            cli = WriteOptions(actor=Actor("me@host", "setpoint", "setpoint"))
            await store.update(dict(made, spec={"size": 3}), options=cli)
            got = await take(events, 2)
        finally:
            await close_watch(events)
    finally:
        await local.close()
    assert [(e.verb, e.actor) for e in got] == [
        ("create", Actor("ed", "tuner", "setpoint")),
        ("update", Actor("ed", "setpoint", "setpoint")),
    ]
