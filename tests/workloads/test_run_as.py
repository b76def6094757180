"""Who a Process's, a Job's and a Deployment's commands run as
(`setpoint.runtime.run_as`), with real children: an exec probe runs as the child does (its
user, its environment, its working directory, never the engine's environment), and a
`user:` the engine may not use is refused once, quietly, without touching a child that
already runs.

Tests that switch users run as root only (skipped otherwise); the refusals are tested as
an engine that is not root by giving the controller that engine's `UserPolicy`
(`engine_uid`), never by patching `os.geteuid` (the engine's own files must still be its
own: `setpoint.files` checks their owner against the real one).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from process_support import (
    SLEEP_FOREVER,
    TIMEOUT,
    condition,
    job_controller,
    process,
    process_controller,
    python,
    wait_for,
)
from supervisor_support import is_alive
from writes_support import writes_since

from setpoint import testing
from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.model import Object
from setpoint.runtime.reconciler import Request
from setpoint.runtime.run_as import UserPolicy
from setpoint.testing import Harness, ManualClock, reconcile_until_stable
from setpoint.workloads import deployment
from setpoint.workloads import job as job_plan
from setpoint.workloads import process as process_plan
from setpoint.workloads.child_plan import Action
from setpoint.workloads.deployment import DEPLOYMENT
from setpoint.workloads.job import JOB, JobSettings
from setpoint.workloads.process import PROCESS, ProcessController, ProcessSettings

NOBODY = pwd.getpwnam("nobody")
AS_NOBODY = UserPolicy(None, NOBODY.pw_uid)
"""The policy of an engine run by nobody (not root): it may not switch users."""
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")


async def _processes(
    tmp_path: Path, clock: Clock, users: UserPolicy | None = None
) -> AsyncIterator[tuple[Harness, ProcessController]]:
    async with Harness(clock=clock) as harness:
        settings = ProcessSettings(tmp_path / "state", tmp_path / "logs")
        if users is not None:
            settings = ProcessSettings(tmp_path / "state", tmp_path / "logs", users)
        processes = process_controller(harness.manager, settings)
        await harness.start()
        try:
            yield harness, processes
        finally:
            await harness.stop()
            await processes.stop_all(grace=0)


def ready(obj: Object | None) -> bool:
    return condition(obj, "Ready").get("status") == "True"


def stalled(reason: str) -> Callable[[Object | None], bool]:
    return lambda obj: condition(obj, "Stalled").get("reason") == reason


def restarted_since(pid: int) -> Callable[[Object | None], bool]:
    """Another child than `pid` runs, and the Process is not Stalled."""
    return lambda o: (
        o is not None and o["status"].get("pid") not in (None, pid) and not condition(o, "Stalled")
    )


# -- exec probes run as the child ---------------------------------------------------------


async def test_an_exec_probe_sees_the_childs_env_and_cwd_but_not_the_engines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's environment is the child's (its `env`, over the few variables every
    child inherits), not the engine's: a token in the engine's environment stays there.
    (What the probe printed is the `Ready` condition's message.)"""
    monkeypatch.setenv("SETPOINT_TEST_ENGINE_ONLY", "a token of the engine's")
    work = tmp_path / "work"
    work.mkdir()
    check = ["sh", "-c", 'echo "$MARK|${SETPOINT_TEST_ENGINE_ONLY:-}|$(pwd)"']
    async for harness, _ in _processes(tmp_path, SYSTEM_CLOCK):
        await harness.store.create(
            process(
                "p", python(SLEEP_FOREVER), env={"MARK": "x"}, cwd=str(work),
                readinessProbe={"exec": {"command": check}, "periodSeconds": 1},
            )
        )  # fmt: skip
        obj = await wait_for(harness.store, "p", ready)
    assert condition(obj, "Ready")["message"] == f"exit code 0: x||{work}"


@as_root
async def test_an_exec_probe_runs_as_the_processs_user(tmp_path: Path) -> None:
    """As root, a Process with `user: nobody`: its exec probe runs as nobody (uid, gid, no
    supplementary groups), with the child's environment and HOME."""
    check = ["sh", "-c", 'echo "$(id -u) $(id -g) $(id -G) $MARK $HOME"']
    async for harness, _ in _processes(tmp_path, SYSTEM_CLOCK):
        await harness.store.create(
            process(
                "p", ["sleep", "infinity"], user="nobody", env={"MARK": "x"},
                readinessProbe={"exec": {"command": check}, "periodSeconds": 1},
            )
        )  # fmt: skip
        obj = await wait_for(harness.store, "p", ready)
    uid, gid = NOBODY.pw_uid, NOBODY.pw_gid
    message = condition(obj, "Ready")["message"]
    assert message == f"exit code 0: {uid} {gid} {gid} x {NOBODY.pw_dir}"


