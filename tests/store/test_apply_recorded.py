"""Plain writes recorded as field managers' (`WriteOptions.record_fields`, decided in the
store's write): concurrent patches of one object each land and each is recorded, a patch
pinned to an old resourceVersion is refused, and a patch may not rename the object."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from setpoint.engine import builtin_kinds
from setpoint.errors import Conflict, Invalid, NotFound
from setpoint.store import open_store
from setpoint.store.apply import server_side_apply
from setpoint.store.base import Actor, WriteOptions
from setpoint.workloads.kinds import PROCESS


def by(manager: str, *, record_fields: bool = False) -> WriteOptions:
    return WriteOptions(actor=Actor(None, manager, None), record_fields=record_fields)


async def test_concurrent_recorded_patches_all_land(tmp_path: Path) -> None:
    store = await open_store(f"sqlite:///{tmp_path / 'state.db'}", builtin_kinds())
    try:
        applied = {
            "apiVersion": PROCESS.api_version,
            "kind": "Process",
            "metadata": {"name": "p"},
            "spec": {"args": ["true"]},
        }
        await server_side_apply(store, PROCESS, "p", "default", applied, field_manager="m")

        async def label(i: int) -> None:
            patch = {"metadata": {"labels": {f"l{i}": "x"}}}
            await store.patch(PROCESS.api_version, "Process", "p", patch, options=by(f"w{i}"))

        await asyncio.gather(*(label(i) for i in range(8)))
        obj = await store.get(PROCESS.api_version, "Process", "p", "default")
        assert obj["metadata"]["labels"] == {f"l{i}": "x" for i in range(8)}
        owned = {e["manager"]: e["fieldsV1"] for e in obj["metadata"]["managedFields"]}
        for i in range(8):
            assert owned[f"w{i}"] == {"f:metadata": {"f:labels": {f"f:l{i}": {}}}}
        assert owned["m"] == {"f:spec": {"f:args": {}}}

        stale = {"metadata": {"resourceVersion": "1", "labels": {"late": "x"}}}
        with pytest.raises(Conflict):
            await store.patch(PROCESS.api_version, "Process", "p", stale,
                              options=by("late", record_fields=True))  # fmt: skip
        renamed = {"metadata": {"name": "q"}}
        with pytest.raises(Invalid) as refused:
            await store.patch(PROCESS.api_version, "Process", "p", renamed,
                              options=by("late", record_fields=True))  # fmt: skip
        assert refused.value.field == "patch"
    finally:
        await store.close()


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
async def test_an_apply_of_the_status_is_a_status_write_with_its_entry(
    tmp_path: Path, url: str
) -> None:
    """Only the status and the managed fields change; a status write that does not record
    fields keeps the stored managed fields, whatever its object carries."""
    url = f"sqlite:///{tmp_path / 'state.db'}" if url == "sqlite" else url
    store = await open_store(url, builtin_kinds())
    try:
        process = {
            "apiVersion": PROCESS.api_version,
            "kind": "Process",
            "metadata": {"name": "p"},
            "spec": {"args": ["true"]},
        }
        await server_side_apply(store, PROCESS, "p", "default", process, field_manager="m")
        with pytest.raises(NotFound):
            await server_side_apply(
                store, PROCESS, "q", "default", {**process, "metadata": {"name": "q"}},
                field_manager="m", subresource="status",
            )  # fmt: skip
        status = {"phase": "Running", "restarts": 0}
        changed = {**process, "spec": {"args": ["false"]}, "status": status}
        applied = await server_side_apply(
            store, PROCESS, "p", "default", changed, field_manager="m", subresource="status"
        )
        obj = await store.get(PROCESS.api_version, "Process", "p", "default")
        assert obj == applied
        assert (obj["spec"]["args"], obj["metadata"]["generation"]) == (["true"], 1)
        assert {k: obj["status"][k] for k in status} == status
        entries = [(e["manager"], e.get("subresource")) for e in obj["metadata"]["managedFields"]]
        assert entries == [("m", None), ("m", "status")]

        obj["metadata"]["managedFields"] = []
        written = await store.update_status(obj)
        assert written["metadata"]["managedFields"] == applied["metadata"]["managedFields"]
    finally:
        await store.close()
