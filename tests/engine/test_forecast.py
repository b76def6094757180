"""`setpoint.engine.forecast`, pure: the steps from stored objects to proposed ones (the
check against a real engine is tests/cli/test_cli_plan.py)."""

from __future__ import annotations

from typing import Any

from setpoint.engine.forecast import JOB_OUTCOME, PROBES_PASS, forecast
from setpoint.engine.kinds import builtin_kinds

NOW = 1_700_000_000.0


def deployment(replicas: int, version: str = "v1", min_ready: float = 0) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "minReadySeconds": min_ready,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"args": ["sleep", "1000"], "env": {"V": version}},
            },
        },
    }
    builtin_kinds().for_object(obj).validate(obj)
    return obj


def job() -> dict[str, Any]:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "migrate", "namespace": "default"},
        "spec": {"args": ["true"]},
    }


def test_a_new_deployment_starts_its_replicas_then_they_become_ready() -> None:
    result = forecast([], [deployment(2)], NOW)
    assert [s.action for s in result.steps] == ["start", "start", "ready", "ready"]
    assert [s.order for s in result.steps] == [1, 2, 3, 4]
    assert result.settled
    assert result.assumptions == (PROBES_PASS,)


def test_min_ready_seconds_moves_the_simulated_clock_on_and_settles() -> None:
    result = forecast([], [deployment(2, min_ready=30)], NOW)
    assert [s.action for s in result.steps] == ["start", "start", "ready", "ready"]
    assert result.settled


def test_a_new_job_runs_with_an_upper_bound_of_attempts_and_an_unknown_outcome() -> None:
    result = forecast([], [job()], NOW)
    assert [(s.kind, s.action, s.attempts) for s in result.steps] == [("Job", "run", 7)]
    assert result.steps[0].as_dict()["attempts"] == 7
    assert JOB_OUTCOME in result.assumptions


def test_a_kind_it_does_not_forecast_says_so_and_the_budget_ends_a_forecast() -> None:
    changed = job()
    changed["spec"] = {"args": ["false"]}
    result = forecast([job()], [changed], NOW)
    assert [(s.kind, s.action) for s in result.steps] == [("Job", "not-forecast")]
    assert not forecast([], [deployment(3)], NOW, budget=1).settled


def test_nothing_to_do() -> None:
    assert forecast([], [], NOW).steps == ()
