"""The Job controller against real child processes, through the test harness.

Attempts are small `sys.executable -c` scripts. Tests wait for the stored state through
the store's watch (`wait_for_job`) or a pidfd, under timeouts, never on the wall clock;
deadline timing runs on a `ManualClock`. Every child is stopped at the end of its test.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from process_support import (
    SLEEP_FOREVER,
    TIMEOUT,
    condition,
    free_port,
    job_controller,
    open_gate,
    process,
    process_controller,
    python,
    serve_after,
    wait_for,
)
from supervisor_support import Notifications, is_alive, kill_group, wait_pid_gone

from setpoint import testing
from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.model import Object
from setpoint.store import Store
from setpoint.testing import Harness, ManualClock, capture_events, reconcile_until_stable
from setpoint.workloads.job import JOB, JobController, JobSettings, setup
from setpoint.workloads.process import ProcessSettings

TINY_BACKOFF = {"initialSeconds": 0.01, "maxSeconds": 0.02}
# Long enough for the reconcile after an exit (which stops what is left of it and waits for
# its last output) to see the back-off still running, even on a loaded machine.
OBSERVABLE_BACKOFF = {"initialSeconds": 0.5, "maxSeconds": 0.5}


def job(name: str, args: list[str], **spec: Any) -> Object:
    return {
        "apiVersion": JOB.api_version,
        "kind": JOB.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"args": args, **spec},
    }


async def get_job(store: Store, name: str) -> Object:
    return await store.get(JOB.api_version, JOB.kind, name, "default")


async def wait_for_job(
    store: Store, name: str, predicate: Callable[[Object | None], bool], *, within: float = TIMEOUT
) -> Object | None:
    """Return the Job `name` (None once deleted) as soon as `predicate` holds for it."""
    return await testing.wait_for(store, JOB, name, predicate, within=within)


def phase(value: str) -> Callable[[Object | None], bool]:
    return lambda o: (o or {}).get("status", {}).get("phase") == value


def running(obj: Object | None) -> bool:
    status = (obj or {}).get("status") or {}
    return status.get("phase") == "Running" and status.get("pid") is not None


def stalled(obj: Object | None) -> bool:
    return condition(obj, "Stalled").get("status") == "True"


@dataclass
class World:
    harness: Harness
    jobs: JobController
    state_dir: Path


async def _world(tmp_path: Path, clock: Clock, url: str = "memory://") -> AsyncIterator[World]:
    async with Harness(clock=clock, url=url) as harness:
        jobs = job_controller(harness.manager, JobSettings(tmp_path / "jobs", tmp_path / "logs"))
        processes = process_controller(
            harness.manager, ProcessSettings(tmp_path / "processes", tmp_path / "logs")
        )
        await harness.start()
        try:
            yield World(harness, jobs, tmp_path / "jobs")
        finally:
            await harness.stop()
            await jobs.stop_all(grace=0)
            await processes.stop_all(grace=0)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async for w in _world(tmp_path, SYSTEM_CLOCK):
        yield w


@pytest.fixture
async def durable(tmp_path: Path) -> AsyncIterator[World]:
    """On a SQLite store: every status write waits for the disk, long enough for a quick
    child to end meanwhile."""
    async for w in _world(tmp_path, SYSTEM_CLOCK, f"sqlite:///{tmp_path / 'state.db'}"):
        yield w


@pytest.fixture
async def manual(tmp_path: Path) -> AsyncIterator[tuple[World, ManualClock]]:
    clock = ManualClock()
    async for w in _world(tmp_path, clock):
        yield w, clock


def counting_script(counter: Path, fail_times: int) -> list[str]:
    """argv of an attempt that fails (exit 1) its first `fail_times` runs, then exits 0."""
    code = f"""
        from pathlib import Path
        counter = Path({str(counter)!r})
        runs = int(counter.read_text()) if counter.exists() else 0
        counter.write_text(str(runs + 1))
        raise SystemExit(1 if runs < {fail_times} else 0)
    """
    return python(code)


async def test_a_job_that_exits_zero_completes_once(world: World, tmp_path: Path) -> None:
    store = world.harness.store
    counter = tmp_path / "runs"
    async with capture_events(store) as events:
        await store.create(job("migrate", counting_script(counter, 0)))
        obj = await wait_for_job(store, "migrate", phase("Succeeded"))
        await events.wait_event("Started", involved_name="migrate")
        await events.wait_event("Completed", involved_name="migrate")
    await reconcile_until_stable(world.harness)
    obj = await get_job(store, "migrate")
    status = obj["status"]
    assert status["phase"] == "Succeeded"
    assert status["attempts"] == 1
    assert status["failed"] == 0
    assert status["lastExit"]["code"] == 0
    assert status["startTime"]
    assert status["completionTime"]
    assert status["observedGeneration"] == 1
    assert "pid" not in status
    assert condition(obj, "Complete")["status"] == "True"
    assert condition(obj, "Ready")["status"] == "True"
    assert condition(obj, "Failed") == {}
    assert "setpoint.dev/job" in obj["metadata"]["finalizers"]
    assert counter.read_text() == "1"  # run once, not restarted
    assert world.jobs.pids() == {}
    assert not list(world.state_dir.glob("*.json"))
    assert (tmp_path / "logs" / "default_migrate.log").exists()


async def test_failures_are_retried_until_it_succeeds(world: World, tmp_path: Path) -> None:
    store = world.harness.store
    async with capture_events(store) as events:
        await store.create(
            job("migrate", counting_script(tmp_path / "runs", 2), backoff=OBSERVABLE_BACKOFF)
        )
        obj = await wait_for_job(store, "migrate", phase("Succeeded"))
        await events.wait_event("BackOff", involved_name="migrate")
    assert obj is not None
    status = obj["status"]
    assert status["failed"] == 2
    assert status["attempts"] == 3
    assert condition(obj, "Complete")["status"] == "True"
    assert (tmp_path / "runs").read_text() == "3"


async def test_exceeding_the_backoff_limit_fails_and_stalls(world: World) -> None:
    store = world.harness.store
    async with capture_events(store) as events:
        await store.create(
            job("migrate", python("raise SystemExit(3)"), backoffLimit=1, backoff=TINY_BACKOFF)
        )
        obj = await wait_for_job(store, "migrate", lambda o: phase("Failed")(o) and stalled(o))
        await events.wait_event("Failed", involved_name="migrate")
    assert obj is not None
    status = obj["status"]
    assert status["attempts"] == 2
    assert status["failed"] == 2
    assert status["lastExit"]["code"] == 3
    assert condition(obj, "Failed")["status"] == "True"
    assert condition(obj, "Failed")["reason"] == "BackoffLimitExceeded"
    assert condition(obj, "Stalled")["reason"] == "BackoffLimitExceeded"
    assert condition(obj, "Complete")["status"] == "False"
    assert condition(obj, "Ready")["status"] == "False"
    await reconcile_until_stable(world.harness)
    obj = await get_job(store, "migrate")
    assert obj["status"]["attempts"] == 2  # not run again
    assert stalled(obj)


async def test_an_attempt_that_ends_at_once_is_recorded_with_its_exit_code(
    durable: World,
) -> None:
    """A shell that exits at once may end before the reconcile that started it has
    finished: its exit is still recorded as its own (never as an unknown one), with the
    last line it wrote."""
    store = durable.harness.store
    script = "echo starting; echo 'initdb: not found' >&2; exit 3"
    await store.create(job("quick", ["sh", "-c", script], backoffLimit=3, backoff=TINY_BACKOFF))
    obj = await wait_for_job(store, "quick", phase("Failed"))
    assert obj is not None
    assert obj["status"]["attempts"] == 4
    assert obj["status"]["lastExit"]["code"] == 3
    # the last line it wrote says why, as Kubernetes' FallbackToLogsOnError does
    assert obj["status"]["lastExit"]["reason"] == "exited with code 3: initdb: not found"
    assert "unknown" not in condition(obj, "Failed")["message"]


async def test_the_deadline_stops_the_attempt_and_fails(
    manual: tuple[World, ManualClock],
) -> None:
    world, clock = manual
    store = world.harness.store
    async with capture_events(store) as events:
        await store.create(
            job(
                "migrate",
                python(SLEEP_FOREVER),
                activeDeadlineSeconds=30,
                terminationGracePeriodSeconds=5,
            )
        )
        obj = await wait_for_job(store, "migrate", running)
        assert obj is not None
        pid = obj["status"]["pid"]
        await reconcile_until_stable(world.harness)  # the deadline's look-again is scheduled
        clock.advance(29)
        await reconcile_until_stable(world.harness)
        assert is_alive(pid)
        clock.advance(1)
        obj = await wait_for_job(store, "migrate", lambda o: phase("Failed")(o) and stalled(o))
        await events.wait_event("DeadlineExceeded", involved_name="migrate")
    await wait_pid_gone(pid)
    assert obj is not None
    status = obj["status"]
    assert condition(obj, "Failed")["reason"] == "DeadlineExceeded"
    assert condition(obj, "Stalled")["reason"] == "DeadlineExceeded"
    assert "pid" not in status
    assert status["lastExit"]["stoppedOnRequest"] is True
    assert "activeDeadlineSeconds" in status["lastExit"]["stopReason"]
    assert world.jobs.pids() == {}


async def test_depends_on_a_process_starts_only_once_it_is_ready(
    world: World, tmp_path: Path
) -> None:
    store = world.harness.store
    port = free_port()
    gate = Notifications(tmp_path / "gate")
    counter = tmp_path / "runs"
    try:
        await store.create(
            job(
                "migrate",
                counting_script(counter, 0),
                dependsOn=[{"kind": "Process", "name": "db"}],
            )
        )
        obj = await wait_for_job(store, "migrate", phase("Waiting"))
        assert condition(obj, "Ready")["reason"] == "WaitingForDependency"
        assert "Process/db" in condition(obj, "Ready")["message"]

        probe = {"tcpSocket": {"port": port}, "periodSeconds": 1}
        await store.create(process("db", serve_after(gate.path, port), readinessProbe=probe))
        await wait_for(store, "db", lambda o: (o or {}).get("status", {}).get("phase") == "Running")
        await reconcile_until_stable(world.harness)
        obj = await get_job(store, "migrate")
        assert obj["status"]["phase"] == "Waiting"
        assert "Process/db is not Ready" in condition(obj, "Ready")["message"]
        assert not counter.exists()

        open_gate(gate.path)
        obj = await wait_for_job(store, "migrate", phase("Succeeded"))
        assert counter.read_text() == "1"
    finally:
        gate.close()


async def test_depends_on_another_job_complete(world: World, tmp_path: Path) -> None:
    store = world.harness.store
    gate = Notifications(tmp_path / "gate")
    try:
        first = python(f"open({str(gate.path)!r}).readline()")
        await store.create(
            job(
                "seed",
                python("pass"),
                dependsOn=[{"kind": "Job", "name": "init", "condition": "Complete"}],
            )
        )
        await store.create(job("init", first))
        await wait_for_job(store, "init", running)
        obj = await wait_for_job(store, "seed", phase("Waiting"))
        assert "Job/init" in condition(obj, "Ready")["message"]
        open_gate(gate.path)
        await wait_for_job(store, "seed", phase("Succeeded"))
    finally:
        gate.close()


async def test_a_spec_change_runs_a_finished_job_again(world: World, tmp_path: Path) -> None:
    store = world.harness.store
    counter = tmp_path / "runs"
    await store.create(job("migrate", counting_script(counter, 0)))
    obj = await wait_for_job(store, "migrate", phase("Succeeded"))
    assert obj is not None
    obj["spec"]["env"] = {"VERSION": "2"}
    await store.update(obj)
    obj = await wait_for_job(
        store,
        "migrate",
        lambda o: (
            phase("Succeeded")(o) and o is not None and o["status"]["observedGeneration"] == 2
        ),
    )
    assert obj is not None
    assert obj["status"]["attempts"] == 1
    assert counter.read_text() == "2"


async def test_deleting_a_running_job_stops_its_process(world: World) -> None:
    store = world.harness.store
    await store.create(job("migrate", python(SLEEP_FOREVER), terminationGracePeriodSeconds=5))
    obj = await wait_for_job(store, "migrate", running)
    assert obj is not None
    pid = obj["status"]["pid"]
    await store.delete(JOB.api_version, JOB.kind, "migrate", "default")
    assert await wait_for_job(store, "migrate", lambda o: o is None) is None
    await wait_pid_gone(pid)
    assert not (world.state_dir / "default_migrate.json").exists()


async def test_a_new_engine_adopts_the_running_attempt(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    state_dir, log_dir = tmp_path / "jobs", tmp_path / "logs"
    pid = None
    try:
        async with Harness(url=url) as harness:
            first = job_controller(harness.manager, JobSettings(state_dir, log_dir))
            await harness.start()
            await harness.store.create(job("migrate", python(SLEEP_FOREVER)))
            obj = await wait_for_job(harness.store, "migrate", running)
            assert obj is not None
            pid = obj["status"]["pid"]
            await harness.stop()
        await first.detach()  # as if the engine had died: the attempt keeps running
        assert is_alive(pid)

        async with Harness(url=url) as harness:
            setup(harness.manager, JobSettings(state_dir, log_dir))
            await harness.start()
            await reconcile_until_stable(harness)
            obj = await get_job(harness.store, "migrate")
            assert obj["status"]["pid"] == pid
            assert obj["status"]["attempts"] == 1
            assert obj["status"]["phase"] == "Running"
            assert is_alive(pid)
            await harness.store.delete(JOB.api_version, JOB.kind, "migrate", "default")
            await wait_for_job(harness.store, "migrate", lambda o: o is None)
            await wait_pid_gone(pid)
    finally:
        if pid is not None and is_alive(pid):
            kill_group(pid)


async def test_a_process_waits_for_a_job_to_complete(world: World, tmp_path: Path) -> None:
    """`web dependsOn migrate Complete`: the Process starts only once the Job completed, woken
    by the Job's change (no resync)."""
    store = world.harness.store
    marker = tmp_path / "migrated"
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    migrate = python(f"open({str(gate)!r}).readline(); open({str(marker)!r}, 'w').close()")
    await store.create(job("migrate", migrate))
    web = process("web", python(SLEEP_FOREVER))
    web["spec"]["dependsOn"] = [{"kind": "Job", "name": "migrate", "condition": "Complete"}]
    await store.create(web)
    waiting = await wait_for(store, "web", lambda o: condition(o, "Ready").get("reason")
                             == "WaitingForDependency")  # fmt: skip
    assert "Job/migrate" in condition(waiting, "Ready")["message"]
    await wait_for_job(store, "migrate", running)
    open_gate(gate)
    started = await wait_for(store, "web", running)
    assert marker.exists()
    assert started is not None
