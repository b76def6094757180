"""kr8s (its asyncio API) against setpoint's API, as its users use it: `kr8s.asyncio.api`
with the server's kubeconfig, Widgets (a CRD) as a class of kr8s's own (`new_class`), watches
through `Api.watch`; each test checks what the server stores afterwards.

kr8s has no call of its own for two of them, so its users (and these tests) make the request
with `Api.call_api`: server-side apply (an `application/apply-patch+yaml` PATCH), and
watching from a resourceVersion that may be too old: `Api.watch(since=...)` answers a 410 by
watching again from the same resourceVersion, which is 410 again, forever. What kr8s offers
instead is a watch with no resourceVersion, which starts with what exists (a re-list)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import kr8s
import kr8s.asyncio
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
from kr8s.asyncio.objects import APIObject, ConfigMap, new_class

from setpoint.testing import ApiServer

Widget = new_class(kind=KIND, version=API_VERSION, namespaced=True, plural=PLURAL)

Event = tuple[str, str, int]
"""A watch event as the tests compare them: (type, name, spec.size)."""


@contextlib.asynccontextmanager
async def connected(server: ApiServer) -> AsyncIterator[kr8s.asyncio.Api]:
    """kr8s's client of `server`, its connections closed on the way out, before the test's
    event loop is: kr8s has no call for it, so its HTTP session is closed here."""
    api = await kr8s.asyncio.api(kubeconfig=str(server.kubeconfig))
    try:
        yield api
    finally:
        if api._session is not None:
            await api._session.aclose()


@pytest.fixture
async def api(served: tuple[ApiServer, World]) -> AsyncIterator[kr8s.asyncio.Api]:
    async with connected(served[0]) as api:
        yield api


@pytest.fixture
def world(served: tuple[ApiServer, World]) -> World:
    return served[1]


@contextlib.asynccontextmanager
async def watching(
    api: kr8s.asyncio.Api, kind: type[APIObject] = Widget, **options: Any
) -> AsyncIterator[asyncio.Queue[tuple[str, APIObject]]]:
    """The events of `Api.watch` of `kind` in the default namespace, as they come. The watch
    runs in a task that is cancelled on the way out: that unwinds kr8s's stream at once."""
    events: asyncio.Queue[tuple[str, APIObject]] = asyncio.Queue()

    async def watch() -> None:
        async for event in api.watch(kind, namespace=NAMESPACE, **options):
            events.put_nowait(event)

    watcher = asyncio.create_task(watch())
    try:
        yield events
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher  # re-raises what ended the watch, if anything did


async def next_events(events: asyncio.Queue[tuple[str, APIObject]], count: int) -> list[Event]:
    """The next `count` Widget events: (type, name, spec.size)."""
    async with asyncio.timeout(TIMEOUT):
        got = [await events.get() for _ in range(count)]
    return [(kind, obj.name, obj.spec["size"]) for kind, obj in got]


async def test_create_get_and_list_with_selectors(api: kr8s.asyncio.Api, world: World) -> None:
    await Widget(widget("k-red", labels={"test": "k-list", "colour": "red"}), api=api).create()
    blue = widget("k-blue", size=2, labels={"test": "k-list", "colour": "blue"})
    await Widget(blue, api=api).create()
    got = await Widget.get("k-blue", namespace=NAMESPACE, api=api)
    stored = world.widget("k-blue")
    assert stored is not None
    assert (got.spec.to_dict(), got.metadata.uid) == ({"size": 2}, stored["metadata"]["uid"])

    async def listed(selector: dict[str, str] | str) -> list[str]:
        found = Widget.list(api=api, namespace=NAMESPACE, label_selector=selector)
        return sorted([w.name async for w in found])  # type: ignore[union-attr]

    assert await listed({"test": "k-list"}) == ["k-blue", "k-red"]
    assert await listed("test=k-list,colour!=red") == ["k-blue"]
    assert await listed("test=k-list,colour in (red,green)") == ["k-red"]
    with pytest.raises(kr8s.ServerError) as refused:
        await Widget(widget("k-red", size=9), api=api).create()
    assert refused.value.response is not None
    assert refused.value.response.status_code == 409
    assert world.widget("k-red")["spec"] == {"size": 1}  # type: ignore[index]


async def test_watch_from_a_resource_version(api: kr8s.asyncio.Api, world: World) -> None:
    created = Widget(widget("k-watched"), api=api)
    await created.create()
    world.resize("k-watched", 2)
    world.resize("k-watched", 3)
    selector = {"metadata.name": "k-watched"}
    since = created.metadata.resourceVersion
    async with watching(api, since=since, field_selector=selector) as events:
        seen = await next_events(events, 2)
    assert seen == [("MODIFIED", "k-watched", 2), ("MODIFIED", "k-watched", 3)]


async def test_merge_and_json_patch(api: kr8s.asyncio.Api, world: World) -> None:
    patched = Widget(widget("k-patched", labels={"a": "1"}), api=api)
    await patched.create()
    await patched.patch({"metadata": {"labels": {"a": None, "b": "2"}}, "spec": {"colour": "red"}})
    await patched.patch(
        [
            {"op": "test", "path": "/spec/colour", "value": "red"},
            {"op": "replace", "path": "/spec/size", "value": 5},
        ],
        type="json",
    )
    stored = world.widget("k-patched")
    assert stored is not None
    assert (stored["metadata"]["labels"], stored["spec"]) == (
        {"b": "2"},
        {"size": 5, "colour": "red"},
    )
    assert patched.spec.to_dict() == stored["spec"]  # kr8s keeps what the server answered
    with pytest.raises(kr8s.ServerError) as refused:
        await patched.patch([{"op": "test", "path": "/spec/size", "value": 1}], type="json")
    assert refused.value.response is not None
    assert refused.value.response.status_code == 422
    assert world.widget("k-patched") == stored


