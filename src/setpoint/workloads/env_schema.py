"""The schemas of a Secret and of the environment a command's spec gives (`env` values
from Secrets, `envFrom`), and which Secrets a spec names. Pure: no I/O
(`setpoint.workloads.secret` resolves an environment against the store).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from setpoint.model import Object, Schema
from setpoint.model.fields import EnvName, OsString

MAX_SECRET_BYTES = 1024 * 1024
"""The most a Secret's `data` may hold, decoded (Kubernetes' limit)."""
SECRETS_INDEX = "secrets"
"""Name of the cache index that `secret_keys` computes."""

_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


# -- the kind ------------------------------------------------------------------------


def _check_key(key: str) -> None:
    if not _KEY.match(key) or len(key) > 253:
        raise PydanticCustomError(
            "secret_key",
            "{key!r} is not a valid key: want letters, digits, '-', '_' or '.'",
            {"key": key},
        )


class SecretBody(Schema):
    """The top-level fields of a `Secret` (see the module docstring)."""

    data: dict[str, str] = Field(default_factory=dict)
    string_data: dict[str, str] | None = None
    type: str = Field(default="Opaque", min_length=1)

    @field_validator("data")
    @classmethod
    def _base64(cls, data: dict[str, str]) -> dict[str, str]:
        for key, value in data.items():
            _check_key(key)
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise PydanticCustomError(
                    "base64", "data.{key}: not base64 (use stringData for plain text)", {"key": key}
                ) from None
        return data

    @model_validator(mode="after")
    def _merge_string_data(self) -> SecretBody:
        for key, text in (self.string_data or {}).items():
            _check_key(key)
            self.data[key] = base64.b64encode(text.encode()).decode()
        self.string_data = None
        size = sum(len(base64.b64decode(v)) for v in self.data.values())
        if size > MAX_SECRET_BYTES:
            raise PydanticCustomError(
                "secret_size", "holds {size} bytes; at most 1 MiB", {"size": size}
            )
        return self


# -- references in a Process or Job spec ----------------------------------------------


class SecretKeySelector(Schema):
    """`secretKeyRef`: the value of `key` in the Secret `name` (of the object's namespace)."""

    name: str = Field(min_length=1)
    key: str = Field(min_length=1)
    optional: bool = False


class EnvVarSource(Schema):
    """`valueFrom`: where a variable's value comes from (a Secret's key)."""

    secret_key_ref: SecretKeySelector


class EnvVarFrom(Schema):
    """An `env` entry whose value comes from elsewhere: `{valueFrom: {secretKeyRef: ...}}`."""

    value_from: EnvVarSource


class SecretEnvSource(Schema):
    """`secretRef` of `envFrom`: every key of the Secret `name`."""

    name: str = Field(min_length=1)
    optional: bool = False


class EnvFromSource(Schema):
    """One `envFrom` entry: a Secret's keys as variables, each named `prefix + key`."""

    secret_ref: SecretEnvSource
    prefix: str = ""

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, prefix: str) -> str:
        if "=" in prefix or "\0" in prefix:
            raise PydanticCustomError(
                "prefix", "an environment variable name cannot hold '=' or NUL"
            )
        return prefix


def _env_from_list(value: Any) -> Any:
    """Kubernetes' `env: [{name, value} | {name, valueFrom}]` as the mapping setpoint keeps."""
    if not isinstance(value, list):
        return value
    env: dict[str, Any] = {}
    for i, item in enumerate(value):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise PydanticCustomError("env", "env[{i}]: want {{name, value}}", {"i": i})
        extra = set(item) - {"name", "value", "valueFrom"}
        if extra or ("value" in item) == ("valueFrom" in item):
            raise PydanticCustomError(
                "env", "env[{i}]: want name and one of value or valueFrom", {"i": i}
            )
        if item["name"] in env:
            raise PydanticCustomError(
                "env", "env[{i}]: {name} is given twice", {"i": i, "name": item["name"]}
            )
        env[item["name"]] = item["value"] if "value" in item else {"valueFrom": item["valueFrom"]}
    return env


Env = Annotated[dict[EnvName, OsString | EnvVarFrom], BeforeValidator(_env_from_list)]
"""A spec's `env`: name -> a value, or `{valueFrom: {secretKeyRef: ...}}`."""


def referenced_secrets(spec: Mapping[str, Any]) -> list[str]:
    """Names of the Secrets a spec's `env` and `envFrom` refer to, each once, in order."""
    names: dict[str, None] = {}
    for value in (spec.get("env") or {}).values():
        if isinstance(value, Mapping):
            names[str(value["valueFrom"]["secretKeyRef"]["name"])] = None
    for source in spec.get("envFrom") or ():
        names[str(source["secretRef"]["name"])] = None
    return list(names)


def secret_keys(obj: Object) -> Iterable[str]:
    """Cache index function: `namespace/name` of every Secret `obj`'s spec refers to."""
    namespace = obj["metadata"].get("namespace") or ""
    return [f"{namespace}/{name}" for name in referenced_secrets(obj.get("spec") or {})]
