"""`dependsOn` a Service: a Process and a Deployment that wait for a Service to be `Ready`
start once it is, woken by the Service's own change (a Service has endpoints only after its
backend is Ready, so the backend's change alone came too early to wake them).

Real Process, Service and Deployment controllers on the test harness; waits are on the
stored state under timeouts.
"""

from __future__ import annotations

from pathlib import Path

from process_support import SLEEP_FOREVER, process, process_controller, python
from service_support import echo_backend, ready, service

from setpoint.testing import Harness, free_port_range, wait_for
from setpoint.workloads import deployment
from setpoint.workloads.deployment import DEPLOYMENT
from setpoint.workloads.process import PROCESS, ProcessSettings
from setpoint.workloads.service import SERVICE
from setpoint.workloads.service import setup as service_setup

NEEDS_SERVICE = [{"kind": "Service", "name": "echo", "condition": "Ready"}]


def running(obj: object) -> bool:
    status = (obj or {}).get("status") or {}  # type: ignore[attr-defined]
    return status.get("phase") == "Running"


async def test_dependents_of_a_service_start_when_it_turns_ready(tmp_path: Path) -> None:
    async with Harness() as harness:
        settings = ProcessSettings(tmp_path / "state", tmp_path / "logs")
        processes = process_controller(harness.manager, settings)
        service_setup(harness.manager)
        deployment.setup(harness.manager)
        await harness.start()
        try:
            await _dependents_start(harness)
        finally:
            await harness.stop()
            await processes.stop_all(grace=0)


async def _dependents_start(harness: Harness) -> None:
    store = harness.store
    start = free_port_range(4)
    listen = start + 3
    await store.create(service("echo", listen, {"app": "echo"}))
    await store.create(process("waiter", python(SLEEP_FOREVER), dependsOn=NEEDS_SERVICE))
    await store.create(
        {
            "apiVersion": DEPLOYMENT.api_version,
            "kind": DEPLOYMENT.kind,
            "metadata": {"name": "front", "namespace": "default"},
            "spec": {
                "replicas": 1,
                "portRange": {"start": start, "end": start + 1},
                "selector": {"matchLabels": {"app": "front"}},
                "dependsOn": NEEDS_SERVICE,
                "template": {
                    "metadata": {"labels": {"app": "front"}},
                    "spec": {"args": python(SLEEP_FOREVER)},
                },
            },
        }
    )
    waiting = await wait_for(store, PROCESS, "waiter", lambda o: o is not None and bool(
        (o.get("status") or {}).get("phase") == "Waiting"))  # fmt: skip
    assert waiting is not None

    await store.create(echo_backend("backend", start + 2))
    assert await wait_for(store, SERVICE, "echo", ready, within=30) is not None
    assert await wait_for(store, PROCESS, "waiter", running, within=30) is not None
    assert await wait_for(store, DEPLOYMENT, "front", ready, within=30) is not None
