"""Slow and hostile clients cannot exhaust the server: headers trickled byte by byte are
cut, a body that does not arrive is refused, connections beyond the limit are turned
away, a TLS handshake that never ends is cut at the head's deadline, and connections
without a token cannot starve one with a token; random requests never get a 5xx nor a
traceback (hypothesis)."""

from __future__ import annotations

import asyncio
import json
import resource
import socket
import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_kit import ADMIN, PROCESSES, QUICK, TIMEOUT, client_context, process, running_api
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from setpoint.api.app import create_app
from setpoint.api.auth import Authenticator, Role, User
from setpoint.api.server import ServerLimits
from setpoint.api.tls import ensure_certificate
from setpoint.engine.kinds import builtin_kinds
from setpoint.store import open_store


async def read_all(reader: asyncio.StreamReader) -> bytes:
    """Everything until the server closes the connection (fail after TIMEOUT)."""
    received = b""
    async with asyncio.timeout(TIMEOUT):
        while chunk := await reader.read(65536):
            received += chunk
    return received


async def response_status(reader: asyncio.StreamReader) -> bytes:
    """The status line of the next response (its body read past)."""
    async with asyncio.timeout(TIMEOUT):
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
    return head.split(b"\r\n", 1)[0]


async def test_headers_that_never_end_are_cut() -> None:
    async with running_api(limits=ServerLimits(header_timeout=0.5)) as api:
        reader, writer = await asyncio.open_connection("127.0.0.1", api.server.port)
        writer.write(b"GET /version HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")  # and no more
        await writer.drain()
        assert await read_all(reader) == b""  # closed without an answer
        writer.close()
        assert (await api.client.get("/version")).status_code == 200


async def test_headers_over_the_size_limit_are_refused() -> None:
    async with running_api(limits=ServerLimits(max_header_bytes=4096)) as api:
        reader, writer = await asyncio.open_connection("127.0.0.1", api.server.port)
        headers = b"".join(b"X-Big-%d: %s\r\n" % (n, b"y" * 1024) for n in range(10))
        writer.write(b"GET /version HTTP/1.1\r\nHost: localhost\r\n" + headers)  # never ended
        await writer.drain()
        answer = await read_all(reader)
        assert answer.startswith(b"HTTP/1.1 431 "), answer
        writer.close()
        big = {"X-Big": "y" * 1024}  # within the limit: served
        assert (await api.client.get("/version", headers=big)).status_code == 200


async def test_a_body_that_does_not_arrive_is_refused_and_nothing_is_written() -> None:
    async with running_api() as api:  # body_timeout 1 s
        reader, writer = await asyncio.open_connection("127.0.0.1", api.server.port)
        writer.write(
            f"POST {PROCESSES} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {ADMIN}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{".encode()
        )
        await writer.drain()
        async with asyncio.timeout(TIMEOUT):
            head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400")
        writer.close()
        assert await api.store.revision() == 0


async def test_connections_beyond_the_limit_are_turned_away() -> None:
    async with running_api(limits=ServerLimits(max_connections=2)) as api:
        held = [await asyncio.open_connection("127.0.0.1", api.server.port) for _ in range(3)]
        try:
            async with httpx.AsyncClient(base_url=api.server.url, timeout=TIMEOUT) as fresh:
                answer = await fresh.get("/healthz")
            assert answer.status_code == 503
        finally:
            for _, writer in held:
                writer.close()


def allow_open_files(count: int) -> None:
    """Raise this process's soft limit of open files to `count` (skip if the hard one is
    lower)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < count:
        pytest.skip(f"{count} open files are needed; the hard limit is {hard}")
    if soft != resource.RLIM_INFINITY and soft < count:
        resource.setrlimit(resource.RLIMIT_NOFILE, (count, hard))


IDLE_TLS = 1100
"""More idle connections than the server's `max_connections` (1024)."""


