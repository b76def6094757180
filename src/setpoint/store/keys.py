"""An object's key in a store, (apiVersion, kind, namespace, name), and the `NotFound` a
missing one raises: shared by the write rules (`setpoint.store.rules`) and the readers
(`setpoint.store.sqlite_reader`), which need nothing else of them. Pure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from setpoint.errors import NotFound

if TYPE_CHECKING:
    from setpoint.model import Kind

Key = tuple[str, str, str, str]
"""(apiVersion, kind, namespace, name); namespace is "" for cluster-scoped kinds."""


def key_of(kind: Kind, name: str, namespace: str | None) -> Key:
    return (kind.api_version, kind.kind, (namespace or "default") if kind.namespaced else "", name)


def not_found(key: Key) -> NotFound:
    _, kind, ns, name = key
    where = f' in namespace "{ns}"' if ns else ""
    return NotFound(f'{kind} "{name}" not found{where}')
