"""The scale subresource: reading and writing replicas of any kind that declares one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from setpoint.errors import Conflict, Invalid, NotFound
from setpoint.model import Kind, Registry, ScaleSubresource, Schema
from setpoint.runtime.scale import read_scale, write_scale
from setpoint.store import Store, open_store


class PoolSpec(Schema):
    replicas: int = 1
    image: str = "x"


class PoolStatus(Schema):
    replicas: int = 0
    selector: str | None = None


POOL = Kind(
    "test.setpoint.dev/v1", "Pool", "pools", spec=PoolSpec, status=PoolStatus,
    scale=ScaleSubresource(),
)  # fmt: skip
PLAIN = Kind("test.setpoint.dev/v1", "Plain", "plains", spec=PoolSpec)


@pytest.fixture
async def pools() -> AsyncIterator[Store]:
    registry = Registry()
    registry.register(POOL)
    registry.register(PLAIN)
    store = await open_store("memory://", registry)
    for kind in (POOL, PLAIN):
        await store.create(
            {
                "apiVersion": kind.api_version,
                "kind": kind.kind,
                "metadata": {"name": "a", "namespace": "default"},
                "spec": {"replicas": 2, "image": "v1"},
            }
        )
    obj = await store.get(POOL.api_version, POOL.kind, "a", "default")
    obj["status"] = {"replicas": 1, "selector": "app=a"}
    await store.update_status(obj)
    yield store
    await store.close()


async def test_read_scale_reads_the_declared_paths(pools: Store) -> None:
    scale = await read_scale(pools, POOL, "a", "default")
    assert (scale.replicas, scale.status_replicas, scale.selector) == (2, 1, "app=a")


async def test_write_scale_changes_only_the_replicas(pools: Store) -> None:
    scale = await write_scale(pools, POOL, "a", "default", 5)
    obj = await pools.get(POOL.api_version, POOL.kind, "a", "default")
    assert scale.replicas == 5
    assert obj["spec"] == {"replicas": 5, "image": "v1"}
    assert obj["metadata"]["generation"] == 2


async def test_write_scale_with_a_stale_resource_version_is_a_conflict(pools: Store) -> None:
    stale = await read_scale(pools, POOL, "a", "default")
    await write_scale(pools, POOL, "a", "default", 3)
    with pytest.raises(Conflict, match="read its scale again"):
        await write_scale(pools, POOL, "a", "default", 4, resource_version=stale.resource_version)
    assert (await read_scale(pools, POOL, "a", "default")).replicas == 3


async def test_concurrent_writers_without_a_version_all_land(pools: Store) -> None:
    await asyncio.gather(*(write_scale(pools, POOL, "a", "default", n) for n in range(3, 9)))
    assert (await read_scale(pools, POOL, "a", "default")).replicas in range(3, 9)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
async def test_bad_replicas_are_refused_and_nothing_is_written(pools: Store, bad: object) -> None:
    before = await pools.get(POOL.api_version, POOL.kind, "a", "default")
    with pytest.raises(Invalid, match="replicas"):
        await write_scale(pools, POOL, "a", "default", bad)  # type: ignore[arg-type]
    assert await pools.get(POOL.api_version, POOL.kind, "a", "default") == before


async def test_a_kind_without_scale_or_a_missing_object_is_an_error(pools: Store) -> None:
    with pytest.raises(Invalid, match="Plain has no scale subresource"):
        await read_scale(pools, PLAIN, "a", "default")
    with pytest.raises(NotFound):
        await write_scale(pools, POOL, "missing", "default", 1)
