"""The `Secret` kind (core `v1`, namespaced, as Kubernetes') and how a Process or Job gets
its values into its environment.

A Secret holds `data` (key -> base64 value), `type` (`Opaque` by default; free text, as
Kubernetes) and, on input only, `stringData` (key -> plain text), which admission merges
into `data` (base64-encoded, winning over a `data` entry of the same key) and drops, as
the Kubernetes API server does. Keys are Kubernetes' (`[-._a-zA-Z0-9]+`); a Secret holds
at most 1 MiB. A Kubernetes `v1` Secret manifest is accepted as it is. Its `data` is a
secret field of the kind (`Kind.secret_fields`): the timeline records only which keys
changed, `describe` shows keys and sizes, and values quoted from children's output are
masked (`setpoint.model.redaction`).

A Process (and so a Deployment's template) or Job spec refers to Secrets as Kubernetes'
containers do:

* `env: {NAME: {valueFrom: {secretKeyRef: {name, key, optional}}}}`, beside plain
  `NAME: value` entries; Kubernetes' list form (`env: [{name, value}, {name,
  valueFrom}]`) is accepted too and stored as the mapping;
* `envFrom: [{secretRef: {name, optional}, prefix}]`: every key of the Secret, as
  `prefix + key`.

`env` wins over `envFrom`, and a later `envFrom` entry over an earlier one, as Kubernetes.
Values are resolved when the child is started (`resolve_env`, pure, over a lookup of
Secrets by name in the object's namespace; `resolve_env_in_store` reads them from the
store). A Secret or key that is missing (and not `optional`) keeps the child from
starting: `SecretUnavailable`, which the controllers report as `Stalled` with reason
`SecretMissing` (`SecretInvalid` for a value that holds a NUL byte); creating the Secret
wakes the objects that refer to it (`SECRETS_INDEX`, `referring_to`). As in
Kubernetes, a running child keeps the values it was started with: a Secret change takes
effect at its next start.

Pure but for `resolve_env_in_store` (store reads): no other I/O, no clock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from setpoint.errors import NotFound, SecretUnavailable
from setpoint.model import Object
from setpoint.model.redaction import decode_secret
from setpoint.runtime.cache import Cache
from setpoint.runtime.reconciler import Request
from setpoint.store import Store
from setpoint.workloads.env_schema import (
    MAX_SECRET_BYTES,
    SECRETS_INDEX,
    Env,
    EnvFromSource,
    EnvVarFrom,
    SecretBody,
    referenced_secrets,
    secret_keys,
)
from setpoint.workloads.kinds import SECRET

__all__ = [
    "MAX_SECRET_BYTES",
    "SECRET",
    "SECRETS_INDEX",
    "Env",
    "EnvFromSource",
    "EnvVarFrom",
    "ResolvedEnv",
    "SecretBody",
    "SecretUnavailable",
    "referenced_secrets",
    "referring_to",
    "resolve_env",
    "resolve_env_in_store",
    "secret_keys",
]


def referring_to(cache: Cache) -> Callable[[Object], Iterable[Request]]:
    """A mapper for `ControllerBuilder.watches`: a Secret's change enqueues every object in
    `cache` (which must have the `SECRETS_INDEX` index) that refers to it."""

    def mapper(secret: Object) -> Iterator[Request]:
        meta = secret["metadata"]
        for obj in cache.by_index(SECRETS_INDEX, f"{meta.get('namespace') or ''}/{meta['name']}"):
            yield Request(obj["metadata"]["name"], obj["metadata"].get("namespace") or "")

    return mapper


# -- resolution ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResolvedEnv:
    """The environment a child is started with (`env`), and which of its values came from
    Secrets (`secret_values`: to be masked wherever the child's output is quoted)."""

    env: dict[str, str]
    secret_values: frozenset[str] = frozenset()


SecretLookup = Callable[[str], Object | None]
"""A Secret by name in the object's namespace, or None when there is none."""


def resolve_env(
    spec: Mapping[str, Any],
    lookup: SecretLookup,
    namespace: str = "default",
    *,
    best_effort: bool = False,
) -> ResolvedEnv:
    """The environment of a child of `spec`: its `envFrom` Secrets' keys, then its `env`.

    Raises `SecretUnavailable` for a Secret or key that is missing and not optional, or
    a value that holds a NUL byte; with `best_effort`, leaves those variables out instead
    (for a child that already runs). `namespace` only words the messages. Pure."""
    env: dict[str, str] = {}
    secret: set[str] = set()

    def unavailable(message: str, reason: str = "SecretMissing") -> None:
        if not best_effort:
            raise SecretUnavailable(message, reason=reason)

    def take(name: str, data: str, where: str) -> None:
        value = decode_secret(data)
        if "\0" in value:
            env.pop(name, None)
            unavailable(f"{where} holds a NUL byte, which an environment variable cannot",
                        "SecretInvalid")  # fmt: skip
            return
        env[name] = value
        secret.add(value)

    for source in spec.get("envFrom") or ():
        ref = source["secretRef"]
        found = lookup(ref["name"])
        if found is None:
            if not ref.get("optional"):
                unavailable(f'envFrom: secret "{ref["name"]}" not found')
            continue
        for key, data in sorted((found.get("data") or {}).items()):
            where = f"key {key} of Secret {namespace}/{ref['name']}"
            take(str(source.get("prefix") or "") + key, data, where)
    for name, value in (spec.get("env") or {}).items():
        if not isinstance(value, Mapping):
            env[name] = str(value)
            continue
        ref = value["valueFrom"]["secretKeyRef"]
        found = lookup(ref["name"])
        data = (found.get("data") or {}).get(ref["key"]) if found is not None else None
        where = f"key {ref['key']} of Secret {namespace}/{ref['name']}"
        if data is None:
            env.pop(name, None)
            if ref.get("optional"):
                continue
            if found is None:
                unavailable(f'env {name}: secret "{ref["name"]}" not found')
            else:
                unavailable(f"env {name}: couldn't find {where}")
            continue
        take(name, data, where)
    return ResolvedEnv(env, frozenset(secret))


async def resolve_env_in_store(
    store: Store, obj: Object, *, best_effort: bool = False
) -> ResolvedEnv:
    """`resolve_env` for `obj`'s spec, with its Secrets as the store has them now."""
    spec = obj.get("spec") or {}
    namespace = obj["metadata"].get("namespace") or "default"
    secrets: dict[str, Object] = {}
    for name in referenced_secrets(spec):
        with contextlib.suppress(NotFound):
            secrets[name] = await store.get(SECRET.api_version, SECRET.kind, name, namespace)
    return resolve_env(spec, secrets.get, namespace, best_effort=best_effort)
