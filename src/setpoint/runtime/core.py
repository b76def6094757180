"""Schemas of the Kubernetes core kinds setpoint stores with no controller behind them:
`Namespace`, `ConfigMap` and `Pod` (core `v1`, as the Kubernetes API server serves
them), for operators written against Kubernetes (kopf, client libraries) that create,
watch and own them. Their kinds are declared in `setpoint.runtime.kinds`.

As in envtest (an API server with no scheduler, kubelet or namespace controller), nothing
acts on them: a Pod is stored and stays as it was written (no container is started, its
phase is what a client writes to its status), a Namespace's deletion does not delete what
is in it. They are validated as the API server validates them where a client could
notice: a ConfigMap's keys and size, a Pod's containers (at least one, each with a DNS
label name, unique, and an image); the many other fields of a Pod's spec are kept as they
are written.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from setpoint.model import Schema

__all__ = [
    "MAX_CONFIG_MAP_BYTES",
    "ConfigMapBody",
    "Container",
    "NamespaceSpec",
    "NamespaceStatus",
    "PodSpec",
    "PodStatus",
]

MAX_CONFIG_MAP_BYTES = 1024 * 1024
"""The most a ConfigMap's `data` and `binaryData` may hold together (Kubernetes' limit)."""

_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _check_keys(keys: Any) -> None:
    for key in keys:
        if len(key) > 253 or not _KEY.fullmatch(key):
            raise PydanticCustomError(
                "config_key",
                "'{key}' is not a valid key: want letters, digits, '-', '_' or '.'",
                {"key": key},
            )


def _check_size(data: dict[str, str], binary: dict[str, str]) -> None:
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    size += sum(len(k) + len(base64.b64decode(v)) for k, v in binary.items())
    if size > MAX_CONFIG_MAP_BYTES:
        raise PydanticCustomError(
            "config_size", "holds {size} bytes; at most 1 MiB", {"size": size}
        )


class ConfigMapBody(Schema):
    """The top-level fields of a `ConfigMap`: `data` (key -> text), `binaryData` (key ->
    base64), no key in both, at most 1 MiB in all; `immutable`, as Kubernetes."""

    data: dict[str, str] | None = None
    binary_data: dict[str, str] | None = None
    immutable: bool | None = None

    @field_validator("data")
    @classmethod
    def _data(cls, data: dict[str, str] | None) -> dict[str, str] | None:
        _check_keys(data or {})
        _check_size(data or {}, {})
        return data

    @field_validator("binary_data")
    @classmethod
    def _binary_data(
        cls, binary: dict[str, str] | None, info: ValidationInfo
    ) -> dict[str, str] | None:
        _check_keys(binary or {})
        for key, value in (binary or {}).items():
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise PydanticCustomError("base64", "'{key}': not base64", {"key": key}) from None
        data = info.data.get("data") or {}
        both = sorted(set(data) & set(binary or {}))
        if both:
            raise PydanticCustomError("config_key", "'{key}' is in data too", {"key": both[0]})
        _check_size(data, binary or {})
        return binary


class NamespaceSpec(Schema):
    """A `Namespace`'s spec: its finalizers (what must be done before it is gone)."""

    finalizers: list[str] | None = None


class NamespaceStatus(Schema):
    """A `Namespace`'s status: `Active` or `Terminating` (kept as written)."""

    model_config = ConfigDict(extra="allow")

    phase: str | None = None


class Container(Schema):
    """One container of a Pod: a name (DNS label) and an image are required; the other
    fields (command, env, ports, resources ...) are kept as written."""

    model_config = ConfigDict(extra="allow")

    name: str
    image: str = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _dns_label(cls, name: str) -> str:
        if len(name) > 63 or not _DNS1123_LABEL.fullmatch(name):
            raise PydanticCustomError(
                "dns_label",
                "'{name}': want a DNS label (lowercase letters, digits and '-', at most 63)",
                {"name": name},
            )
        return name


class PodSpec(Schema):
    """A `Pod`'s spec: at least one container, names unique among containers and init
    containers; every other field of Kubernetes' PodSpec is kept as written."""

    model_config = ConfigDict(extra="allow")

    containers: list[Container] = Field(min_length=1)
    init_containers: list[Container] | None = None

    @model_validator(mode="after")
    def _unique_names(self) -> PodSpec:
        seen: set[str] = set()
        for container in [*(self.init_containers or []), *self.containers]:
            if container.name in seen:
                raise PydanticCustomError(
                    "duplicate", "container name '{name}' is used twice", {"name": container.name}
                )
            seen.add(container.name)
        return self


class PodStatus(Schema):
    """A `Pod`'s status, as a client writes it (no kubelet writes one here); `Pending` from
    its create on (`Kind.status_on_create`), as kube-apiserver creates every Pod."""

    model_config = ConfigDict(extra="allow")

    phase: str = "Pending"
