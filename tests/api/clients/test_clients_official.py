"""The official `kubernetes` client against setpoint's API, as its users use it: the
kubeconfig loaded by `config.new_client_from_config`, Widgets (a CRD) through
`CustomObjectsApi`, watches through `watch.Watch().stream`; each test checks what the server
stores afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from clients_kit import (
    CONFIG_MAPS,
    FINALIZER,
    GROUP,
    NAMESPACE,
    PLURAL,
    TIMEOUT,
    VERSION,
    World,
    widget,
)
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from setpoint.testing import ApiServer

WIDGET = (GROUP, VERSION, NAMESPACE, PLURAL)
JSON_PATCH = "application/json-patch+json"
"""Named for a JSON patch: this client sends a merge patch unless told (`_content_type`)."""


@pytest.fixture
def custom(served: tuple[ApiServer, World]) -> Iterator[client.CustomObjectsApi]:
    api, _ = served
    with config.new_client_from_config(config_file=str(api.kubeconfig)) as api_client:
        yield client.CustomObjectsApi(api_client)


@pytest.fixture
def world(served: tuple[ApiServer, World]) -> World:
    return served[1]


def events(
    custom: client.CustomObjectsApi, count: int, **options: Any
) -> list[tuple[str, str, int]]:
    """The first `count` events of a watch of Widgets: (type, name, spec.size)."""
    seen: list[tuple[str, str, int]] = []
    stream = watch.Watch()
    for event in stream.stream(
        custom.list_namespaced_custom_object, *WIDGET, timeout_seconds=int(TIMEOUT), **options
    ):
        obj = event["object"]
        seen.append((event["type"], obj["metadata"]["name"], obj["spec"]["size"]))
        if len(seen) == count:
            stream.stop()
    return seen


def test_create_get_and_list_with_selectors(custom: client.CustomObjectsApi, world: World) -> None:
    custom.create_namespaced_custom_object(
        *WIDGET, widget("o-red", labels={"test": "o-list", "colour": "red"})
    )
    custom.create_namespaced_custom_object(
        *WIDGET, widget("o-blue", size=2, labels={"test": "o-list", "colour": "blue"})
    )
    got = custom.get_namespaced_custom_object(*WIDGET, "o-blue")
    assert (got["spec"], got["metadata"]["uid"]) == (
        {"size": 2},
        world.widget("o-blue")["metadata"]["uid"],
    )  # type: ignore[index]

    def listed(selector: str) -> list[str]:
        items = custom.list_namespaced_custom_object(*WIDGET, label_selector=selector)["items"]
        return sorted(item["metadata"]["name"] for item in items)

    assert listed("test=o-list") == ["o-blue", "o-red"]
    assert listed("test=o-list,colour!=red") == ["o-blue"]
    assert listed("test=o-list,colour in (red,green)") == ["o-red"]
    with pytest.raises(ApiException) as refused:
        custom.create_namespaced_custom_object(*WIDGET, widget("o-red", size=9))
    assert refused.value.status == 409
    assert world.widget("o-red")["spec"] == {"size": 1}  # type: ignore[index]


def test_watch_from_a_resource_version(custom: client.CustomObjectsApi, world: World) -> None:
    created = custom.create_namespaced_custom_object(*WIDGET, widget("o-watched"))
    world.resize("o-watched", 2)
    world.resize("o-watched", 3)
    seen = events(
        custom,
        2,
        resource_version=created["metadata"]["resourceVersion"],
        field_selector="metadata.name=o-watched",
    )
    assert seen == [("MODIFIED", "o-watched", 2), ("MODIFIED", "o-watched", 3)]


def test_merge_and_json_patch(custom: client.CustomObjectsApi, world: World) -> None:
    custom.create_namespaced_custom_object(*WIDGET, widget("o-patched", labels={"a": "1"}))
    custom.patch_namespaced_custom_object(  # a merge patch, the default
        *WIDGET,
        "o-patched",
        {"metadata": {"labels": {"a": None, "b": "2"}}, "spec": {"colour": "red"}},
    )
    custom.patch_namespaced_custom_object(
        *WIDGET,
        "o-patched",
        [
            {"op": "test", "path": "/spec/colour", "value": "red"},
            {"op": "replace", "path": "/spec/size", "value": 5},
        ],
        _content_type=JSON_PATCH,
    )
    stored = world.widget("o-patched")
    assert stored is not None
    assert (stored["metadata"]["labels"], stored["spec"]) == (
        {"b": "2"},
        {"size": 5, "colour": "red"},
    )
    with pytest.raises(ApiException) as refused:
        custom.patch_namespaced_custom_object(
            *WIDGET,
            "o-patched",
            [{"op": "test", "path": "/spec/size", "value": 1}],
            _content_type=JSON_PATCH,
        )
    assert refused.value.status == 422
    assert world.widget("o-patched") == stored


def test_status_subresource(custom: client.CustomObjectsApi, world: World) -> None:
    custom.create_namespaced_custom_object(*WIDGET, widget("o-status"))
    custom.patch_namespaced_custom_object_status(
        *WIDGET, "o-status", {"status": {"phase": "Ready", "observedGeneration": 1}}
    )
    current = custom.get_namespaced_custom_object(*WIDGET, "o-status")
    current["status"]["phase"] = "Done"
    current["spec"]["size"] = 7  # not written through the status subresource
    custom.replace_namespaced_custom_object_status(*WIDGET, "o-status", current)
    custom.patch_namespaced_custom_object(  # nor is the status through the object
        *WIDGET, "o-status", {"status": {"phase": "Lost"}, "spec": {"size": 2}}
    )
    stored = world.widget("o-status")
    assert stored is not None
    assert stored["status"] == {"phase": "Done", "observedGeneration": 1}
    assert (stored["spec"], stored["metadata"]["generation"]) == ({"size": 2}, 2)


def test_server_side_apply(custom: client.CustomObjectsApi, world: World) -> None:
    manifest = widget("o-applied", labels={"by": "apply"})
    custom.patch_namespaced_custom_object(
        *WIDGET,
        "o-applied",
        manifest,
        field_manager="tester",
        _content_type="application/apply-patch+yaml",
    )
    manifest["spec"]["colour"] = "blue"
    custom.patch_namespaced_custom_object(
        *WIDGET,
        "o-applied",
        manifest,
        field_manager="tester",
        _content_type="application/apply-patch+yaml",
    )
    with pytest.raises(ApiException) as conflict:  # another manager's value for its field
        custom.patch_namespaced_custom_object(
            *WIDGET,
            "o-applied",
            widget("o-applied", size=9),
            field_manager="other",
            _content_type="application/apply-patch+yaml",
        )
    assert conflict.value.status == 409
    stored = world.widget("o-applied")
    assert stored is not None
    assert stored["spec"] == {"size": 1, "colour": "blue"}
    managers = {
        (entry["manager"], entry["operation"]) for entry in stored["metadata"]["managedFields"]
    }
    assert managers == {("tester", "Apply")}


def test_delete_with_finalizers(custom: client.CustomObjectsApi, world: World) -> None:
    created = custom.create_namespaced_custom_object(
        *WIDGET, widget("o-finalized", finalizers=[FINALIZER])
    )
    custom.delete_namespaced_custom_object(*WIDGET, "o-finalized")
    lingering = world.widget("o-finalized")
    assert lingering is not None
    assert lingering["metadata"]["deletionTimestamp"]
    assert lingering["metadata"]["finalizers"] == [FINALIZER]
    custom.patch_namespaced_custom_object(
        *WIDGET,
        "o-finalized",
        [{"op": "remove", "path": "/metadata/finalizers"}],
        _content_type=JSON_PATCH,
    )
    assert world.widget("o-finalized") is None
    seen = watch.Watch().stream(
        custom.list_namespaced_custom_object,
        *WIDGET,
        resource_version=created["metadata"]["resourceVersion"],
        field_selector="metadata.name=o-finalized",
        timeout_seconds=int(TIMEOUT),
    )
    marked, deleted = next(seen), next(seen)
    seen.close()
    assert (marked["type"], marked["object"]["metadata"]["finalizers"]) == ("MODIFIED", [FINALIZER])
    assert marked["object"]["metadata"]["deletionTimestamp"]
    assert deleted["type"] == "DELETED"


def test_410_gone_is_resumed_by_relisting(compacting: tuple[ApiServer, World]) -> None:
    api, world = compacting
    with config.new_client_from_config(config_file=str(api.kubeconfig)) as api_client:
        custom = client.CustomObjectsApi(api_client)
        custom.create_namespaced_custom_object(*WIDGET, widget("o-gone"))
        version = custom.list_namespaced_custom_object(*WIDGET)["metadata"]["resourceVersion"]
        world.resize("o-gone", 2)  # missed: the watcher was away
        world.outdate(version)

        with pytest.raises(ApiException) as gone:
            events(custom, 1, resource_version=version)
        assert gone.value.status == 410

        relisted = custom.list_namespaced_custom_object(*WIDGET)
        assert [item["spec"]["size"] for item in relisted["items"]] == [2]
        world.resize("o-gone", 3)
        version = relisted["metadata"]["resourceVersion"]
        assert events(custom, 1, resource_version=version) == [("MODIFIED", "o-gone", 3)]


def test_a_typed_core_kind(served: tuple[ApiServer, World]) -> None:
    """A ConfigMap as the client's own model (`V1ConfigMap`), in answers and watch events."""
    api, world = served
    with config.new_client_from_config(config_file=str(api.kubeconfig)) as api_client:
        core = client.CoreV1Api(api_client)
        made = core.create_namespaced_config_map(
            NAMESPACE,
            client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name="o-config", labels={"test": "o-typed"}),
                data={"a": "1"},
            ),
        )
        assert isinstance(made, client.V1ConfigMap)
        core.patch_namespaced_config_map("o-config", NAMESPACE, {"data": {"b": "2"}})
        listed = core.list_namespaced_config_map(NAMESPACE, label_selector="test=o-typed")
        assert [(c.metadata.name, c.data) for c in listed.items] == [
            ("o-config", {"a": "1", "b": "2"})
        ]
        stream, seen = watch.Watch(), []
        for event in stream.stream(
            core.list_namespaced_config_map,
            NAMESPACE,
            resource_version=made.metadata.resource_version,
            field_selector="metadata.name=o-config",
            timeout_seconds=int(TIMEOUT),
        ):
            seen.append(event)
            stream.stop()
        assert [(e["type"], type(e["object"]), e["object"].data) for e in seen] == [
            ("MODIFIED", client.V1ConfigMap, {"a": "1", "b": "2"})
        ]
        core.delete_namespaced_config_map("o-config", NAMESPACE)
    assert world.widget("o-config", CONFIG_MAPS) is None
