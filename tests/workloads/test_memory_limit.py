"""`resources.limits.memory` against real children: a child that allocates past its limit
is killed, its exit recorded as `OOMKilled` (status, event, `describe`); one that stays
within it is left alone; a bad quantity is refused naming the field.

Children are `sys.executable -c` scripts that touch the memory they allocate (so it is
resident). Tests wait for the stored state through the store's watch, never by sleeping.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from process_support import (
    SLEEP_FOREVER,
    condition,
    process,
    process_controller,
    python,
    wait_for,
)

from setpoint.cli.describe import describe_object
from setpoint.clock import SYSTEM_CLOCK
from setpoint.errors import Invalid
from setpoint.model import Object
from setpoint.runtime import EVENT
from setpoint.testing import Harness, capture_events
from setpoint.workloads.memory import group_rss
from setpoint.workloads.process import ProcessSettings

GREEDY = """
    import time
    held = [b"x" * (8 << 20) for _ in range(12)]  # 96 MiB, every page written
    print("holding", sum(map(len, held)), flush=True)
    while True: time.sleep(3600)
"""
MODEST = """
    held = b"x" * (4 << 20)
    print("done", len(held), flush=True)
"""


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with Harness(clock=SYSTEM_CLOCK) as harness:
        settings = ProcessSettings(tmp_path / "state", tmp_path / "logs")
        processes = process_controller(harness.manager, settings)
        await harness.start()
        try:
            yield harness
        finally:
            await harness.stop()
            await processes.stop_all(grace=0)


def exited(obj: Object | None) -> bool:
    return bool(((obj or {}).get("status") or {}).get("lastExit"))


async def test_a_child_over_its_memory_limit_is_oom_killed(harness: Harness) -> None:
    store = harness.store
    limited = process(
        "greedy", python(GREEDY), restartPolicy="Never", resources={"limits": {"memory": "32Mi"}}
    )
    async with capture_events(store) as events:
        await store.create(limited)
        obj = await wait_for(store, "greedy", exited, within=60)
        oom = await events.wait_event("OOMKilling", involved_name="greedy")
    assert obj is not None
    last = obj["status"]["lastExit"]
    assert last["reason"] == "OOMKilled"
    assert "over its limit of 32Mi (spec.resources.limits.memory)" in last["message"]
    assert last["signal"] == signal.SIGKILL
    assert last["stoppedOnRequest"] is False
    assert obj["status"]["phase"] == "Failed"
    assert condition(obj, "Ready")["status"] == "False"
    assert "over its limit of 32Mi" in oom.message
    assert "spec.resources.limits.memory" in oom.message
    listed, _ = await store.list(EVENT.api_version, EVENT.kind, "default")
    text = describe_object(obj, [e for e in listed if e["involvedObject"]["name"] == "greedy"], 0)
    assert "reason: OOMKilled" in text
    assert "OOMKilling" in text


async def test_a_child_within_its_limit_is_left_alone(harness: Harness) -> None:
    store = harness.store
    modest = process(
        "modest", python(MODEST), restartPolicy="Never", resources={"limits": {"memory": "1Gi"}}
    )
    await store.create(modest)
    obj = await wait_for(store, "modest", exited, within=60)
    assert obj is not None
    assert obj["status"]["lastExit"]["code"] == 0
    assert obj["status"]["phase"] == "Succeeded"


async def test_a_running_child_has_its_group_memory_counted(harness: Harness) -> None:
    store = harness.store
    await store.create(process("idle", python(SLEEP_FOREVER)))
    obj = await wait_for(store, "idle", lambda o: bool(((o or {}).get("status") or {}).get("pid")))
    assert obj is not None
    pid = obj["status"]["pid"]
    assert group_rss(pid, pid) > 1 << 20  # an interpreter holds megabytes


@pytest.mark.parametrize("bad", ["64MB", "-1Mi", "0", "1m", "lots", "", "1.5.3Gi", True])
async def test_a_bad_memory_limit_is_refused_naming_the_field(
    harness: Harness, bad: object
) -> None:
    manifest = process("bad", python(SLEEP_FOREVER), resources={"limits": {"memory": bad}})
    with pytest.raises(Invalid, match=r"resources\.limits\.memory"):
        await harness.store.create(manifest)


async def test_an_unknown_resource_is_refused(harness: Harness) -> None:
    manifest = process("cpu", python(SLEEP_FOREVER), resources={"limits": {"cpu": "500m"}})
    with pytest.raises(Invalid, match=r"resources\.limits\.cpu"):
        await harness.store.create(manifest)
