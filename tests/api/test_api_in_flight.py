"""Requests beyond the bound in flight are answered 429 `TooManyRequests` with `Retry-After`,
as kube-apiserver answers them, and the clients that know it wait and retry: a write held in
flight (its body not sent yet) fills the writes' place; another write is refused and leaves
nothing behind; reads and watches go on; kubectl's write, refused while the place is taken,
lands once it is free."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from api_kit import kubectl_binary
from http_kit import ADMIN, PROCESSES, TIMEOUT, Api, client_context, process, running_api

from setpoint.api.in_flight import is_long_running
from setpoint.api.kubeconfig import kubeconfig, write_kubeconfig
from setpoint.api.resources import ApiSettings
from setpoint.api.tls import ensure_certificate

SETTINGS = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "settings", "namespace": "default"},
    "data": {"level": "3"},
}

ONE_EACH = ApiSettings(max_requests_in_flight=1, max_writes_in_flight=1, body_timeout=TIMEOUT)


async def hold_a_write(api: Api) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    """A POST of a Process whose head is sent and whose body is not (yet): in flight until
    `release` sends the rest. Returns when the server counts it."""
    body = json.dumps(process("held")).encode()
    tls = client_context(api.server.tls) if api.server.tls else None
    reader, writer = await asyncio.open_connection("127.0.0.1", api.server.port, ssl=tls)
    writer.write(
        f"POST {PROCESSES} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {ADMIN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body[:1]
    )
    await writer.drain()
    async with asyncio.timeout(TIMEOUT):
        while api.in_flight.writes == 0:  # noqa: ASYNC110 - a counter of the server's
            await asyncio.sleep(0.01)
    return reader, writer, body[1:]


async def release(held: tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]) -> bytes:
    """Send the held write's body; its status line."""
    reader, writer, rest = held
    writer.write(rest)
    await writer.drain()
    async with asyncio.timeout(TIMEOUT):
        head = await reader.readuntil(b"\r\n\r\n")
    writer.close()
    return head.split(b"\r\n", 1)[0]


async def test_a_write_beyond_the_bound_is_answered_429_and_writes_nothing() -> None:
    async with running_api(ONE_EACH) as api:
        held = await hold_a_write(api)
        refused = await api.client.post(PROCESSES, json=process("refused"))
        assert refused.status_code == 429
        assert refused.headers["Retry-After"] == "1"
        assert refused.headers["Connection"] == "close"  # its body unread: not to be reused
        body = refused.json()
        assert (body["kind"], body["reason"], body["code"]) == ("Status", "TooManyRequests", 429)
        assert body["details"] == {"retryAfterSeconds": 1}
        # Reads have their own place, and watches take none.
        async with api.client.stream("GET", f"{PROCESSES}?watch=true") as watch:
            assert watch.status_code == 200
            assert (await api.client.get(PROCESSES)).status_code == 200
        assert await release(held) == b"HTTP/1.1 201 Created"
        names = [
            item["metadata"]["name"] for item in (await api.client.get(PROCESSES)).json()["items"]
        ]
        assert names == ["held"]  # the refused write left nothing
        assert (await api.client.post(PROCESSES, json=process("later"))).status_code == 201
        assert (api.in_flight.reads, api.in_flight.writes, api.in_flight.refused) == (0, 0, 1)


async def test_kubectl_waits_out_a_429_and_its_write_lands(tmp_path: Path) -> None:
    tls = ensure_certificate(tmp_path / "tls", [])  # kubectl sends a token over HTTPS only
    async with running_api(ONE_EACH, tls=tls) as api:
        server = kubeconfig(api.server.url, ADMIN, certificate=tls.cert.read_bytes())
        config = write_kubeconfig(tmp_path / "kubeconfig", server)
        held = await hold_a_write(api)
        kubectl = await asyncio.create_subprocess_exec(
            kubectl_binary(), "--kubeconfig", str(config), "create", "-f", "-",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert kubectl.stdin is not None
        kubectl.stdin.write(json.dumps(SETTINGS).encode())
        kubectl.stdin.close()
        async with asyncio.timeout(TIMEOUT):
            while api.in_flight.refused == 0:  # noqa: ASYNC110 - kubectl's try met the held one
                await asyncio.sleep(0.01)
        assert await release(held) == b"HTTP/1.1 201 Created"
        async with asyncio.timeout(TIMEOUT):
            _, err = await kubectl.communicate()
        assert kubectl.returncode == 0, err.decode()
        stored = await api.client.get("/api/v1/namespaces/default/configmaps/settings")
        assert stored.json()["data"] == {"level": "3"}


def test_a_watch_is_long_running_however_its_flag_is_spelt() -> None:
    """As the routes read `watch` (`query.flag`): kubernetes_asyncio's `watch=True` holds no
    place in flight for the life of its watch."""
    for query in (b"watch=true", b"watch=True", b"watch=1", b"watch=", b"follow=TRUE"):
        assert is_long_running(PROCESSES, query), query
    for query in (b"", b"watch=false", b"watch=0", b"watch=False", b"limit=5"):
        assert not is_long_running(PROCESSES, query), query
