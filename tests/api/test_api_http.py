"""The API over HTTP, without kubectl: Status errors, discovery, lists and paging, field
selectors, dry runs, the scale subresource and watches; each test checks the store."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from http_kit import ADMIN, PROCESSES, VIEW, Api, process, running_api

from setpoint.model import Object


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    async with running_api() as running:
        yield running


async def names(api: Api) -> list[str]:
    items, _ = await api.store.list("setpoint.dev/v1alpha1", "Process")
    return sorted(o["metadata"]["name"] for o in items)


def assert_status(response: object, code: int, reason: str) -> dict[str, object]:
    import httpx

    assert isinstance(response, httpx.Response)
    assert response.status_code == code, response.text
    body = response.json()
    assert body["kind"] == "Status"
    assert (body["status"], body["code"], body["reason"]) == ("Failure", code, reason)
    return body  # type: ignore[no-any-return]


async def test_discovery_names_kinds_with_their_subresources(api: Api) -> None:
    groups = (await api.client.get("/apis")).json()
    assert "setpoint.dev" in [g["name"] for g in groups["groups"]]
    resources = (await api.client.get("/apis/setpoint.dev/v1alpha1")).json()["resources"]
    by_name = {r["name"]: r for r in resources}
    assert by_name["deployments"]["shortNames"] == ["deploy"]
    assert "all" in by_name["processes"]["categories"]
    assert by_name["processes"]["namespaced"] is True
    assert by_name["deployments/scale"]["kind"] == "Scale"
    assert by_name["deployments/scale"]["group"] == "autoscaling"
    assert "processes/status" in by_name
    core = (await api.client.get("/api/v1")).json()["resources"]
    assert "events" in [r["name"] for r in core]
    assert all("categories" not in r for r in core)  # `kubectl get all` leaves them out
    crds = (await api.client.get("/apis/apiextensions.k8s.io/v1")).json()["resources"]
    assert [r.get("categories") for r in crds if "/" not in r["name"]] == [None]
    assert (await api.client.get("/version")).json()["major"] == "1"
    # With a trailing slash, as kr8s asks, Kubernetes serves the same lists.
    assert (await api.client.get("/api/")).json() == (await api.client.get("/api")).json()
    assert (await api.client.get("/apis/")).json() == groups


async def test_errors_are_status_objects_and_nothing_is_written(api: Api) -> None:
    body = assert_status(await api.client.get(f"{PROCESSES}/missing"), 404, "NotFound")
    assert body["details"] == {"name": "missing", "group": "setpoint.dev", "kind": "processes"}

    created = await api.client.post(PROCESSES, json=process("web"))
    assert created.status_code == 201
    assert_status(await api.client.post(PROCESSES, json=process("web")), 409, "AlreadyExists")

    stale = created.json()
    stale["spec"]["args"] = ["sleep", "1"]
    await api.client.patch(
        f"{PROCESSES}/web",
        content=json.dumps({"metadata": {"labels": {"a": "b"}}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert_status(await api.client.put(f"{PROCESSES}/web", json=stale), 409, "Conflict")

    bad = process("bad")
    bad["spec"]["restartPolicy"] = "Sometimes"
    invalid = assert_status(await api.client.post(PROCESSES, json=bad), 422, "Invalid")
    causes = invalid["details"]["causes"]  # type: ignore[index]
    assert [c["field"] for c in causes] == ["spec.restartPolicy"]
    assert 'Process.setpoint.dev "bad" is invalid' in str(invalid["message"])
    assert await names(api) == ["web"]


@pytest.mark.parametrize(
    ("content_type", "body", "code", "reason"),
    [
        ("application/json", b'{"apiVersion": ', 400, "BadRequest"),
        ("application/json", b"[" * 500 + b"]" * 500, 400, "BadRequest"),
        (
            "application/yaml",
            b"a: &a [x, x, x, x, x, x, x, x, x]\n"
            + b"".join(
                b"%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n" % ((c, c) + (c - 1,) * 9)
                for c in range(ord("b"), ord("k"))
            ),
            400,
            "BadRequest",
        ),
        ("text/plain", b"hello", 415, "UnsupportedMediaType"),
        ("application/json", b" " * (3 * 1024 * 1024 + 1), 413, "RequestEntityTooLarge"),
        (
            "application/json",
            json.dumps(process("Not_A_Name")).encode(),
            422,
            "Invalid",
        ),
        ("application/json", json.dumps([process("x")]).encode(), 400, "BadRequest"),
    ],
    ids=["malformed", "deep", "alias-bomb", "content-type", "too-large", "bad-name", "not-object"],
)
async def test_bad_bodies_get_their_status(
    api: Api, content_type: str, body: bytes, code: int, reason: str
) -> None:
    revision = await api.store.revision()
    response = await api.client.post(
        PROCESSES, content=body, headers={"Content-Type": content_type}
    )
    assert_status(response, code, reason)
    assert "Traceback" not in response.text
    assert await api.store.revision() == revision


async def test_a_patch_of_an_unknown_type_is_415_and_apply_patches_are_served(api: Api) -> None:
    await api.client.post(PROCESSES, json=process("web"))
    plain = await api.client.patch(f"{PROCESSES}/web", json={"spec": {}})
    assert_status(plain, 415, "UnsupportedMediaType")
    applied = await api.client.patch(
        f"{PROCESSES}/web?fieldManager=me",
        content=b"apiVersion: setpoint.dev/v1alpha1\nkind: Process\nmetadata: {name: web}\n"
        b"spec: {args: [sleep, '5']}\n",
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    assert applied.status_code == 200, applied.text
    stored = await api.store.get("setpoint.dev/v1alpha1", "Process", "web")
    assert stored["spec"]["args"] == ["sleep", "5"]


async def test_tokens_are_checked(api: Api) -> None:
    anonymous = await api.client.get(PROCESSES, headers={"Authorization": ""})
    assert_status(anonymous, 401, "Unauthorized")
    wrong = await api.client.get("/apis", headers={"Authorization": "Bearer nope"})
    assert_status(wrong, 401, "Unauthorized")
    viewer = {"Authorization": f"Bearer {VIEW}"}
    assert (await api.client.get(PROCESSES, headers=viewer)).status_code == 200
    refused = await api.client.post(PROCESSES, json=process("web"), headers=viewer)
    assert_status(refused, 403, "Forbidden")
    assert await names(api) == []
    assert ADMIN != VIEW


async def test_anonymous_reads_when_allowed() -> None:
    async with running_api(anonymous_read=True) as api:
        await api.store.create(process("web"))
        anonymous = {"Authorization": ""}
        listed = await api.client.get(PROCESSES, headers=anonymous)
        assert [o["metadata"]["name"] for o in listed.json()["items"]] == ["web"]
        refused = await api.client.delete(f"{PROCESSES}/web", headers=anonymous)
        assert_status(refused, 403, "Forbidden")


async def test_lists_page_through_one_snapshot(api: Api) -> None:
    for i in range(7):
        await api.store.create(process(f"p{i}"))
    first = (await api.client.get(PROCESSES, params={"limit": 3})).json()
    revision = first["metadata"]["resourceVersion"]
    assert first["metadata"]["remainingItemCount"] == 4
    await api.store.create(process("p9"))  # after the snapshot: not in its pages
    seen = [o["metadata"]["name"] for o in first["items"]]
    token = first["metadata"]["continue"]
    while token:
        page = (await api.client.get(PROCESSES, params={"limit": 3, "continue": token})).json()
        assert page["metadata"]["resourceVersion"] == revision
        seen += [o["metadata"]["name"] for o in page["items"]]
        token = page["metadata"].get("continue")
    assert seen == [f"p{i}" for i in range(7)]
    bad = await api.client.get(PROCESSES, params={"limit": 3, "continue": "nonsense"})
    assert_status(bad, 400, "BadRequest")


async def test_field_selectors_and_every_namespace(api: Api) -> None:
    await api.store.create(process("a"))
    await api.store.create(process("b", namespace="other"))
    everywhere = "/apis/setpoint.dev/v1alpha1/processes"
    listed = (
        await api.client.get(everywhere, params={"fieldSelector": "metadata.namespace=other"})
    ).json()
    assert [o["metadata"]["name"] for o in listed["items"]] == ["b"]
    not_a = (await api.client.get(everywhere, params={"fieldSelector": "metadata.name!=a"})).json()
    assert [o["metadata"]["name"] for o in not_a["items"]] == ["b"]
    unknown = await api.client.get(PROCESSES, params={"fieldSelector": "spec.args=x"})
    assert_status(unknown, 400, "BadRequest")


async def test_event_fields_kubectl_describe_uses(api: Api) -> None:
    events = "/api/v1/namespaces/default/events"
    for name, about in (("e1", "web"), ("e2", "db")):
        event: Object = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name},
            "involvedObject": {
                "apiVersion": "setpoint.dev/v1alpha1",
                "kind": "Process",
                "name": about,
                "namespace": "default",
            },
            "reason": "Started",
            "message": "m",
            "type": "Normal",
            "firstTimestamp": "2026-01-01T00:00:00Z",
            "lastTimestamp": "2026-01-01T00:00:00Z",
            "source": {"component": "c"},
        }
        assert (await api.client.post(events, json=event)).status_code == 201
    selector = (
        "involvedObject.name=web,involvedObject.namespace=default,involvedObject.kind=Process"
    )
    found = (await api.client.get(events, params={"fieldSelector": selector})).json()
    assert [e["metadata"]["name"] for e in found["items"]] == ["e1"]


async def test_dry_runs_write_nothing(api: Api) -> None:
    dry = await api.client.post(PROCESSES, params={"dryRun": "All"}, json=process("web"))
    assert dry.status_code == 201
    assert dry.json()["metadata"]["name"] == "web"
    assert await names(api) == []
    await api.store.create(process("web"))
    revision = await api.store.revision()
    patched = await api.client.patch(
        f"{PROCESSES}/web",
        params={"dryRun": "All"},
        content=json.dumps({"spec": {"args": ["sleep", "5"]}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.json()["spec"]["args"] == ["sleep", "5"]
    deleted = await api.client.delete(f"{PROCESSES}/web", params={"dryRun": "All"})
    assert deleted.status_code == 200
    assert await api.store.revision() == revision


async def test_scale_subresource(api: Api) -> None:
    deployments = "/apis/setpoint.dev/v1alpha1/namespaces/default/deployments"
    deployment = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"args": ["sleep", "1"]}},
        },
    }
    await api.store.create(deployment)
    scale = (await api.client.get(f"{deployments}/web/scale")).json()
    assert (scale["apiVersion"], scale["kind"], scale["spec"]) == (
        "autoscaling/v1",
        "Scale",
        {"replicas": 2},
    )
    scale["spec"]["replicas"] = 4
    assert (await api.client.put(f"{deployments}/web/scale", json=scale)).status_code == 200
    stored = await api.store.get("setpoint.dev/v1alpha1", "Deployment", "web")
    assert stored["spec"]["replicas"] == 4
    no_scale = await api.client.get(f"{PROCESSES}/web/scale")
    assert_status(no_scale, 404, "NotFound")


async def test_delete_with_options_and_finalizers(api: Api) -> None:
    held = process("held", finalizers=["example.com/hold"])
    created = await api.store.create(held)
    wrong_uid = await api.client.request(
        "DELETE", f"{PROCESSES}/held", json={"preconditions": {"uid": "not-it"}}
    )
    assert_status(wrong_uid, 409, "Conflict")
    lingering = await api.client.request(
        "DELETE",
        f"{PROCESSES}/held",
        json={
            "propagationPolicy": "Background",
            "preconditions": {"uid": created["metadata"]["uid"]},
        },
    )
    assert lingering.json()["metadata"]["deletionTimestamp"]
    assert await names(api) == ["held"]
    await api.store.create(process("plain"))
    gone = (await api.client.delete(f"{PROCESSES}/plain")).json()
    assert (gone["kind"], gone["status"]) == ("Status", "Success")
    assert await names(api) == ["held"]
