"""Create, get, list and delete on every backend: what the store fills in and hands back."""

from __future__ import annotations

import pytest
from conformance_kit import API, first_event, gadget, note, rv, snapshot, widget

import setpoint.errors
from setpoint.clock import parse_rfc3339
from setpoint.errors import AlreadyExists, NotFound, StoreClosed
from setpoint.model import codec


def test_store_package_exports_the_contract() -> None:
    import setpoint.store as store_pkg

    assert callable(store_pkg.open_store)
    for name in ("Conflict", "AlreadyExists", "NotFound", "Gone", "Invalid"):
        assert getattr(store_pkg, name) is getattr(setpoint.errors, name)
    assert store_pkg.WatchEvent is not None
    assert store_pkg.Store is not None


async def test_create_fills_server_metadata(store) -> None:
    before = await store.revision()
    obj = await store.create(widget("w1", 3))

    meta = obj["metadata"]
    assert meta["name"] == "w1"
    assert meta["namespace"] == "default"
    assert isinstance(meta["uid"], str)
    assert meta["uid"]
    assert isinstance(meta["resourceVersion"], str)
    assert rv(obj) == before + 1 == await store.revision()
    assert meta["generation"] == 1
    parse_rfc3339(meta["creationTimestamp"])
    assert "deletionTimestamp" not in meta
    assert obj["apiVersion"] == API
    assert obj["kind"] == "Widget"
    # The schema's defaults are filled in.
    assert obj["spec"] == {"size": 3, "color": "blue", "tags": []}


async def test_create_ignores_server_fields_in_the_input(store) -> None:
    manifest = widget("w1")
    manifest["metadata"].update(
        uid="chosen-by-client", generation=7, creationTimestamp="2001-01-01T00:00:00Z"
    )
    obj = await store.create(manifest)
    assert obj["metadata"]["uid"] != "chosen-by-client"
    assert obj["metadata"]["generation"] == 1
    assert obj["metadata"]["creationTimestamp"] != "2001-01-01T00:00:00Z"


async def test_get_returns_what_create_returned(store) -> None:
    created = await store.create(widget("w1", 5, labels={"app": "web"}))
    assert await store.get(API, "Widget", "w1") == created
    assert await store.get(API, "Widget", "w1", namespace="default") == created


async def test_get_missing_raises_not_found(store) -> None:
    await store.create(widget("w1", namespace="a"))
    with pytest.raises(NotFound):
        await store.get(API, "Widget", "nope")
    with pytest.raises(NotFound):
        await store.get(API, "Widget", "w1", namespace="b")
    with pytest.raises(NotFound):
        await store.get(API, "Gadget", "w1", namespace=None)


async def test_create_existing_name_is_already_exists_and_writes_nothing(store) -> None:
    await store.create(widget("w1", 1))
    before = await snapshot(store)
    with pytest.raises(AlreadyExists):
        await store.create(widget("w1", 2))
    assert await snapshot(store) == before
    # The same name in another namespace is another object.
    other = await store.create(widget("w1", 2, namespace="other"))
    assert other["metadata"]["namespace"] == "other"
    assert (await store.get(API, "Widget", "w1"))["spec"]["size"] == 1


async def test_cluster_scoped_kind_has_no_namespace(store) -> None:
    obj = await store.create(gadget("g1", 4))
    assert "namespace" not in obj["metadata"] or not obj["metadata"]["namespace"]
    assert await store.get(API, "Gadget", "g1", namespace=None) == obj
    items, _ = await store.list(API, "Gadget")
    assert items == [obj]
    deleted = await store.delete(API, "Gadget", "g1", namespace=None)
    assert deleted["metadata"]["uid"] == obj["metadata"]["uid"]
    with pytest.raises(NotFound):
        await store.get(API, "Gadget", "g1", namespace=None)


async def test_list_returns_items_and_the_revision_read_at(store) -> None:
    items, revision = await store.list(API, "Widget")
    assert items == []
    assert revision == await store.revision()

    created = [await store.create(widget(f"w{i}", i)) for i in range(5)]
    await store.create(gadget("g1"))
    items, revision = await store.list(API, "Widget")
    assert revision == await store.revision() == rv(created[-1]) + 1
    assert sorted(items, key=lambda o: o["metadata"]["name"]) == created
    assert all(rv(o) <= revision for o in items)


async def test_list_by_namespace(store) -> None:
    a1 = await store.create(widget("one", namespace="a"))
    a2 = await store.create(widget("two", namespace="a"))
    b1 = await store.create(widget("one", namespace="b"))

    def names(items):
        return sorted((o["metadata"]["namespace"], o["metadata"]["name"]) for o in items)

    assert names((await store.list(API, "Widget", namespace="a"))[0]) == names([a1, a2])
    assert names((await store.list(API, "Widget", namespace="b"))[0]) == names([b1])
    assert (await store.list(API, "Widget", namespace="c"))[0] == []
    assert names((await store.list(API, "Widget"))[0]) == names([a1, a2, b1])


async def test_delete_without_finalizers_removes_at_once(store) -> None:
    created = await store.create(widget("w1", 2))
    before = await store.revision()
    last = await store.delete(API, "Widget", "w1")
    assert last["metadata"]["uid"] == created["metadata"]["uid"]
    assert last["spec"] == created["spec"]
    assert await store.revision() == before + 1
    with pytest.raises(NotFound):
        await store.get(API, "Widget", "w1")
    assert (await store.list(API, "Widget"))[0] == []


async def test_delete_missing_is_not_found_and_writes_nothing(store) -> None:
    await store.create(widget("w1"))
    before = await snapshot(store)
    with pytest.raises(NotFound):
        await store.delete(API, "Widget", "nope")
    with pytest.raises(NotFound):
        await store.delete(API, "Widget", "w1", namespace="elsewhere")
    assert await snapshot(store) == before


