"""One engine per store, decided by the engine lease: who holds it, and when another engine
may take it over (a dead holder on this host at once; one on another host only after its
lease expired on our own clock)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from typing import Any

import pytest

from setpoint import runtime
from setpoint.engine import ENGINE_LEASE, EngineHolder, claim_engine_lease
from setpoint.errors import EngineRunning
from setpoint.model import Registry
from setpoint.runtime.leases import LEASE, micro_time
from setpoint.store import Store, open_store
from setpoint.testing import ManualClock

URL = "memory://"
TIMEOUT = 10.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def store(clock: ManualClock) -> Any:
    registry = Registry()
    runtime.register(registry)
    opened = await open_store(URL, registry, clock=clock)
    yield opened
    await opened.close()


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


async def holder_of(store: Store) -> str:
    lease = await store.get(LEASE.api_version, LEASE.kind, ENGINE_LEASE, "default")
    return str(lease["spec"].get("holderIdentity") or "")


async def claim(store: Store, holder: EngineHolder, clock: ManualClock) -> None:
    await claim_engine_lease(store, holder, store_url=URL, clock=clock)


def test_an_identity_names_host_pid_and_start_time() -> None:
    holder = EngineHolder("build_host_7", 1234, 987654)
    assert EngineHolder.parse(holder.identity) == holder
    assert str(holder) == "pid 1234 on host build_host_7"
    assert EngineHolder.parse("myhost_4f2a9c") is None  # a manager's identity, not an engine's
    this = EngineHolder.this_process()
    assert (this.host, this.pid, this.on_this_host, this.runs()) == (
        socket.gethostname(),
        os.getpid(),
        True,
        True,
    )


async def test_a_second_engine_is_refused_while_the_first_runs(
    store: Store, clock: ManualClock
) -> None:
    first = EngineHolder.this_process()
    await claim(store, first, clock)
    second = EngineHolder(first.host, dead_pid(), 1)  # any other identity
    with pytest.raises(EngineRunning) as refused:
        await claim(store, second, clock)
    assert refused.value.holder == f"pid {os.getpid()} on host {socket.gethostname()}"
    assert str(refused.value).startswith(
        f"an engine (pid {os.getpid()} on host {socket.gethostname()}) already runs on memory://"
    )
    assert await holder_of(store) == first.identity


async def test_a_dead_holder_on_this_host_is_taken_over_at_once(
    store: Store, clock: ManualClock
) -> None:
    crashed = EngineHolder(socket.gethostname(), dead_pid(), 1)
    await claim(store, crashed, clock)
    reused = EngineHolder(socket.gethostname(), os.getpid(), 1)  # a live pid, another start
    this = EngineHolder.this_process()
    for dead in (crashed, reused):
        await claim(store, dead, clock)
        await claim(store, this, clock)  # no time passes: taken over at once
        assert await holder_of(store) == this.identity
        await store.delete(LEASE.api_version, LEASE.kind, ENGINE_LEASE, "default")


async def test_a_holder_on_another_host_is_taken_over_only_once_expired(
    store: Store, clock: ManualClock
) -> None:
    elsewhere = EngineHolder("another-host", 4321, 5)
    await claim(store, elsewhere, clock)
    this = EngineHolder.this_process()
    with pytest.raises(EngineRunning, match=r"pid 4321 on host another-host"):
        await claim(store, this, clock)  # renewed just now: it runs

    # It stopped renewing a while ago (by its timestamp): wait for the lease to expire on
    # our clock, then take it over.
    lease = await store.get(LEASE.api_version, LEASE.kind, ENGINE_LEASE, "default")
    lease["spec"]["renewTime"] = micro_time(clock.now() - 3600)
    await store.update(lease)
    claiming = asyncio.create_task(claim(store, this, clock))
    await asyncio.wait_for(clock.wait_sleepers(), TIMEOUT)
    assert await holder_of(store) == elsewhere.identity
    while not claiming.done():  # move time on whenever the claim waits for it
        parked = asyncio.ensure_future(clock.wait_sleepers())
        await asyncio.wait_for(
            asyncio.wait({claiming, parked}, return_when=asyncio.FIRST_COMPLETED), TIMEOUT
        )
        parked.cancel()
        if not claiming.done():
            clock.advance(15)
    await claiming
    assert await holder_of(store) == this.identity
    assert clock.monotonic() >= 60  # not before its duration had passed unchanged
