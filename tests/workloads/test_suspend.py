"""`spec.suspend` on a Process (as a Kubernetes Job's; `setpoint stop` sets it, `setpoint
start` clears it): a running child is stopped and none is started, whatever the restart
policy, and the Process says so (`Ready=False`, reason `Suspended`) and then writes nothing;
clearing it starts a child again.

Real child processes; time runs on a `ManualClock`; store revisions measure the quiet.
"""

from __future__ import annotations

import copy

from process_support import SLEEP_FOREVER, condition, process, python, wait_for
from supervisor_support import is_alive
from test_children import World, world, writes_while_time_passes

from setpoint.model import Object
from setpoint.workloads.process import PROCESS

__all__ = ["world"]  # the fixture, used by name


async def set_suspend(world: World, name: str, suspend: bool) -> None:
    store = world.harness.store
    obj = copy.deepcopy(await store.get(PROCESS.api_version, PROCESS.kind, name, "default"))
    obj["spec"]["suspend"] = suspend
    await store.update(obj)


def suspended(obj: Object | None) -> bool:
    status = (obj or {}).get("status") or {}
    return status.get("phase") == "Suspended" and condition(obj, "Ready")["reason"] == "Suspended"


def running(obj: Object | None) -> bool:
    return bool(((obj or {}).get("status") or {}).get("pid"))


async def test_a_suspended_process_is_stopped_quietly_and_resumed(world: World) -> None:
    store = world.harness.store
    await store.create(process("web", python(SLEEP_FOREVER), restartPolicy="Always"))
    obj = await wait_for(store, "web", running)
    assert obj is not None
    first = obj["status"]["pid"]

    await set_suspend(world, "web", True)
    obj = await wait_for(store, "web", suspended)
    assert obj is not None
    assert not is_alive(first)
    assert "pid" not in obj["status"]
    assert condition(obj, "Ready")["status"] == "False"
    assert obj["status"]["lastExit"]["stoppedOnRequest"] is True
    assert obj["status"]["restarts"] == 0  # asked for, not a crash
    assert await writes_while_time_passes(world) == 0  # restartPolicy Always: not restarted
    assert world.processes.pids() == {}

    await set_suspend(world, "web", False)
    obj = await wait_for(
        store, "web", lambda o: running(o) and condition(o, "Ready")["status"] == "True"
    )
    assert obj is not None
    assert obj["status"]["phase"] == "Running"
    assert world.processes.pids() == {("default", "web"): obj["status"]["pid"]}


async def test_a_process_created_suspended_never_starts(world: World) -> None:
    store = world.harness.store
    await store.create(process("idle", python(SLEEP_FOREVER), suspend=True))
    obj = await wait_for(store, "idle", suspended)
    assert obj is not None
    assert await writes_while_time_passes(world) == 0
    assert world.processes.pids() == {}
