"""Resource requests take the app's direct way past Starlette's middleware and routes
(`setpoint.api.app._ApiApp`) and keep what those gave them: a 500 Status for a failure
nobody expected (the server serves on), Starlette's answers for what no route allows,
insight's routes under `/apis/`; and the server, which holds a response's head for its
body (`setpoint.http_server`, the API's), holds nothing back."""

from __future__ import annotations

import asyncio

import httpx
from http_kit import ADMIN, PROCESSES, TIMEOUT, process, running_api

from setpoint.api.app import create_app
from setpoint.api.auth import Authenticator, Role, User
from setpoint.engine.kinds import builtin_kinds
from setpoint.model import Object
from setpoint.store.base import NO_OPTIONS, WriteOptions
from setpoint.store.memory import MemoryStore


class FailingStore(MemoryStore):
    """A store whose creates fail as a bug would: not with a `setpoint.Error`."""

    async def create(self, obj: Object, *, options: WriteOptions = NO_OPTIONS) -> Object:
        raise RuntimeError("a bug")


async def test_an_unexpected_failure_is_a_500_status_and_the_app_serves_on() -> None:
    store = FailingStore(builtin_kinds())
    app = create_app(store, auth=Authenticator({ADMIN: User("admin", Role.ADMIN)}))
    transport = httpx.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {ADMIN}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        response = await client.post(PROCESSES, json=process("web"), headers=headers)
        assert response.status_code == 500
        body = response.json()
        assert (body["kind"], body["code"]) == ("Status", 500)
        assert "RuntimeError" in body["message"]
        assert "a bug" not in body["message"]
        listed = await client.get(PROCESSES, headers=headers)
        assert listed.status_code == 200
        assert listed.json()["items"] == []
    await store.close()


async def test_what_no_route_allows_is_answered_as_starlette_did() -> None:
    async with running_api() as api:
        options = await api.client.options(PROCESSES)
        assert options.status_code == 405
        assert options.json()["kind"] == "Status"
        newline = await api.client.get("/apis/setpoint.dev/v1alpha1/namespaces/a%0Ab/processes")
        assert newline.status_code == 404
        assert newline.json()["kind"] == "Status"
        insight = await api.client.get("/apis/insight.setpoint.dev/v1alpha1/timeline")
        assert insight.status_code == 200
        assert "Status" not in insight.text[:100]


async def test_responses_on_a_kept_alive_connection_arrive_whole() -> None:
    """A head held for its body (`_HeadWithBody`) is never held back: each answer
    arrives, head and body, before the next request is sent."""
    async with running_api() as api:
        await api.store.create(process("web"))
        reader, writer = await asyncio.open_connection("127.0.0.1", api.server.port)
        request = (
            f"GET {PROCESSES}/web HTTP/1.1\r\nHost: localhost\r\n"
            f"Authorization: Bearer {ADMIN}\r\n\r\n"
        )
        for _ in range(3):  # on one kept-alive connection
            writer.write(request.encode())
            async with asyncio.timeout(TIMEOUT):
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                body = await reader.readexactly(length)
            assert head.startswith(b"HTTP/1.1 200")
            assert b'"name":"web"' in body
        writer.close()
