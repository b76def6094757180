"""Watches over HTTP: a stream of `{type, object}` lines from a revision, existing objects
first when no revision is given, bookmarks, 410 as an ERROR event, timeouts, and a watcher
that never reads is dropped without slowing anyone else; the memory watches hold is
bounded per user and in all (429 for a new watch, then a drop), and given back when
they close (a real `setpoint serve`, its resident memory measured)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from api_kit import TOKENS, start_server
from http_kit import ADMIN, PROCESSES, TIMEOUT, VIEW, Api, process, running_api

from setpoint.api.resources import ApiSettings
from setpoint.api.watch import WatchLimits


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    async with running_api() as running:
        yield running


class Lines:
    """The lines of a watch response, read as they come."""

    def __init__(self, lines: AsyncIterator[str]) -> None:
        self.lines = lines

    async def next(self, match: Any = None) -> dict[str, Any]:
        """The next event (for which `match(event)` holds, if given); fail after TIMEOUT."""
        async with asyncio.timeout(TIMEOUT):
            async for line in self.lines:
                event: dict[str, Any] = json.loads(line)
                if match is None or match(event):
                    return event
        raise AssertionError("the stream ended")


async def test_a_watch_from_a_revision_streams_every_change_then_bookmarks(api: Api) -> None:
    created = await api.store.create(process("web"))
    since = created["metadata"]["resourceVersion"]
    params = {"watch": "true", "resourceVersion": since, "allowWatchBookmarks": "true"}
    async with api.client.stream("GET", PROCESSES, params=params) as response:
        assert response.status_code == 200
        lines = Lines(response.aiter_lines())
        await api.store.patch(
            "setpoint.dev/v1alpha1", "Process", "web", {"metadata": {"labels": {"a": "b"}}}
        )
        modified = await lines.next()
        assert (modified["type"], modified["object"]["metadata"]["labels"]) == (
            "MODIFIED",
            {"a": "b"},
        )
        await api.store.delete("setpoint.dev/v1alpha1", "Process", "web")
        deleted = await lines.next()
        assert deleted["type"] == "DELETED"
        assert int(deleted["object"]["metadata"]["resourceVersion"]) > int(
            modified["object"]["metadata"]["resourceVersion"]
        )
        bookmark = await lines.next(lambda e: e["type"] == "BOOKMARK")
        assert (
            bookmark["object"]["metadata"]["resourceVersion"]
            == deleted["object"]["metadata"]["resourceVersion"]
        )


async def test_a_watch_without_a_revision_starts_with_what_exists(api: Api) -> None:
    await api.store.create(process("a"))
    await api.store.create(process("b", labels={"keep": "no"}))
    params = {"watch": "true", "labelSelector": "keep!=no"}
    async with api.client.stream("GET", PROCESSES, params=params) as response:
        lines = Lines(response.aiter_lines())
        first = await lines.next()
        assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "a")
        await api.store.create(process("c"))
        later = await lines.next()
        assert (later["type"], later["object"]["metadata"]["name"]) == ("ADDED", "c")


@pytest.mark.parametrize("value", ["True", "1", "TRUE", ""])
async def test_watch_is_a_boolean_as_the_api_server_reads_one(api: Api, value: str) -> None:
    """kubernetes_asyncio sends `watch=True`; anything but absent, `0` or `false` is true."""
    created = await api.store.create(process("a"))
    await api.store.create(process("b"))
    params = {"watch": value, "resourceVersion": created["metadata"]["resourceVersion"]}
    async with api.client.stream("GET", PROCESSES, params=params) as response:
        event = await Lines(response.aiter_lines()).next()
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "b")
    for value in ("false", "False", "0"):
        listed = await api.client.get(PROCESSES, params={"watch": value})
        assert listed.json()["kind"] == "ProcessList"


async def test_a_compacted_revision_is_a_410_error_event(api: Api) -> None:
    await api.store.create(process("a"))
    await api.store.create(process("b"))
    await api.store.compact(await api.store.revision())
    params = {"watch": "true", "resourceVersion": "1"}
    async with api.client.stream("GET", PROCESSES, params=params) as response:
        error = await Lines(response.aiter_lines()).next()
    assert error["type"] == "ERROR"
    assert (error["object"]["kind"], error["object"]["code"]) == ("Status", 410)
    assert error["object"]["reason"] == "Expired"


async def test_timeout_seconds_ends_the_stream(api: Api) -> None:
    params = {"watch": "true", "resourceVersion": "0", "timeoutSeconds": "1"}
    async with (
        asyncio.timeout(TIMEOUT),
        api.client.stream("GET", PROCESSES, params=params) as response,
    ):
        assert [line async for line in response.aiter_lines()] == []


async def test_a_watcher_that_never_reads_is_dropped_and_slows_nobody(api: Api) -> None:
    host, port = "127.0.0.1", api.server.port
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        f"GET {PROCESSES}?watch=true&resourceVersion=0 HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {ADMIN}\r\n\r\n".encode()
    )
    await writer.drain()
    big = "x" * 100_000
    written = 0
    async with asyncio.timeout(TIMEOUT):
        for i in range(120):  # 12 MB of changes: more than every buffer on the way
            await api.store.create(process(f"p{i}", annotations={"big": big}))
            written += 1
        # Others are served meanwhile.
        assert (await api.client.get(f"{PROCESSES}/p0")).status_code == 200
        await api.watches.wait_dropped(1)  # the server gave up on it: no buffer grows
        assert api.watches.open == 0
        received = b""
        while chunk := await reader.read(1 << 20):  # the server closes the connection
            received += chunk
    writer.close()
    assert received.startswith(b"HTTP/1.1 200")
    assert received.count(b'"type":"ADDED"') < written  # dropped before the end
    assert (await api.client.get(PROCESSES, params={"limit": 1})).status_code == 200


async def test_a_watcher_whose_socket_stays_full_is_dropped_after_the_send_timeout() -> None:
    # A buffer that never overflows: only the send timeout can drop this watcher.
    settings = ApiSettings(
        body_timeout=1.0,
        watch=WatchLimits(max_buffered_bytes=1 << 30, send_timeout=1.0, bookmark_interval=0.2),
    )
    async with running_api(settings) as api:
        host, port = "127.0.0.1", api.server.port
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills at once
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (host, port))
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(
            f"GET {PROCESSES}?watch=true&resourceVersion=0 HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {ADMIN}\r\n\r\n".encode()
        )
        await writer.drain()
        big = "x" * 100_000
        async with asyncio.timeout(TIMEOUT):
            for i in range(120):  # 12 MB: more than the socket buffers on the way hold
                await api.store.create(process(f"p{i}", annotations={"big": big}))
            await api.watches.wait_dropped(1)
            assert api.watches.open == 0
            while await reader.read(1 << 20):  # the server closes the connection
                pass
        writer.close()


async def stuck_watch(port: int, token: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A watch of Processes on a socket that takes almost nothing and is never read."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(
        f"GET {PROCESSES}?watch=true&resourceVersion=0 HTTP/1.1\r\nHost: localhost\r\n"
        f"Authorization: Bearer {token}\r\n\r\n".encode()
    )
    await writer.drain()
    return reader, writer


async def watch_answer(api: Api, token: str) -> tuple[int, dict[str, str], str]:
    """A new watch's status, headers and (for a refusal) body."""
    headers = {"Authorization": f"Bearer {token}"}
    params = {"watch": "true", "resourceVersion": "0"}
    async with api.client.stream("GET", PROCESSES, params=params, headers=headers) as response:
        body = "" if response.status_code == 200 else (await response.aread()).decode()
        return response.status_code, dict(response.headers), body


