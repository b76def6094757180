"""What a web page could send is refused before it reaches a resource: a write whose body
is not declared JSON, YAML or a patch (415), a Host that is not this server's (403: DNS
rebinding), an Origin that is not the server's own (403). Over HTTP on a real server; the
store shows that nothing was written."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator

import httpx
import pytest
from http_kit import PROCESSES, VIEW, Api, process, running_api

from setpoint.api.browser_safety import HostRules, refusal
from setpoint.api.serving import host_rules
from setpoint.errors import Forbidden, Invalid, UnsupportedMediaType

SECRETS = "/api/v1/namespaces/default/secrets"
BODY = json.dumps(process("page")).encode()


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    async with running_api() as running:
        yield running


@pytest.mark.parametrize(
    ("method", "content_type", "from_a_page"),
    [
        ("POST", None, True),
        ("POST", "text/plain", False),
        ("POST", "application/x-www-form-urlencoded", False),
        ("POST", "multipart/form-data; boundary=x", False),
        ("POST", "*/*", False),
        ("PUT", None, True),
        ("PATCH", None, False),
        ("PATCH", "text/plain;charset=UTF-8", False),
        ("DELETE", "text/plain", False),
    ],
)
async def test_a_write_not_declared_json_is_415_and_writes_nothing(
    api: Api, method: str, content_type: str | None, from_a_page: bool
) -> None:
    """A body named nothing is refused from a page (which always names its Origin; here the
    server's own, so that the Origin rule does not refuse it first) and in any PATCH."""
    await api.client.post(PROCESSES, json=process("web"))
    revision = await api.store.revision()
    headers = {"Content-Type": content_type} if content_type else {}
    if from_a_page:
        headers["Origin"] = api.server.url
    url = PROCESSES if method == "POST" else f"{PROCESSES}/web"
    answer = await api.client.request(method, url, content=BODY, headers=headers)
    assert answer.status_code == 415, answer.text
    status = answer.json()
    assert status["reason"] == "UnsupportedMediaType"
    shown = (content_type or "unnamed").split(";")[0]
    assert f"not '{shown}'" in status["message"]
    assert "\n" not in status["message"]
    assert await api.store.revision() == revision


async def test_json_yaml_and_patch_types_are_served_and_a_delete_may_have_no_body(
    api: Api,
) -> None:
    created = await api.client.post(PROCESSES, json=process("web"))
    assert created.status_code == 201, created.text
    patched = await api.client.patch(
        f"{PROCESSES}/web",
        content=b'{"metadata": {"labels": {"a": "b"}}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200, patched.text
    yaml_body = b"apiVersion: setpoint.dev/v1alpha1\nkind: Process\nmetadata: {name: y}\n"
    posted = await api.client.post(
        PROCESSES,
        content=yaml_body + b"spec: {args: [sleep, '9']}\n",
        headers={"Content-Type": "application/yaml"},
    )
    assert posted.status_code == 201, posted.text
    deleted = await api.client.delete(f"{PROCESSES}/y")  # no body, no content type
    assert deleted.status_code == 200, deleted.text
    with_options = await api.client.request(
        "DELETE",
        f"{PROCESSES}/web",
        content=b'{"propagationPolicy": "Foreground"}',
        headers={"Content-Type": "application/json"},
    )
    assert with_options.status_code == 202, with_options.text  # Foreground: accepted


async def test_a_write_naming_no_content_type_and_no_origin_is_read_as_json(api: Api) -> None:
    """As the Kubernetes API server (pykube-ng sends no Content-Type): what no page can send."""
    created = await api.client.post(PROCESSES, content=BODY)
    assert created.status_code == 201, created.text
    stored = await api.store.get("setpoint.dev/v1alpha1", "Process", "page", "default")
    replaced = await api.client.put(f"{PROCESSES}/page", content=json.dumps(stored).encode())
    assert replaced.status_code == 200, replaced.text
    deleted = await api.client.request(
        "DELETE", f"{PROCESSES}/page", content=b'{"propagationPolicy": "Background"}'
    )
    assert deleted.status_code == 200, deleted.text
    items, _ = await api.store.list("setpoint.dev/v1alpha1", "Process", None)
    assert items == []


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.nip.io:{port}"])
async def test_a_host_that_is_not_loopback_is_refused_even_for_reads(api: Api, host: str) -> None:
    """A page whose name was rebound to 127.0.0.1 names its own host: it reads nothing."""
    await api.client.post(
        SECRETS,
        json={
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s"},
            "stringData": {"k": "hunter2"},
        },
    )
    named = host.format(port=api.server.port)
    answer = await api.client.get(SECRETS, headers={"Host": named})
    assert answer.status_code == 403, answer.text
    assert "hunter2" not in answer.text
    assert answer.json()["reason"] == "Forbidden"
    assert "--accept-hosts" in answer.json()["message"]
    written = await api.client.post(PROCESSES, json=process("x"), headers={"Host": named})
    assert written.status_code == 403
    items, _ = await api.store.list("setpoint.dev/v1alpha1", "Process", None)
    assert items == []


@pytest.mark.parametrize(
    "host", ["localhost:{port}", "LOCALHOST", "127.0.0.9:{port}", "[::1]:{port}"]
)
async def test_loopback_hosts_are_served(api: Api, host: str) -> None:
    answer = await api.client.get(PROCESSES, headers={"Host": host.format(port=api.server.port)})
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "null",
        "http://localhost:{port}",
        "https://127.0.0.1:{port}",
        "http://127.0.0.1:1",
    ],
)
async def test_an_origin_not_the_servers_own_is_refused_for_every_method(
    api: Api, origin: str
) -> None:
    shown = origin.format(port=api.server.port)
    read = await api.client.get(SECRETS, headers={"Origin": shown})
    assert read.status_code == 403, read.text
    assert "origin" in read.json()["message"]
    assert "access-control-allow-origin" not in read.headers
    written = await api.client.post(PROCESSES, json=process("x"), headers={"Origin": shown})
    assert written.status_code == 403
    items, _ = await api.store.list("setpoint.dev/v1alpha1", "Process", None)
    assert items == []


