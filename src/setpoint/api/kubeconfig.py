"""A kubeconfig naming a setpoint API server and its token, so that `KUBECONFIG=FILE
kubectl get processes` (or the kubernetes Python client) needs no other flag.

`kubeconfig(url, token)` builds it (one cluster, one user, one context, made current);
`write_kubeconfig(path, ...)` writes it with mode 0600 (it holds a token), replacing the
file in one rename, never writing through a symbolic link. No decisions about where the
file goes: that is the caller's.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import yaml

from setpoint.files import write_private


def kubeconfig(
    url: str,
    token: str | None,
    *,
    certificate: bytes | None = None,
    name: str = "setpoint",
    namespace: str = "default",
) -> dict[str, Any]:
    """A kubeconfig with one context `name` for the server at `url` (no token: none sent),
    trusting `certificate` (PEM: the server's self-signed one) for HTTPS."""
    user: dict[str, Any] = {"token": token} if token else {}
    cluster: dict[str, Any] = {"server": url}
    if certificate is not None:
        cluster["certificate-authority-data"] = base64.b64encode(certificate).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}
        ],
        "current-context": name,
        "preferences": {},
    }


def write_kubeconfig(path: str | os.PathLike[str], config: dict[str, Any]) -> Path:
    """Write `config` to `path` (mode 0600, in one rename; never through a symbolic link:
    `setpoint.files.write_private`; its directory must exist); return the path."""
    write_private(path, yaml.safe_dump(config, sort_keys=False).encode())
    return Path(path)
