"""Watches over HTTP: a stream of `{type, object}` lines from a revision, existing objects
first when no revision is given, bookmarks, 410 as an ERROR event, timeouts, and a watcher
that never reads is dropped without slowing anyone else."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from http_kit import ADMIN, PROCESSES, TIMEOUT, Api, process, running_api

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
