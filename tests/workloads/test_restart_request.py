"""A restart request (the annotation `setpoint restart` sets) is honoured once per value: a
running Process's child is replaced, a finished one runs again whatever its restart policy,
a Job runs again from scratch; afterwards nothing more is written.

Real child processes; time runs on a `ManualClock`; store revisions measure the quiet.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

from process_support import SLEEP_FOREVER, condition, process, python, wait_for
from supervisor_support import is_alive
from test_children import World, job, world, writes_while_time_passes

from setpoint import testing
from setpoint.model import Object
from setpoint.model.wellknown import RESTARTED_AT
from setpoint.workloads.job import JOB
from setpoint.workloads.process import PROCESS

__all__ = ["world"]  # the fixture, used by name

APPENDS = "import sys\nwith open(sys.argv[1], 'a') as f: f.write('ran\\n')"


async def request_restart(world: World, kind_name: str, name: str, stamp: str) -> None:
    kind = PROCESS if kind_name == "Process" else JOB
    store = world.harness.store
    obj = copy.deepcopy(await store.get(kind.api_version, kind.kind, name, "default"))
    obj["metadata"].setdefault("annotations", {})[RESTARTED_AT] = stamp
    await store.update(obj)


def restarted(stamp: str) -> Callable[[Object | None], bool]:
    def check(obj: Object | None) -> bool:
        status = (obj or {}).get("status") or {}
        return status.get("restartedAt") == stamp and bool(status.get("pid"))

    return check


async def test_a_running_process_is_restarted_once_per_request(world: World) -> None:
    store = world.harness.store
    await store.create(process("web", python(SLEEP_FOREVER)))
    obj = await wait_for(store, "web", lambda o: bool((o or {}).get("status", {}).get("pid")))
    assert obj is not None
    first = obj["status"]["pid"]

    await request_restart(world, "Process", "web", "t1")
    obj = await wait_for(store, "web", restarted("t1"))
    assert obj is not None
    second = obj["status"]["pid"]
    assert second != first
    assert not is_alive(first)
    assert obj["status"]["restarts"] == 0  # asked for, not a crash
    assert condition(obj, "Ready")["status"] == "True"
    assert await writes_while_time_passes(world) == 0
    assert world.processes.pids() == {("default", "web"): second}

    await request_restart(world, "Process", "web", "t2")  # a new value: once more
    obj = await wait_for(store, "web", restarted("t2"))
    assert obj is not None
    assert obj["status"]["pid"] != second
    assert not is_alive(second)
    assert await writes_while_time_passes(world) == 0


async def test_a_finished_process_runs_again_whatever_its_restart_policy(
    world: World, tmp_path: Path
) -> None:
    store = world.harness.store
    runs = tmp_path / "runs"
    await store.create(process("once", python(APPENDS, str(runs)), restartPolicy="Never"))
    await wait_for(store, "once", lambda o: (o or {}).get("status", {}).get("phase") == "Succeeded")

    await request_restart(world, "Process", "once", "t1")

    def ran_again(obj: Object | None) -> bool:
        status = (obj or {}).get("status") or {}
        return status.get("restartedAt") == "t1" and status.get("phase") == "Succeeded"

    await wait_for(store, "once", ran_again)
    assert runs.read_text() == "ran\nran\n"
    assert await writes_while_time_passes(world) == 0
    assert runs.read_text() == "ran\nran\n"


async def test_a_completed_job_runs_again_from_scratch_once(world: World, tmp_path: Path) -> None:
    store = world.harness.store
    runs = tmp_path / "runs"
    await store.create(job("migrate", python(APPENDS, str(runs))))

    def complete(stamp: str | None) -> Callable[[Object | None], bool]:
        def check(obj: Object | None) -> bool:
            status = (obj or {}).get("status") or {}
            done = condition(obj, "Complete").get("status") == "True"
            return done and status.get("restartedAt") == stamp

        return check

    await testing.wait_for(store, JOB, "migrate", complete(None))
    await request_restart(world, "Job", "migrate", "t1")
    obj = await testing.wait_for(store, JOB, "migrate", complete("t1"))
    assert obj is not None
    assert obj["status"]["attempts"] == 1
    assert runs.read_text() == "ran\nran\n"
    assert await writes_while_time_passes(world) == 0
    assert runs.read_text() == "ran\nran\n"
