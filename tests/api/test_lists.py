"""Lists over HTTP, on the memory and SQLite stores: the items are the stored objects as
they are; pages (with selectors) come from one snapshot; an evicted snapshot's token is
410 Gone; the Accept header picks the objects, a Table or their metadata only
(`PartialObjectMetadataList`, `PartialObjectMetadata`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_kit import PROCESSES, QUICK, TIMEOUT, process

from setpoint.api.app import create_app
from setpoint.api.query import answer_form
from setpoint.api.resources import ApiSettings
from setpoint.api.server import ApiServer
from setpoint.engine.kinds import builtin_kinds
from setpoint.store import open_store
from setpoint.store.base import Store

API = "setpoint.dev/v1alpha1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
METADATA_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
METADATA = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,application/json"


class Api:
    def __init__(self, store: Store, client: httpx.AsyncClient) -> None:
        self.store = store
        self.client = client

    async def list(self, accept: str = "application/json", **params: Any) -> dict[str, Any]:
        response = await self.client.get(PROCESSES, params=params, headers={"Accept": accept})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def pages(self, accept: str = "application/json", **params: Any) -> list[Any]:
        """Every page of a paged list, each checked to carry the first page's revision."""
        pages = [await self.list(accept, **params)]
        revision = pages[0]["metadata"]["resourceVersion"]
        while token := pages[-1]["metadata"].get("continue"):
            pages.append(await self.list(accept, **params, **{"continue": token}))
            assert pages[-1]["metadata"]["resourceVersion"] == revision
        return pages


async def serve(url: str, settings: ApiSettings = QUICK) -> AsyncIterator[Api]:
    store = await open_store(url, builtin_kinds())
    try:
        async with (
            ApiServer(create_app(store, auth=None, settings=settings)) as server,
            httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT) as client,
        ):
            yield Api(store, client)
    finally:
        await store.close()


@pytest.fixture(params=["memory", "sqlite"])
async def api(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Api]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'state.db'}"
    async for running in serve(url):
        yield running


async def create(api: Api, count: int) -> None:
    for i in range(count):
        labels = {"parity": ("even", "odd")[i % 2]}
        await api.store.create(process(f"p{i}", labels=labels, namespace="default"))


async def test_items_are_the_stored_objects_as_they_are(api: Api) -> None:
    await create(api, 3)
    listed = await api.list()
    stored, revision = await api.store.list(API, "Process", "default")
    assert (listed["apiVersion"], listed["kind"]) == (API, "ProcessList")
    assert listed["metadata"] == {"resourceVersion": str(revision)}
    assert listed["items"] == stored
    assert [list(o) for o in listed["items"]] == [list(o) for o in stored]  # key order too
    assert (await api.list(labelSelector="parity=none"))["items"] == []


async def test_pages_with_selectors_come_from_one_snapshot(api: Api) -> None:
    await create(api, 9)
    first = await api.list(limit=2, labelSelector="parity=even", fieldSelector="metadata.name!=p4")
    assert first["metadata"]["remainingItemCount"] == 2  # p0 p2, then p6 p8
    await api.store.create(process("p10", labels={"parity": "even"}, namespace="default"))
    await api.store.delete(API, "Process", "p6", "default")
    token = first["metadata"]["continue"]
    rest = await api.list(limit=2, labelSelector="parity=even", **{"continue": token})
    assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert "continue" not in rest["metadata"]
    names = [o["metadata"]["name"] for page in (first, rest) for o in page["items"]]
    assert names == ["p0", "p2", "p6", "p8"]  # as they were when the list began
    every = await api.pages(limit=4)
    assert [len(p["items"]) for p in every] == [4, 4, 1]
    assert [p["metadata"].get("remainingItemCount") for p in every] == [5, 1, None]


async def test_an_evicted_snapshot_is_410_gone(tmp_path: Path) -> None:
    settings = ApiSettings(max_list_snapshots=1)
    async for api in serve(f"sqlite:///{tmp_path / 'state.db'}", settings):
        await create(api, 3)
        first = await api.list(limit=1)
        await api.list(limit=1)  # a second paged list: the first one's snapshot goes
        response = await api.client.get(
            PROCESSES, params={"limit": 1, "continue": first["metadata"]["continue"]}
        )
        assert response.status_code == 410, response.text
        assert (response.json()["kind"], response.json()["reason"]) == ("Status", "Expired")


async def test_metadata_only_when_asked(api: Api) -> None:
    await create(api, 5)
    stored, revision = await api.store.list(API, "Process", "default")
    pages = await api.pages(METADATA_LIST, limit=2)
    assert [len(p["items"]) for p in pages] == [2, 2, 1]
    for page in pages:
        assert (page["apiVersion"], page["kind"]) == ("meta.k8s.io/v1", "PartialObjectMetadataList")
        assert page["metadata"]["resourceVersion"] == str(revision)
    items = [item for page in pages for item in page["items"]]
    assert items == [
        {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}
        for o in stored
    ]
    one = await api.client.get(f"{PROCESSES}/p3", headers={"Accept": METADATA})
    assert one.json() == items[3]


async def test_a_table_page_has_a_row_per_object(api: Api) -> None:
    await create(api, 3)
    pages = await api.pages(TABLE, limit=2)
    assert [p["kind"] for p in pages] == ["Table", "Table"]
    rows = [row for page in pages for row in page["rows"]]
    assert [row["cells"][0] for row in rows] == ["p0", "p1", "p2"]
    assert [row["object"]["kind"] for row in rows] == ["PartialObjectMetadata"] * 3


@pytest.mark.parametrize(
    ("accept", "form"),
    [
        ("", "Object"),
        ("application/json", "Object"),
        (TABLE, "Table"),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", "Table"),
        (METADATA_LIST, "PartialObjectMetadata"),
        (METADATA, "PartialObjectMetadata"),
        (f"{METADATA},{TABLE}", "Table"),
        ("application/json;as=Table;v=v1", "Object"),  # not of meta.k8s.io
        ("application/json;as=Other;g=meta.k8s.io", "Object"),
    ],
)
def test_the_accept_header_picks_the_form(accept: str, form: str) -> None:
    assert answer_form(accept) == form
