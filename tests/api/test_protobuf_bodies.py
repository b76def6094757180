"""kubectl's generators send protobuf: `kubectl create configmap`, `create secret` and `create
namespace` against `setpoint serve` store what kubectl meant, the object its own
`--dry-run=client -o json` prints; a protobuf body of another kind, of a field setpoint does
not read, or broken, is refused with one clear line and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from api_kit import Server
from http_kit import running_api
from hypothesis import given
from hypothesis import strategies as st

from setpoint.api.protobuf import MAGIC, MEDIA_TYPE, decode
from setpoint.errors import Error

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
PROTOBUF = {"Content-Type": MEDIA_TYPE}


def created_as_kubectl_means(server: Server, *args: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """What `kubectl create ARGS` stored, and what kubectl says it would send."""
    meant = json.loads(server.ok("create", *args, "--dry-run=client", "-o", "json").out)
    server.ok("create", *args)
    kind = meant["kind"].lower()
    stored = json.loads(server.ok("get", kind, meant["metadata"]["name"], "-o", "json").out)
    return stored, meant


def test_kubectls_generators_store_what_kubectl_meant(server: Server, tmp_path: Path) -> None:
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)))
    stored, meant = created_as_kubectl_means(
        server, "configmap", "settings", "--from-literal=mode=fast", "--from-literal=empty=",
        f"--from-file={binary}",
    )  # fmt: skip
    assert stored["data"] == meant["data"] == {"mode": "fast", "empty": ""}
    assert stored["binaryData"] == meant["binaryData"]  # bytes, not text: base64 both ways

    stored, meant = created_as_kubectl_means(
        server, "secret", "generic", "token", "--from-literal=key=s3cr3t", "--type=example/t"
    )
    assert stored["data"] == meant["data"] == {"key": "czNjcjN0"}
    assert stored["type"] == "example/t"

    stored, meant = created_as_kubectl_means(server, "namespace", "team-b")
    assert stored["metadata"]["name"] == "team-b"
    assert "namespace/team-b" in server.ok("get", "namespaces", "-o", "name").out.split()


def varint(value: int) -> bytes:
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = field(1, api_version.encode()) + field(2, kind.encode())
    return MAGIC + field(1, type_meta) + field(2, raw)


NAMED = field(1, field(1, b"from-protobuf"))  # metadata.name


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        (envelope("v1", "Pod", NAMED), 415, "not v1 Pod: send it as application/json"),
        (envelope("v1", "ConfigMap", NAMED + field(9, b"x")), 415, "field 9 of the protobuf"),
        (envelope("v1", "ConfigMap", NAMED + field(1, b"\x0a\x05ab")), 400, "ends inside"),
        (b'{"kind": "ConfigMap"}', 400, "magic"),
        (MAGIC + b"\x08", 400, "ends inside a number"),
    ],
)
async def test_a_protobuf_body_setpoint_cannot_read_is_refused_whole(
    body: bytes, code: int, says: str
) -> None:
    async with running_api() as api:
        refused = await api.client.post(CONFIGMAPS, content=body, headers=PROTOBUF)
        assert refused.status_code == code, refused.text
        assert says in refused.json()["message"]
        assert "\n" not in refused.json()["message"]
        assert await api.store.revision() == 0
        body = envelope("v1", "ConfigMap", NAMED + field(2, field(1, b"k")))  # data: {k: ""}
        created = await api.client.post(CONFIGMAPS, content=body, headers=PROTOBUF)
        assert created.status_code == 201, created.text
        assert created.json()["data"] == {"k": ""}


@given(st.binary(max_size=200), st.sampled_from([b"", MAGIC]))
def test_any_bytes_are_read_or_refused_with_a_status_never_crash(tail: bytes, head: bytes) -> None:
    """Whatever a client sends as protobuf, the answer is an object or a setpoint error (a
    4xx Status), never another exception (a 500)."""
    try:
        decoded: dict[str, Any] | None = decode(head + tail)
    except Error as exc:
        decoded, code = None, exc.code
    assert decoded["apiVersion"] == "v1" if decoded is not None else code in (400, 415)
