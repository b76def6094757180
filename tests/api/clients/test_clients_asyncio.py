"""kubernetes_asyncio against setpoint's API, as its users use it: the kubeconfig loaded by
`config.new_client_from_config`, Widgets (a CRD) through `CustomObjectsApi`, watches through
`watch.Watch().stream`, all in the test's event loop (the server runs in a thread of its
own); each test checks what the server stores afterwards."""

from __future__ import annotations

from collections.abc import AsyncIterator
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
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

from setpoint.testing import ApiServer

WIDGET = (GROUP, VERSION, NAMESPACE, PLURAL)
MERGE_PATCH = "application/merge-patch+json"
"""Named for a merge patch: this client sends any body as a JSON patch unless told
(`_content_type`)."""


@pytest.fixture
async def custom(served: tuple[ApiServer, World]) -> AsyncIterator[client.CustomObjectsApi]:
    api, _ = served
    async with await config.new_client_from_config(config_file=str(api.kubeconfig)) as api_client:
        yield client.CustomObjectsApi(api_client)


@pytest.fixture
def world(served: tuple[ApiServer, World]) -> World:
    return served[1]


async def events(
    custom: client.CustomObjectsApi, count: int, **options: Any
) -> list[tuple[str, str, int]]:
    """The first `count` events of a watch of Widgets: (type, name, spec.size)."""
    seen: list[tuple[str, str, int]] = []
    async with watch.Watch().stream(
        custom.list_namespaced_custom_object, *WIDGET, timeout_seconds=int(TIMEOUT), **options
    ) as stream:
        async for event in stream:
            obj = event["object"]
            seen.append((event["type"], obj["metadata"]["name"], obj["spec"]["size"]))
            if len(seen) == count:
                break
    return seen


async def test_create_get_and_list_with_selectors(
    custom: client.CustomObjectsApi, world: World
) -> None:
    await custom.create_namespaced_custom_object(
        *WIDGET, widget("a-red", labels={"test": "a-list", "colour": "red"})
    )
    await custom.create_namespaced_custom_object(
        *WIDGET, widget("a-blue", size=2, labels={"test": "a-list", "colour": "blue"})
    )
    got = await custom.get_namespaced_custom_object(*WIDGET, "a-blue")
    assert (got["spec"], got["metadata"]["uid"]) == (
        {"size": 2},
        world.widget("a-blue")["metadata"]["uid"],
    )  # type: ignore[index]

    async def listed(selector: str) -> list[str]:
        found = await custom.list_namespaced_custom_object(*WIDGET, label_selector=selector)
        return sorted(item["metadata"]["name"] for item in found["items"])

    assert await listed("test=a-list") == ["a-blue", "a-red"]
    assert await listed("test=a-list,colour!=red") == ["a-blue"]
    assert await listed("test=a-list,colour in (red,green)") == ["a-red"]
    with pytest.raises(ApiException) as refused:
        await custom.create_namespaced_custom_object(*WIDGET, widget("a-red", size=9))
    assert refused.value.status == 409
    assert world.widget("a-red")["spec"] == {"size": 1}  # type: ignore[index]


async def test_watch_from_a_resource_version(custom: client.CustomObjectsApi, world: World) -> None:
    created = await custom.create_namespaced_custom_object(*WIDGET, widget("a-watched"))
    world.resize("a-watched", 2)
    world.resize("a-watched", 3)
    seen = await events(
        custom,
        2,
        resource_version=created["metadata"]["resourceVersion"],
        field_selector="metadata.name=a-watched",
    )
    assert seen == [("MODIFIED", "a-watched", 2), ("MODIFIED", "a-watched", 3)]


async def test_merge_and_json_patch(custom: client.CustomObjectsApi, world: World) -> None:
    await custom.create_namespaced_custom_object(*WIDGET, widget("a-patched", labels={"a": "1"}))
    await custom.patch_namespaced_custom_object(
        *WIDGET,
        "a-patched",
        {"metadata": {"labels": {"a": None, "b": "2"}}, "spec": {"colour": "red"}},
        _content_type=MERGE_PATCH,
    )
    await custom.patch_namespaced_custom_object(  # a list: a JSON patch, the default
        *WIDGET,
        "a-patched",
        [
            {"op": "test", "path": "/spec/colour", "value": "red"},
            {"op": "replace", "path": "/spec/size", "value": 5},
        ],
    )
    stored = world.widget("a-patched")
    assert stored is not None
    assert (stored["metadata"]["labels"], stored["spec"]) == (
        {"b": "2"},
        {"size": 5, "colour": "red"},
    )
    with pytest.raises(ApiException) as refused:
        await custom.patch_namespaced_custom_object(
            *WIDGET,
            "a-patched",
            [{"op": "test", "path": "/spec/size", "value": 1}],
        )
    assert refused.value.status == 422
    assert world.widget("a-patched") == stored


