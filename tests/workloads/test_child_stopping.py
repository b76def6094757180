"""A child the Process (or Job) controller stops is `Ready=False` before its stop signal
is sent.

Each child here ignores SIGTERM (with a grace period far longer than any test), so the
stop is in flight, and provably so, until the test SIGKILLs the child itself: what the
store says meanwhile is what dependents and Services see of a process shutting down.
(The clock is the system's, for the readiness probe that says the child is armed; no
outcome depends on how long anything takes.)"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from process_support import (
    TIMEOUT,
    condition,
    job_controller,
    process,
    process_controller,
    python,
    wait_for,
)
from supervisor_support import is_alive, wait_pid_gone

from setpoint import testing
from setpoint.clock import SYSTEM_CLOCK
from setpoint.model import Object
from setpoint.store import Store
from setpoint.testing import Harness
from setpoint.workloads.job import JOB, JobSettings
from setpoint.workloads.process import PROCESS, ProcessSettings

GRACE = 3600.0
"""Longer than any test: the stop ends when the test kills the child, not before."""


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with Harness(clock=SYSTEM_CLOCK) as harness:
        processes = process_controller(
            harness.manager, ProcessSettings(tmp_path / "state", tmp_path / "logs")
        )
        jobs = job_controller(
            harness.manager, JobSettings(tmp_path / "job-state", tmp_path / "logs")
        )
        await harness.start()
        try:
            yield harness.store
        finally:
            await harness.stop()
            await processes.stop_all(grace=0)
            await jobs.stop_all(grace=0)


def stubborn(armed: Path, *extra: str) -> list[str]:
    """A child that ignores SIGTERM, then says so by creating `armed`."""
    code = f"""
        import pathlib, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        pathlib.Path({str(armed)!r}).touch()
        while True: time.sleep(3600)
    """
    return python(code, *extra)


async def create_ready(store: Store, tmp_path: Path, name: str, *extra: str) -> Object:
    """A running, Ready Process whose child ignores SIGTERM (its readiness probe says so)."""
    armed = tmp_path / f"{name}.armed"
    probe = {"exec": {"command": ["test", "-e", str(armed)]}, "periodSeconds": 1}
    await store.create(
        process(name, stubborn(armed, *extra), terminationGracePeriodSeconds=GRACE,
                readinessProbe=probe)
    )  # fmt: skip
    obj = await wait_for(store, name, lambda o: condition(o, "Ready").get("status") == "True")
    assert obj is not None
    return obj


async def statuses_since(store: Store, name: str, since: int) -> list[dict[str, Any]]:
    """The statuses the Process `name` was stored with after revision `since`, in order
    (the first is that of the write right after `since`, if it was a Process write)."""
    until = await store.revision()
    seen: list[dict[str, Any]] = []
    async for change in store.watch(PROCESS.api_version, PROCESS.kind, since=since):
        if change.object["metadata"]["name"] == name:
            seen.append(dict(change.object.get("status") or {}))
        if change.revision >= until:
            break
    return seen


def ready_reason(status: dict[str, Any]) -> tuple[str | None, str | None]:
    ready = condition({"status": status}, "Ready")
    return ready.get("status"), ready.get("reason")


async def test_a_spec_change_marks_the_process_restarting_before_it_stops(
    store: Store, tmp_path: Path
) -> None:
    obj = await create_ready(store, tmp_path, "db", "old")
    old = obj["status"]["pid"]
    obj["spec"]["args"] = [*obj["spec"]["args"][:-1], "new"]
    changed = await store.update(obj)
    since = int(changed["metadata"]["resourceVersion"])

    stopping = await wait_for(store, "db", lambda o: ready_reason(o["status"])[0] == "False")
    assert stopping is not None
    assert ready_reason(stopping["status"]) == ("False", "Restarting")
    assert "the spec changed" in condition(stopping, "Ready")["message"]
    assert stopping["status"]["pid"] == old
    assert is_alive(old)  # the stop is in flight
    assert "lastExit" not in stopping["status"]

    os.kill(old, signal.SIGKILL)
    await wait_pid_gone(old)
    done = await wait_for(
        store,
        "db",
        lambda o: o["status"].get("pid") not in (None, old) and "lastExit" in o["status"],
    )
    assert done is not None

    history = await statuses_since(store, "db", since)
    # Not ready first, with the old child's pid, before its exit or the new pid appears;
    # then (one write) the exit recorded and the new child running: one write more than
    # a restart took before.
    assert ready_reason(history[0]) == ("False", "Restarting")
    assert history[0]["pid"] == old
    assert "lastExit" not in history[0]
    assert history[1]["pid"] != old
    assert history[1]["lastExit"]["stoppedOnRequest"] is True
    first_new = next(i for i, s in enumerate(history) if s.get("pid") not in (None, old))
    assert first_new == 1  # two writes from the spec change to the new child: one was before


async def test_a_deleted_process_is_terminating_while_its_child_is_alive(
    store: Store, tmp_path: Path
) -> None:
    obj = await create_ready(store, tmp_path, "web")
    pid = obj["status"]["pid"]
    await store.delete(PROCESS.api_version, PROCESS.kind, "web", "default")

    gone = await wait_for(store, "web", lambda o: ready_reason(o["status"])[0] == "False")
    assert gone is not None
    assert gone["metadata"].get("deletionTimestamp")
    assert ready_reason(gone["status"]) == ("False", "Terminating")
    assert gone["status"]["phase"] == "Running"  # until its child has exited
    assert is_alive(pid)  # /proc/<pid> is there, and not a zombie

    os.kill(pid, signal.SIGKILL)
    assert await wait_for(store, "web", lambda o: o is None) is None


async def test_a_deleted_jobs_attempt_is_terminating_while_it_runs(
    store: Store, tmp_path: Path
) -> None:
    armed = tmp_path / "armed"
    os.mkfifo(armed)
    code = f"""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open({str(armed)!r}, "w") as gate: gate.write("armed\\n")
        while True: time.sleep(3600)
    """
    await store.create(
        {
            "apiVersion": JOB.api_version,
            "kind": JOB.kind,
            "metadata": {"name": "migrate", "namespace": "default"},
            "spec": {"args": python(code), "terminationGracePeriodSeconds": GRACE},
        }
    )
    # The attempt says it ignores SIGTERM (a fifo: the read returns once it has written).
    assert await asyncio.wait_for(asyncio.to_thread(armed.read_text), TIMEOUT) == "armed\n"
    obj = await testing.wait_for(store, JOB, "migrate", lambda o: "pid" in o["status"])
    assert obj is not None
    pid = obj["status"]["pid"]
    await store.delete(JOB.api_version, JOB.kind, "migrate", "default")

    gone = await testing.wait_for(
        store, JOB, "migrate", lambda o: ready_reason(o["status"])[1] == "Terminating"
    )
    assert gone is not None
    assert gone["status"]["phase"] == "Running"
    assert condition(gone, "Complete").get("status") == "False"
    assert gone["status"]["pid"] == pid
    assert is_alive(pid)  # the stop is in flight

    os.kill(pid, signal.SIGKILL)
    assert await testing.wait_for(store, JOB, "migrate", lambda o: o is None) is None
