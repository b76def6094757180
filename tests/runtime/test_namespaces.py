"""The Namespaces a Kubernetes API server always has (`setpoint.runtime.namespaces`): made
when missing, once, and never on a store whose registry has no Namespace kind."""

from __future__ import annotations

from pathlib import Path

from setpoint.engine import builtin_kinds
from setpoint.model import Registry
from setpoint.runtime.namespaces import ensure_system_namespaces
from setpoint.store import open_store


async def test_default_and_kube_system_are_made_once(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path}/state.db", builtin_kinds(), create=True)
    try:
        metadata = {"name": "default", "labels": {"mine": "yes"}}
        await store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})
        assert await ensure_system_namespaces(store) == 1  # kube-system; default was there
        items, revision = await store.list("v1", "Namespace")
        assert sorted(o["metadata"]["name"] for o in items) == ["default", "kube-system"]
        assert await ensure_system_namespaces(store) == 0  # at every start: no write
        assert (await store.list("v1", "Namespace"))[1] == revision
        default = await store.get("v1", "Namespace", "default", None)
        assert default["metadata"]["labels"] == {"mine": "yes"}  # left as it was
    finally:
        await store.close()


async def test_nothing_is_made_without_the_namespace_kind() -> None:
    store = await open_store("memory://", Registry())
    try:
        assert await ensure_system_namespaces(store) == 0
    finally:
        await store.close()
