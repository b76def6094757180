"""A Deployment whose rollout missed its deadline is reported once, then left alone: it
stays `Stalled=True` and the store gets no write while time goes by.

The Deployment controller runs alone on a manual clock; the test plays the Process
controller (it marks replicas Ready), so what is counted is the Deployment's own doing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from writes_support import writes_since

from setpoint.model import Object, get_condition, set_condition
from setpoint.store import Store
from setpoint.testing import Harness, ManualClock, reconcile_until_stable
from setpoint.workloads import deployment
from setpoint.workloads.deployment import DEPLOYMENT
from setpoint.workloads.process import PROCESS

DEADLINE = 5


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    async with Harness(clock=ManualClock()) as harness:
        deployment.setup(harness.manager, clock=harness.clock)
        await harness.start()
        yield harness


def web(version: str) -> Object:
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
        },
    }


async def mark_ready(harness: Harness) -> None:
    """Play the Process controller: every replica that exists now is Ready."""
    store = harness.store
    replicas, _ = await store.list(PROCESS.api_version, PROCESS.kind, "default")
    for replica in replicas:
        status: dict[str, Any] = dict(replica.get("status") or {})
        set_condition(status, "Ready", True, reason="Ready", now=harness.clock.now())
        replica["status"] = status
        await store.update_status(replica)


async def condition(store: Store, type_: str) -> dict[str, Any]:
    obj = await store.get(DEPLOYMENT.api_version, DEPLOYMENT.kind, "web", "default")
    return get_condition(obj.get("status"), type_) or {}


async def test_a_rollout_past_its_deadline_stays_stalled_and_writes_nothing(
    harness: Harness,
) -> None:
    store, clock = harness.store, harness.clock
    assert isinstance(clock, ManualClock)
    obj = await store.create(web("v1"))
    await reconcile_until_stable(harness)
    await mark_ready(harness)
    await reconcile_until_stable(harness)
    assert (await condition(store, "Ready"))["status"] == "True"

    obj = await store.get(DEPLOYMENT.api_version, DEPLOYMENT.kind, "web", "default")
    obj["spec"]["template"]["spec"]["env"] = {"VERSION": "v2"}  # its replica never gets Ready
    await store.update(obj)
    await reconcile_until_stable(harness)
    clock.advance(DEADLINE + 1)
    await reconcile_until_stable(harness)
    stalled = await condition(store, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "ProgressDeadlineExceeded")

    since = await store.revision()
    for _ in range(10):  # ten seconds, a second at a time
        clock.advance(1)
        await reconcile_until_stable(harness)
    assert await writes_since(store, since) == []
    assert await condition(store, "Stalled") == stalled
    assert (await condition(store, "Ready"))["reason"] == "ProgressDeadlineExceeded"