async def test_status_subresource(api: kr8s.asyncio.Api, world: World) -> None:
    obj = Widget(widget("k-status"), api=api)
    await obj.create()
    await obj.patch({"status": {"phase": "Ready", "observedGeneration": 1}}, subresource="status")
    await obj.patch(  # the status through the subresource only: the spec is not written
        {"status": {"phase": "Done"}, "spec": {"size": 7}}, subresource="status"
    )
    await obj.patch({"status": {"phase": "Lost"}, "spec": {"size": 2}})  # nor the status here
    stored = world.widget("k-status")
    assert stored is not None
    assert stored["status"] == {"phase": "Done", "observedGeneration": 1}
    assert (stored["spec"], stored["metadata"]["generation"]) == ({"size": 2}, 2)


async def apply(api: kr8s.asyncio.Api, manifest: dict[str, Any], manager: str) -> dict[str, Any]:
    """Server-side apply with kr8s: its own request (kr8s has no call for it)."""
    async with api.call_api(
        "PATCH",
        version=API_VERSION,
        namespace=NAMESPACE,
        url=f"{PLURAL}/{manifest['metadata']['name']}",
        params={"fieldManager": manager},
        headers={"Content-Type": "application/apply-patch+yaml"},
        content=json.dumps(manifest),
    ) as response:
        applied: dict[str, Any] = response.json()
    return applied


async def test_server_side_apply(api: kr8s.asyncio.Api, world: World) -> None:
    manifest = widget("k-applied", labels={"by": "apply"})
    await apply(api, manifest, "tester")
    manifest["spec"]["colour"] = "blue"
    await apply(api, manifest, "tester")
    with pytest.raises(kr8s.ServerError) as conflict:  # another manager's value for its field
        await apply(api, widget("k-applied", size=9), "other")
    assert conflict.value.response is not None
    assert conflict.value.response.status_code == 409
    stored = world.widget("k-applied")
    assert stored is not None
    assert stored["spec"] == {"size": 1, "colour": "blue"}
    managers = {(f["manager"], f["operation"]) for f in stored["metadata"]["managedFields"]}
    assert managers == {("tester", "Apply")}


async def test_delete_with_finalizers(api: kr8s.asyncio.Api, world: World) -> None:
    obj = Widget(widget("k-finalized", finalizers=[FINALIZER]), api=api)
    await obj.create()
    await obj.delete()
    lingering = world.widget("k-finalized")
    assert lingering is not None
    assert lingering["metadata"]["deletionTimestamp"]
    assert lingering["metadata"]["finalizers"] == [FINALIZER]
    await obj.patch([{"op": "remove", "path": "/metadata/finalizers"}], type="json")
    assert world.widget("k-finalized") is None
    assert not await obj.exists()


async def test_410_gone_is_resumed_by_relisting(compacting: tuple[ApiServer, World]) -> None:
    server, world = compacting
    async with connected(server) as api:
        await resume_after_410(api, world)


async def resume_after_410(api: kr8s.asyncio.Api, world: World) -> None:
    obj = Widget(widget("k-gone"), api=api)
    await obj.create()
    version = obj.metadata.resourceVersion
    world.resize("k-gone", 2)  # missed: the watcher was away
    world.outdate(version)

    params = {"watch": "true", "resourceVersion": version}
    async with api.call_api(
        "GET", version=API_VERSION, namespace=NAMESPACE, url=PLURAL, params=params, stream=True
    ) as response:
        first = json.loads(await anext(response.aiter_lines()))
    assert (first["type"], first["object"]["code"]) == ("ERROR", 410)

    async with watching(api) as events:  # no resourceVersion: what exists first, then changes
        assert await next_events(events, 1) == [("ADDED", "k-gone", 2)]
        world.resize("k-gone", 3)
        assert await next_events(events, 1) == [("MODIFIED", "k-gone", 3)]


async def test_a_typed_core_kind(api: kr8s.asyncio.Api, world: World) -> None:
    """A ConfigMap as kr8s's own class, in answers and watch events."""
    made = ConfigMap(
        {"metadata": {"name": "k-config", "labels": {"test": "k-typed"}}, "data": {"a": "1"}},
        api=api,
    )
    await made.create()
    since = made.metadata.resourceVersion
    await made.patch({"data": {"b": "2"}})
    listed = [c async for c in ConfigMap.list(api=api, label_selector={"test": "k-typed"})]
    assert [(c.name, c.data.to_dict()) for c in listed] == [  # type: ignore[union-attr]
        ("k-config", {"a": "1", "b": "2"})
    ]
    selector = {"metadata.name": "k-config"}
    async with watching(api, ConfigMap, since=since, field_selector=selector) as events:
        async with asyncio.timeout(TIMEOUT):
            kind, obj = await events.get()
    assert (kind, type(obj), obj.data.to_dict()) == ("MODIFIED", ConfigMap, {"a": "1", "b": "2"})
    await made.delete()
    assert world.widget("k-config", CONFIG_MAPS) is None
