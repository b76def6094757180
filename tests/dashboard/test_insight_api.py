"""The insight read endpoints the dashboard uses, over HTTP on a real server in the test's
loop (a SQLite store in tmp_path, so the timeline and the logs sit beside it). No browser."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
from dashboard_kit import record_failure

from setpoint.api.app import create_app
from setpoint.api.auth import Authenticator, Role, User
from setpoint.api.insight import _readable_cause
from setpoint.api.server import ApiServer
from setpoint.engine import workspace_of
from setpoint.engine.kinds import builtin_kinds
from setpoint.model.wellknown import child_log_file
from setpoint.store import open_store
from setpoint.store.base import Store

INSIGHT = "/apis/insight.setpoint.dev/v1alpha1"
OBJ = f"{INSIGHT}/namespaces/default/processes"
TIMEOUT_S = 60.0


def process(name: str, *depends_on: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"args": ["sleep", "1000"]}
    if depends_on:
        spec["dependsOn"] = [
            {"kind": "Process", "name": d, "condition": "Ready"} for d in depends_on
        ]
    meta = {"name": name, "namespace": "default", "labels": {"app": name}}
    return {"apiVersion": "setpoint.dev/v1alpha1", "kind": "Process", "metadata": meta} | {
        "spec": spec
    }


@asynccontextmanager
async def serving(directory: Path) -> AsyncIterator[tuple[Store, httpx.AsyncClient]]:
    store = await open_store(f"sqlite:///{directory / 'state.db'}", builtin_kinds())
    auth = Authenticator({"a": User("admin", Role.ADMIN), "v": User("viewer", Role.VIEW)})
    try:
        async with (
            ApiServer(create_app(store, auth=auth)) as server,
            httpx.AsyncClient(
                base_url=server.url, headers={"Authorization": "Bearer v"}, timeout=TIMEOUT_S
            ) as client,
        ):
            yield store, client
    finally:
        await store.close()


async def next_line(lines: AsyncIterator[str]) -> str:
    return await asyncio.wait_for(anext(lines), TIMEOUT_S)


async def test_objects_lists_every_kind_then_watches_them(tmp_path: Path) -> None:
    async with serving(tmp_path) as (store, client):
        await store.create(process("db"))
        listed = (await client.get(f"{INSIGHT}/objects")).json()
        names = {(o["kind"], o["metadata"]["name"]) for o in listed["items"]}
        assert ("Process", "db") in names
        selected = await client.get(f"{INSIGHT}/objects", params={"labelSelector": "app=x"})
        assert selected.json()["items"] == []
        since = listed["metadata"]["resourceVersion"]
        query = {"watch": "true", "resourceVersion": since}
        async with client.stream("GET", f"{INSIGHT}/objects", params=query) as watch:
            lines = watch.aiter_lines()
            await store.create(process("web", "db"))
            event = orjson.loads(await next_line(lines))
            assert event["type"] == "ADDED"
            assert event["object"]["metadata"]["name"] == "web"
            await store.delete("setpoint.dev/v1alpha1", "Process", "db", "default")
            event = orjson.loads(await next_line(lines))
            assert (event["type"], event["object"]["metadata"]["name"]) == ("DELETED", "db")


async def test_why_names_the_root_blocker(tmp_path: Path) -> None:
    async with serving(tmp_path) as (store, client):
        await store.create(process("db", "disk"))
        await store.create(process("web", "db"))
        why = (await client.get(f"{OBJ}/web/why")).json()
        assert why["state"] == "Reconciling"
        assert why["rootBlocker"]["path"] == ["Process/web", "Process/db", "Process/disk"]
        assert why["rootBlocker"]["state"] == "Missing"
        assert "does not exist" in why["rootBlocker"]["message"]
        assert why["topCause"] is None  # no timeline recorded


async def test_explain_ranks_the_injected_cause_first(tmp_path: Path) -> None:
    record_failure(tmp_path / "state.db")
    async with serving(tmp_path) as (_, client):
        explained = (await client.get(f"{OBJ}/api/explain")).json()
        assert explained["state"] == "failing"
        assert explained["causes"][0]["entry"]["type"] == "change"
        assert "Process/cache spec.args changed" in explained["causes"][0]["reason"]
        best = explained["causes"][0]
        assert best["path"] == ["Process/api", "Process/cache"]
        assert [(h["from"], h["to"], h["relation"]) for h in best["hops"]] == [
            ("Process/api", "Process/cache", "dependsOn")
        ]
        assert best["verified"] is True  # each hop with the edge entry that shows it
        timeline = (await client.get(f"{OBJ}/cache/timeline")).json()["items"]
        assert {e["type"] for e in timeline} >= {"change", "exit", "condition"}
        everything = (await client.get(f"{INSIGHT}/timeline", params={"limit": "3"})).json()
        assert len(everything["items"]) == 3


async def test_log_tails_and_follows(tmp_path: Path) -> None:
    log = workspace_of(f"sqlite:///{tmp_path / 'state.db'}").log_dir / child_log_file(
        "default", "db"
    )
    log.parent.mkdir(parents=True)
    log.write_text("one\ntwo\nthree\n")
    async with serving(tmp_path) as (store, client):
        await store.create(process("db"))
        tail = await client.get(f"{OBJ}/db/log", params={"tailLines": "2"})
        assert tail.text == "two\nthree\n"
        query = {"tailLines": "1", "follow": "true"}
        async with client.stream("GET", f"{OBJ}/db/log", params=query) as followed:
            lines = followed.aiter_lines()
            assert await next_line(lines) == "three"
            with log.open("a") as f:
                f.write("four\n")
            assert await next_line(lines) == "four"
        assert (await client.get(f"{OBJ}/nothere/log")).status_code == 404


async def test_reads_need_a_token_and_view_may_read(tmp_path: Path) -> None:
    async with serving(tmp_path) as (store, client):
        await store.create(process("db"))
        anonymous = await client.get(f"{INSIGHT}/objects", headers={"Authorization": ""})
        assert anonymous.status_code == 401
        assert anonymous.json()["kind"] == "Status"
        assert (await client.get(f"{OBJ}/db/why")).status_code == 200
        bad = await client.get(f"{INSIGHT}/timeline", params={"limit": "x"})
        assert bad.status_code == 400
        assert "limit" in bad.json()["message"]
        unknown = await client.get(f"{INSIGHT}/namespaces/default/nothings/x/why")
        assert unknown.status_code == 404


async def test_view_is_not_shown_secrets_in_objects_or_per_object_endpoints(
    tmp_path: Path,
) -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db-password", "namespace": "default"},
        "stringData": {"password": "hunter2"},
    }
    async with serving(tmp_path) as (store, client):  # the client holds the view token
        await store.create(secret)
        await store.create(process("db"))
        listed = await client.get(f"{INSIGHT}/objects")
        assert {o["kind"] for o in listed.json()["items"]} == {"Process"}
        assert "hunter2" not in listed.text
        as_admin = await client.get(f"{INSIGHT}/objects", headers={"Authorization": "Bearer a"})
        assert "Secret" in {o["kind"] for o in as_admin.json()["items"]}

        since = listed.json()["metadata"]["resourceVersion"]
        query = {"watch": "true", "resourceVersion": since}
        async with client.stream("GET", f"{INSIGHT}/objects", params=query) as watch:
            lines = watch.aiter_lines()
            await store.create(secret | {"metadata": {"name": "other", "namespace": "default"}})
            await store.create(process("web"))
            event = orjson.loads(await next_line(lines))  # the Secret's ADDED is left out
            assert (event["object"]["kind"], event["object"]["metadata"]["name"]) == (
                "Process",
                "web",
            )
        for sub in ("timeline", "explain", "why", "log"):
            refused = await client.get(f"{INSIGHT}/namespaces/default/secrets/db-password/{sub}")
            assert refused.status_code == 403, (sub, refused.text)


def test_a_cause_path_through_a_kind_the_user_may_not_read_is_shown_hidden() -> None:
    edge = {"type": "edge", "from": {"kind": "Process", "name": "db"}, "relation": "uses"}
    edge["to"] = {"kind": "Secret", "name": "db-password"}
    cause = {
        "path": ["Process/web", "Process/db", "Secret/db-password"],
        "hops": [
            {"from": "Process/web", "to": "Process/db", "relation": "dependsOn", "entry": {}},
            {"from": "Process/db", "to": "Secret/db-password", "relation": "uses", "entry": edge},
        ],
    }
    shown = _readable_cause(cause, frozenset({"Secret"}))
    assert shown["path"] == ["Process/web", "Process/db", "(hidden)"]
    assert shown["hops"][1] == {
        "from": "Process/db",
        "to": "(hidden)",
        "relation": "uses",
        "entry": None,
    }
    assert shown["hops"][0]["to"] == "Process/db"
    assert "db-password" not in orjson.dumps(shown).decode()
