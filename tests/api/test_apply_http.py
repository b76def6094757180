"""When plain writes are recorded as a field manager's (`docs/api.md`): a PATCH of an
object that has managed fields, or one naming a `fieldManager`, takes the fields it
changes (under the User-Agent's name when it names none); a PUT that names none and
carries no `managedFields` stays the plain, unrecorded write; `managedFields: [{}]`
clears them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from http_kit import PROCESSES, Api, process, running_api

from setpoint.model import Object

APPLY = {"Content-Type": "application/apply-patch+yaml"}
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    async with running_api() as running:
        yield running


async def stored(api: Api, name: str) -> Object:
    return await api.store.get("setpoint.dev/v1alpha1", "Process", name, "default")


def managers(obj: Object) -> dict[str, Any]:
    return {
        (e["manager"], e["operation"]): e["fieldsV1"]
        for e in obj["metadata"].get("managedFields", [])
    }


async def test_a_patch_of_an_applied_object_is_recorded_under_the_user_agent(api: Api) -> None:
    body = b"apiVersion: setpoint.dev/v1alpha1\nkind: Process\nmetadata: {name: web}\n"
    body += b"spec: {args: [sleep, '5'], cwd: /tmp}\n"
    applied = await api.client.patch(f"{PROCESSES}/web?fieldManager=tool", content=body,
                                      headers=APPLY)  # fmt: skip
    assert applied.status_code == 200, applied.text
    patched = await api.client.patch(
        f"{PROCESSES}/web",
        json={"spec": {"cwd": "/srv"}},
        headers={**MERGE, "User-Agent": "ops-bot/1.2"},
    )
    assert patched.status_code == 200, patched.text
    now = await stored(api, "web")
    assert managers(now) == {
        ("tool", "Apply"): {"f:spec": {"f:args": {}}},
        ("ops-bot", "Update"): {"f:spec": {"f:cwd": {}}},
    }
    conflict = await api.client.patch(f"{PROCESSES}/web?fieldManager=tool", content=body,
                                       headers=APPLY)  # fmt: skip
    assert conflict.status_code == 409
    assert conflict.json()["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "ops-bot" using '
         "setpoint.dev/v1alpha1", "field": ".spec.cwd"}
    ]  # fmt: skip


async def test_plain_writes_of_unmanaged_objects_stay_unrecorded(api: Api) -> None:
    created = (await api.client.post(PROCESSES, json=process("plain"))).json()
    created["metadata"]["labels"] = {"a": "b"}
    put = await api.client.put(f"{PROCESSES}/plain", json=created)
    assert put.status_code == 200, put.text
    patched = await api.client.patch(
        f"{PROCESSES}/plain", json={"metadata": {"labels": {"c": "d"}}}, headers=MERGE
    )
    assert patched.status_code == 200, patched.text
    assert "managedFields" not in (await stored(api, "plain"))["metadata"]
    # naming a fieldManager records even then
    named = await api.client.patch(
        f"{PROCESSES}/plain?fieldManager=me", json={"spec": {"cwd": "/"}}, headers=MERGE
    )
    assert named.status_code == 200, named.text
    assert managers(await stored(api, "plain")) == {("me", "Update"): {"f:spec": {"f:cwd": {}}}}


async def test_a_put_carrying_managed_fields_is_recorded_and_an_empty_entry_clears(
    api: Api,
) -> None:
    await api.client.post(f"{PROCESSES}?fieldManager=x", json=process("put"))
    named = await api.client.patch(
        f"{PROCESSES}/put?fieldManager=first", json={"spec": {"cwd": "/"}}, headers=MERGE
    )
    obj = named.json()
    obj["spec"]["user"] = "nobody"
    put = await api.client.put(f"{PROCESSES}/put", json=obj, headers={"User-Agent": "editor"})
    assert put.status_code == 200, put.text
    assert managers(await stored(api, "put")) == {
        ("first", "Update"): {"f:spec": {"f:cwd": {}}},
        ("editor", "Update"): {"f:spec": {"f:user": {}}},
    }
    obj = put.json()
    obj["metadata"]["managedFields"] = [{}]
    cleared = await api.client.put(f"{PROCESSES}/put", json=obj)
    assert cleared.status_code == 200, cleared.text
    assert "managedFields" not in (await stored(api, "put"))["metadata"]
