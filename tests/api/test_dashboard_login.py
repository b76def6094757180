"""The dashboard's one-time login codes (`setpoint.api.login`) through the API app: a code
works once and only within `CODE_TTL_S` (a manual clock moves time), it logs in as the
user who asked for it (a `view` token's code makes a `view` session), and a server with
no login codes does not serve the route."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from setpoint.api.app import create_app
from setpoint.api.auth import Authenticator, Role, User
from setpoint.api.login import CODE_TTL_S, INSIGHT_PATH, LoginCodes
from setpoint.engine.kinds import builtin_kinds
from setpoint.store import open_store
from setpoint.testing.clock import ManualClock

ADMIN, VIEW = "admin-token-0123456789", "view-token-0123456789"
PAGE = "http://127.0.0.1:8001/ui/"
PROCESSES = "/apis/setpoint.dev/v1alpha1/namespaces/default/processes"


@pytest.fixture
async def world() -> AsyncIterator[tuple[httpx.AsyncClient, LoginCodes, ManualClock]]:
    store = await open_store("memory://", builtin_kinds())
    auth = Authenticator({ADMIN: User("alice", Role.ADMIN), VIEW: User("bob", Role.VIEW)})
    clock = ManualClock()
    codes = LoginCodes(auth, clock, page_url=PAGE)
    app = create_app(store, auth=auth, login=codes)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8001") as client:
        yield client, codes, clock
    await store.close()


async def new_code(client: httpx.AsyncClient, token: str) -> str:
    response = await client.post(
        INSIGHT_PATH, json={}, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200, response.text
    link = response.json()["url"]
    assert link.startswith(PAGE + "#login=")
    return str(link.split("#login=", 1)[1])


async def test_a_code_works_once_and_not_after_it_expires(
    world: tuple[httpx.AsyncClient, LoginCodes, ManualClock],
) -> None:
    client, _, clock = world
    code = await new_code(client, ADMIN)
    first = await client.post("/ui/login", json={"code": code})
    assert first.status_code == 200
    token = first.json()["token"]
    assert token not in (ADMIN, VIEW)
    session = {"Authorization": f"Bearer {token}"}
    assert (await client.get(PROCESSES, headers=session)).status_code == 200
    assert (await client.post("/ui/login", json={"code": code})).status_code == 401

    late = await new_code(client, ADMIN)
    clock.advance(CODE_TTL_S + 1)
    expired = await client.post("/ui/login", json={"code": late})
    assert expired.status_code == 401
    assert "setpoint dashboard" in expired.json()["message"]
    assert (await client.post("/ui/login", json={"code": late})).status_code == 401

    on_time = await new_code(client, ADMIN)
    clock.advance(CODE_TTL_S - 1)
    assert (await client.post("/ui/login", json={"code": on_time})).status_code == 200


async def test_a_code_logs_in_as_whoever_asked_for_it(
    world: tuple[httpx.AsyncClient, LoginCodes, ManualClock],
) -> None:
    client, _, _ = world
    code = await new_code(client, VIEW)
    token = (await client.post("/ui/login", json={"code": code})).json()["token"]
    session = {"Authorization": f"Bearer {token}"}
    assert (await client.get(PROCESSES, headers=session)).status_code == 200
    assert (await client.delete(PROCESSES + "/web", headers=session)).status_code == 403
    assert (await client.post(INSIGHT_PATH, json={})).status_code == 401  # no token, no code


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b'{"code": 3}', b'{"code": ""}', b"[1]", b'{"code": "' + b"x" * 300 + b'"}'],
)
async def test_a_body_that_is_no_code_is_refused_in_one_line(
    world: tuple[httpx.AsyncClient, LoginCodes, ManualClock], body: bytes
) -> None:
    client, _, _ = world
    headers = {"Content-Type": "application/json"}
    response = await client.post("/ui/login", content=body, headers=headers)
    assert response.status_code in (400, 401)
    message = response.json()["message"]
    assert "\n" not in message
    assert "Traceback" not in message


async def test_no_login_codes_no_login_route() -> None:
    store = await open_store("memory://", builtin_kinds())
    app = create_app(store, auth=Authenticator({ADMIN: User("alice", Role.ADMIN)}))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.post("/ui/login", json={"code": "anything"})
    await store.close()
    assert response.status_code in (404, 405)
