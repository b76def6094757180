"""The Autoscaler names itself when it rescales its target: the write carries the actor
`controller/autoscaler`, so the timeline (and `explain`) do not take a rescale for a
person's change of `spec.replicas`."""

from __future__ import annotations

import asyncio
import sys

from control_autoscaler_support import SCALED, autoscaler, kinds, scaled

from setpoint.control.autoscaler import setup
from setpoint.testing import Harness, ManualClock


async def test_a_rescale_is_written_as_the_autoscalers() -> None:
    clock = ManualClock()
    async with Harness(registry=kinds(), clock=clock) as harness:
        setup(harness.manager)
        await harness.start()
        store = harness.store
        await store.create(scaled("queue", 1))
        since = await store.revision()
        metric = {
            "command": {"args": [sys.executable, "-c", "print(42)"]},
            "target": 10,
            "targetType": "AverageValue",
        }
        await store.create(autoscaler("queue", "queue", metric))
        changes = store.watch(SCALED.api_version, SCALED.kind, "default", since=since)
        async with asyncio.timeout(30):
            async for event in changes:
                if (event.object.get("spec") or {}).get("replicas") == 5:
                    break
    assert event.actor is not None
    assert event.actor.name() == "controller/autoscaler"
