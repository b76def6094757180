"""Lifecycle helpers: owner references, the one-controller rule, finalizers, deletion state."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.errors import Invalid
from setpoint.runtime.lifecycle import (
    add_finalizer,
    controller_of,
    has_finalizer,
    is_deleting,
    owner_reference,
    remove_finalizer,
    set_controller_reference,
)

API = "test.setpoint.dev/v1"


def stored(name: str, uid: str, *, kind: str = "Widget", namespace: str | None = "default") -> Any:
    """An object as the store returns it (with a uid)."""
    meta: dict[str, Any] = {"name": name, "uid": uid}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": API, "kind": kind, "metadata": meta}


def child(namespace: str | None = "default", **meta: Any) -> Any:
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": API, "kind": "Widget", "metadata": {"name": "child", **meta}}


# -- owner references ----------------------------------------------------------------


def test_owner_reference_names_the_owner_and_blocks_by_default() -> None:
    assert owner_reference(stored("web", "u-1")) == {
        "apiVersion": API,
        "kind": "Widget",
        "name": "web",
        "uid": "u-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    ref = owner_reference(stored("web", "u-1"), controller=False, block_owner_deletion=False)
    assert (ref["controller"], ref["blockOwnerDeletion"]) == (False, False)


def test_owner_reference_needs_a_created_owner() -> None:
    owner = {"apiVersion": API, "kind": "Widget", "metadata": {"name": "web"}}
    with pytest.raises(Invalid, match="uid") as info:
        owner_reference(owner)
    assert info.value.field == "metadata.uid"


def test_set_controller_reference_adds_once() -> None:
    obj = child()
    assert set_controller_reference(stored("web", "u-1"), obj) is True
    assert obj["metadata"]["ownerReferences"] == [owner_reference(stored("web", "u-1"))]
    assert set_controller_reference(stored("web", "u-1"), obj) is False
    assert len(obj["metadata"]["ownerReferences"]) == 1
    assert controller_of(obj) == owner_reference(stored("web", "u-1"))


def test_set_controller_reference_keeps_other_owners_and_refreshes_a_recreated_owner() -> None:
    other = owner_reference(stored("db", "u-db"), controller=False)
    obj = child(ownerReferences=[other])
    set_controller_reference(stored("web", "u-1"), obj)
    # The same owner, deleted and recreated (new uid), possibly at another version.
    recreated = stored("web", "u-2")
    recreated["apiVersion"] = "test.setpoint.dev/v2"
    assert set_controller_reference(recreated, obj) is True
    assert obj["metadata"]["ownerReferences"] == [other, owner_reference(recreated)]


def test_set_controller_reference_refuses_a_second_controller() -> None:
    obj = child()
    set_controller_reference(stored("web", "u-1"), obj)
    before = [dict(r) for r in obj["metadata"]["ownerReferences"]]
    with pytest.raises(Invalid, match='already controlled by Widget "web"') as info:
        set_controller_reference(stored("api", "u-2"), obj)
    assert info.value.field == "metadata.ownerReferences"
    assert obj["metadata"]["ownerReferences"] == before


def test_set_controller_reference_refuses_to_cross_namespaces() -> None:
    with pytest.raises(Invalid, match="cannot cross namespaces") as info:
        set_controller_reference(stored("web", "u-1", namespace="prod"), child("default"))
    assert info.value.field == "metadata.namespace"
    with pytest.raises(Invalid, match="no namespace"):
        set_controller_reference(stored("web", "u-1", namespace="prod"), child(None))


def test_a_cluster_scoped_owner_may_own_a_namespaced_object() -> None:
    obj = child("prod")
    owner = stored("pool", "u-p", kind="Gadget", namespace=None)
    assert set_controller_reference(owner, obj) is True
    assert controller_of(obj) == owner_reference(owner)


def test_controller_of_ignores_owners_that_are_not_controllers() -> None:
    obj = child(ownerReferences=[owner_reference(stored("db", "u-db"), controller=False)])
    assert controller_of(obj) is None
    assert controller_of(child()) is None


# -- finalizers and deletion ---------------------------------------------------------


def test_finalizers_are_added_once_and_removed() -> None:
    obj = child()
    assert not has_finalizer(obj, "example.com/cleanup")
    assert add_finalizer(obj, "example.com/cleanup") is True
    assert add_finalizer(obj, "example.com/cleanup") is False
    assert add_finalizer(obj, "example.com/other") is True
    assert obj["metadata"]["finalizers"] == ["example.com/cleanup", "example.com/other"]
    assert has_finalizer(obj, "example.com/cleanup")

    assert remove_finalizer(obj, "example.com/cleanup") is True
    assert remove_finalizer(obj, "example.com/cleanup") is False
    assert obj["metadata"]["finalizers"] == ["example.com/other"]
    assert remove_finalizer(obj, "example.com/other") is True
    assert "finalizers" not in obj["metadata"]


def test_is_deleting_means_a_deletion_timestamp() -> None:
    obj = child()
    assert not is_deleting(obj)
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert is_deleting(obj)
    assert not is_deleting({"apiVersion": API, "kind": "Widget"})
