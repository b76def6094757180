"""A Service that cannot listen (another program holds its port) is reported once, then
left alone: it stays `Stalled=True`, tries the port again every `LISTEN_RETRY_SECONDS`,
and the store gets no write while the port stays taken. Time is a manual clock."""

from __future__ import annotations

import socket

from process_support import condition
from service_support import service, wait_for_service
from writes_support import writes_since

from setpoint.testing import Harness, ManualClock, reconcile_until_stable
from setpoint.workloads.service import LISTEN_RETRY_SECONDS
from setpoint.workloads.service import setup as setup_services


async def test_a_service_that_cannot_listen_writes_nothing_until_the_port_is_free() -> None:
    clock = ManualClock()
    async with Harness(clock=clock) as harness:
        setup_services(harness.manager)
        await harness.start()
        store = harness.store
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = taken.getsockname()[1]
            await store.create(service("web", busy, {"app": "web"}))
            await wait_for_service(
                store, "web", lambda o: condition(o, "Stalled").get("reason") == "ListenFailed"
            )
            await reconcile_until_stable(harness)
            stalled = await wait_for_service(store, "web", lambda o: o is not None)

            since = await store.revision()
            for _ in range(10):  # ten seconds, a second at a time: two more tries
                clock.advance(1)
                await reconcile_until_stable(harness)
            assert await writes_since(store, since) == []
            now = await wait_for_service(store, "web", lambda o: o is not None)
            assert now["status"] == stalled["status"]

        clock.advance(LISTEN_RETRY_SECONDS)  # the port is free: the next try listens
        svc = await wait_for_service(store, "web", lambda o: condition(o, "Stalled") == {})
        assert condition(svc, "Ready")["reason"] == "NoReadyEndpoints"
