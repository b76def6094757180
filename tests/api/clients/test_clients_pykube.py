"""pykube-ng against setpoint's API, as its users use it: `KubeConfig.from_file` and an
`HTTPClient`, Widgets (a CRD) as a `NamespacedAPIObject` subclass, queries with `objects()`,
`filter` and `watch`; each test checks what the server stores afterwards.

pykube-ng's objects patch with a merge patch only; a JSON patch and server-side apply are
requests its users make through the client with the object's own `api_kwargs`, as here."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pykube
import pytest
from clients_kit import (
    API_VERSION,
    CONFIG_MAPS,
    FINALIZER,
    KIND,
    NAMESPACE,
    PLURAL,
    TIMEOUT,
    World,
    widget,
)
from pykube.exceptions import HTTPError
from pykube.query import Query, now

from setpoint.testing import ApiServer


class Widget(pykube.objects.NamespacedAPIObject):  # type: ignore[misc]
    version = API_VERSION
    endpoint = PLURAL
    kind = KIND


@pytest.fixture
def api(served: tuple[ApiServer, World]) -> Iterator[pykube.HTTPClient]:
    client = pykube.HTTPClient(pykube.KubeConfig.from_file(str(served[0].kubeconfig)))
    yield client
    client.session.close()


@pytest.fixture
def world(served: tuple[ApiServer, World]) -> World:
    return served[1]


def events(query: Query, count: int, since: Any) -> list[tuple[str, str, int]]:
    """The first `count` events of a watch of `query` from `since`: (type, name, spec.size)."""
    seen: list[tuple[str, str, int]] = []
    watch = query.watch(since=since, params={"timeoutSeconds": int(TIMEOUT)})
    try:
        for event in watch:
            seen.append((event.type, event.object.name, event.object.obj["spec"]["size"]))
            if len(seen) == count:
                break
    finally:
        if watch.response is not None:
            watch.response.close()
    return seen


def send(obj: Widget, method: str, content_type: str, body: Any, **params: str) -> None:
    """A request pykube-ng's objects have no call for, made as its users make it."""
    answer = obj.api.request(
        method,
        **obj.api_kwargs(
            headers={"Content-Type": content_type}, data=json.dumps(body), params=params or None
        ),
    )
    obj.api.raise_for_status(answer)
    obj.set_obj(answer.json())


def test_create_get_and_list_with_selectors(api: pykube.HTTPClient, world: World) -> None:
    Widget(api, widget("p-red", labels={"test": "p-list", "colour": "red"})).create()
    Widget(api, widget("p-blue", size=2, labels={"test": "p-list", "colour": "blue"})).create()
    got = Widget.objects(api, namespace=NAMESPACE).get_by_name("p-blue")
    stored = world.widget("p-blue")
    assert stored is not None
    assert (got.obj["spec"], got.metadata["uid"]) == ({"size": 2}, stored["metadata"]["uid"])

    def listed(selector: dict[str, Any]) -> list[str]:
        return sorted(
            w.name for w in Widget.objects(api).filter(namespace=NAMESPACE, selector=selector)
        )

    assert listed({"test": "p-list"}) == ["p-blue", "p-red"]
    assert listed({"test": "p-list", "colour__neq": "red"}) == ["p-blue"]
    assert listed({"test": "p-list", "colour__in": ["red", "green"]}) == ["p-red"]
    with pytest.raises(HTTPError) as refused:
        Widget(api, widget("p-red", size=9)).create()
    assert refused.value.code == 409
    assert world.widget("p-red")["spec"] == {"size": 1}  # type: ignore[index]


def test_watch_from_a_resource_version(api: pykube.HTTPClient, world: World) -> None:
    created = Widget(api, widget("p-watched"))
    created.create()
    world.resize("p-watched", 2)
    world.resize("p-watched", 3)
    query = Widget.objects(api).filter(
        namespace=NAMESPACE, field_selector={"metadata.name": "p-watched"}
    )
    seen = events(query, 2, since=created.metadata["resourceVersion"])
    assert seen == [("MODIFIED", "p-watched", 2), ("MODIFIED", "p-watched", 3)]


def test_merge_and_json_patch(api: pykube.HTTPClient, world: World) -> None:
    obj = Widget(api, widget("p-patched", labels={"a": "1"}))
    obj.create()
    obj.patch({"metadata": {"labels": {"a": None, "b": "2"}}, "spec": {"colour": "red"}})
    json_patch = "application/json-patch+json"
    send(
        obj,
        "PATCH",
        json_patch,
        [
            {"op": "test", "path": "/spec/colour", "value": "red"},
            {"op": "replace", "path": "/spec/size", "value": 5},
        ],
    )
    stored = world.widget("p-patched")
    assert stored is not None
    assert (stored["metadata"]["labels"], stored["spec"]) == (
        {"b": "2"},
        {"size": 5, "colour": "red"},
    )
    obj.reload()
    assert obj.obj == stored
    with pytest.raises(HTTPError) as refused:
        send(obj, "PATCH", json_patch, [{"op": "test", "path": "/spec/size", "value": 1}])
    assert refused.value.code == 422
    assert world.widget("p-patched") == stored


