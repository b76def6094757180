"""The Job plan, pure: completion, retries under back-off, the back-off limit, the
deadline, spec changes, suspension, deletion and dependencies, by example and by property
(hypothesis). Also the kind's schema and `desired_of`."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from process_support import assert_stopping_status

from setpoint.errors import Invalid
from setpoint.model import Object, get_condition
from setpoint.workloads.child_facts import ChildFacts
from setpoint.workloads.child_plan import BackoffSchema, ChildDesired, ChildExit, backoff_delay
from setpoint.workloads.job import (
    JOB,
    SUSPENDED_MESSAGE,
    Action,
    JobDesired,
    JobObserved,
    JobSpecSchema,
    desired_of,
    observe,
    plan,
    spec_hash,
)

NOW = 1_000.0


def wanted(generation: int, *, deleting: bool = False, **spec: Any) -> JobDesired:
    """A Job's desired state: its spec is the schema's defaults but for `spec`."""
    return ChildDesired(generation, JobSpecSchema(args=["migrate"], **spec), deleting)


def retry(initial: float, maximum: float) -> BackoffSchema:
    return BackoffSchema(initial_seconds=initial, max_seconds=maximum)


def failed_exit(code: int | None = 1, *, at: float = NOW) -> ChildExit:
    return ChildExit(code, None, f"exited with code {code}", at)


def test_first_start_is_a_fresh_run() -> None:
    step = plan(wanted(1), JobObserved(), NOW)
    assert step.action is Action.START
    assert step.fresh
    assert step.phase == "Running"
    assert step.wait_seconds == 0
    # With a deadline, the controller looks again when it falls due.
    assert plan(wanted(1, active_deadline_seconds=30), JobObserved(), NOW).wait_seconds == 30


def test_waits_for_dependencies_before_the_first_attempt() -> None:
    step = plan(wanted(1), JobObserved(unmet="waiting for Process/db to be Ready"), NOW)
    assert step.action is Action.WAIT
    assert step.phase == "Waiting"
    assert "Process/db" in step.reason


def test_success_completes_and_is_not_rerun() -> None:
    observed = JobObserved(generation=1, attempts=1, last_exit=ChildExit(0, None, "exited", NOW))
    step = plan(wanted(1), observed, NOW)
    assert (step.action, step.phase, step.outcome) == (Action.NOTHING, "Succeeded", "Complete")
    recorded = JobObserved(generation=1, attempts=1, finished="Complete")
    assert plan(wanted(1), recorded, NOW + 1e6).action is Action.NOTHING


def test_a_failure_backs_off_then_retries() -> None:
    desired = wanted(1, backoff=retry(10, 300))
    observed = JobObserved(generation=1, attempts=1, failed=1, last_exit=failed_exit())
    step = plan(desired, observed, NOW + 4)
    assert step.action is Action.WAIT
    assert step.phase == "Pending"
    assert step.wait_seconds == pytest.approx(6)
    step = plan(desired, observed, NOW + 10)
    assert step.action is Action.START
    assert not step.fresh


def test_retry_delay_doubles_to_the_cap() -> None:
    backoff = retry(10, 300)
    assert [backoff_delay(n, backoff) for n in range(8)] == [0, 10, 20, 40, 80, 160, 300, 300]


def test_failing_more_than_the_backoff_limit_fails() -> None:
    observed = JobObserved(generation=1, attempts=3, failed=3, last_exit=failed_exit())
    step = plan(wanted(1, backoff_limit=2), observed, NOW)
    assert (step.action, step.phase, step.outcome) == (
        Action.NOTHING,
        "Failed",
        "BackoffLimitExceeded",
    )
    assert "backoffLimit (2)" in step.reason


def test_the_deadline_stops_a_running_attempt() -> None:
    desired = wanted(1, active_deadline_seconds=30)
    observed = JobObserved(running=True, generation=1, started_at=NOW, attempts=1)
    step = plan(desired, observed, NOW + 10)
    assert step.action is Action.NOTHING
    assert step.wait_seconds == pytest.approx(20)  # look again at the deadline
    step = plan(desired, observed, NOW + 30)
    assert (step.action, step.phase, step.outcome) == (Action.STOP, "Failed", "DeadlineExceeded")


def test_the_deadline_cuts_a_back_off_short() -> None:
    desired = wanted(1, active_deadline_seconds=30, backoff=retry(100, 300))
    observed = JobObserved(
        generation=1, started_at=NOW, attempts=1, failed=1, last_exit=failed_exit(at=NOW + 5)
    )
    step = plan(desired, observed, NOW + 5)
    assert step.action is Action.WAIT
    assert step.wait_seconds == pytest.approx(25)
    step = plan(desired, observed, NOW + 30)
    assert step.outcome == "DeadlineExceeded"
    assert step.action is Action.NOTHING


def test_a_spec_change_restarts_a_running_attempt_from_scratch() -> None:
    step = plan(wanted(2), JobObserved(running=True, generation=1, attempts=3), NOW)
    assert step.action is Action.RESTART
    assert step.fresh
    assert "generation 1 -> 2" in step.reason


@pytest.mark.parametrize("finished", ["Complete", "BackoffLimitExceeded", "DeadlineExceeded"])
def test_a_spec_change_reruns_a_finished_job(finished: str) -> None:
    observed = JobObserved(generation=1, attempts=7, failed=7, finished=finished)  # type: ignore[arg-type]
    step = plan(wanted(2), observed, NOW)
    assert step.action is Action.START
    assert step.fresh


def test_deletion_stops_a_running_attempt() -> None:
    step = plan(wanted(1, deleting=True), JobObserved(running=True, generation=1), NOW)
    assert step.action is Action.STOP
    step = plan(wanted(1, deleting=True), JobObserved(generation=1), NOW)
    assert step.action is Action.NOTHING


def test_suspend_stops_a_running_attempt_and_says_so_before_the_stop_signal() -> None:
    observed = JobObserved(running=True, generation=1, pid=42, attempts=1, started_at=NOW)
    step = plan(wanted(2, suspend=True), observed, NOW)
    assert (step.action, step.reason) == (Action.STOP, SUSPENDED_MESSAGE)
    assert step.status is not None
    suspended = get_condition(step.status, "Suspended")
    assert suspended is not None
    assert (suspended["status"], suspended["reason"]) == ("True", "JobSuspended")
    assert [e.reason for e in step.events] == ["Killing", "Suspended"]


def test_a_suspended_job_starts_nothing_and_its_stopped_attempt_is_no_failure() -> None:
    stopped = ChildExit(0, None, "exited with code 0", NOW, NOW - 5, SUSPENDED_MESSAGE)
    status = {"startTime": "2026-01-01T00:00:00Z", "startedGeneration": 1, "attempts": 1}
    observed = observe(status, ChildFacts(ended=stopped), None, NOW)
    assert observed.failed == 0
    failed = dataclasses.replace(stopped, code=1, stop_reason="activeDeadlineSeconds exceeded")
    assert observe(status, ChildFacts(ended=failed), None, NOW).failed == 1
    step = plan(wanted(2, suspend=True, backoff_limit=0), observed, NOW)
    assert (step.action, step.phase, step.outcome) == (Action.NOTHING, "Suspended", None)
    assert step.status is not None
    assert step.status["failed"] == 0
    assert "startTime" not in step.status  # the deadline starts again on resume
    for never in (JobObserved(), JobObserved(unmet="waiting for Process/db to be Ready")):
        assert plan(wanted(1, suspend=True), never, NOW).phase == "Suspended"


def test_a_suspended_job_says_suspended_whatever_else_holds_it_back() -> None:
    """A refused `user:` is reported (`Stalled`) once it is resumed; suspended, it is not
    what the Job waits for."""
    refused = ("UserNotAllowed", "this engine may not run commands as root")
    step = plan(wanted(2, suspend=True), JobObserved(refused=refused), NOW)
    assert (step.action, step.phase, step.stall) == (Action.NOTHING, "Suspended", None)
    assert step.status is not None
    ready = get_condition(step.status, "Ready")
    assert ready is not None
    assert (ready["reason"], ready["message"]) == ("Suspended", SUSPENDED_MESSAGE)
    assert plan(wanted(3), JobObserved(refused=refused), NOW).stall == refused


def test_resuming_starts_at_once_and_the_deadline_counts_from_then() -> None:
    """The attempt a suspension stopped neither completed (though it exited 0) nor failed:
    resumed, the run goes on without a back-off, its counts kept."""
    stopped = ChildExit(0, None, "exited with code 0", NOW, NOW - 5, SUSPENDED_MESSAGE)
    desired = wanted(3, active_deadline_seconds=30, backoff=retry(100, 300))
    status = {"startedSpecHash": spec_hash(desired.spec)}  # as it was before `suspend`
    observed = JobObserved(generation=2, attempts=3, failed=2, last_exit=stopped, status=status)
    step = plan(desired, observed, NOW)
    assert (step.action, step.reason, step.fresh) == (Action.START, "resumed", False)
    assert step.wait_seconds == 30
    assert step.status is not None
    assert (step.status["attempts"], step.status["failed"]) == (4, 2)


def test_suspend_alone_is_no_spec_change_but_any_other_field_is() -> None:
    spec = JobSpecSchema.model_validate({"args": ["migrate"], "backoffLimit": 2})
    suspended = JobSpecSchema.model_validate({"args": ["migrate"], "backoffLimit": 2,
                                              "suspend": True})  # fmt: skip
    assert spec_hash(spec) == spec_hash(suspended)
    changed = JobSpecSchema.model_validate({"args": ["migrate"], "backoffLimit": 3})
    assert spec_hash(changed) != spec_hash(spec)
    # a default left unsaid is not part of it: a release that changes it reruns nothing
    assert spec_hash(JobSpecSchema(args=["migrate"])) != spec_hash(
        JobSpecSchema(args=["migrate"], backoff_limit=6)
    )
    finished = {"startedSpecHash": spec_hash(spec), "startedGeneration": 1}
    done = JobObserved(generation=1, attempts=1, finished="Complete", status=finished)
    resumed = plan(ChildDesired(3, spec), done, NOW)
    assert (resumed.action, resumed.phase) == (Action.NOTHING, "Succeeded")
    assert resumed.status is not None
    assert resumed.status["startedGeneration"] == 3  # Started and Completed still hold
    assert get_condition(resumed.status, "Suspended") is None  # a finished Job is not
    rerun = plan(ChildDesired(3, changed), done, NOW)
    assert (rerun.action, rerun.fresh) == (Action.START, True)
    running = JobObserved(running=True, generation=1, attempts=1, status=finished)
    assert plan(ChildDesired(3, spec), running, NOW).action is Action.NOTHING


def test_desired_of_reads_the_wire_form_with_defaults() -> None:
    obj: Object = {
        "apiVersion": JOB.api_version,
        "kind": "Job",
        "metadata": {"name": "m", "namespace": "default", "generation": 3},
        "spec": {"args": ["true"], "activeDeadlineSeconds": 60, "backoff": {"initialSeconds": 1}},
    }
    desired = desired_of(obj)
    assert desired.generation == 3
    assert not desired.deleting
    assert desired.spec.backoff_limit == 6
    assert desired.spec.active_deadline_seconds == 60.0
    assert desired.spec.backoff == retry(1.0, 300.0)


def test_the_schema_refuses_a_negative_backoff_limit() -> None:
    obj: Object = {
        "apiVersion": JOB.api_version,
        "kind": "Job",
        "metadata": {"name": "m", "namespace": "default"},
        "spec": {"args": ["true"], "backoffLimit": -1},
    }
    with pytest.raises(Invalid, match="backoffLimit"):
        JOB.validate(obj)


# -- properties ------------------------------------------------------------------------

outcomes = st.sampled_from([None, "Complete", "BackoffLimitExceeded", "DeadlineExceeded"])
exits = st.builds(
    ChildExit,
    st.one_of(st.none(), st.integers(0, 3)),
    st.none(),
    st.just("exited"),
    st.floats(NOW - 1000, NOW + 1000),
)
desireds = st.builds(
    wanted,
    generation=st.integers(1, 3),
    backoff_limit=st.integers(0, 8),
    active_deadline_seconds=st.one_of(st.none(), st.floats(0.5, 1000)),
    backoff=st.builds(retry, st.floats(0.01, 50), st.floats(0.01, 500)),
    deleting=st.booleans(),
    suspend=st.booleans(),
)
observeds = st.builds(
    JobObserved,
    running=st.booleans(),
    generation=st.one_of(st.none(), st.integers(1, 3)),
    started_at=st.one_of(st.none(), st.floats(NOW - 2000, NOW)),
    attempts=st.integers(0, 10),
    failed=st.integers(0, 10),
    last_exit=st.one_of(st.none(), exits),
    finished=outcomes,
    unmet=st.one_of(st.none(), st.just("waiting for Process/db to be Ready")),
)


@given(desireds, observeds, st.floats(NOW - 100, NOW + 5000))
def test_plans_are_sane(desired: JobDesired, observed: JobObserved, now: float) -> None:
    step = plan(desired, observed, now)
    assert step.wait_seconds >= 0
    if observed.running:
        assert step.action is not Action.START  # never two attempts at once
        if step.action is Action.RESTART:
            assert observed.generation != desired.generation
    if desired.deleting or desired.spec.suspend:
        assert step.action in (Action.STOP, Action.NOTHING)  # a suspended Job starts nothing
    if step.action in (Action.START, Action.RESTART) and not step.fresh:
        assert observed.unmet is None
    same_run = observed.generation == desired.generation
    succeeded = observed.finished == "Complete" or (
        observed.last_exit is not None and observed.last_exit.succeeded
    )
    if same_run and not observed.running and succeeded and observed.finished in (None, "Complete"):
        assert step.action is Action.NOTHING  # a success is never run again
    if same_run and not observed.running and observed.finished is not None:
        assert step.action is Action.NOTHING


@given(
    st.integers(0, 6),
    st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=1, max_size=20),
    st.one_of(st.none(), st.floats(1, 500)),
    st.lists(st.floats(0, 100), min_size=20, max_size=20),
)
def test_a_run_never_exceeds_backoff_limit_plus_one_attempts(
    backoff_limit: int,
    codes: list[int | None],
    deadline: float | None,
    durations: list[float],
) -> None:
    """Drive the plan as the controller would, each attempt ending with the next code
    (None: killed) after the next duration; the run ends, within the limits."""
    desired = wanted(
        1, backoff_limit=backoff_limit, active_deadline_seconds=deadline, backoff=retry(10, 300)
    )
    observed = JobObserved()
    now = NOW
    outcome = None
    for i in range(200):
        step = plan(desired, observed, now)
        assert step.wait_seconds >= 0
        if step.action is Action.START:
            assert not observed.running
            attempts = 1 if step.fresh else observed.attempts + 1
            started = now if step.fresh else observed.started_at
            observed = JobObserved(
                running=True, generation=1, started_at=started, attempts=attempts,
                failed=0 if step.fresh else observed.failed,
            )  # fmt: skip
            assert observed.attempts <= backoff_limit + 1
            now += durations[i % len(durations)]
            code = codes[(observed.attempts - 1) % len(codes)]
            if deadline is not None and now >= observed.started_at + deadline:  # type: ignore[operator]
                now = observed.started_at + deadline  # type: ignore[operator]
                continue  # the deadline comes first: the next look stops it
            failed = observed.failed + (0 if code == 0 else 1)
            observed = JobObserved(
                generation=1, started_at=observed.started_at, attempts=observed.attempts,
                failed=failed, last_exit=ChildExit(code, None, "exited", now),
            )  # fmt: skip
        elif step.action is Action.STOP:
            assert step.outcome == "DeadlineExceeded"
            observed = JobObserved(
                generation=1, started_at=observed.started_at, attempts=observed.attempts,
                failed=observed.failed + 1, last_exit=ChildExit(None, None, "killed", now),
                finished="DeadlineExceeded",
            )  # fmt: skip
        elif step.action is Action.WAIT:
            assert step.wait_seconds > 0
            now += step.wait_seconds
        else:
            assert step.action is Action.NOTHING
            assert step.outcome is not None
            outcome = step.outcome
            break
        assert observed.failed <= backoff_limit + 1
    assert outcome is not None, "the run never ended"
    assert observed.attempts <= backoff_limit + 1
    if outcome == "BackoffLimitExceeded":
        assert observed.failed == backoff_limit + 1
    # Once ended, it stays ended however much time passes.
    ended = JobObserved(
        generation=1, started_at=observed.started_at, attempts=observed.attempts,
        failed=observed.failed, last_exit=observed.last_exit, finished=outcome,
    )  # fmt: skip
    assert plan(desired, ended, now + 1e6).action is Action.NOTHING


@given(desireds, observeds, st.floats(NOW - 100, NOW + 5000))
def test_the_planned_status_is_valid(
    desired: JobDesired, observed: JobObserved, now: float
) -> None:
    step = plan(desired, observed, now)
    assert step.status is not None
    if step.action in (Action.STOP, Action.RESTART):  # not ready while it stops
        assert_stopping_status(
            JOB, step.status, deleting=desired.deleting, pid=observed.pid,
            observed_generation=observed.status.get("observedGeneration"), phases=("Running",),
        )  # fmt: skip
        return
    JOB.validate_status(dict(step.status))
    assert step.status["phase"] == step.phase
    assert ("pid" in step.status) == observed.running
    if step.outcome in ("BackoffLimitExceeded", "DeadlineExceeded"):
        assert step.stall is not None
        assert step.stall[0] == step.outcome
    assert plan(desired, observed, now) == step  # pure: the same inputs, the same plan
