"""`wait_for` and `free_port_range` from the public test kit."""

from __future__ import annotations

import asyncio
import socket

import pytest

from setpoint.model import Kind, Registry
from setpoint.store import open_store
from setpoint.testing import free_port_range, wait_for

THING = Kind("test.setpoint.dev/v1", "Thing", "things")


def thing(name: str) -> dict[str, object]:
    return {
        "apiVersion": THING.api_version,
        "kind": THING.kind,
        "metadata": {"name": name, "namespace": "default"},
    }


async def test_wait_for_sees_a_later_write_and_a_deletion() -> None:
    registry = Registry()
    registry.register(THING)
    store = await open_store("memory://", registry)
    try:
        waiting = asyncio.ensure_future(
            wait_for(
                store,
                THING,
                "a",
                lambda o: o is not None and "x" in o["metadata"].get("labels", {}),
            )
        )
        await store.create(thing("a"))
        await store.create(thing("b"))
        obj = await store.get(THING.api_version, THING.kind, "a", "default")
        obj["metadata"]["labels"] = {"x": "1"}
        await store.update(obj)
        found = await waiting
        assert found is not None
        assert found["metadata"]["labels"] == {"x": "1"}
        gone = asyncio.ensure_future(wait_for(store, THING, "a", lambda o: o is None))
        await store.delete(THING.api_version, THING.kind, "a", "default")
        assert await gone is None
        with pytest.raises(TimeoutError, match=r"b: not there within 0\.05s"):
            await wait_for(store, THING, "b", lambda o: o is None, within=0.05)
    finally:
        await store.close()


def test_free_port_range_gives_bindable_ports_below_the_ephemeral_range() -> None:
    start = free_port_range(5)
    assert start >= 20000
    assert start + 5 <= 32768
    for port in range(start, start + 5):
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