# -- a user the engine may not use ----------------------------------------------------------


async def _quiet_for_ten_seconds(
    harness: Harness, processes: ProcessController, clock: ManualClock, name: str
) -> None:
    """Ten seconds go by, a second at a time, the controller looking at `name` each second:
    the store gets no write (Events aside)."""
    since = await harness.store.revision()
    for _ in range(10):
        clock.advance(1)
        assert processes.controller is not None
        processes.controller.enqueue(Request(name, "default"))
        await reconcile_until_stable(harness)
    assert await writes_since(harness.store, since) == []


async def test_an_engine_that_is_not_root_refuses_another_user_once_and_quietly(
    tmp_path: Path,
) -> None:
    """As an engine run by nobody: a Process with `user: root` is Pending and Stalled,
    reason UserNotAllowed, saying why and what to change; written once, not retried."""
    clock = ManualClock()
    async for harness, processes in _processes(tmp_path, clock, AS_NOBODY):
        await harness.store.create(process("p", python(SLEEP_FOREVER), user="root"))
        obj = await wait_for(harness.store, "p", stalled("UserNotAllowed"))
        await reconcile_until_stable(harness)
        message = condition(obj, "Stalled")["message"]
        assert message == (
            "spec.user: cannot run as 'root': the engine runs as 'nobody', not root, and cannot"
            " switch users; drop spec.user (to run as 'nobody') or run the engine as root"
        )
        assert obj is not None
        assert obj["status"]["phase"] == "Pending"
        assert condition(obj, "Ready")["reason"] == "UserNotAllowed"
        assert processes.pids() == {}
        await _quiet_for_ten_seconds(harness, processes, clock, "p")


@as_root
async def test_an_allow_list_refuses_the_users_it_does_not_name(tmp_path: Path) -> None:
    """A root engine allowed only nobody: a Process without `user:` (it would run as root)
    is refused, one as nobody runs."""
    async for harness, processes in _processes(tmp_path, SYSTEM_CLOCK, UserPolicy.of(["nobody"])):
        await harness.store.create(process("as-root", python(SLEEP_FOREVER)))
        await harness.store.create(process("as-nobody", ["sleep", "infinity"], user="nobody"))
        obj = await wait_for(harness.store, "as-root", stalled("UserNotAllowed"))
        assert (
            "runs as 'root' (no spec.user), which this engine does not allow"
            in (condition(obj, "Stalled")["message"])
        )
        assert "--allow-user root" in condition(obj, "Stalled")["message"]
        obj = await wait_for(harness.store, "as-nobody", lambda o: ready(o))
        assert obj is not None
        assert os.stat(f"/proc/{obj['status']['pid']}").st_uid == NOBODY.pw_uid
        assert set(processes.pids()) == {("default", "as-nobody")}


async def test_a_refused_change_of_user_leaves_the_running_child_alone(
    tmp_path: Path,
) -> None:
    """A running Process whose `user:` changes to one the engine may not use: the change
    is not carried out (the child runs on, same pid, status as it was) and the Process is
    Stalled, once; changing it back to an allowed spec restarts it as usual."""
    clock = ManualClock()
    async for harness, processes in _processes(tmp_path, clock, AS_NOBODY):
        store = harness.store
        await store.create(process("p", python(SLEEP_FOREVER)))
        obj = await wait_for(store, "p", lambda o: (o or {}).get("status", {}).get("pid"))
        assert obj is not None
        pid: int = obj["status"]["pid"]
        obj["spec"]["user"] = "root"
        await store.update(obj)
        obj = await wait_for(store, "p", stalled("UserNotAllowed"))
        await reconcile_until_stable(harness)
        assert obj is not None
        assert is_alive(pid)
        assert processes.pids() == {("default", "p"): pid}
        assert obj["status"]["pid"] == pid
        assert obj["status"]["observedGeneration"] == 1  # it still describes the child
        await _quiet_for_ten_seconds(harness, processes, clock, "p")
        obj = await store.get(obj["apiVersion"], obj["kind"], "p", "default")
        del obj["spec"]["user"]
        await store.update(obj)
        obj = await wait_for(store, "p", restarted_since(pid), within=TIMEOUT)
        assert obj is not None


