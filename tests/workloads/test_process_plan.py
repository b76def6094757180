"""The Process plan, pure: restart policy, crash-loop back-off, spec changes, deletion and
dependencies, by example and by property (hypothesis). Also the kind's schema."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from process_support import assert_stopping_status

from setpoint.errors import Invalid
from setpoint.model import Object
from setpoint.workloads.child_plan import ChildDesired, ChildExit, backoff_delay
from setpoint.workloads.process import (
    PROCESS,
    Action,
    CrashLoopBackoffSchema,
    Desired,
    Observed,
    ProcessSpecSchema,
    RecordedProbes,
    desired_of,
    plan,
    recorded_probes,
)

NOW = 1_000.0


def backoff(initial: float, maximum: float, reset_after: float) -> CrashLoopBackoffSchema:
    return CrashLoopBackoffSchema(
        initial_seconds=initial, max_seconds=maximum, reset_after_seconds=reset_after
    )


FAST = backoff(10, 300, 600)


def wanted(generation: int, *, deleting: bool = False, **spec: Any) -> Desired:
    """A Process's desired state: its spec is the schema's defaults but for `spec`."""
    return ChildDesired(generation, ProcessSpecSchema(args=["server"], **spec), deleting)


def started_at(finished: float, ran_for: float | None) -> float | None:
    return None if ran_for is None else finished - ran_for


def crashed(code: int | None = 1, *, at: float = NOW, ran_for: float | None = 1.0) -> ChildExit:
    return ChildExit(code, None, f"exited with code {code}", at, started_at(at, ran_for))


def test_first_start() -> None:
    step = plan(wanted(1), Observed(), NOW)
    assert step.action is Action.START
    assert step.phase == "Running"
    assert not step.counts_as_restart


def test_running_and_current_means_nothing() -> None:
    step = plan(wanted(1), Observed(running=True, generation=1), NOW)
    assert step.action is Action.NOTHING


def test_spec_change_restarts_without_counting() -> None:
    step = plan(wanted(2), Observed(running=True, generation=1, recent_restarts=4), NOW)
    assert step.action is Action.RESTART
    assert "generation 1 -> 2" in step.reason
    assert not step.counts_as_restart
    assert step.recent_restarts == 0


def test_liveness_failure_stops_it_like_a_crash() -> None:
    observed = Observed(running=True, generation=1, unhealthy="liveness probe failed: refused")
    step = plan(wanted(1), observed, NOW)
    assert step.action is Action.STOP
    assert "liveness" in step.reason
    # ... and the next look restarts it under the restart policy and the back-off.
    stopped = ChildExit(None, 15, "killed by SIGTERM", NOW, NOW - 5.0)
    after = plan(wanted(1), Observed(generation=1, last_exit=stopped, recent_restarts=1), NOW)
    assert after.action is Action.WAIT
    assert after.phase == "CrashLoopBackOff"


def test_first_restart_is_immediate_then_backs_off() -> None:
    step = plan(wanted(1), Observed(generation=1, last_exit=crashed()), NOW)
    assert step.action is Action.START
    assert step.counts_as_restart
    assert step.recent_restarts == 1
    step = plan(wanted(1), Observed(generation=1, last_exit=crashed(), recent_restarts=1), NOW)
    assert step.action is Action.WAIT
    assert step.phase == "CrashLoopBackOff"
    assert step.wait_seconds == 10
    later = plan(
        wanted(1), Observed(generation=1, last_exit=crashed(), recent_restarts=1), NOW + 10
    )
    assert later.action is Action.START
    assert later.recent_restarts == 2


def test_a_long_run_resets_the_backoff() -> None:
    observed = Observed(generation=1, last_exit=crashed(ran_for=600), recent_restarts=7)
    step = plan(wanted(1, backoff=FAST), observed, NOW)
    assert step.action is Action.START
    assert step.recent_restarts == 1


@pytest.mark.parametrize(
    ("policy", "code", "action", "phase"),
    [
        ("Always", 0, Action.START, "Running"),
        ("OnFailure", 0, Action.NOTHING, "Succeeded"),
        ("OnFailure", 1, Action.START, "Running"),
        ("OnFailure", None, Action.START, "Running"),  # unknown (adopted) exit: a failure
        ("Never", 0, Action.NOTHING, "Succeeded"),
        ("Never", 2, Action.NOTHING, "Failed"),
    ],
)
def test_restart_policy(policy: Any, code: int | None, action: Action, phase: str) -> None:
    step = plan(
        wanted(1, restart_policy=policy), Observed(generation=1, last_exit=crashed(code)), NOW
    )
    assert (step.action, step.phase) == (action, phase)


def test_a_finished_process_runs_again_when_its_spec_changes() -> None:
    observed = Observed(generation=1, last_exit=crashed(0))
    step = plan(wanted(2, restart_policy="Never"), observed, NOW)
    assert step.action is Action.START
    assert not step.counts_as_restart


def test_deletion_stops_then_lets_go() -> None:
    assert plan(wanted(3, deleting=True), Observed(running=True, generation=1), NOW).action is (
        Action.STOP
    )
    assert plan(wanted(3, deleting=True), Observed(), NOW).action is Action.NOTHING


def test_unmet_dependencies_hold_the_start() -> None:
    step = plan(wanted(1), Observed(unmet="waiting for Process/db to be Ready"), NOW)
    assert step.action is Action.WAIT
    assert step.phase == "Waiting"
    assert step.wait_seconds == 0
    assert "Process/db" in step.reason


def test_a_failing_dependency_does_not_stop_a_running_process() -> None:
    observed = Observed(running=True, generation=1, unmet="Process/db is not Ready: Exited")
    assert plan(wanted(1), observed, NOW).action is Action.NOTHING


# -- properties --------------------------------------------------------------------------

policies = st.sampled_from(["Always", "OnFailure", "Never"])
backoffs = st.builds(
    backoff,
    initial=st.floats(0.001, 100),
    maximum=st.floats(0.001, 1000),
    reset_after=st.floats(0, 1000),
)
exits = st.builds(
    ChildExit,
    code=st.none() | st.integers(0, 255),
    signal=st.none() | st.integers(1, 64),
    reason=st.just("exited"),
    finished_at=st.floats(0, 2 * NOW),
    started_at=st.none() | st.floats(-NOW, 2 * NOW),
)
desireds = st.builds(
    wanted,
    generation=st.integers(1, 5),
    restart_policy=policies,
    backoff=backoffs,
    deleting=st.booleans(),
)
observeds = st.builds(
    Observed,
    running=st.booleans(),
    generation=st.none() | st.integers(1, 5),
    last_exit=st.none() | exits,
    recent_restarts=st.integers(0, 100),
    unhealthy=st.none() | st.just("liveness probe failed"),
    unmet=st.none() | st.just("waiting for Process/db to be Ready"),
)


@given(desireds, observeds, st.floats(0, 3 * NOW))
def test_never_starts_while_running(desired: Desired, observed: Observed, now: float) -> None:
    step = plan(desired, observed, now)
    if observed.running:
        assert step.action is not Action.START
    else:
        assert step.action not in (Action.STOP, Action.RESTART)
    if step.action is Action.STOP:
        assert desired.deleting or observed.unhealthy is not None


@given(
    st.booleans(),
    st.sampled_from(["Unknown", "Success", "Failure"]),
    st.text(max_size=20),
    st.booleans(),
)
def test_a_running_child_s_probes_read_back_from_the_status_they_wrote(
    started: bool, readiness: Any, message: str, startup_probe: bool
) -> None:
    """What a plan writes of a running child's probes, `recorded_probes` reads back: an
    adopted child resumes from it (readiness only once its startup probe has passed)."""
    probe = {"exec": {"command": ["true"]}}
    spec: dict[str, Any] = {"readiness_probe": probe}
    if startup_probe:
        spec["startup_probe"] = probe
    started = started or not startup_probe
    observed = Observed(
        running=True,
        generation=1,
        started=started,
        readiness=readiness,
        probe_message=message if readiness != "Unknown" else "",
    )
    status = plan(wanted(1, **spec), observed, NOW).status
    assert status is not None
    recorded = recorded_probes(status)
    if started:
        assert recorded == RecordedProbes(True, readiness, observed.probe_message)
    else:
        assert recorded == RecordedProbes(False, "Unknown", "")


@given(desireds, observeds, st.floats(0, 3 * NOW))
def test_wait_is_never_negative(desired: Desired, observed: Observed, now: float) -> None:
    step = plan(desired, observed, now)
    assert step.wait_seconds >= 0
    assert step.recent_restarts >= 0
    if step.wait_seconds > 0:
        assert step.action is Action.WAIT
        assert step.wait_seconds <= desired.spec.backoff.max_seconds + 1e-6 + max(
            0.0, (observed.last_exit.finished_at if observed.last_exit else 0.0) - now
        )


@given(desireds, observeds, st.floats(0, 3 * NOW))
def test_deleting_never_starts(desired: Desired, observed: Observed, now: float) -> None:
    if desired.deleting:
        assert plan(desired, observed, now).action in (Action.STOP, Action.NOTHING)


@given(desireds, observeds, st.floats(0, 3 * NOW))
def test_unmet_dependencies_never_start(desired: Desired, observed: Observed, now: float) -> None:
    if observed.unmet is not None:
        assert plan(desired, observed, now).action is not Action.START


@given(backoffs, st.integers(1, 200))
def test_backoff_doubles_and_caps(settings: CrashLoopBackoffSchema, n: int) -> None:
    assert backoff_delay(0, settings) == 0
    delay, following = backoff_delay(n, settings), backoff_delay(n + 1, settings)
    assert 0 < delay <= settings.max_seconds
    assert following == min(settings.max_seconds, 2 * delay) or following == settings.max_seconds
    assert backoff_delay(1, settings) == min(settings.initial_seconds, settings.max_seconds)


# -- the schema ---------------------------------------------------------------------------


def process(spec: dict[str, Any]) -> Object:
    return {
        "apiVersion": PROCESS.api_version,
        "kind": PROCESS.kind,
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec,
    }


def test_schema_defaults() -> None:
    obj = process({"args": ["true"]})
    PROCESS.validate(obj)
    spec = obj["spec"]
    assert spec["restartPolicy"] == "Always"
    assert spec["backoff"] == {
        "initialSeconds": 10.0,
        "maxSeconds": 300.0,
        "resetAfterSeconds": 600.0,
    }
    assert spec["terminationGracePeriodSeconds"] == 30.0
    desired = desired_of({**obj, "metadata": {**obj["metadata"], "generation": 2}})
    assert (desired.generation, desired.deleting) == (2, False)
    assert desired.spec.restart_policy == "Always"
    assert desired.spec.backoff == backoff(10, 300, 600)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({}, "spec.args"),
        ({"args": []}, "spec.args"),
        ({"args": ["x"], "restartPolicy": "Sometimes"}, "spec.restartPolicy"),
        ({"args": ["x"], "readinessProbe": {"periodSeconds": 1}}, "spec.readinessProbe"),
        (
            {"args": ["x"], "livenessProbe": {"tcpSocket": {"port": 1}, "successThreshold": 2}},
            "spec",
        ),
        ({"args": ["x"], "dependsOn": [{"kind": "Process"}]}, "spec.dependsOn[0].name"),
        ({"args": ["x"], "ports": [70000]}, "spec"),
    ],
)
def test_schema_refuses_naming_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(Invalid) as info:
        PROCESS.validate(process(spec))
    assert info.value.field is not None
    assert info.value.field.startswith(field)


def test_liveness_needs_success_threshold_one() -> None:
    spec = {"args": ["x"], "livenessProbe": {"tcpSocket": {"port": 1}, "successThreshold": 2}}
    with pytest.raises(Invalid, match=r"livenessProbe\.successThreshold: must be 1"):
        PROCESS.validate(process(spec))


@given(desireds, observeds, st.floats(0, 3 * NOW))
def test_the_planned_status_is_valid_and_true_to_the_child(
    desired: Desired, observed: Observed, now: float
) -> None:
    step = plan(desired, observed, now)
    assert step.status is not None
    if step.action in (Action.STOP, Action.RESTART):  # not ready while it stops
        assert_stopping_status(
            PROCESS, step.status, deleting=desired.deleting, pid=observed.pid,
            observed_generation=observed.status.get("observedGeneration"),
            phases=("Starting", "Running"),
        )  # fmt: skip
        return
    PROCESS.validate_status(dict(step.status))
    assert step.status["observedGeneration"] == desired.generation
    assert ("pid" in step.status) == observed.running
    assert step.status["phase"] in ("Starting", "Running") or step.action is not Action.START
    assert plan(desired, observed, now) == step  # pure: the same inputs, the same plan
