"""Who writes through the API, and how often a write is validated: every write names the
authenticated user, the field manager and the User-Agent to the store (the real kubectl
against `setpoint serve`, and httpx in process), the timeline's audit trail and `explain`'s
"who" name them, and each create, update and patch validates its object once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from api_kit import TIMEOUT, TOKENS, Server, process
from http_kit import PROCESSES, running_api
from http_kit import process as plain_process

from setpoint.engine.kinds import builtin_kinds
from setpoint.insight.recorder import Recorder
from setpoint.insight.timeline import Timeline
from setpoint.model import Kind
from setpoint.store import open_store
from setpoint.store.base import Actor, WatchEvent

MERGE = {"content-type": "application/merge-patch+json"}
API = "setpoint.dev/v1alpha1"


async def entries_until(
    timeline: Timeline, holds: Callable[[list[dict[str, Any]]], bool], **query: Any
) -> list[dict[str, Any]]:
    async with asyncio.timeout(TIMEOUT):
        while not holds(entries := await asyncio.to_thread(timeline.query, **query)):  # noqa: ASYNC110
            await asyncio.sleep(0.02)
    return entries


@contextlib.asynccontextmanager
async def recording(server: Server) -> AsyncIterator[Timeline]:
    """The timeline recorder on the served store, as `setpoint up` runs it beside `serve`."""
    store = await open_store(server.store, builtin_kinds())
    timeline = Timeline.open(server.directory / "state.db")
    recorder = Recorder(store, timeline)
    task = asyncio.create_task(recorder.run())
    try:
        async with asyncio.timeout(TIMEOUT):
            await recorder.wait_watching()
        yield timeline
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await store.close()
        timeline.close()


async def test_kubectl_writes_are_audited_as_the_token_user_and_explain_names_them(
    server: Server,
) -> None:
    ref = {"kind": "Process", "name": "audited", "namespace": "default"}
    edit = TOKENS["edit"]  # its user is "edit"
    async with recording(server) as timeline:
        path = server.write("audited.yaml", process("audited", "sleep", "1000"))
        await asyncio.to_thread(server.ok, "apply", "-f", str(path), token=edit)
        patch = '{"spec":{"args":["sleep","2000"]}}'
        await asyncio.to_thread(
            server.ok, "patch", "process", "audited", "--type=merge", "-p", patch, token=edit
        )
        store = await open_store(server.store, builtin_kinds())
        try:  # the engine's part: the process fails after the change
            current = await store.get(API, "Process", "audited")
            failed = {"type": "Ready", "status": "False", "reason": "ReadinessProbeFailed"}
            await store.update_status({**current, "status": {"conditions": [failed]}})
        finally:
            await store.close()
        entries = await entries_until(
            timeline, lambda es: len([e for e in es if e["type"] == "write"]) == 3, object=ref
        )
    writes = [(e["verb"], e["user"], e["manager"]) for e in entries if e["type"] == "write"]
    assert writes == [
        ("create", "edit", "kubectl-client-side-apply"),
        ("patch", "edit", "kubectl-patch"),
        ("update_status", None, None),  # the engine's write names nobody
    ]
    agents = [e["agent"] for e in entries if e["type"] == "write" and e["agent"]]
    assert all(agent.startswith("kubectl/") for agent in agents)
    changes = [(e["action"], e["actor"]) for e in entries if e["type"] == "change"]
    assert changes == [("created", "edit"), ("updated", "edit")]

    explained = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "setpoint", "--store", server.store, "explain",
         "process/audited", "-o", "json"],
        capture_output=True, text=True, cwd=server.directory, timeout=TIMEOUT,
    )  # fmt: skip
    assert explained.returncode == 0, explained.stderr
    causes = json.loads(explained.stdout)
    spec_change = [c for c in causes if c["entry"]["type"] == "change"]
    assert spec_change, causes
    assert spec_change[0]["entry"]["actor"] == "edit"
    assert "by edit" in spec_change[0]["reason"]


async def test_every_api_write_names_its_user_manager_and_agent_to_the_store() -> None:
    async with running_api() as api:
        start = await api.store.revision()
        events = api.store.watch(API, "Process", since=start)
        agent = {"user-agent": "my-client/2.1 (python)"}
        client = api.client
        created = await client.post(PROCESSES, json=plain_process("p"), headers=agent)
        assert created.status_code == 201, created.text
        url = f"{PROCESSES}/p?fieldManager=tuner"
        body = b'{"spec":{"args":["sleep","5"]}}'
        patched = await client.patch(url, content=body, headers={**MERGE, **agent})
        assert patched.status_code == 200, patched.text
        dry = await client.delete(f"{PROCESSES}/p?dryRun=All", headers=agent)
        assert dry.status_code == 200, dry.text
        gone = await client.delete(f"{PROCESSES}/p", headers=agent)
        assert gone.status_code == 200, gone.text
        got: list[WatchEvent] = []
        async with asyncio.timeout(TIMEOUT):
            async for event in events:
                got.append(event)
                if len(got) == 3:
                    break
        revision = await api.store.revision()
    assert [(e.verb, e.actor) for e in got] == [
        ("create", Actor("admin", "my-client", "my-client/2.1 (python)")),
        ("patch", Actor("admin", "tuner", "my-client/2.1 (python)")),
        ("delete", Actor("admin", "my-client", "my-client/2.1 (python)")),
    ]
    assert revision == start + 3  # the dry run used none


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kinds of the objects `Kind.validate` is called on, as it is called."""
    calls: list[str] = []
    validate = Kind.validate

    def counted(self: Kind, obj: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(self.kind)
        return validate(self, obj, *args, **kwargs)

    monkeypatch.setattr(Kind, "validate", counted)
    return calls


async def test_each_api_write_validates_its_object_once(validations: list[str]) -> None:
    """As kubectl sends them: each names a fieldManager, so each records its fields."""
    async with running_api() as api:
        client = api.client
        validations.clear()
        made = await client.post(
            f"{PROCESSES}?fieldManager=kubectl-create", json=plain_process("v")
        )
        assert made.status_code == 201, made.text
        assert validations == ["Process"]

        validations.clear()
        obj = made.json()
        obj["spec"]["args"] = ["sleep", "7"]
        put = await client.put(f"{PROCESSES}/v?fieldManager=kubectl-edit", json=obj)
        assert put.status_code == 200, put.text
        assert validations == ["Process"]
        owned = {e["manager"] for e in put.json()["metadata"]["managedFields"]}
        assert "kubectl-edit" in owned

        validations.clear()
        body = b'{"spec":{"args":["sleep","8"]}}'
        patched = await client.patch(
            f"{PROCESSES}/v?fieldManager=kubectl-patch", content=body, headers=MERGE
        )
        assert patched.status_code == 200, patched.text
        assert validations == ["Process"]
        owned = {e["manager"] for e in patched.json()["metadata"]["managedFields"]}
        assert "kubectl-patch" in owned