async def test_a_job_with_a_user_the_engine_may_not_use_is_stalled(tmp_path: Path) -> None:
    """The Job controller asks the same policy: here an engine as nobody (its policy), a
    Job as root is Pending and Stalled, reason UserNotAllowed, and nothing ran."""
    async with Harness(clock=ManualClock()) as harness:
        jobs = job_controller(
            harness.manager,
            JobSettings(tmp_path / "jobs", tmp_path / "logs", UserPolicy(None, NOBODY.pw_uid)),
        )
        await harness.start()
        ran = tmp_path / "ran"
        job = {
            "apiVersion": JOB.api_version,
            "kind": JOB.kind,
            "metadata": {"name": "migrate", "namespace": "default"},
            "spec": {"args": ["touch", str(ran)], "user": "root"},
        }
        await harness.store.create(job)
        obj = await testing.wait_for(
            harness.store, JOB, "migrate", stalled("UserNotAllowed"), within=TIMEOUT
        )
        assert obj is not None
        assert obj["status"]["phase"] == "Pending"
        assert condition(obj, "Complete")["reason"] == "UserNotAllowed"
        assert jobs.pids() == {}
        assert not ran.exists()
        await harness.stop()


async def test_a_deployment_with_a_refused_user_creates_no_replica_and_is_stalled_once(
    tmp_path: Path,
) -> None:
    """A Deployment whose template changes to a `user:` the engine may not use (here an
    engine as nobody, its policy; the test plays the Process controller, which is not
    running): no replica of the new template is created, those of the old one stay, and
    the Deployment is Stalled (UserNotAllowed), once: then nothing is written."""
    clock = ManualClock()
    async with Harness(clock=clock) as harness:
        users = UserPolicy(None, NOBODY.pw_uid)
        controller = deployment.setup(harness.manager, deployment.DeploymentSettings(users))
        await harness.start()
        store = harness.store
        web = {
            "apiVersion": DEPLOYMENT.api_version,
            "kind": DEPLOYMENT.kind,
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 2,
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"args": ["x"]}},
            },
        }
        await store.create(web)
        await reconcile_until_stable(harness)
        first, _ = await store.list(PROCESS.api_version, PROCESS.kind, namespace="default")
        assert len(first) == 2
        obj = await store.get(DEPLOYMENT.api_version, DEPLOYMENT.kind, "web", "default")
        obj["spec"]["template"]["spec"]["user"] = "root"
        await store.update(obj)
        await reconcile_until_stable(harness)
        obj = await store.get(DEPLOYMENT.api_version, DEPLOYMENT.kind, "web", "default")
        stall = condition(obj, "Stalled")
        assert stall["reason"] == "UserNotAllowed"
        assert stall["message"].startswith(
            "spec.template.spec.user: cannot run as 'root': the engine runs as 'nobody'"
        )
        assert condition(obj, "Ready")["reason"] == "UserNotAllowed"
        after, _ = await store.list(PROCESS.api_version, PROCESS.kind, namespace="default")
        assert sorted(p["metadata"]["name"] for p in after) == sorted(
            p["metadata"]["name"] for p in first
        )
        since = await store.revision()
        for _ in range(10):
            clock.advance(60)  # past any progress deadline: none runs while refused
            controller.enqueue(Request("web", "default"))
            await reconcile_until_stable(harness)
        assert await writes_since(store, since) == []


# -- the plans, pure -----------------------------------------------------------------------

REFUSED = ("UserNotAllowed", "spec.user: cannot run as 'root': ...")


@pytest.mark.parametrize("kind", ["Process", "Job"])
@pytest.mark.parametrize(
    ("running", "generation", "action", "stalls"),
    [
        (False, None, Action.NOTHING, True),  # nothing runs: start nothing, stall
        (True, 1, Action.NOTHING, True),  # a child of the earlier spec runs on
        (True, 2, Action.STOP, False),  # a child of the refused spec itself is stopped
    ],
)
def test_a_refused_user_starts_nothing_and_stops_only_a_child_of_the_refused_spec(
    kind: str, running: bool, generation: int | None, action: Action, stalls: bool
) -> None:
    obj: Object = {
        "apiVersion": PROCESS.api_version,
        "kind": kind,
        "metadata": {"name": "p", "namespace": "default", "generation": 2},
        "spec": {"args": ["x"], "user": "root"},
    }
    stored = {"phase": "Running", "observedGeneration": 1} if running else {}
    common = {"running": running, "generation": generation, "status": stored, "refused": REFUSED}
    step: process_plan.Plan | job_plan.JobPlan
    if kind == "Process":
        step = process_plan.plan(process_plan.desired_of(obj), process_plan.Observed(**common), 0)
    else:
        step = job_plan.plan(job_plan.desired_of(obj), job_plan.JobObserved(**common), 0)
    assert step.action is action
    assert (step.stall == REFUSED) is stalls
    if running and action is Action.NOTHING:
        assert step.status is None  # the stored status still describes the running child
    if not running:
        assert step.status is not None
        assert step.status["phase"] == "Pending"
        assert condition({"status": step.status}, "Ready")["reason"] == "UserNotAllowed"