BIG = "x" * 100_000
BUDGET = 4 * 1024 * 1024


@pytest.mark.parametrize(
    ("budgets", "refused", "whose"),
    [
        ({"max_user_buffered_bytes": BUDGET}, [ADMIN], "user 'admin'"),
        ({"max_total_buffered_bytes": BUDGET}, [ADMIN, VIEW], "the server"),
    ],
    ids=["per-user", "total"],
)
async def test_watches_over_a_memory_budget_are_refused_then_dropped(
    budgets: dict[str, int], refused: list[str], whose: str
) -> None:
    # Neither the watch's own buffer (16 MiB) nor the send timeout can drop it: the budget.
    limits = WatchLimits(send_timeout=TIMEOUT, bookmark_interval=TIMEOUT, **budgets)
    async with running_api(ApiSettings(body_timeout=1.0, watch=limits)) as api:
        counts = api.watches
        _, writer = await stuck_watch(api.server.port, ADMIN)
        created = 0
        async with asyncio.timeout(TIMEOUT):
            while 2 * counts.buffered <= BUDGET:  # until more than half is held
                await api.store.create(process(f"p{created}", annotations={"big": BIG}))
                created += 1
                await asyncio.sleep(0)  # the watch's pump takes the event
        assert counts.buffered_by_user.keys() == {"admin"}
        for token in (ADMIN, VIEW):
            code, headers, body = await watch_answer(api, token)
            if token in refused:
                assert (code, headers["retry-after"]) == (429, "1"), body
                status = json.loads(body)
                assert (status["kind"], status["reason"]) == ("Status", "TooManyRequests")
                assert whose in status["message"]
            else:
                assert code == 200
        assert counts.refused == len(refused)
        async with asyncio.timeout(TIMEOUT):
            while counts.dropped == 0:  # beyond the budget: the watch is dropped
                await api.store.create(process(f"p{created}", annotations={"big": BIG}))
                created += 1
                await asyncio.sleep(0)
        writer.close()
        assert (counts.buffered, counts.buffered_by_user) == (0, {})
        assert (await watch_answer(api, ADMIN))[0] == 200