async def test_recreated_object_gets_a_new_uid(store) -> None:
    first = await store.create(widget("w1"))
    await store.delete(API, "Widget", "w1")
    second = await store.create(widget("w1"))
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert second["metadata"]["generation"] == 1
    assert rv(second) > rv(first)


async def test_every_write_takes_the_next_revision(store) -> None:
    start = await store.revision()
    obj = await store.create(widget("w1", 1))
    revisions = [rv(obj)]
    obj["spec"]["size"] = 2
    obj = await store.update(obj)
    revisions.append(rv(obj))
    obj["status"] = {"phase": "Running"}
    obj = await store.update_status(obj)
    revisions.append(rv(obj))
    obj = await store.patch(API, "Widget", "w1", {"spec": {"color": "red"}})
    revisions.append(rv(obj))
    revisions.append(rv(await store.create(gadget("g1"))))
    await store.delete(API, "Widget", "w1")
    revisions.append(await store.revision())
    assert revisions == list(range(start + 1, start + 7))


async def test_returned_objects_are_copies(store) -> None:
    manifest = widget("w1", 1, labels={"app": "web"})
    created = await store.create(manifest)
    manifest["spec"]["size"] = 99
    created["spec"]["size"] = 98
    created["metadata"]["labels"]["app"] = "mutated"
    got = await store.get(API, "Widget", "w1")
    assert got["spec"]["size"] == 1
    assert got["metadata"]["labels"] == {"app": "web"}
    got["spec"]["tags"].append("mutated")
    items, _ = await store.list(API, "Widget")
    items[0]["spec"]["color"] = "mutated"
    again = await store.get(API, "Widget", "w1")
    assert again["spec"] == {"size": 1, "color": "blue", "tags": []}


CALLS_AFTER_CLOSE = {
    "get": lambda s, obj: s.get(API, "Widget", "w1"),
    "list": lambda s, obj: s.list(API, "Widget"),
    "revision": lambda s, obj: s.revision(),
    "compact": lambda s, obj: s.compact(1),
    "create": lambda s, obj: s.create(widget("w2")),
    "update": lambda s, obj: s.update(obj),
    "update_status": lambda s, obj: s.update_status(dict(obj, status={"phase": "x"})),
    "patch": lambda s, obj: s.patch(API, "Widget", "w1", {"spec": {"size": 2}}),
    "delete": lambda s, obj: s.delete(API, "Widget", "w1"),
    "watch": lambda s, obj: first_event(s, API, "Widget", since=0),
}


@pytest.mark.parametrize("call", CALLS_AFTER_CLOSE.values(), ids=CALLS_AFTER_CLOSE.keys())
async def test_closed_store_refuses_every_call(stores, call) -> None:
    store = await stores.open()
    obj = await store.create(widget("w1"))
    await store.close()
    with pytest.raises(StoreClosed):
        await call(store, obj)
    await store.close()  # closing twice is harmless


async def test_list_pages_read_one_snapshot(store) -> None:
    """Pages come from one snapshot: writes made between pages are not in them, every page
    carries the same revision, and together the pages are the list."""
    for i in range(25):
        await store.create(widget(f"w{i:02}", i, labels={"even": str(i % 2 == 0).lower()}))
    expected, revision = await store.list(API, "Widget")
    pages = []
    async for page, page_revision in store.list_pages(API, "Widget", page_size=10):
        pages.append((page, page_revision))
        await store.create(widget(f"late{len(pages)}"))  # after the snapshot: not listed
    assert {r for _, r in pages} == {revision}
    assert [o for page, _ in pages for o in page] == expected
    assert all(len(page) <= 10 for page, _ in pages)
    selected = [
        o["metadata"]["name"]
        async for page, _ in store.list_pages(API, "Widget", label_selector="even=true")
        for o in page
    ]
    assert selected == [f"w{i:02}" for i in range(0, 25, 2)]


async def test_list_pages_of_nothing_is_one_empty_page(store) -> None:
    pages = [p async for p in store.list_pages(API, "Widget")]
    assert pages == [([], await store.revision())]


async def test_list_encoded_is_the_list_as_json(store) -> None:
    """`list_encoded` answers what `list` does (the same objects, keys in the same order,
    the same revision), each object as its JSON; selectors and namespaces narrow it alike."""
    for i in range(6):
        labels = {"even": str(i % 2 == 0).lower()}
        await store.create(widget(f"w{i}", i, namespace=("a", "b")[i % 2], labels=labels))
    for namespace, selector in ((None, None), ("a", None), (None, "even=false"), ("b", "even")):
        expected, revision = await store.list(API, "Widget", namespace, selector)
        encoded, encoded_revision = await store.list_encoded(API, "Widget", namespace, selector)
        decoded = [codec.decode(data) for data in encoded]
        assert (decoded, encoded_revision) == (expected, revision)
        assert [list(o["metadata"]) for o in decoded] == [list(o["metadata"]) for o in expected]
    assert await store.list_encoded(API, "Widget", "nowhere") == ([], revision)


async def test_update_and_patch_remove_top_level_fields(store) -> None:
    """Kinds whose data is not under `spec` (like Event) can drop a field by leaving it out of
    an update, or by a merge patch of null."""
    created = await store.create({**note("n1", 1), "extra": "x", "more": {"a": 1}})
    del created["extra"]
    updated = await store.update(created)
    assert "extra" not in updated
    assert rv(updated) == rv(created) + 1
    patched = await store.patch(API, "Note", "n1", {"more": None})
    assert "more" not in patched
    assert "more" not in await store.get(API, "Note", "n1")
