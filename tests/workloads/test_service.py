"""The Service proxy against real child processes run by the real Process controller:
traffic reaches only Ready Processes, follows readiness, survives a Process being deleted
under a client's loop with zero failed requests, passes half-closes on, falls over to
the next endpoint, reports a port in use (and listens once it is free), moves, and
closes with its Service or engine.

Tests wait for stored state through the store's watch, never on the wall clock.
"""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from process_support import SLEEP_FOREVER, condition, free_port, process, python
from service_support import (
    ServiceWorld,
    echo_backend,
    endpoint_names,
    http_backend,
    http_get,
    ready,
    service,
    service_world,
    wait_for_process,
    wait_for_service,
)

from setpoint.testing import Harness, ManualClock, reconcile_until_stable
from setpoint.workloads.process import PROCESS
from setpoint.workloads.service import LISTEN_RETRY_SECONDS, SERVICE
from setpoint.workloads.service import setup as setup_services


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[ServiceWorld]:
    async with service_world(tmp_path) as w:
        yield w


async def requests(port: int, count: int) -> Counter[str]:
    """Who answered `count` requests through `port`, one new connection each; every one
    must succeed."""
    answers: Counter[str] = Counter()
    for _ in range(count):
        code, body = await http_get(port)
        assert code == 200, (code, body)
        answers[body] += 1
    return answers


