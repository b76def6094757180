"""`spec.suspend` on a Job (as Kubernetes' batch/v1 Job; `setpoint stop` sets it, `setpoint
start` clears it): a suspended Job starts no attempt, a running attempt is stopped and counts
neither as failed nor as completed, the Job says so (phase Suspended, `Suspended` True with
reason `JobSuspended`) and then writes nothing; resuming runs it to completion; a Job that
has finished is left as it is; a dependent of a suspended Job waits.

Real child processes; time runs on a `ManualClock`; store revisions measure the quiet.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

from process_support import condition, python
from supervisor_support import Notifications, is_alive, wait_pid_gone
from test_children import QUIET_SECONDS, World, job, world

from setpoint import testing
from setpoint.model import Object
from setpoint.runtime.reconciler import Request
from setpoint.store import Store
from setpoint.testing import capture_events, reconcile_until_stable
from setpoint.workloads.job import JOB

__all__ = ["world"]  # the fixture, used by name


async def set_suspend(store: Store, name: str, suspend: bool) -> None:
    obj = copy.deepcopy(await store.get(JOB.api_version, JOB.kind, name, "default"))
    obj["spec"]["suspend"] = suspend
    await store.update(obj)


async def wait_for_job(
    store: Store, name: str, predicate: Callable[[Object | None], bool]
) -> Object:
    obj = await testing.wait_for(store, JOB, name, predicate)
    assert obj is not None
    return obj


def phase(value: str) -> Callable[[Object | None], bool]:
    return lambda o: ((o or {}).get("status") or {}).get("phase") == value


def suspended(obj: Object | None) -> bool:
    return phase("Suspended")(obj) and condition(obj, "Suspended").get("status") == "True"


async def writes_while_resynced(world: World, *names: str) -> int:
    """The store revisions written while `QUIET_SECONDS` pass, a second at a time, each
    second every Job of `names` reconciled again (as a resync does) until stable."""
    await reconcile_until_stable(world.harness)
    before = await world.harness.store.revision()
    controller = world.jobs.controller
    assert controller is not None
    for _ in range(QUIET_SECONDS):
        world.clock.advance(1)
        for name in names:
            controller.enqueue(Request(name, "default"))
        await reconcile_until_stable(world.harness)
    return await world.harness.store.revision() - before


def counted_run(counter: Path, notes: Path | None = None) -> list[str]:
    """argv of an attempt that counts its runs in `counter`. With `notes`, the first run
    says `up` there and waits, exiting 0 on SIGTERM (as many programs do); every other
    run exits 0 at once."""
    wait = ""
    if notes is not None:
        wait = f"""
        if runs == 0:
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            with open({str(notes)!r}, "w") as f:
                f.write("up\\n")
            while True:
                time.sleep(3600)
        """
    code = f"""
        import signal, sys, time
        from pathlib import Path
        counter = Path({str(counter)!r})
        runs = int(counter.read_text()) if counter.exists() else 0
        counter.write_text(str(runs + 1))
        {wait.strip()}
    """
    return python(code)


def reason_of(obj: Object | None, type_: str) -> tuple[str, str, str]:
    found = condition(obj, type_)
    return found.get("status", ""), found.get("reason", ""), found.get("message", "")


async def test_a_job_created_suspended_starts_only_once_resumed(
    world: World, tmp_path: Path
) -> None:
    store = world.harness.store
    counter = tmp_path / "runs"
    await store.create(job("migrate", counted_run(counter), suspend=True))
    obj = await wait_for_job(store, "migrate", suspended)
    assert reason_of(obj, "Suspended") == ("True", "JobSuspended", "Job suspended")
    assert reason_of(obj, "Complete")[:2] == ("False", "Suspended")
    assert reason_of(obj, "Ready")[:2] == ("False", "Suspended")
    assert obj["status"]["attempts"] == 0
    assert "startTime" not in obj["status"]
    assert await writes_while_resynced(world, "migrate") == 0
    assert not counter.exists()  # never started
    assert world.jobs.pids() == {}

    async with capture_events(store) as events:
        await set_suspend(store, "migrate", False)
        obj = await wait_for_job(store, "migrate", phase("Succeeded"))
        await events.wait_event("Resumed", involved_name="migrate")
    assert counter.read_text() == "1"
    assert reason_of(obj, "Suspended") == ("False", "JobResumed", "Job resumed")
    assert reason_of(obj, "Complete")[0] == "True"
    assert obj["status"]["attempts"] == 1


async def test_suspending_a_running_job_stops_its_attempt_without_a_failure(
    world: World, tmp_path: Path
) -> None:
    """backoffLimit 0: were the stopped attempt counted as failed, the Job would have
    Failed; it exits 0 on SIGTERM: were it counted as completed, the Job would have
    Succeeded. Neither: it is Suspended, and resumed it runs to completion."""
    store = world.harness.store
    counter, notes = tmp_path / "runs", Notifications(tmp_path / "notes")
    try:
        spec = {"backoffLimit": 0, "terminationGracePeriodSeconds": 5}
        await store.create(job("migrate", counted_run(counter, notes.path), **spec))
        assert await notes.line() == "up"
        obj = await wait_for_job(store, "migrate", lambda o: phase("Running")(o) and
                                 bool(o and o["status"].get("pid")))  # fmt: skip
        pid = obj["status"]["pid"]

        async with capture_events(store) as events:
            await set_suspend(store, "migrate", True)
            obj = await wait_for_job(store, "migrate", suspended)
            await events.wait_event("Suspended", involved_name="migrate")
        await wait_pid_gone(pid)
        assert not is_alive(pid)
        status = obj["status"]
        assert "pid" not in status
        assert (status["attempts"], status["failed"]) == (1, 0)
        assert status["lastExit"]["stoppedOnRequest"] is True
        assert status["lastExit"]["code"] == 0  # it exited 0: not a completion all the same
        assert "spec.suspend" in status["lastExit"]["stopReason"]
        assert "startTime" not in status  # the deadline counts again from the next attempt
        assert reason_of(obj, "Suspended") == ("True", "JobSuspended", "Job suspended")
        assert reason_of(obj, "Complete")[:2] == ("False", "Suspended")
        assert condition(obj, "Failed") == {}
        assert condition(obj, "Stalled") == {}
        assert await writes_while_resynced(world, "migrate") == 0
        assert world.jobs.pids() == {}
        assert counter.read_text() == "1"

        await set_suspend(store, "migrate", False)
        obj = await wait_for_job(store, "migrate", phase("Succeeded"))
        assert counter.read_text() == "2"
        status = obj["status"]
        assert (status["attempts"], status["failed"]) == (2, 0)
        assert status["startTime"]
        assert reason_of(obj, "Suspended")[:2] == ("False", "JobResumed")
        assert reason_of(obj, "Complete")[0] == "True"
    finally:
        notes.close()


async def test_a_job_waits_for_a_dependency_that_is_suspended(world: World, tmp_path: Path) -> None:
    store = world.harness.store
    await store.create(job("init", counted_run(tmp_path / "init"), suspend=True))
    await store.create(
        job(
            "seed",
            counted_run(tmp_path / "seed"),
            dependsOn=[{"kind": "Job", "name": "init", "condition": "Complete"}],
        )
    )
    await wait_for_job(store, "init", suspended)
    obj = await wait_for_job(store, "seed", phase("Waiting"))
    assert "Job/init is not Complete: Suspended" in reason_of(obj, "Ready")[2]
    assert await writes_while_resynced(world, "init", "seed") == 0
    assert not (tmp_path / "seed").exists()

    await set_suspend(store, "init", False)
    await wait_for_job(store, "seed", phase("Succeeded"))
    assert (tmp_path / "init").read_text() == "1"
    assert (tmp_path / "seed").read_text() == "1"


async def test_a_finished_job_is_neither_suspended_nor_run_again(
    world: World, tmp_path: Path
) -> None:
    """As Kubernetes' Job: suspending a Job that has completed changes nothing; and
    stopping and starting it is no change of its spec, so it does not run again (its
    `startedGeneration` follows, so `Started` and `Completed` dependencies still hold)."""
    store = world.harness.store
    counter = tmp_path / "runs"
    await store.create(job("migrate", counted_run(counter)))
    done = (await wait_for_job(store, "migrate", phase("Succeeded")))["status"]
    for suspend in (True, False):
        async with capture_events(store) as events:
            await set_suspend(store, "migrate", suspend)
            await reconcile_until_stable(world.harness)
        assert [e.reason for e in events.events] == []  # not suspended, not completed again
        obj = await store.get(JOB.api_version, JOB.kind, "migrate", "default")
        status = obj["status"]
        assert status["phase"] == "Succeeded"
        assert status["observedGeneration"] == status["startedGeneration"]
        assert status["startedGeneration"] == obj["metadata"]["generation"]
        assert condition(obj, "Suspended") == {}
        assert reason_of(obj, "Complete")[0] == "True"
        assert status["completionTime"] == done["completionTime"]  # not completed again
    assert counter.read_text() == "1"
