"""The child lifecycle that Process and Job share, against real child processes: stuck
objects write nothing, OS failures at start are retried (and say why), re-adopted
children show their real pid, and exits stopped on request say so in a field.

Time runs on a `ManualClock` where the controllers are clock driven; the store's revision
is the measure of quiet (every write is one revision).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from process_support import (
    SLEEP_FOREVER,
    condition,
    job_controller,
    process,
    process_controller,
    python,
    wait_for,
)
from supervisor_support import is_alive, kill_group, listing
from writes_support import writes_since

from setpoint import testing
from setpoint.clock import Clock
from setpoint.errors import Invalid
from setpoint.model import Object
from setpoint.runtime.reconciler import Request
from setpoint.testing import Harness, ManualClock, reconcile_until_stable
from setpoint.workloads import supervisor
from setpoint.workloads.child_plan import ENVIRONMENT_BACKOFF
from setpoint.workloads.children import ChildSettings
from setpoint.workloads.job import JOB, JobController
from setpoint.workloads.process import PROCESS, ProcessController

QUIET_SECONDS = 10


@dataclass
class World:
    harness: Harness
    clock: ManualClock
    processes: ProcessController
    jobs: JobController


async def _world(
    clock: Clock, process_dirs: ChildSettings, job_dirs: ChildSettings, url: str = "memory://"
) -> AsyncIterator[tuple[Harness, ProcessController, JobController]]:
    async with Harness(clock=clock, url=url) as harness:
        processes = process_controller(harness.manager, process_dirs)
        jobs = job_controller(harness.manager, job_dirs)
        await harness.start()
        try:
            yield harness, processes, jobs
        finally:
            await harness.stop()
            await jobs.stop_all(grace=0)
            await processes.stop_all(grace=0)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    clock = ManualClock()
    process_dirs = ChildSettings(tmp_path / "processes", tmp_path / "logs")
    job_dirs = ChildSettings(tmp_path / "jobs", tmp_path / "logs")
    async for harness, processes, jobs in _world(clock, process_dirs, job_dirs):
        yield World(harness, clock, processes, jobs)


def job(name: str, args: list[str], **spec: object) -> Object:
    return {
        "apiVersion": JOB.api_version,
        "kind": JOB.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"args": args, **spec},
    }


def stalled(obj: Object | None) -> bool:
    return condition(obj, "Stalled").get("status") == "True"


async def writes_while_time_passes(world: World, seconds: int = QUIET_SECONDS) -> int:
    """The store revisions written while `seconds` pass, one second at a time, each second
    waited out until the controllers (and any probe, back asleep) have nothing left to do."""
    await reconcile_until_stable(world.harness)
    sleepers = world.clock.waiting()
    before = await world.harness.store.revision()
    for _ in range(seconds):
        world.clock.advance(1)
        await asyncio.wait_for(world.clock.wait_sleepers(sleepers), 10)
        await reconcile_until_stable(world.harness)
    return await world.harness.store.revision() - before


# -- quiet when nothing changes ------------------------------------------------------------


async def test_a_job_past_its_backoff_limit_writes_nothing(world: World) -> None:
    store = world.harness.store
    await store.create(job("migrate", python("raise SystemExit(3)"), backoffLimit=0))
    obj = await testing.wait_for(store, JOB, "migrate", stalled)
    assert obj is not None
    assert condition(obj, "Failed")["reason"] == "BackoffLimitExceeded"
    assert await writes_while_time_passes(world) == 0
    obj = await store.get(JOB.api_version, JOB.kind, "migrate", "default")
    assert obj["status"]["attempts"] == 1
    assert stalled(obj)


async def test_a_process_whose_command_is_missing_writes_nothing(world: World) -> None:
    store = world.harness.store
    await store.create(process("nope", ["/nonexistent/command"]))
    obj = await wait_for(store, "nope", stalled)
    assert obj is not None
    assert obj["status"]["phase"] == "Failed"
    ready = condition(obj, "Ready")
    assert (ready["reason"], ready["status"]) == ("StartFailed", "False")
    assert "/nonexistent/command" in ready["message"]
    assert await writes_while_time_passes(world) == 0


async def test_probe_results_that_do_not_change_write_nothing(world: World) -> None:
    store = world.harness.store
    probe = {"exec": {"command": ["true"]}, "periodSeconds": 1}
    liveness = {"exec": {"command": ["true"]}, "periodSeconds": 1}
    await store.create(
        process("web", python(SLEEP_FOREVER), readinessProbe=probe, livenessProbe=liveness)
    )
    obj = await wait_for(store, "web", lambda o: condition(o, "Ready").get("status") == "True")
    assert obj is not None
    pid = obj["status"]["pid"]
    assert await writes_while_time_passes(world) == 0
    obj = await store.get(PROCESS.api_version, PROCESS.kind, "web", "default")
    assert obj["status"]["pid"] == pid
    assert condition(obj, "Ready")["reason"] == "ReadinessProbeSucceeded"


# -- OS failures are transient ---------------------------------------------------------------


@pytest.mark.parametrize("broken", ["state", "logs"])
async def test_an_unwritable_directory_is_retried_and_recovers(tmp_path: Path, broken: str) -> None:
    """A directory whose parent is a regular file cannot be made, even by root (ENOTDIR):
    the start fails, the status says why, the Process is not Stalled, and it starts once
    the directory can be made."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a directory should be\n")
    state_dir = blocker / "state" if broken == "state" else tmp_path / "state"
    log_dir = blocker / "logs" if broken == "logs" else tmp_path / "logs"
    clock = ManualClock()
    dirs = ChildSettings(state_dir, log_dir)
    async for harness, _, _ in _world(clock, dirs, ChildSettings(tmp_path / "jobs", log_dir)):
        store = harness.store
        await store.create(process("web", python(SLEEP_FOREVER)))
        obj = await wait_for(
            store, "web", lambda o: condition(o, "Ready").get("reason") == "StartFailed"
        )
        assert obj is not None
        assert obj["status"]["phase"] == "Pending"
        assert "Not a directory" in condition(obj, "Ready")["message"]
        assert obj["status"]["nextStartAt"]
        assert not stalled(obj)
        # Still broken: retried with back-off, and no write unless something changes.
        revision = await store.revision()
        clock.advance(ENVIRONMENT_BACKOFF.initial_seconds)
        await reconcile_until_stable(harness)
        obj = await store.get(PROCESS.api_version, PROCESS.kind, "web", "default")
        assert obj["status"]["phase"] == "Pending"
        assert await store.revision() - revision <= 2  # nextStartAt, and the event's count

        blocker.unlink()
        clock.advance(ENVIRONMENT_BACKOFF.max_seconds)
        obj = await wait_for(store, "web", lambda o: (o or {}).get("status", {}).get("pid"))
        assert obj is not None
        assert obj["status"]["phase"] == "Running"
        assert condition(obj, "Ready")["status"] == "True"
        assert is_alive(obj["status"]["pid"])