def refuses(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


async def test_traffic_reaches_only_ready_processes_and_follows_readiness(
    world: ServiceWorld,
) -> None:
    store, tmp = world.store, world.tmp
    port = free_port()
    await store.create(http_backend("web-a", free_port(), tmp / "a-unready"))
    (tmp / "b-unready").touch()
    await store.create(http_backend("web-b", free_port(), tmp / "b-unready"))
    await store.create(service("web", port, {"app": "web"}))

    svc = await wait_for_service(store, "web", lambda o: endpoint_names(o) == ["web-a"])
    assert ready(svc)
    assert svc["status"]["readyEndpoints"] == 1
    assert svc["status"]["observedGeneration"] == 1
    assert await requests(port, 6) == {"web-a": 6}

    (tmp / "b-unready").unlink()  # web-b turns Ready: both get traffic, in turn
    await wait_for_service(store, "web", lambda o: endpoint_names(o) == ["web-a", "web-b"])
    assert await requests(port, 6) == {"web-a": 3, "web-b": 3}

    (tmp / "a-unready").touch()  # web-a's readiness probe fails: it gets nothing more
    await wait_for_process(store, "web-a", lambda o: condition(o, "Ready")["status"] == "False")
    await wait_for_service(store, "web", lambda o: endpoint_names(o) == ["web-b"])
    assert await requests(port, 6) == {"web-b": 6}

    stats = world.services.statistics("web")
    assert stats is not None
    assert (stats.connections, stats.failures) == (18, 0)


async def test_no_ready_endpoint_resets_the_connection(world: ServiceWorld) -> None:
    store = world.store
    port = free_port()
    await store.create(service("web", port, {"app": "nothing"}))
    svc = await wait_for_service(store, "web", lambda o: condition(o, "Ready") != {})
    ready_ = condition(svc, "Ready")
    assert (ready_["status"], ready_["reason"]) == ("False", "NoReadyEndpoints")
    assert "app=nothing" in ready_["message"]
    assert svc["status"]["endpoints"] == []
    with pytest.raises(ConnectionResetError):
        await http_get(port)
    stats = world.services.statistics("web")
    assert stats is not None
    assert (stats.connections, stats.failures) == (1, 1)
    metrics = world.harness.manager.metrics
    assert metrics is not None
    text = metrics.render().decode()
    assert 'setpoint_service_connection_failures_total{service="default/web"} 1.0' in text


async def test_deleting_a_process_under_a_client_loop_fails_no_request(
    world: ServiceWorld,
) -> None:
    store, tmp = world.store, world.tmp
    port = free_port()
    for name in ("web-a", "web-b"):
        await store.create(http_backend(name, free_port(), tmp / f"{name}-unready"))
    await store.create(service("web", port, {"app": "web"}))
    await wait_for_service(store, "web", lambda o: endpoint_names(o) == ["web-a", "web-b"])

    answers: list[str] = []
    failures: list[str] = []
    warmed_up = asyncio.Event()
    gone = asyncio.Event()

    async def client() -> None:
        after_gone = 0
        for _ in range(20_000):  # bounded: 20 before, then until web-a is gone, then 50
            try:
                code, body = await http_get(port)
            except OSError as exc:
                failures.append(repr(exc))
                continue
            if code != 200:
                failures.append(f"{code} {body!r}")
                continue
            answers.append(body)
            if len(answers) >= 20:
                warmed_up.set()
            if gone.is_set():
                after_gone += 1
                if after_gone >= 50:
                    return

    loop = asyncio.create_task(client())
    await warmed_up.wait()
    await store.delete(PROCESS.api_version, PROCESS.kind, "web-a", "default")
    await wait_for_process(store, "web-a", lambda o: o is None)  # stopped, then gone
    gone.set()
    await asyncio.wait_for(loop, timeout=30)

    assert failures == []
    assert answers[-50:] == ["web-b"] * 50
    assert answers.count("web-a") >= 10
    stats = world.services.statistics("web")
    assert stats is not None
    assert stats.failures == 0
    assert stats.connections == len(answers)
    # web-a left the endpoints when marked for deletion, before it was even signalled:
    # no connection was ever tried on it after it stopped listening.
    assert stats.retries == 0


async def test_a_refused_endpoint_is_skipped_for_the_next(world: ServiceWorld) -> None:
    store, tmp = world.store, world.tmp
    port = free_port()
    # Ready (no readiness probe) but listening nowhere: every connect to it is refused.
    deaf = process("web-deaf", python(SLEEP_FOREVER), ports=[free_port()])
    deaf["metadata"]["labels"] = {"app": "web"}
    await store.create(deaf)
    await store.create(http_backend("web-ok", free_port(), tmp / "unready"))
    await store.create(service("web", port, {"app": "web"}))
    await wait_for_service(store, "web", lambda o: endpoint_names(o) == ["web-deaf", "web-ok"])
    assert await requests(port, 6) == {"web-ok": 6}
    stats = world.services.statistics("web")
    assert stats is not None
    assert stats.failures == 0
    assert stats.retries == 3  # every other connection tried web-deaf first


async def test_half_close_and_back_pressure(world: ServiceWorld) -> None:
    store = world.store
    port = free_port()
    await store.create(echo_backend("echo", free_port()))
    await store.create(service("echo", port, {"app": "echo"}))
    await wait_for_service(store, "echo", lambda o: endpoint_names(o) == ["echo"])
    payload = b"x" * (8 * 1024 * 1024)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        await writer.drain()
        writer.write_eof()  # the backend answers only once it sees the end of input
        answer = await asyncio.wait_for(reader.read(), timeout=30)
    finally:
        writer.close()
    assert answer == f"got {len(payload)} bytes".encode()


async def test_a_port_in_use_stalls_then_moving_heals_it(world: ServiceWorld) -> None:
    store = world.store
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        await store.create(service("web", busy, {"app": "web"}))
        svc = await wait_for_service(store, "web", lambda o: condition(o, "Ready") != {})
        for type_, value in (("Ready", "False"), ("Stalled", "True")):
            assert condition(svc, type_)["status"] == value
            assert condition(svc, type_)["reason"] == "ListenFailed"
            assert str(busy) in condition(svc, type_)["message"]
        assert world.services.statistics("web") is None

        free = free_port()
        svc["spec"]["port"] = free
        await store.update(svc)
        svc = await wait_for_service(
            store, "web", lambda o: condition(o, "Ready").get("reason") == "NoReadyEndpoints"
        )
        assert condition(svc, "Stalled") == {}
        assert svc["status"]["observedGeneration"] == 2
        assert not refuses(free)


async def test_a_moved_service_listens_on_the_new_port_only(world: ServiceWorld) -> None:
    store, tmp = world.store, world.tmp
    first, second = free_port(), free_port()
    await store.create(http_backend("web-a", free_port(), tmp / "unready"))
    await store.create(service("web", first, {"app": "web"}))
    svc = await wait_for_service(store, "web", ready)
    assert await requests(first, 2) == {"web-a": 2}
    svc["spec"]["port"] = second
    await store.update(svc)
    await wait_for_service(
        store, "web", lambda o: ready(o) and o["status"]["observedGeneration"] == 2
    )
    assert await requests(second, 2) == {"web-a": 2}
    assert refuses(first)


async def test_deleting_the_service_or_stopping_the_engine_closes_the_listener(
    world: ServiceWorld,
) -> None:
    store = world.store
    gone, kept = free_port(), free_port()
    await store.create(service("gone", gone, {"app": "web"}))
    await store.create(service("kept", kept, {"app": "web"}))
    for name in ("gone", "kept"):
        await wait_for_service(store, name, lambda o: condition(o, "Ready") != {})
    assert not refuses(gone)
    await store.delete(SERVICE.api_version, SERVICE.kind, "gone", "default")
    await reconcile_until_stable(world.harness)
    assert refuses(gone)
    assert not refuses(kept)
    await world.harness.stop()
    assert refuses(kept)


async def test_a_failed_listen_is_tried_again_once_the_port_is_free() -> None:
    clock = ManualClock()
    async with Harness(clock=clock) as harness:
        setup_services(harness.manager)
        await harness.start()
        store = harness.store
        taken = socket.socket()
        try:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = taken.getsockname()[1]
            await store.create(service("web", busy, {"app": "web"}))
            await wait_for_service(
                store, "web", lambda o: condition(o, "Stalled").get("reason") == "ListenFailed"
            )
            await reconcile_until_stable(harness)  # the retry is scheduled, not yet due
        finally:
            taken.close()
        clock.advance(LISTEN_RETRY_SECONDS)
        svc = await wait_for_service(store, "web", lambda o: condition(o, "Stalled") == {})
        assert condition(svc, "Ready")["reason"] == "NoReadyEndpoints"
        assert not refuses(busy)
