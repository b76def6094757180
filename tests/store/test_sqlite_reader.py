"""`open_reader` and `SqliteReader`: synchronous reads of a SQLite store answer as the
backend's `get` and `list` do (items, order, revision, selectors, namespaces, NotFound),
never create or change the file, and refuse a file that is not a store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from setpoint.errors import Invalid, NotFound, UnknownKind
from setpoint.model import Kind, Registry
from setpoint.store import open_reader, open_store

API = "test.setpoint.dev/v1"


def registry() -> Registry:
    reg = Registry()
    reg.register(Kind(API, "Thing", "things"))
    return reg


def thing(name: str, namespace: str = "default", **labels: str) -> dict[str, object]:
    meta = {"name": name, "namespace": namespace, "labels": labels}
    return {"apiVersion": API, "kind": "Thing", "metadata": meta, "spec": {}}


async def test_reads_answer_as_the_store_does(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    store = await open_store(url, registry())
    try:
        for obj in (thing("b", app="x"), thing("a", app="y"), thing("c", "other", app="x")):
            await store.create(obj)
        await store.delete(API, "Thing", "a")
        expected = [
            await store.list(API, "Thing", "default"),
            await store.list(API, "Thing"),
            await store.list(API, "Thing", None, "app=x"),
        ]
        one = await store.get(API, "Thing", "c", "other")
    finally:
        await store.close()
    reader = open_reader(url, registry())
    assert reader is not None
    try:
        assert [
            reader.list(API, "Thing", "default"),
            reader.list(API, "Thing"),
            reader.list(API, "Thing", None, "app=x"),
        ] == expected
        assert expected[1][1] == 4  # three creates and a delete: the revision read at
        assert reader.get(API, "Thing", "c", "other") == one
        with pytest.raises(NotFound, match='Thing "a" not found in namespace "default"'):
            reader.get(API, "Thing", "a")
        with pytest.raises(UnknownKind):
            reader.list(API, "Gadget")
    finally:
        reader.close()


def test_a_missing_store_is_not_found_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "none" / "state.db"
    with pytest.raises(NotFound, match="reading never creates one"):
        open_reader(f"sqlite:///{path}", registry())
    assert not path.parent.exists()


def test_a_file_that_is_not_a_store_is_refused_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"not sqlite at all\n" * 100)
    before = path.read_bytes()
    with pytest.raises(Invalid, match="cannot open") as refused:
        open_reader(f"sqlite:///{path}", registry())
    assert refused.value.field == "store"
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["state.db"]


def test_urls_are_checked_as_open_store_checks_them(tmp_path: Path) -> None:
    with pytest.raises(Invalid, match="sync="):
        open_reader(f"sqlite:///{tmp_path}/state.db?sync=sometimes", registry())
    with pytest.raises(Invalid, match="unknown option"):
        open_reader(f"sqlite:///{tmp_path}/state.db?colour=red", registry())
    with pytest.raises(Invalid, match=r"want sqlite:///relative/path\.db"):
        open_reader("sqlite://relative.db", registry())


def test_other_backends_have_no_synchronous_reader() -> None:
    assert open_reader("memory://", registry()) is None
    assert open_reader("etcd://localhost:2379", registry()) is None  # open_store judges it