# -- re-adoption -----------------------------------------------------------------------------


async def test_a_readopted_child_shows_its_real_pid_and_restarts(tmp_path: Path) -> None:
    """An engine that died between starting a child and writing its pid leaves a status
    without one: the next engine adopts the child and shows its pid, keeping the count
    of restarts."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    process_dirs = ChildSettings(tmp_path / "processes", tmp_path / "logs")
    job_dirs = ChildSettings(tmp_path / "jobs", tmp_path / "logs")
    pid = None
    try:
        async for harness, processes, _ in _world(
            testing.ManualClock(), process_dirs, job_dirs, url
        ):
            await harness.store.create(process("web", python(SLEEP_FOREVER)))
            obj = await wait_for(
                harness.store, "web", lambda o: (o or {}).get("status", {}).get("pid")
            )
            assert obj is not None
            pid = obj["status"]["pid"]
            await harness.stop()
            await processes.detach()  # as if the engine had died: the child keeps running
            status = dict(obj["status"], restarts=2)
            for lost in ("pid", "startTime"):
                status.pop(lost)
            obj["status"] = status
            await harness.store.update_status(obj)
        assert pid is not None
        assert is_alive(pid)

        async for harness, processes, _ in _world(
            testing.ManualClock(), process_dirs, job_dirs, url
        ):
            obj = await wait_for(
                harness.store, "web", lambda o: (o or {}).get("status", {}).get("pid")
            )
            assert obj is not None
            assert obj["status"]["pid"] == pid
            assert obj["status"]["restarts"] == 2
            assert obj["status"]["startTime"]
            assert processes.pids() == {("default", "web"): pid}
    finally:
        if pid is not None:
            kill_group(pid)


async def test_a_readopted_child_stays_ready_until_a_probe_says_otherwise(tmp_path: Path) -> None:
    """A Ready child adopted by the next engine keeps the startup and readiness its status
    records: no revision of it shows `Ready=False` (its Service would drop it meanwhile),
    and the adoption writes at most once. Its passed startup probe is not run again; its
    readiness probe fails from then on, but once only, under its `failureThreshold`: the
    result stays Unknown, which says nothing new."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    process_dirs = ChildSettings(tmp_path / "processes", tmp_path / "logs")
    job_dirs = ChildSettings(tmp_path / "jobs", tmp_path / "logs")
    healthy = tmp_path / "healthy"
    healthy.touch()
    probe = {"exec": {"command": ["test", "-e", str(healthy)]}, "failureThreshold": 3}
    pid = None
    try:
        async for harness, processes, _ in _world(
            testing.ManualClock(), process_dirs, job_dirs, url
        ):
            await harness.store.create(
                process("web", python(SLEEP_FOREVER), startupProbe=probe, readinessProbe=probe)
            )
            obj = await wait_for(
                harness.store, "web", lambda o: condition(o, "Ready").get("status") == "True"
            )
            assert obj is not None
            pid = obj["status"]["pid"]
            await harness.stop()
            await processes.detach()  # as if the engine had died: the child keeps running
            before = await harness.store.revision()
        healthy.unlink()

        async for harness, processes, _ in _world(
            testing.ManualClock(), process_dirs, job_dirs, url
        ):
            store = harness.store
            await reconcile_until_stable(harness)
            assert processes.pids() == {("default", "web"): pid}
            obj = await store.get(PROCESS.api_version, PROCESS.kind, "web", "default")
            assert condition(obj, "Ready")["status"] == "True"
            writes = await writes_since(store, before)
            assert len(writes) <= 1, writes
            assert all("Started=True Ready=True" in write for write in writes), writes
    finally:
        if pid is not None:
            kill_group(pid)


