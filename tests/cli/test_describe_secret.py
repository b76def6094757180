"""`describe` of a kind with secret fields (a Secret) shows keys and sizes, never values."""

from __future__ import annotations

import base64

from setpoint.cli.describe import describe_object
from setpoint.workloads.secret import SECRET


def test_a_secret_is_described_with_keys_and_sizes_only() -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db", "namespace": "default"},
        "type": "Opaque",
        "data": {"password": base64.b64encode(b"hunter2-correct-horse").decode(), "empty": ""},
    }
    text = describe_object(secret, [], now=0.0, secret_fields=SECRET.secret_fields)
    assert "Data:\n  empty:     0 bytes\n  password:  21 bytes" in text
    assert "Type:  Opaque" in text
    assert "hunter2" not in text
    assert secret["data"]["password"] not in text