def test_status_subresource(api: pykube.HTTPClient, world: World) -> None:
    obj = Widget(api, widget("p-status"))
    obj.create()
    obj.patch({"status": {"phase": "Ready", "observedGeneration": 1}}, subresource="status")
    obj.obj["status"]["phase"] = "Done"
    obj.obj["spec"]["size"] = 7  # not written through the status subresource
    obj.update(subresource="status")
    obj.patch({"status": {"phase": "Lost"}, "spec": {"size": 2}})  # nor the status here
    stored = world.widget("p-status")
    assert stored is not None
    assert stored["status"] == {"phase": "Done", "observedGeneration": 1}
    assert (stored["spec"], stored["metadata"]["generation"]) == ({"size": 2}, 2)


def test_server_side_apply(api: pykube.HTTPClient, world: World) -> None:
    apply = "application/apply-patch+yaml"
    manifest = widget("p-applied", labels={"by": "apply"})
    send(Widget(api, manifest), "PATCH", apply, manifest, fieldManager="tester")
    manifest["spec"]["colour"] = "blue"
    send(Widget(api, manifest), "PATCH", apply, manifest, fieldManager="tester")
    other = widget("p-applied", size=9)
    with pytest.raises(HTTPError) as conflict:  # another manager's value for its field
        send(Widget(api, other), "PATCH", apply, other, fieldManager="other")
    assert conflict.value.code == 409
    stored = world.widget("p-applied")
    assert stored is not None
    assert stored["spec"] == {"size": 1, "colour": "blue"}
    managers = {(f["manager"], f["operation"]) for f in stored["metadata"]["managedFields"]}
    assert managers == {("tester", "Apply")}


def test_delete_with_finalizers(api: pykube.HTTPClient, world: World) -> None:
    obj = Widget(api, widget("p-finalized", finalizers=[FINALIZER]))
    obj.create()
    obj.delete()
    lingering = world.widget("p-finalized")
    assert lingering is not None
    assert lingering["metadata"]["deletionTimestamp"]
    assert lingering["metadata"]["finalizers"] == [FINALIZER]
    obj.reload()
    obj.obj["metadata"]["finalizers"] = []
    obj.update(is_strategic=False)  # pykube's default keeps the items a list had
    assert world.widget("p-finalized") is None
    assert not obj.exists()


def test_410_gone_is_resumed_by_relisting(compacting: tuple[ApiServer, World]) -> None:
    server, world = compacting
    api = pykube.HTTPClient(pykube.KubeConfig.from_file(str(server.kubeconfig)))
    with contextlib.closing(api.session):
        obj = Widget(api, widget("p-gone"))
        obj.create()
        version = obj.metadata["resourceVersion"]
        world.resize("p-gone", 2)  # missed: the watcher was away
        world.outdate(version)

        watch = Widget.objects(api).filter(namespace=NAMESPACE).watch(since=version)
        first = next(iter(watch))
        watch.response.close()
        assert (first.type, first.object.obj["code"]) == ("ERROR", 410)

        relisted = Widget.objects(api).filter(namespace=NAMESPACE)
        assert [w.obj["spec"]["size"] for w in relisted] == [2]
        world.resize("p-gone", 3)
        assert events(relisted, 1, since=now) == [("MODIFIED", "p-gone", 3)]  # the list's


def test_a_typed_core_kind(api: pykube.HTTPClient, world: World) -> None:
    """A ConfigMap as pykube-ng's own class, in answers and watch events."""
    made = pykube.ConfigMap(
        api, {"metadata": {"name": "p-config", "labels": {"test": "p-typed"}}, "data": {"a": "1"}}
    )
    made.create()
    since = made.metadata["resourceVersion"]
    made.patch({"data": {"b": "2"}})
    listed = pykube.ConfigMap.objects(api).filter(namespace=NAMESPACE, selector={"test": "p-typed"})
    assert [(c.name, c.obj["data"]) for c in listed] == [("p-config", {"a": "1", "b": "2"})]
    query = listed.filter(field_selector={"metadata.name": "p-config"})
    watch = query.watch(since=since, params={"timeoutSeconds": int(TIMEOUT)})
    try:
        first = next(iter(watch))
    finally:
        watch.response.close()
    assert (first.type, type(first.object), first.object.obj["data"]) == (
        "MODIFIED",
        pykube.ConfigMap,
        {"a": "1", "b": "2"},
    )
    made.delete()
    assert world.widget("p-config", CONFIG_MAPS) is None