# -- exit records --------------------------------------------------------------------------


async def test_a_stop_on_request_is_a_field_of_the_exit(world: World) -> None:
    store = world.harness.store
    await store.create(process("web", python(SLEEP_FOREVER)))
    obj = await wait_for(store, "web", lambda o: (o or {}).get("status", {}).get("pid"))
    assert obj is not None
    obj["spec"]["args"] = python(SLEEP_FOREVER, "v2")
    await store.update(obj)
    obj = await wait_for(store, "web", lambda o: (o or {}).get("status", {}).get("lastExit"))
    assert obj is not None
    last = obj["status"]["lastExit"]
    assert last["stoppedOnRequest"] is True
    assert "spec changed" in last["stopReason"]
    assert "stopped" not in last["reason"]  # the fact is the field, not words in the reason


# -- errors say what happened ----------------------------------------------------------------


class _Tracebacks(logging.Handler):
    """Keeps the log records that carry an exception; `seen` is set at the first."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)
            self.seen.set()


async def test_an_unexpected_error_is_logged_with_its_traceback() -> None:
    def broken(request: Request) -> None:
        raise RuntimeError(f"cannot handle {request.name}")

    handler = _Tracebacks()
    logger = logging.getLogger("setpoint.controller")
    logger.addHandler(handler)
    try:
        async with Harness() as harness:
            harness.manager.controller("broken").for_(PROCESS).complete(broken)
            await harness.start()
            await harness.store.create(process("web", ["true"]))
            await asyncio.wait_for(handler.seen.wait(), 10)
    finally:
        logger.removeHandler(handler)
    exc_info = handler.records[0].exc_info
    assert exc_info is not None
    assert isinstance(exc_info[1], RuntimeError)  # not `NoneType: None`
    assert "cannot handle web" in str(exc_info[1])


@pytest.mark.parametrize(
    ("args", "env"),
    [(["echo", "a\0b"], {}), (["true"], {"A=B": "x"}), (["true"], {"A": "x\0y"})],
)
async def test_what_the_os_cannot_run_is_invalid_and_leaves_nothing(
    tmp_path: Path, args: list[str], env: dict[str, str]
) -> None:
    """Admission refuses such values; whatever still reaches a start is refused there as
    `Invalid` (a reason for the status), never as a stray `ValueError`."""
    spec = supervisor.ProcessSpec(args=args, log_dir=tmp_path / "logs", marker="m", env=env)
    with pytest.raises(Invalid, match="cannot start web"):
        await supervisor.start("web", spec, tmp_path / "state")
    assert listing(tmp_path / "state") == []
