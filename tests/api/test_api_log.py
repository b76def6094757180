"""The log endpoint (`.../namespaces/NS/processes/NAME/log`) of a real server in the test's
loop: a tail is read from the end of a big log, not the whole file; a follow ends when its
client goes away; Secret values the object's environment takes are masked."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from setpoint.api.app import create_app
from setpoint.api.auth import Authenticator, Role, User
from setpoint.api.server import ApiServer
from setpoint.engine import workspace_of
from setpoint.engine.kinds import builtin_kinds
from setpoint.model.wellknown import child_log_file
from setpoint.store import open_store
from setpoint.store.base import Store

LOG = "/apis/insight.setpoint.dev/v1alpha1/namespaces/default/processes/db/log"
TIMEOUT = 60.0


@asynccontextmanager
async def serving(directory: Path) -> AsyncIterator[tuple[Store, ApiServer, httpx.AsyncClient]]:
    store = await open_store(f"sqlite:///{directory / 'state.db'}", builtin_kinds())
    auth = Authenticator({"v": User("viewer", Role.VIEW)})
    try:
        async with (
            ApiServer(create_app(store, auth=auth)) as server,
            httpx.AsyncClient(
                base_url=server.url, headers={"Authorization": "Bearer v"}, timeout=TIMEOUT
            ) as client,
        ):
            yield store, server, client
    finally:
        await store.close()


def log_of(directory: Path) -> Path:
    path = workspace_of(f"sqlite:///{directory / 'state.db'}").log_dir / child_log_file(
        "default", "db"
    )
    path.parent.mkdir(parents=True)
    return path


def process(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"args": ["sleep", "1000"], **spec},
    }


def bytes_read() -> int:
    """What this process (the server is in it) has read so far, files and sockets."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


async def test_a_tail_of_a_big_log_is_read_from_its_end(tmp_path: Path) -> None:
    log = log_of(tmp_path)
    line = b"x" * 99 + b"\n"
    log.write_bytes(line * 100_000 + b"the last but one\nthe last\n")  # 10 MB
    async with serving(tmp_path) as (store, _, client):
        await store.create(process())
        before = bytes_read()
        tail = await client.get(LOG, params={"tailLines": "2"})
        read = bytes_read() - before
        assert tail.text == "the last but one\nthe last\n"
        assert read < 1024 * 1024, f"the server read {read} bytes for two lines"
        many = await client.get(LOG, params={"tailLines": "1000"})
        assert many.content == line * 998 + b"the last but one\nthe last\n"


async def test_a_follow_ends_when_its_client_goes_away(tmp_path: Path) -> None:
    log = log_of(tmp_path)
    log.write_text("one\n")
    async with serving(tmp_path) as (store, server, client):
        await store.create(process())
        tasks = server._server.server_state.tasks
        async with client.stream("GET", LOG, params={"follow": "true"}) as followed:
            lines = followed.aiter_lines()
            assert await asyncio.wait_for(anext(lines), TIMEOUT) == "one"
            assert len(tasks) == 1  # the follow's request runs
        async with asyncio.timeout(TIMEOUT):  # nothing more is written: it ends all the same
            while True:
                if not tasks:
                    break
                await asyncio.sleep(0.01)


async def test_secret_values_in_a_log_are_masked(tmp_path: Path) -> None:
    log = log_of(tmp_path)
    log.write_text("connecting as admin with hunter2-is-secret\nready\n")
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db", "namespace": "default"},
        "data": {"password": base64.b64encode(b"hunter2-is-secret").decode()},
    }
    ref = {"valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}
    async with serving(tmp_path) as (store, _, client):
        await store.create(secret)
        await store.create(process(env={"PASSWORD": ref}))
        answer = await client.get(LOG)
        assert answer.text == "connecting as admin with ***\nready\n"
        query = {"tailLines": "0", "follow": "true"}
        async with client.stream("GET", LOG, params=query) as followed:
            with log.open("a") as f:
                f.write("again hunter2-is-secret\n")
            lines = followed.aiter_lines()
            assert await asyncio.wait_for(anext(lines), TIMEOUT) == "again ***"
