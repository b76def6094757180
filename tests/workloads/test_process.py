"""The Process controller against real child processes, through the test harness.

Children are small `sys.executable -c` scripts. Tests wait for the stored state
through the store's watch (`wait_for`) or a pidfd, under timeouts, never on the
wall clock; back-off timing runs on a `ManualClock`. Every child is stopped at
the end of its test.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from process_support import (
    SLEEP_FOREVER,
    TIMEOUT,
    argv_of,
    condition,
    free_port,
    open_gate,
    process,
    process_controller,
    python,
    serve_after,
    wait_for,
)
from supervisor_support import Notifications, is_alive, kill_group, wait_pid_gone

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Invalid
from setpoint.model import Object
from setpoint.model.wellknown import child_name
from setpoint.testing import Harness, ManualClock, capture_events, reconcile_until_stable
from setpoint.workloads.process import (
    PROCESS,
    ProcessController,
    ProcessSettings,
    setup,
)


@dataclass
class World:
    harness: Harness
    processes: ProcessController
    state_dir: Path


async def _world(tmp_path: Path, clock: Clock) -> AsyncIterator[World]:
    async with Harness(clock=clock) as harness:
        processes = process_controller(
            harness.manager, ProcessSettings(tmp_path / "state", tmp_path / "logs")
        )
        await harness.start()
        try:
            yield World(harness, processes, tmp_path / "state")
        finally:
            await harness.stop()
            await processes.stop_all(grace=0)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async for w in _world(tmp_path, SYSTEM_CLOCK):
        yield w


@pytest.fixture
async def manual(tmp_path: Path) -> AsyncIterator[tuple[World, ManualClock]]:
    clock = ManualClock()
    async for w in _world(tmp_path, clock):
        yield w, clock


def running(obj: Object | None) -> bool:
    status = (obj or {}).get("status") or {}
    return status.get("phase") == "Running" and status.get("pid") is not None


def ready(obj: Object | None) -> bool:
    return condition(obj, "Ready").get("status") == "True"


async def test_starts_and_reports_running(world: World) -> None:
    store = world.harness.store
    async with capture_events(store) as events:
        await store.create(process("web", python(SLEEP_FOREVER)))
        obj = await wait_for(store, "web", lambda o: running(o) and ready(o))
        assert obj is not None
        status = obj["status"]
        assert is_alive(status["pid"])
        assert condition(obj, "Started")["status"] == "True"
        assert status["restarts"] == 0
        assert status["startTime"]
        assert status["observedGeneration"] == 1
        assert "setpoint.dev/process" in obj["metadata"]["finalizers"]
        await events.wait_event("Started", involved_name="web")
    assert world.processes.pids() == {("default", "web"): status["pid"]}


async def test_a_killed_child_is_noticed_and_restarted(world: World) -> None:
    store = world.harness.store
    await store.create(process("web", python(SLEEP_FOREVER)))
    obj = await wait_for(store, "web", running)
    assert obj is not None
    first = obj["status"]["pid"]
    os.kill(first, signal.SIGKILL)
    obj = await wait_for(
        store, "web", lambda o: running(o) and o is not None and o["status"]["pid"] != first
    )
    assert obj is not None
    status = obj["status"]
    assert status["restarts"] == 1
    assert status["lastExit"]["signal"] == signal.SIGKILL
    assert "SIGKILL" in status["lastExit"]["reason"]
    assert is_alive(status["pid"])
    await wait_pid_gone(first)


async def test_on_failure_exit_zero_succeeds_and_is_not_restarted(world: World) -> None:
    store = world.harness.store
    async with capture_events(store) as events:
        await store.create(process("job", python("raise SystemExit(0)"), restartPolicy="OnFailure"))
        obj = await wait_for(
            store, "job", lambda o: (o or {}).get("status", {}).get("phase") == "Succeeded"
        )
        await events.wait_event("Exited", involved_name="job")
    await reconcile_until_stable(world.harness)
    obj = await store.get(PROCESS.api_version, PROCESS.kind, "job", "default")
    status = obj["status"]
    assert status["phase"] == "Succeeded"
    assert status["restarts"] == 0
    assert status["lastExit"]["code"] == 0
    assert "pid" not in status
    assert condition(obj, "Ready")["reason"] == "Completed"
    assert world.processes.pids() == {}


async def test_a_crash_loop_backs_off(manual: tuple[World, ManualClock]) -> None:
    world, clock = manual
    store = world.harness.store
    backoff = {"initialSeconds": 30, "maxSeconds": 100, "resetAfterSeconds": 600}
    async with capture_events(store) as events:
        await store.create(process("crash", python("raise SystemExit(3)"), backoff=backoff))
        # The first restart is immediate; the second exit backs off 30 s.
        obj = await wait_for(
            store,
            "crash",
            lambda o: (o or {}).get("status", {}).get("phase") == "CrashLoopBackOff",
        )
        await events.wait_event("BackOff", involved_name="crash")
    assert obj is not None
    status = obj["status"]
    assert status["restarts"] == 1
    assert status["lastExit"]["code"] == 3
    assert status["nextStartAt"]
    assert condition(obj, "Ready")["reason"] == "CrashLoopBackOff"
    await reconcile_until_stable(world.harness)  # nothing happens until time moves
    obj = await store.get(PROCESS.api_version, PROCESS.kind, "crash", "default")
    assert obj["status"]["restarts"] == 1
    first_next = obj["status"]["nextStartAt"]

    clock.advance(30)
    obj = await wait_for(
        store,
        "crash",
        lambda o: (
            (o or {}).get("status", {}).get("phase") == "CrashLoopBackOff"
            and o is not None
            and o["status"]["restarts"] == 2
        ),
    )
    assert obj is not None
    assert obj["status"]["nextStartAt"] > first_next
    assert "back-off 60s" in condition(obj, "Ready")["message"]


async def test_a_command_that_cannot_start_stalls(world: World) -> None:
    store = world.harness.store
    await store.create(process("nope", ["/nonexistent/command"]))
    obj = await wait_for(store, "nope", lambda o: condition(o, "Stalled").get("status") == "True")
    assert obj is not None
    assert condition(obj, "Stalled")["reason"] == "StartFailed"
    assert condition(obj, "Ready")["status"] == "False"


async def test_readiness_probe_turns_ready(world: World, tmp_path: Path) -> None:
    store = world.harness.store
    port = free_port()
    gate = Notifications(tmp_path / "gate")
    try:
        probe = {"tcpSocket": {"port": port}, "periodSeconds": 1}
        await store.create(process("web", serve_after(gate.path, port), readinessProbe=probe))
        obj = await wait_for(store, "web", running)
        assert condition(obj, "Ready")["status"] == "False"
        assert condition(obj, "Ready")["reason"] in (
            "ReadinessProbePending",
            "ReadinessProbeFailed",
        )
        open_gate(gate.path)
        obj = await wait_for(store, "web", ready)
        assert condition(obj, "Ready")["reason"] == "ReadinessProbeSucceeded"
    finally:
        gate.close()


async def test_a_spec_change_restarts_with_the_new_args(world: World) -> None:
    store = world.harness.store
    obj = await store.create(process("web", python(SLEEP_FOREVER, "old")))
    obj = await wait_for(store, "web", running)
    assert obj is not None
    first = obj["status"]["pid"]
    obj["spec"]["args"] = python(SLEEP_FOREVER, "new")
    await store.update(obj)
    obj = await wait_for(
        store,
        "web",
        lambda o: running(o) and o is not None and o["status"]["observedGeneration"] == 2,
    )
    assert obj is not None
    pid = obj["status"]["pid"]
    assert pid != first
    assert argv_of(pid)[-1] == "new"
    assert obj["status"]["restarts"] == 0
    await wait_pid_gone(first)


async def test_a_stop_signal_is_sent_instead_of_sigterm(world: World, tmp_path: Path) -> None:
    """PostgreSQL's fast shutdown is SIGINT: a child that ignores SIGTERM and exits 7 on
    SIGINT is stopped by `stopSignal: SIGINT` well within its long grace period."""
    store = world.harness.store
    armed = tmp_path / "armed"
    code = f"""
        import pathlib, signal, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, lambda *_: sys.exit(7))
        pathlib.Path({str(armed)!r}).touch()
        while True: time.sleep(3600)
    """
    probe = {"exec": {"command": ["test", "-e", str(armed)]}, "periodSeconds": 1}
    obj = await store.create(
        process(
            "pg", python(code), stopSignal="SIGINT", terminationGracePeriodSeconds=60,
            readinessProbe=probe,
        )
    )  # fmt: skip
    obj = await wait_for(store, "pg", lambda o: condition(o, "Ready").get("status") == "True")
    assert obj is not None
    obj["spec"]["env"] = {"CHANGED": "1"}
    await store.update(obj)
    obj = await wait_for(
        store, "pg", lambda o: o is not None and o["status"].get("lastExit", {}).get("code") == 7
    )
    assert obj is not None
    assert obj["status"]["lastExit"].get("signal") is None


async def test_an_exec_probe_runs_with_the_childs_env_and_cwd(world: World, tmp_path: Path) -> None:
    (tmp_path / "here").touch()
    check = ["sh", "-c", 'test "$MARK" = x && test -e here']
    await world.harness.store.create(
        process(
            "p", python(SLEEP_FOREVER), env={"MARK": "x"}, cwd=str(tmp_path),
            readinessProbe={"exec": {"command": check}, "periodSeconds": 1},
        )
    )  # fmt: skip
    obj = await wait_for(
        world.harness.store, "p", lambda o: condition(o, "Ready").get("status") == "True"
    )
    assert obj is not None


async def test_an_unknown_stop_signal_is_refused(world: World) -> None:
    with pytest.raises(Invalid, match="stopSignal"):
        await world.harness.store.create(process("x", python(SLEEP_FOREVER), stopSignal="TERM"))


async def test_delete_stops_the_process_and_the_object_goes(world: World) -> None:
    store = world.harness.store
    await store.create(process("web", python(SLEEP_FOREVER), terminationGracePeriodSeconds=5))
    obj = await wait_for(store, "web", running)
    assert obj is not None
    pid = obj["status"]["pid"]
    await store.delete(PROCESS.api_version, PROCESS.kind, "web", "default")
    assert await wait_for(store, "web", lambda o: o is None) is None
    await wait_pid_gone(pid)
    assert not (world.state_dir / f"{child_name('default', 'web')}.json").exists()


async def test_depends_on_waits_then_starts(world: World, tmp_path: Path) -> None:
    store = world.harness.store
    port = free_port()
    gate = Notifications(tmp_path / "gate")
    try:
        await store.create(
            process("b", python(SLEEP_FOREVER), dependsOn=[{"kind": "Process", "name": "a"}])
        )
        obj = await wait_for(
            store, "b", lambda o: (o or {}).get("status", {}).get("phase") == "Waiting"
        )
        ready_b = condition(obj, "Ready")
        assert ready_b["status"] == "False"
        assert ready_b["reason"] == "WaitingForDependency"
        assert "Process/a" in ready_b["message"]
        assert "pid" not in obj["status"]  # type: ignore[index]

        probe = {"tcpSocket": {"port": port}, "periodSeconds": 1}
        await store.create(process("a", serve_after(gate.path, port), readinessProbe=probe))
        await wait_for(store, "a", running)
        await reconcile_until_stable(world.harness)
        obj = await store.get(PROCESS.api_version, PROCESS.kind, "b", "default")
        assert obj["status"]["phase"] == "Waiting"
        assert "Process/a is not Ready" in condition(obj, "Ready")["message"]

        open_gate(gate.path)
        obj = await wait_for(store, "b", lambda o: running(o) and ready(o))
        assert obj is not None
        assert is_alive(obj["status"]["pid"])
    finally:
        gate.close()


async def test_a_new_engine_adopts_the_running_child(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    state_dir, log_dir = tmp_path / "state", tmp_path / "logs"
    pid = None
    try:
        async with Harness(url=url) as harness:
            first = process_controller(harness.manager, ProcessSettings(state_dir, log_dir))
            await harness.start()
            await harness.store.create(process("web", python(SLEEP_FOREVER)))
            obj = await wait_for(harness.store, "web", running)
            assert obj is not None
            pid = obj["status"]["pid"]
            await harness.stop()
        await first.detach()  # as if the engine had died: the child keeps running
        assert is_alive(pid)

        async with Harness(url=url) as harness:
            setup(harness.manager, ProcessSettings(state_dir, log_dir))
            await harness.start()
            await reconcile_until_stable(harness)
            obj = await harness.store.get(PROCESS.api_version, PROCESS.kind, "web", "default")
            assert obj["status"]["pid"] == pid
            assert obj["status"]["restarts"] == 0
            assert is_alive(pid)
            record = json.loads((state_dir / "default_web.json").read_text())
            assert record["pid"] == pid
            # The adopted child is watched: its death is noticed and it is restarted.
            os.kill(pid, signal.SIGKILL)
            obj = await wait_for(
                harness.store,
                "web",
                lambda o: running(o) and o is not None and o["status"]["pid"] != pid,
            )
            assert obj is not None
            second = obj["status"]["pid"]
            assert obj["status"]["restarts"] == 1
            await harness.store.delete(PROCESS.api_version, PROCESS.kind, "web", "default")
            await wait_for(harness.store, "web", lambda o: o is None)
            await wait_pid_gone(second)
    finally:
        if pid is not None:
            kill_group(pid)


async def test_orphans_are_stopped_on_startup(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    state_dir, log_dir = tmp_path / "state", tmp_path / "logs"
    pid = None
    try:
        async with Harness(url=url) as harness:
            first = process_controller(harness.manager, ProcessSettings(state_dir, log_dir))
            await harness.start()
            await harness.store.create(process("web", python(SLEEP_FOREVER)))
            obj = await wait_for(harness.store, "web", running)
            assert obj is not None
            pid = obj["status"]["pid"]
            await harness.stop()
            await first.detach()
            # Gone while no engine ran: drop the finalizer and delete.
            obj = await harness.store.get(PROCESS.api_version, PROCESS.kind, "web", "default")
            obj["metadata"].pop("finalizers")
            await harness.store.update(obj)
            await harness.store.delete(PROCESS.api_version, PROCESS.kind, "web", "default")

        async with Harness(url=url) as harness:
            second = process_controller(harness.manager, ProcessSettings(state_dir, log_dir))
            await harness.start()
            await asyncio.wait_for(second.wait_orphans_collected(), TIMEOUT)
            assert not is_alive(pid)
        assert not (state_dir / "default_web.json").exists()
    finally:
        if pid is not None:
            kill_group(pid)


async def test_a_failing_liveness_probe_restarts_under_backoff(
    manual: tuple[World, ManualClock],
) -> None:
    world, _ = manual
    store = world.harness.store
    probe = {"tcpSocket": {"port": free_port()}, "failureThreshold": 1}
    async with capture_events(store) as events:
        await store.create(process("web", python(SLEEP_FOREVER), livenessProbe=probe))
        # Killed, restarted at once, killed again: then it backs off.
        obj = await wait_for(
            store, "web", lambda o: (o or {}).get("status", {}).get("phase") == "CrashLoopBackOff"
        )
        await events.wait_event("Unhealthy", involved_name="web")
        await events.wait_event("Killing", involved_name="web")
    assert obj is not None
    status = obj["status"]
    assert status["restarts"] == 1
    assert status["lastExit"]["stoppedOnRequest"] is True
    assert "liveness probe failed" in status["lastExit"]["stopReason"]
    assert status["lastExit"]["signal"] == signal.SIGTERM
    await reconcile_until_stable(world.harness)
    assert world.processes.pids() == {}


async def test_a_dependency_failing_later_keeps_the_dependent_running(world: World) -> None:
    store = world.harness.store
    await store.create(process("a", python(SLEEP_FOREVER), restartPolicy="Never"))
    await store.create(
        process("b", python(SLEEP_FOREVER), dependsOn=[{"kind": "Process", "name": "a"}])
    )
    obj = await wait_for(store, "b", lambda o: running(o) and ready(o))
    assert obj is not None
    pid_b = obj["status"]["pid"]
    a = await wait_for(store, "a", running)
    assert a is not None
    os.kill(a["status"]["pid"], signal.SIGKILL)
    obj = await wait_for(
        store, "b", lambda o: condition(o, "Ready").get("reason") == "DependencyNotReady"
    )
    assert obj is not None
    assert condition(obj, "Ready")["status"] == "False"
    assert "Process/a is not Ready" in condition(obj, "Ready")["message"]
    assert obj["status"]["pid"] == pid_b
    assert obj["status"]["phase"] == "Running"
    assert is_alive(pid_b)


async def test_a_clean_engine_stop_starts_afresh_next_time(tmp_path: Path) -> None:
    """After `stop_all` (a graceful engine stop) the status says so, and the next engine
    starts the process again without counting a restart or backing off."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    state_dir, log_dir = tmp_path / "state", tmp_path / "logs"
    async with Harness(url=url) as harness:
        first = process_controller(harness.manager, ProcessSettings(state_dir, log_dir))
        await harness.start()
        await harness.store.create(process("web", python(SLEEP_FOREVER)))
        obj = await wait_for(harness.store, "web", running)
        assert obj is not None
        pid = obj["status"]["pid"]
        await harness.stop()
        await first.stop_all(grace=1.0)
        await wait_pid_gone(pid)
        stopped = await harness.store.get(PROCESS.api_version, PROCESS.kind, "web", "default")
        assert "pid" not in stopped["status"]
        assert condition(stopped, "Ready")["reason"] == "EngineStopped"

    async with Harness(url=url) as harness:
        second = process_controller(harness.manager, ProcessSettings(state_dir, log_dir))
        await harness.start()
        try:
            again = await wait_for(harness.store, "web", running)
            assert again is not None
            assert again["status"]["pid"] != pid
            assert again["status"]["restarts"] == 0
        finally:
            await harness.stop()
            await second.stop_all(grace=1.0)
