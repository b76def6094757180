"""lightkube against setpoint's API, as its users use it: `KubeConfig.from_file` and a
`Client`, Widgets (a CRD) as a generic resource class (`create_namespaced_resource`) with its
`Status` subresource class; each test checks what the server stores afterwards."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from clients_kit import (
    CONFIG_MAPS,
    FINALIZER,
    GROUP,
    KIND,
    NAMESPACE,
    PLURAL,
    TIMEOUT,
    VERSION,
    World,
    widget,
)
from lightkube import ApiError, Client, KubeConfig, operators
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import PatchType

from setpoint.testing import ApiServer

Widget = create_namespaced_resource(GROUP, VERSION, KIND, PLURAL)


@pytest.fixture
def client(served: tuple[ApiServer, World]) -> Iterator[Client]:
    api, _ = served
    lightkube = Client(KubeConfig.from_file(str(api.kubeconfig)), field_manager="tester")
    yield lightkube
    lightkube.close()


@pytest.fixture
def world(served: tuple[ApiServer, World]) -> World:
    return served[1]


def events(client: Client, count: int, **options: Any) -> list[tuple[str, str, int]]:
    """The first `count` events of a watch of Widgets: (type, name, spec.size)."""
    seen: list[tuple[str, str, int]] = []
    stream = client.watch(Widget, namespace=NAMESPACE, server_timeout=int(TIMEOUT), **options)
    with contextlib.closing(stream):
        for kind, obj in stream:
            seen.append((kind, obj.metadata.name, obj["spec"]["size"]))
            if len(seen) == count:
                break
    return seen


def test_create_get_and_list_with_selectors(client: Client, world: World) -> None:
    client.create(Widget.from_dict(widget("l-red", labels={"test": "l-list", "colour": "red"})))
    client.create(
        Widget.from_dict(widget("l-blue", size=2, labels={"test": "l-list", "colour": "blue"}))
    )
    got = client.get(Widget, "l-blue", namespace=NAMESPACE)
    stored = world.widget("l-blue")
    assert stored is not None
    assert (got["spec"], got.metadata.uid) == ({"size": 2}, stored["metadata"]["uid"])

    def listed(**labels: Any) -> list[str]:
        return sorted(w.metadata.name for w in client.list(Widget, labels=labels))

    assert listed(test="l-list") == ["l-blue", "l-red"]
    assert listed(test="l-list", colour=operators.not_equal("red")) == ["l-blue"]
    assert listed(test="l-list", colour=operators.in_(["red", "green"])) == ["l-red"]
    with pytest.raises(ApiError) as refused:
        client.create(Widget.from_dict(widget("l-red", size=9)))
    assert refused.value.status.code == 409
    assert world.widget("l-red")["spec"] == {"size": 1}  # type: ignore[index]


def test_watch_from_a_resource_version(client: Client, world: World) -> None:
    created = client.create(Widget.from_dict(widget("l-watched")))
    world.resize("l-watched", 2)
    world.resize("l-watched", 3)
    seen = events(
        client,
        2,
        resource_version=created.metadata.resourceVersion,
        fields={"metadata.name": "l-watched"},
    )
    assert seen == [("MODIFIED", "l-watched", 2), ("MODIFIED", "l-watched", 3)]


def test_merge_and_json_patch(client: Client, world: World) -> None:
    client.create(Widget.from_dict(widget("l-patched", labels={"a": "1"})))
    client.patch(
        Widget,
        "l-patched",
        {"metadata": {"labels": {"a": None, "b": "2"}}, "spec": {"colour": "red"}},
        namespace=NAMESPACE,
        patch_type=PatchType.MERGE,
    )
    client.patch(
        Widget,
        "l-patched",
        [
            {"op": "test", "path": "/spec/colour", "value": "red"},
            {"op": "replace", "path": "/spec/size", "value": 5},
        ],
        namespace=NAMESPACE,
        patch_type=PatchType.JSON,
    )
    stored = world.widget("l-patched")
    assert stored is not None
    assert (stored["metadata"]["labels"], stored["spec"]) == (
        {"b": "2"},
        {"size": 5, "colour": "red"},
    )
    with pytest.raises(ApiError) as refused:
        client.patch(
            Widget,
            "l-patched",
            [{"op": "test", "path": "/spec/size", "value": 1}],
            namespace=NAMESPACE,
            patch_type=PatchType.JSON,
        )
    assert refused.value.status.code == 422
    assert world.widget("l-patched") == stored


def test_status_subresource(client: Client, world: World) -> None:
    client.create(Widget.from_dict(widget("l-status")))
    client.patch(
        Widget.Status,
        "l-status",
        {"status": {"phase": "Ready", "observedGeneration": 1}},
        namespace=NAMESPACE,
        patch_type=PatchType.MERGE,
    )
    current = client.get(Widget, "l-status", namespace=NAMESPACE)
    current["status"]["phase"] = "Done"
    current["spec"]["size"] = 7  # not written through the status subresource
    client.replace(Widget.Status.from_dict(current.to_dict()), "l-status", namespace=NAMESPACE)
    client.patch(  # nor is the status through the object
        Widget,
        "l-status",
        {"status": {"phase": "Lost"}, "spec": {"size": 2}},
        namespace=NAMESPACE,
        patch_type=PatchType.MERGE,
    )
    stored = world.widget("l-status")
    assert stored is not None
    assert stored["status"] == {"phase": "Done", "observedGeneration": 1}
    assert (stored["spec"], stored["metadata"]["generation"]) == ({"size": 2}, 2)


def test_server_side_apply_of_the_status(client: Client, world: World) -> None:
    client.create(Widget.from_dict(widget("l-applied-status")))

    def applied(phase: str, **status: Any) -> Any:
        return Widget.Status.from_dict(
            {**widget("l-applied-status", size=9), "status": {"phase": phase, **status}}
        )

    client.apply(applied("Ready", observedGeneration=1), "l-applied-status", namespace=NAMESPACE)
    client.apply(applied("Done"), "l-applied-status", namespace=NAMESPACE)  # gives up one field
    with pytest.raises(ApiError) as conflict:  # another manager's value for its field
        client.apply(
            applied("Lost"), "l-applied-status", namespace=NAMESPACE, field_manager="other"
        )
    assert conflict.value.status.code == 409
    stored = world.widget("l-applied-status")
    assert stored is not None
    assert (stored["status"], stored["spec"]) == ({"phase": "Done"}, {"size": 1})
    entries = stored["metadata"]["managedFields"]
    assert [(e["manager"], e["operation"], e.get("subresource")) for e in entries] == [
        ("tester", "Apply", "status")
    ]
    assert entries[0]["fieldsV1"] == {"f:status": {"f:phase": {}}}


def test_server_side_apply(client: Client, world: World) -> None:
    manifest = widget("l-applied", labels={"by": "apply"})
    client.apply(Widget.from_dict(manifest))
    manifest["spec"]["colour"] = "blue"
    client.apply(Widget.from_dict(manifest))
    with pytest.raises(ApiError) as conflict:  # another manager's value for its field
        client.apply(Widget.from_dict(widget("l-applied", size=9)), field_manager="other")
    assert conflict.value.status.code == 409
    stored = world.widget("l-applied")
    assert stored is not None
    assert stored["spec"] == {"size": 1, "colour": "blue"}
    managers = {(f["manager"], f["operation"]) for f in stored["metadata"]["managedFields"]}
    assert managers == {("tester", "Apply")}


def test_delete_with_finalizers(client: Client, world: World) -> None:
    client.create(Widget.from_dict(widget("l-finalized", finalizers=[FINALIZER])))
    client.delete(Widget, "l-finalized", namespace=NAMESPACE)
    lingering = world.widget("l-finalized")
    assert lingering is not None
    assert lingering["metadata"]["deletionTimestamp"]
    assert lingering["metadata"]["finalizers"] == [FINALIZER]
    client.patch(
        Widget,
        "l-finalized",
        [{"op": "remove", "path": "/metadata/finalizers"}],
        namespace=NAMESPACE,
        patch_type=PatchType.JSON,
    )
    assert world.widget("l-finalized") is None


def test_410_gone_is_resumed_by_relisting(compacting: tuple[ApiServer, World]) -> None:
    api, world = compacting
    client = Client(KubeConfig.from_file(str(api.kubeconfig)))
    try:
        client.create(Widget.from_dict(widget("l-gone")))
        listed = client.list(Widget, namespace=NAMESPACE)
        assert [w.metadata.name for w in listed] == ["l-gone"]
        version = listed.resourceVersion
        world.resize("l-gone", 2)  # missed: the watcher was away
        world.outdate(version)

        with pytest.raises(ApiError) as gone:  # on_error_raise, the default
            events(client, 1, resource_version=version)
        assert gone.value.status.code == 410

        relisted = client.list(Widget, namespace=NAMESPACE)
        assert [w["spec"]["size"] for w in relisted] == [2]
        world.resize("l-gone", 3)
        seen = events(client, 1, resource_version=relisted.resourceVersion)
        assert seen == [("MODIFIED", "l-gone", 3)]
    finally:
        client.close()


def test_a_typed_core_kind(client: Client, world: World) -> None:
    """A ConfigMap as lightkube's own model, in answers and watch events."""
    made = client.create(
        ConfigMap(metadata=ObjectMeta(name="l-config", labels={"test": "l-typed"}), data={"a": "1"})
    )
    assert isinstance(made, ConfigMap)
    client.patch(
        ConfigMap, "l-config", {"data": {"b": "2"}}, namespace=NAMESPACE, patch_type=PatchType.MERGE
    )
    listed = client.list(ConfigMap, namespace=NAMESPACE, labels={"test": "l-typed"})
    assert [(c.metadata.name, c.data) for c in listed] == [("l-config", {"a": "1", "b": "2"})]
    stream = client.watch(
        ConfigMap,
        namespace=NAMESPACE,
        fields={"metadata.name": "l-config"},
        resource_version=made.metadata.resourceVersion,
        server_timeout=int(TIMEOUT),
    )
    with contextlib.closing(stream):
        kind, first = next(stream)
    assert (kind, type(first), first.data) == ("MODIFIED", ConfigMap, {"a": "1", "b": "2"})
    client.delete(ConfigMap, "l-config", namespace=NAMESPACE)
    assert world.widget("l-config", CONFIG_MAPS) is None