def resident_mb(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory (`VmHWM`: its peak), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field} for pid {pid}")


async def wait_for_memory(pid: int, mib: float) -> None:
    """Until the process's resident memory is at most `mib` (fail after half a TIMEOUT)."""
    async with asyncio.timeout(TIMEOUT / 2):
        while True:
            if resident_mb(pid) <= mib:
                return
            await asyncio.sleep(0.1)


WATCHES = 300
SECRET_BYTES = 900_000
"""1.2 MB once base64-encoded, as the Secret of the finding."""


@pytest.mark.slow
async def test_watches_of_a_big_secret_stay_within_memory_and_give_it_back(
    tmp_path: Path,
) -> None:
    """300 watches from revision 1 over a history that holds a 1.2 MB Secret: each one got
    it (or was turned away), the server's resident memory stayed bounded (it grew to
    1.6 GB before), and came back near where it was once they closed (it kept 1.2 GB)."""
    server = start_server(tmp_path)
    try:
        config = yaml.safe_load(server.kubeconfig.read_text())
        authority = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
        context = ssl.create_default_context(cadata=authority.decode())
        data = base64.b64encode(os.urandom(SECRET_BYTES)).decode()
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "big"}}
        headers = {"Authorization": f"Bearer {TOKENS['admin']}"}
        async with httpx.AsyncClient(verify=context, headers=headers, timeout=TIMEOUT) as client:
            created = await client.post(
                f"{server.url}/api/v1/namespaces/default/secrets",
                json={**secret, "data": {"key": data}},
            )
            assert created.status_code == 201, created.text
            assert int(created.json()["metadata"]["resourceVersion"]) > 1  # in the history
        baseline = resident_mb(server.proc.pid)
        answers: list[str] = []  # each watch's: "Secret", "dropped" or a refusal's code
        all_answered = asyncio.Event()
        close = asyncio.Event()

        async def watch(client: httpx.AsyncClient) -> None:
            url = f"{server.url}/api/v1/namespaces/default/secrets"
            params = {"watch": "true", "resourceVersion": "1"}
            async with client.stream("GET", url, params=params) as response:
                answer = str(response.status_code)
                try:
                    if response.status_code == 200:
                        async for line in response.aiter_lines():
                            if data in line:  # the Secret, whole
                                answer = "Secret"
                                break
                except httpx.RemoteProtocolError:  # over the budget: the server dropped it
                    answer = "dropped"
                answers.append(answer)
                if len(answers) == WATCHES:
                    all_answered.set()
                await close.wait()  # every watch stays open until the peak is read

        every = httpx.Limits(max_connections=None, max_keepalive_connections=0)
        async with httpx.AsyncClient(
            verify=context, headers=headers, timeout=TIMEOUT, limits=every
        ) as client:
            watches = [asyncio.create_task(watch(client)) for _ in range(WATCHES)]
            try:
                async with asyncio.timeout(2 * TIMEOUT):
                    await all_answered.wait()
                peak = resident_mb(server.proc.pid, "VmHWM")
            finally:
                close.set()
                await asyncio.gather(*watches)
        assert "Secret" in answers
        assert set(answers) <= {"Secret", "dropped", "429"}, answers
        assert peak < 512, f"the server grew from {baseline:.0f} MiB to {peak:.0f} MiB"
        await wait_for_memory(server.proc.pid, baseline + 64)
    finally:
        server.stop()