async def test_status_subresource(custom: client.CustomObjectsApi, world: World) -> None:
    await custom.create_namespaced_custom_object(*WIDGET, widget("a-status"))
    await custom.patch_namespaced_custom_object_status(
        *WIDGET,
        "a-status",
        {"status": {"phase": "Ready", "observedGeneration": 1}},
        _content_type=MERGE_PATCH,
    )
    current = await custom.get_namespaced_custom_object(*WIDGET, "a-status")
    current["status"]["phase"] = "Done"
    current["spec"]["size"] = 7  # not written through the status subresource
    await custom.replace_namespaced_custom_object_status(*WIDGET, "a-status", current)
    await custom.patch_namespaced_custom_object(  # nor is the status through the object
        *WIDGET,
        "a-status",
        {"status": {"phase": "Lost"}, "spec": {"size": 2}},
        _content_type=MERGE_PATCH,
    )
    stored = world.widget("a-status")
    assert stored is not None
    assert stored["status"] == {"phase": "Done", "observedGeneration": 1}
    assert (stored["spec"], stored["metadata"]["generation"]) == ({"size": 2}, 2)


async def test_server_side_apply(custom: client.CustomObjectsApi, world: World) -> None:
    manifest = widget("a-applied", labels={"by": "apply"})
    await custom.patch_namespaced_custom_object(
        *WIDGET,
        "a-applied",
        manifest,
        field_manager="tester",
        _content_type="application/apply-patch+yaml",
    )
    manifest["spec"]["colour"] = "blue"
    await custom.patch_namespaced_custom_object(
        *WIDGET,
        "a-applied",
        manifest,
        field_manager="tester",
        _content_type="application/apply-patch+yaml",
    )
    with pytest.raises(ApiException) as conflict:  # another manager's value for its field
        await custom.patch_namespaced_custom_object(
            *WIDGET,
            "a-applied",
            widget("a-applied", size=9),
            field_manager="other",
            _content_type="application/apply-patch+yaml",
        )
    assert conflict.value.status == 409
    stored = world.widget("a-applied")
    assert stored is not None
    assert stored["spec"] == {"size": 1, "colour": "blue"}
    managers = {
        (entry["manager"], entry["operation"]) for entry in stored["metadata"]["managedFields"]
    }
    assert managers == {("tester", "Apply")}


async def test_delete_with_finalizers(custom: client.CustomObjectsApi, world: World) -> None:
    await custom.create_namespaced_custom_object(
        *WIDGET, widget("a-finalized", finalizers=[FINALIZER])
    )
    await custom.delete_namespaced_custom_object(*WIDGET, "a-finalized")
    lingering = world.widget("a-finalized")
    assert lingering is not None
    assert lingering["metadata"]["deletionTimestamp"]
    assert lingering["metadata"]["finalizers"] == [FINALIZER]
    await custom.patch_namespaced_custom_object(
        *WIDGET,
        "a-finalized",
        [{"op": "remove", "path": "/metadata/finalizers"}],
    )
    assert world.widget("a-finalized") is None


async def test_410_gone_is_resumed_by_relisting(compacting: tuple[ApiServer, World]) -> None:
    api, world = compacting
    async with await config.new_client_from_config(config_file=str(api.kubeconfig)) as api_client:
        custom = client.CustomObjectsApi(api_client)
        await custom.create_namespaced_custom_object(*WIDGET, widget("a-gone"))
        listed = await custom.list_namespaced_custom_object(*WIDGET)
        version = listed["metadata"]["resourceVersion"]
        world.resize("a-gone", 2)  # missed: the watcher was away
        world.outdate(version)

        with pytest.raises(ApiException) as gone:
            await events(custom, 1, resource_version=version)
        assert gone.value.status == 410

        relisted = await custom.list_namespaced_custom_object(*WIDGET)
        assert [item["spec"]["size"] for item in relisted["items"]] == [2]
        world.resize("a-gone", 3)
        version = relisted["metadata"]["resourceVersion"]
        assert await events(custom, 1, resource_version=version) == [("MODIFIED", "a-gone", 3)]


async def test_a_typed_core_kind(served: tuple[ApiServer, World]) -> None:
    """A ConfigMap as the client's own model (`V1ConfigMap`), in answers and watch events."""
    api, world = served
    async with await config.new_client_from_config(config_file=str(api.kubeconfig)) as api_client:
        core = client.CoreV1Api(api_client)
        made = await core.create_namespaced_config_map(
            NAMESPACE,
            client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name="a-config", labels={"test": "a-typed"}),
                data={"a": "1"},
            ),
        )
        assert isinstance(made, client.V1ConfigMap)
        await core.patch_namespaced_config_map(
            "a-config", NAMESPACE, {"data": {"b": "2"}}, _content_type=MERGE_PATCH
        )
        listed = await core.list_namespaced_config_map(NAMESPACE, label_selector="test=a-typed")
        assert [(c.metadata.name, c.data) for c in listed.items] == [
            ("a-config", {"a": "1", "b": "2"})
        ]
        seen = []
        async with watch.Watch().stream(
            core.list_namespaced_config_map,
            NAMESPACE,
            resource_version=made.metadata.resource_version,
            field_selector="metadata.name=a-config",
            timeout_seconds=int(TIMEOUT),
        ) as stream:
            async for event in stream:
                seen.append(event)
                break
        assert [(e["type"], type(e["object"]), e["object"].data) for e in seen] == [
            ("MODIFIED", client.V1ConfigMap, {"a": "1", "b": "2"})
        ]
        await core.delete_namespaced_config_map("a-config", NAMESPACE)
    assert world.widget("a-config", CONFIG_MAPS) is None
