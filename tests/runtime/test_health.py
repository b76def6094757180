"""The health and metrics endpoints, served for real (by the API's server,
`setpoint.http_server`) on a loopback port and asked with a raw socket: status codes, bodies
and headers for good, failing, unknown and malformed requests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

from setpoint.http_server import HttpServer, ServerLimits
from setpoint.runtime.health import METRICS_CONTENT_TYPE, serve, split_address
from setpoint.runtime.metrics import Metrics

TIMEOUT = 5.0


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


class Checks:
    """What the server reports; tests flip these and ask again."""

    def __init__(self) -> None:
        self.healthy = True
        self.ready = True
        self.broken: str | None = None  # a check or "metrics" that raises
        self.metrics = Metrics()

    def healthz(self) -> bool:
        if self.broken == "healthz":
            raise RuntimeError("cannot tell")
        return self.healthy

    def readyz(self) -> bool:
        if self.broken == "readyz":
            raise RuntimeError("cannot tell")
        return self.ready

    def render(self) -> bytes:
        if self.broken == "metrics":
            raise RuntimeError("cannot render")
        return self.metrics.render()


@dataclass
class Served:
    checks: Checks
    port: int


async def start(checks: Checks, limits: ServerLimits | None = None) -> HttpServer:
    return await serve(
        "127.0.0.1",
        0,
        healthz=checks.healthz,
        readyz=checks.readyz,
        metrics=checks.render,
        limits=limits,
    )


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    checks = Checks()
    server = await start(checks)
    yield Served(checks, server.port)
    await server.close()


async def exchange(port: int, raw: bytes, *, eof: bool = False) -> bytes:
    """Send `raw` (then end the sending side if `eof`) and read one response: its head, then
    as many body bytes as it says (none for HEAD), or until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        if eof:
            writer.write_eof()
        await writer.drain()
        async with asyncio.timeout(TIMEOUT):
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as exc:
                return exc.partial  # closed without a (complete) response
            length = parse(head).headers.get("content-length")
            if raw.startswith(b"HEAD") or length is None:
                return head if raw.startswith(b"HEAD") else head + await reader.read()
            return head + await reader.readexactly(int(length))
    finally:
        writer.close()
        await writer.wait_closed()


def parse(data: bytes) -> Reply:
    head, sep, body = data.partition(b"\r\n\r\n")
    assert sep, f"no complete response head in {data!r}"
    status_line, *lines = head.decode("latin-1").split("\r\n")
    version, status, _ = status_line.split(" ", 2)
    assert version == "HTTP/1.1"
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Reply(int(status), headers, body)


async def ask(port: int, method: str, target: str) -> Reply:
    raw = f"{method} {target} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: test\r\n\r\n"
    return parse(await exchange(port, raw.encode()))


async def get(port: int, target: str) -> Reply:
    return await ask(port, "GET", target)


# -- checks ---------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
async def test_a_passing_check_answers_200_ok(served: Served, path: str) -> None:
    reply = await get(served.port, path)
    assert reply.status == 200
    assert reply.body == b"ok"
    assert reply.headers["content-type"] == "text/plain; charset=utf-8"
    assert reply.headers["content-length"] == "2"
    assert reply.headers["x-content-type-options"] == "nosniff"


async def test_a_failing_check_answers_500_with_its_name(served: Served) -> None:
    served.checks.ready = False
    reply = await get(served.port, "/readyz")
    assert (reply.status, reply.body) == (500, b"readyz check failed\n")
    assert (await get(served.port, "/healthz")).status == 200

    served.checks.healthy = False
    reply = await get(served.port, "/healthz")
    assert (reply.status, reply.body) == (500, b"healthz check failed\n")

    served.checks.healthy = served.checks.ready = True
    assert (await get(served.port, "/readyz")).status == 200
    assert (await get(served.port, "/healthz")).status == 200


@pytest.mark.parametrize("name", ["healthz", "readyz", "metrics"])
async def test_a_check_that_raises_answers_500_and_the_server_goes_on(
    served: Served, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    served.checks.broken = name
    reply = await get(served.port, f"/{name}")
    assert reply.status == 500
    assert b"RuntimeError" in reply.body
    assert b"cannot" not in reply.body  # the exception's message goes to the log only
    assert "cannot" in caplog.text

    served.checks.broken = None
    assert (await get(served.port, f"/{name}")).status == 200


async def test_the_query_string_is_ignored(served: Served) -> None:
    reply = await get(served.port, "/healthz?verbose=1")
    assert (reply.status, reply.body) == (200, b"ok")


async def test_head_answers_like_get_without_a_body(served: Served) -> None:
    reply = await ask(served.port, "HEAD", "/readyz")
    assert reply.status == 200
    assert reply.body == b""
    assert reply.headers["content-length"] == "2"


# -- metrics --------------------------------------------------------------------


async def test_metrics_serves_the_prometheus_text(served: Served) -> None:
    served.checks.metrics.on_reconcile("widgets", "error", 0.5)
    reply = await get(served.port, "/metrics")
    assert reply.status == 200
    assert reply.headers["content-type"] == METRICS_CONTENT_TYPE
    assert METRICS_CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"
    assert int(reply.headers["content-length"]) == len(reply.body)
    values = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(reply.body.decode())
        for sample in family.samples
    }
    assert values["controller_runtime_reconcile_errors_total", (("controller", "widgets"),)] == 1
    key = (("controller", "widgets"), ("result", "error"))
    assert values["controller_runtime_reconcile_total", key] == 1


