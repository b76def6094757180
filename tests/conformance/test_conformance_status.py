"""Spec versus status: `update` never writes status, `update_status` writes nothing else, and
`generation` counts spec changes only."""

from __future__ import annotations

import contextlib

from conformance_kit import API, rv, widget

from setpoint.errors import Conflict, Invalid


async def test_update_status_leaves_spec_metadata_and_generation_alone(store) -> None:
    obj = await store.create(widget("w1", 1, labels={"app": "web"}))
    attempt = dict(obj)
    attempt["spec"] = {"size": 50, "color": "red", "tags": []}
    attempt["metadata"] = dict(obj["metadata"], labels={"app": "changed"}, finalizers=["x.io/y"])
    attempt["status"] = {"phase": "Running", "readyReplicas": 1, "observedGeneration": 1}

    updated = await store.update_status(attempt)
    assert updated["status"] == {"phase": "Running", "readyReplicas": 1, "observedGeneration": 1}
    assert updated["spec"] == obj["spec"]
    assert updated["metadata"]["labels"] == {"app": "web"}
    assert not updated["metadata"].get("finalizers")
    assert updated["metadata"]["generation"] == 1
    assert updated["metadata"]["uid"] == obj["metadata"]["uid"]
    assert rv(updated) == rv(obj) + 1
    assert await store.get(API, "Widget", "w1") == updated


async def test_update_ignores_status_in_the_input(store) -> None:
    obj = await store.create(widget("w1", 1))
    obj["status"] = {"phase": "Running"}
    obj = await store.update_status(obj)

    obj["status"] = {"phase": "Forged", "readyReplicas": 7}
    obj["spec"]["size"] = 2
    updated = await store.update(obj)
    assert updated["status"] == {"phase": "Running"}
    assert updated["spec"]["size"] == 2
    assert (await store.get(API, "Widget", "w1"))["status"] == {"phase": "Running"}

    # An update without status does not clear it either.
    del updated["status"]
    updated["spec"]["size"] = 3
    again = await store.update(updated)
    assert again["status"] == {"phase": "Running"}


async def test_patch_ignores_status(store) -> None:
    obj = await store.create(widget("w1", 1))
    await store.update_status(dict(obj, status={"phase": "Running"}))
    patched = await store.patch(
        API, "Widget", "w1", {"spec": {"size": 2}, "status": {"phase": "X"}}
    )
    assert patched["status"] == {"phase": "Running"}
    assert patched["spec"]["size"] == 2


async def test_generation_counts_spec_changes_only(store) -> None:
    obj = await store.create(widget("w1", 1))
    assert obj["metadata"]["generation"] == 1

    obj["metadata"]["labels"] = {"tier": "web"}
    obj["metadata"]["annotations"] = {"note": "hello"}
    obj = await store.update(obj)
    assert obj["metadata"]["generation"] == 1
    assert obj["metadata"]["labels"] == {"tier": "web"}

    obj["status"] = {"phase": "Running"}
    obj = await store.update_status(obj)
    assert obj["metadata"]["generation"] == 1

    obj["spec"]["size"] = 2
    obj = await store.update(obj)
    assert obj["metadata"]["generation"] == 2

    obj = await store.patch(API, "Widget", "w1", {"spec": {"tags": ["a"]}})
    assert obj["metadata"]["generation"] == 3

    obj = await store.patch(
        API,
        "Widget",
        "w1",
        [{"op": "replace", "path": "/spec/color", "value": "red"}],
        patch_type="json",
    )
    assert obj["metadata"]["generation"] == 4

    obj = await store.patch(API, "Widget", "w1", {"metadata": {"labels": {"tier": "api"}}})
    assert obj["metadata"]["generation"] == 4
    assert obj["spec"] == {"size": 2, "color": "red", "tags": ["a"]}
    assert await store.get(API, "Widget", "w1") == obj


async def test_update_cannot_forge_server_fields(store) -> None:
    """uid, generation, creationTimestamp and deletionTimestamp belong to the store: an
    update that names other values is refused or has them ignored, never written."""
    obj = await store.create(widget("w1", 1))
    forged = dict(obj, spec={"size": 2})
    forged["metadata"] = dict(
        obj["metadata"],
        uid="forged",
        generation=99,
        creationTimestamp="2001-01-01T00:00:00Z",
        deletionTimestamp="2001-01-01T00:00:00Z",
    )
    with contextlib.suppress(Invalid, Conflict):
        await store.update(forged)
    got = await store.get(API, "Widget", "w1")
    for name in ("uid", "creationTimestamp"):
        assert got["metadata"][name] == obj["metadata"][name]
    assert got["metadata"]["generation"] in (1, 2)
    assert "deletionTimestamp" not in got["metadata"]


async def test_spec_written_in_normal_form_does_not_bump_generation(store) -> None:
    """Writing back the defaults the schema filled in is not a spec change."""
    obj = await store.create(widget("w1", 1))
    obj["spec"] = {"size": 1}  # color and tags take their defaults again
    obj["metadata"]["labels"] = {"touched": "yes"}
    updated = await store.update(obj)
    assert updated["metadata"]["generation"] == 1
    assert updated["spec"] == {"size": 1, "color": "blue", "tags": []}


async def test_merge_patch_semantics(store) -> None:
    await store.create(widget("w1", 1, labels={"a": "1", "b": "2"}, tags=["x"]))
    patched = await store.patch(
        API,
        "Widget",
        "w1",
        {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"tags": ["y", "z"]}},
    )
    assert patched["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert patched["spec"] == {"size": 1, "color": "blue", "tags": ["y", "z"]}


async def test_json_patch_semantics(store) -> None:
    await store.create(widget("w1", 1, tags=["x"]))
    patched = await store.patch(
        API,
        "Widget",
        "w1",
        [
            {"op": "add", "path": "/spec/tags/-", "value": "y"},
            {"op": "test", "path": "/spec/size", "value": 1},
            {"op": "replace", "path": "/spec/size", "value": 5},
            {"op": "add", "path": "/metadata/labels", "value": {"k": "v"}},
        ],
        patch_type="json",
    )
    assert patched["spec"] == {"size": 5, "color": "blue", "tags": ["x", "y"]}
    assert patched["metadata"]["labels"] == {"k": "v"}