async def test_the_servers_own_origin_is_served(api: Api) -> None:
    own = api.server.url  # http://127.0.0.1:PORT: what the dashboard's page sends
    written = await api.client.post(PROCESSES, json=process("web"), headers={"Origin": own})
    assert written.status_code == 201, written.text
    read = await api.client.get(PROCESSES, headers={"Origin": own})
    assert read.status_code == 200
    assert "access-control-allow-origin" not in read.headers


async def test_a_view_token_is_refused_by_host_before_auth(api: Api) -> None:
    answer = await api.client.get(
        PROCESSES, headers={"Host": "evil.example", "Authorization": f"Bearer {VIEW}"}
    )
    assert answer.status_code == 403


def test_host_rules() -> None:
    rules = HostRules.of(patterns=[r"my\.lan", r"^.*\.corp\.example$"])
    assert rules.accepts("my.lan")
    assert not rules.accepts("my.lan.evil.example")  # the whole name must match
    assert rules.accepts("a.corp.example")
    assert not rules.accepts("corp.example.evil")
    with pytest.raises(Invalid, match="--accept-hosts: '\\(': not an RE2"):
        HostRules.of(patterns=["("])
    public = host_rules("10.1.2.3")
    assert public.accepts("10.1.2.3")
    assert public.accepts(socket.gethostname().lower())
    assert not host_rules("127.0.0.1").accepts("10.1.2.3")


def test_refusal_is_pure_and_names_its_reason() -> None:
    ok = {"host": "127.0.0.1:8080", "content-type": "application/json"}
    assert refusal("POST", "http", ok) is None
    assert refusal("GET", "https", {"host": "localhost", "origin": "https://localhost"}) is None
    assert refusal("GET", "https", {"host": "localhost:443", "origin": "https://localhost"}) is None
    assert isinstance(refusal("GET", "http", {}), Forbidden)  # no Host at all
    assert isinstance(refusal("GET", "http", {"host": "127.0.0.1:x"}), Forbidden)
    page = {"host": "localhost", "origin": "http://localhost"}
    assert isinstance(refusal("POST", "http", page), UnsupportedMediaType)
    assert refusal("POST", "http", {"host": "localhost"}) is None  # no Origin: read as JSON
    assert isinstance(refusal("PATCH", "http", {"host": "localhost"}), UnsupportedMediaType)
    chunked = {"host": "localhost", "transfer-encoding": "chunked", "origin": "http://localhost"}
    assert isinstance(refusal("DELETE", "http", chunked), UnsupportedMediaType)
    assert refusal("DELETE", "http", {"host": "localhost", "content-length": "0"}) is None


async def test_an_app_behind_httpx_transport_names_its_host() -> None:
    """The ASGI app itself refuses (not only the server): any ASGI server gets the rules."""
    from setpoint.api.app import create_app
    from setpoint.engine.kinds import builtin_kinds
    from setpoint.store import open_store

    store = await open_store("memory://", builtin_kinds())
    try:
        app = create_app(store, auth=None, hosts=HostRules.of(patterns=["api"]))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            assert (await client.get(PROCESSES)).status_code == 200
            other = await client.get(PROCESSES, headers={"Host": "other"})
            assert other.status_code == 403
    finally:
        await store.close()