# -- other paths and methods ------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/healthz/ping", "/metricsx", "/favicon.ico", "//healthz"])
async def test_other_paths_are_404(served: Served, path: str) -> None:
    reply = await get(served.port, path)
    assert reply.status == 404
    assert b"/healthz" in reply.body


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
async def test_methods_other_than_get_are_405(served: Served, method: str, path: str) -> None:
    reply = await ask(served.port, method, path)
    assert reply.status == 405
    assert reply.headers["allow"] == "GET, HEAD"


async def test_a_post_with_a_body_is_405(served: Served) -> None:
    raw = b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
    assert parse(await exchange(served.port, raw)).status == 405


# -- request forms that are fine ------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"GET /healthz HTTP/1.0\r\n\r\n",  # HTTP/1.0, no headers
        b"\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",  # an empty line first
        b"GET http://localhost:8081/healthz HTTP/1.1\r\nHost: x\r\n\r\n",  # absolute form
    ],
)
async def test_lenient_but_valid_requests_are_answered(served: Served, raw: bytes) -> None:
    reply = parse(await exchange(served.port, raw))
    assert (reply.status, reply.body) == (200, b"ok")


async def test_one_connection_asks_again_and_again(served: Served) -> None:
    """Kept alive, as the API's connections are: a prober need not reconnect."""
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    try:
        for path in ("/healthz", "/readyz", "/healthz"):
            writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            async with asyncio.timeout(TIMEOUT):
                head = await reader.readuntil(b"\r\n\r\n")
                assert parse(head).status == 200
                assert await reader.readexactly(2) == b"ok"
    finally:
        writer.close()
        await writer.wait_closed()


# -- malformed requests ------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"garbage\r\n\r\n",
        b"get /healthz HTTP/1.1\r\n\r\n",
        b"GET /healthz FTP\r\n\r\n",
        b"GET healthz HTTP/1.1\r\n\r\n",
        b"G(T /healthz HTTP/1.1\r\n\r\n",
        b"GET /h\xc3\xa9althz HTTP/1.1\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nno colon here\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
        b"GET /healthz HTTP/1.1\n\n",
    ],
)
async def test_malformed_requests_are_400_and_the_server_goes_on(
    served: Served, raw: bytes
) -> None:
    reply = parse(await exchange(served.port, raw))
    assert reply.status == 400
    assert reply.headers["connection"] == "close"

    assert (await get(served.port, "/healthz")).status == 200


async def test_a_head_that_grows_too_large_is_431() -> None:
    """`ServerLimits.max_header_bytes`, the API's: a head that never ends cannot grow."""
    checks = Checks()
    server = await start(checks, ServerLimits(max_header_bytes=1024))
    try:
        raw = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"y" * 2048  # never ended
        assert parse(await exchange(server.port, raw)).status == 431
        assert (await get(server.port, "/healthz")).status == 200
    finally:
        await server.close()


async def test_a_head_cut_short_gets_no_answer(served: Served) -> None:
    raw = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    assert await exchange(served.port, raw, eof=True) == b""
    assert (await get(served.port, "/healthz")).status == 200


async def test_a_client_that_sends_nothing_and_leaves_is_dropped_quietly(served: Served) -> None:
    assert await exchange(served.port, b"", eof=True) == b""
    assert (await get(served.port, "/healthz")).status == 200


async def test_a_client_that_sends_no_head_in_time_is_cut() -> None:
    """`ServerLimits.header_timeout`, the API's: a slow client cannot hold a connection."""
    server = await start(Checks(), ServerLimits(header_timeout=0.05))
    try:
        assert await exchange(server.port, b"GET /healthz HTTP/1.1\r\n") == b""
    finally:
        await server.close()


# -- serving ------------------------------------------------------------------------


async def test_port_0_binds_a_free_port_and_close_stops_serving() -> None:
    checks = Checks()
    first, second = await start(checks), await start(checks)
    assert first.port != 0
    assert second.port not in (0, first.port)
    assert first.url == f"http://127.0.0.1:{first.port}"

    await first.close()
    with pytest.raises(ConnectionRefusedError):
        await get(first.port, "/healthz")
    assert (await get(second.port, "/healthz")).status == 200
    await second.close()


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:8081", ("127.0.0.1", 8081)),
        ("localhost:0", ("localhost", 0)),
        (":8081", ("", 8081)),
        ("[::1]:9090", ("::1", 9090)),
    ],
)
def test_split_address(address: str, expected: tuple[str, int]) -> None:
    assert split_address(address) == expected


@pytest.mark.parametrize("address", ["8081", "localhost", "localhost:http", "host:70000", ""])
def test_split_address_refuses_what_is_not_host_and_port(address: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        split_address(address)
