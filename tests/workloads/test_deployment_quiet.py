"""A Deployment that cannot go on (its rollout missed its deadline, or it waits for a
dependency) is reported once, then left alone: the store gets no write while time goes
by, however often the controller looks.

The Deployment controller runs alone on a manual clock; the test plays the Process
controller (it marks replicas Ready), so what is counted is the Deployment's own doing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from writes_support import writes_since

from setpoint.model import Object, get_condition, set_condition
from setpoint.runtime.controller import Controller
from setpoint.runtime.reconciler import Request
from setpoint.store import Store
from setpoint.testing import Harness, ManualClock, reconcile_until_stable
from setpoint.workloads import deployment
from setpoint.workloads.deployment import DEPLOYMENT
from setpoint.workloads.process import PROCESS

DEADLINE = 5


@dataclass
class World:
    harness: Harness
    controller: Controller

    @property
    def store(self) -> Store:
        return self.harness.store

    @property
    def clock(self) -> ManualClock:
        assert isinstance(self.harness.clock, ManualClock)
        return self.harness.clock

    async def quiet_for_ten_seconds(self) -> None:
        """Ten seconds go by, a second at a time, and the controller looks at `web` each
        second: the store must get no write (Events aside)."""
        since = await self.store.revision()
        for _ in range(10):
            self.clock.advance(1)
            self.controller.enqueue(Request("web", "default"))
            await reconcile_until_stable(self.harness)
        assert await writes_since(self.store, since) == []


@pytest.fixture
async def world() -> AsyncIterator[World]:
    async with Harness(clock=ManualClock()) as harness:
        controller = deployment.setup(harness.manager)
        await harness.start()
        yield World(harness, controller)


def web(version: str, **spec: Any) -> Object:
    return {
        "apiVersion": DEPLOYMENT.api_version,
        "kind": DEPLOYMENT.kind,
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 2,
            "progressDeadlineSeconds": DEADLINE,
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"args": ["server"], "env": {"VERSION": version}},
            },
            **spec,
        },
    }


async def mark_ready(world: World) -> None:
    """Play the Process controller: every replica that exists now is Ready."""
    store = world.store
    replicas, _ = await store.list(PROCESS.api_version, PROCESS.kind, "default")
    for replica in replicas:
        status: dict[str, Any] = dict(replica.get("status") or {})
        set_condition(status, "Ready", True, reason="Ready", now=world.clock.now())
        replica["status"] = status
        await store.update_status(replica)


async def condition(store: Store, type_: str) -> dict[str, Any]:
    obj = await store.get(DEPLOYMENT.api_version, DEPLOYMENT.kind, "web", "default")
    return get_condition(obj.get("status"), type_) or {}


async def test_a_rollout_past_its_deadline_stays_stalled_and_writes_nothing(
    world: World,
) -> None:
    store, clock = world.store, world.clock
    obj = await store.create(web("v1"))
    await reconcile_until_stable(world.harness)
    await mark_ready(world)
    await reconcile_until_stable(world.harness)
    assert (await condition(store, "Ready"))["status"] == "True"

    obj = await store.get(DEPLOYMENT.api_version, DEPLOYMENT.kind, "web", "default")
    obj["spec"]["template"]["spec"]["env"] = {"VERSION": "v2"}  # its replica never gets Ready
    await store.update(obj)
    await reconcile_until_stable(world.harness)
    clock.advance(DEADLINE + 1)
    await reconcile_until_stable(world.harness)
    stalled = await condition(store, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "ProgressDeadlineExceeded")

    await world.quiet_for_ten_seconds()
    assert await condition(store, "Stalled") == stalled
    assert (await condition(store, "Ready"))["reason"] == "ProgressDeadlineExceeded"


async def test_a_deployment_waiting_for_a_dependency_writes_nothing(world: World) -> None:
    store, clock = world.store, world.clock
    await store.create(web("v1", dependsOn=[{"kind": "Process", "name": "db"}]))
    await reconcile_until_stable(world.harness)
    waiting = await condition(store, "Ready")
    assert (waiting["status"], waiting["reason"]) == ("False", "WaitingForDependency")

    await world.quiet_for_ten_seconds()
    assert await condition(store, "Ready") == waiting

    # once the wait ends, the progress deadline counts from then, not from the creation
    await store.create({"apiVersion": PROCESS.api_version, "kind": PROCESS.kind,
                        "metadata": {"name": "db", "namespace": "default"},
                        "spec": {"args": ["db"]}})  # fmt: skip
    db = await store.get(PROCESS.api_version, PROCESS.kind, "db", "default")
    db["status"] = {}
    set_condition(db["status"], "Ready", True, reason="Ready", now=clock.now())
    await store.update_status(db)
    await reconcile_until_stable(world.harness)
    assert (await condition(store, "Progressing"))["reason"] == "ReplicaSetUpdated"
    assert await condition(store, "Stalled") == {}