@pytest.mark.slow
async def test_idle_tls_connections_without_a_token_do_not_starve_one_with_a_token(
    tmp_path: Path,
) -> None:
    allow_open_files(2 * IDLE_TLS + 256)  # both ends of each connection are in this process
    tls = ensure_certificate(tmp_path, ["127.0.0.1"])
    limits = ServerLimits(header_timeout=10 * TIMEOUT)  # only the cap may close them
    async with running_api(limits=limits, tls=tls) as api:
        context = client_context(tls)
        idle = []
        try:
            async with asyncio.timeout(10 * TIMEOUT):
                for _ in range(IDLE_TLS):  # handshake done, no request: no token needed
                    idle.append(
                        await asyncio.open_connection("127.0.0.1", api.server.port, ssl=context)
                    )
                answer = await api.client.get(PROCESSES)
            assert answer.status_code == 200, answer.text
            connections = api.server._server.server_state.connections
            assert len(connections) <= limits.max_unauthenticated + 1
        finally:
            for _, writer in idle:
                writer.transport.abort()


async def test_a_connection_that_made_an_authenticated_request_is_not_closed_for_strangers() -> (
    None
):
    limits = ServerLimits(max_connections=64, max_unauthenticated=8, header_timeout=TIMEOUT)
    async with running_api(limits=limits) as api:
        port = api.server.port
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        request = (
            f"GET {PROCESSES} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {ADMIN}\r\n\r\n"
        )
        writer.write(request.encode())
        assert await response_status(reader) == b"HTTP/1.1 200 OK"
        # A stranger with a wrong token, then more idle ones than the cap allows.
        wrong, wrong_writer = await asyncio.open_connection("127.0.0.1", port)
        wrong_writer.write(
            b"GET /version HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer no\r\n\r\n"
        )
        assert await response_status(wrong) == b"HTTP/1.1 401 Unauthorized"
        strangers = [await asyncio.open_connection("127.0.0.1", port) for _ in range(16)]
        try:
            async with asyncio.timeout(TIMEOUT):
                await read_all(wrong)  # the oldest stranger was closed (read to its end)
                for stranger, _ in strangers[:8]:  # and the next oldest, down to the cap
                    assert await stranger.read() == b""
                writer.write(request.encode())  # the known connection still serves
            assert await response_status(reader) == b"HTTP/1.1 200 OK"
        finally:
            for _, other in [*strangers, (None, wrong_writer), (None, writer)]:
                other.close()


async def test_a_tls_handshake_that_never_ends_is_cut_at_the_head_deadline(
    tmp_path: Path,
) -> None:
    tls = ensure_certificate(tmp_path, ["127.0.0.1"])
    async with running_api(limits=ServerLimits(header_timeout=0.2), tls=tls) as api:
        # TCP only: no ClientHello. asyncio's own handshake deadline is 60 s.
        reader, writer = await asyncio.open_connection("127.0.0.1", api.server.port)
        try:
            async with asyncio.timeout(TIMEOUT / 2):
                assert await reader.read() == b""  # closed by the server
        finally:
            writer.close()
        assert (await api.client.get("/version")).status_code == 200


async def test_an_idle_tls_connection_does_not_hold_up_the_servers_stop(tmp_path: Path) -> None:
    # A kept-alive client that reads nothing (a kr8s or kopf client between requests) never
    # answers TLS's goodbye: closing its connection politely would wait for it, and the stop
    # for the whole graceful shutdown (`shutdown_timeout`).
    tls = ensure_certificate(tmp_path, ["127.0.0.1"])
    limits = ServerLimits(header_timeout=TIMEOUT, shutdown_timeout=int(TIMEOUT))
    request = f"GET /version HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {ADMIN}\r\n\r\n"

    def request_then_idle(port: int) -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        connection = client_context(tls).wrap_socket(raw, server_hostname="127.0.0.1")
        connection.sendall(request.encode())
        assert connection.recv(65536).startswith(b"HTTP/1.1 200 OK")
        return connection  # kept alive, and never read again until closed

    idle: ssl.SSLSocket | None = None
    try:
        async with asyncio.timeout(TIMEOUT / 2):
            async with running_api(limits=limits, tls=tls) as api:
                idle = await asyncio.to_thread(request_then_idle, api.server.port)
    finally:
        if idle is not None:
            idle.close()


