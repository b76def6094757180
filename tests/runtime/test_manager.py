"""The manager's health server and metrics: probes answer, /metrics counts reconciles."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client.parser import text_string_to_metric_families
from runtime_support import eventually, widget

from setpoint.errors import Invalid
from setpoint.runtime.manager import Manager, ManagerOptions
from setpoint.runtime.reconciler import Request
from setpoint.store import Store


async def http_get(port: int, path: str) -> tuple[int, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    response = (await reader.read()).decode()
    writer.close()
    status = int(response.split(" ", 2)[1])
    return status, response.split("\r\n\r\n", 1)[1]


async def test_probes_and_metrics(store: Store) -> None:
    manager = Manager(store, options=ManagerOptions(health_address="127.0.0.1:0"))
    reconciled: list[Request] = []

    async def reconcile(request: Request) -> None:
        reconciled.append(request)

    manager.controller("widget").for_("widgets").complete(reconcile)
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(manager.wait_started(), 5)
    assert manager.health_server is not None
    port = manager.health_server.port
    assert await http_get(port, "/healthz") == (200, "ok")
    assert await http_get(port, "/readyz") == (200, "ok")

    await store.create(widget("a"))

    async def counted() -> bool:
        _, text = await http_get(port, "/metrics")
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if (
                    sample.name == "controller_runtime_reconcile_total"
                    and sample.labels == {"controller": "widget", "result": "success"}
                    and sample.value >= 1
                ):
                    return True
        return False

    await eventually(counted)
    assert reconciled == [Request("a", "default")]
    manager.stop()
    await asyncio.wait_for(task, 5)


async def test_stop_while_caches_cannot_sync(store: Store) -> None:
    """A manager whose informers never sync (here: the store is closed) still stops."""
    manager = Manager(store)

    async def reconcile(request: Request) -> None:
        raise AssertionError("never started")

    manager.controller("widget").for_("widgets").complete(reconcile)
    await store.close()
    task = asyncio.create_task(manager.run())
    await asyncio.sleep(0)
    manager.stop()
    await asyncio.wait_for(task, 5)
    assert not manager.is_leader


async def test_controllers_are_added_before_run(store: Store) -> None:
    manager = Manager(store)
    task = asyncio.create_task(manager.run())
    await asyncio.wait_for(manager.wait_started(), 5)

    async def reconcile(request: Request) -> None:
        return None

    with pytest.raises(Invalid, match="before run"):
        manager.controller("late").for_("widgets").complete(reconcile)
    manager.stop()
    await asyncio.wait_for(task, 5)


def test_bad_health_address_is_refused() -> None:
    with pytest.raises(Invalid, match="health_address"):
        ManagerOptions(health_address="nowhere")