METHODS = st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"])
SEGMENTS = st.sampled_from(
    [
        "api",
        "apis",
        "v1",
        "setpoint.dev",
        "v1alpha1",
        "namespaces",
        "default",
        "processes",
        "deployments",
        "events",
        "web",
        "status",
        "scale",
        "x",
        "",
        "..",
        "%00",
        "Ünï",
    ]
)
QUERIES = st.dictionaries(
    st.sampled_from(
        [
            "watch",
            "limit",
            "continue",
            "labelSelector",
            "fieldSelector",
            "resourceVersion",
            "dryRun",
            "timeoutSeconds",
            "propagationPolicy",
        ]
    ),
    st.text(max_size=12),
    max_size=3,
)
CONTENT_TYPES = st.sampled_from(
    [
        "application/json",
        "application/yaml",
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
        "text/plain",
        "",
    ]
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
BODIES = (
    st.binary(max_size=64)
    | JSON_VALUES.map(lambda v: json.dumps(v).encode())
    | st.builds(lambda n: json.dumps(process(n)).encode(), st.text(max_size=12))
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(METHODS, st.lists(SEGMENTS, min_size=1, max_size=7), QUERIES, CONTENT_TYPES, BODIES)
@example("GET", ["", "", "", "api"], {}, "", b"")  # `////api`: a path, not a host
def test_no_request_gets_a_5xx(
    method: str, segments: list[str], query: dict[str, str], content_type: str, body: bytes
) -> None:
    async def one() -> None:
        store = await open_store("memory://", builtin_kinds())
        await store.create(process("web"))
        app = create_app(
            store,
            auth=Authenticator({ADMIN: User("admin", Role.ADMIN)}),
            settings=QUICK,
        )
        transport = httpx.ASGITransport(app=app)
        headers: dict[str, Any] = {"Authorization": f"Bearer {ADMIN}"}
        if content_type:
            headers["Content-Type"] = content_type
        query.pop("watch", None)  # a watch streams until its timeout: covered elsewhere
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            # A URL built from its parts: a path like `////api` is not read as a host.
            url = httpx.URL(
                scheme="http", host="localhost", path="/" + "/".join(segments), params=query
            )
            response = await client.request(method, url, content=body, headers=headers)
        await store.close()
        assert response.status_code < 500, response.text
        assert "Traceback" not in response.text
        if (
            response.status_code >= 400
            and response.headers.get("content-type") == "application/json"
        ):
            assert response.json()["kind"] == "Status"

    asyncio.run(one())


@pytest.mark.parametrize("depth", [150, 5000])
async def test_deep_json_patches_are_refused_fast(depth: int) -> None:
    async with running_api() as api:
        await api.store.create(process("web"))
        nested = "[" * depth + "]" * depth
        response = await api.client.patch(
            f"{PROCESSES}/web",
            content=f'[{{"op": "add", "path": "/metadata/labels", "value": {nested}}}]',
            headers={"Content-Type": "application/json-patch+json"},
        )
        assert response.status_code == 400, response.text
        assert (await api.store.get("setpoint.dev/v1alpha1", "Process", "web"))["metadata"][
            "resourceVersion"
        ] == "1"


async def test_connections_send_without_delay() -> None:
    """TCP_NODELAY on every connection: without it a response on a kept-alive connection
    waits for the client's delayed ACK (Nagle's algorithm), ~40 ms per request."""
    import socket

    async with running_api() as api:
        reader, writer = await asyncio.open_connection("127.0.0.1", api.server.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        async with asyncio.timeout(TIMEOUT):
            await reader.readuntil(b"ok")
        connections = list(api.server._server.server_state.connections)
        assert connections
        for connection in connections:
            sock = connection.transport.get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        writer.close()
