"""`setpoint.engine.forecast`, pure: the steps from stored objects to proposed ones (the
check against a real engine is tests/cli/test_cli_plan.py)."""

from __future__ import annotations

from typing import Any

from setpoint.engine.forecast import (
    JOB_OUTCOME,
    KEPT_RUNNING,
    PROBES_PASS,
    forecast,
    forecast_deletion,
)
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


def running(
    name: str, *deps: tuple[str, str], ready: bool = True, owner: str | None = None
) -> dict[str, Any]:
    """A stored Process `name`, Ready or not, depending on `deps` ((name, condition))."""
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "Deployment", "name": owner, "uid": "u"}]
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": meta,
        "spec": {
            "args": ["sleep", "1000"],
            "dependsOn": [{"kind": "Process", "name": d, "condition": c} for d, c in deps],
        },
        "status": {"conditions": [{"type": "Ready", "status": str(ready)}]},
    }


def test_deleting_a_dependency_stops_it_and_its_ready_dependents_in_turn() -> None:
    db = running("db")
    api = running("api", ("db", "Ready"))
    web = running("web", ("api", "Ready"))
    log = running("log", ("api", "Started"))  # Started still holds: api keeps running
    idle = running("idle", ("db", "Ready"), ready=False)  # not Ready already: no change
    result = forecast_deletion([db, api, web, log, idle], [db])
    assert [(s.name, s.action) for s in result.steps] == [
        ("db", "stop"),
        ("api", "not-ready"),
        ("web", "not-ready"),
    ]
    assert result.steps[1].reason == "Process/db is deleted; kept running"
    assert result.steps[2].reason == "Process/api is not Ready; kept running"
    assert result.assumptions == (KEPT_RUNNING,)


def test_deleting_a_deployment_stops_its_replicas_and_a_dependent_is_not_ready() -> None:
    replicas = [running(f"web-abc-{i}", owner="web") for i in range(2)]
    api = running("api", ("web-abc-0", "Started"))  # any condition: what is gone meets none
    result = forecast_deletion([*replicas, api, deployment(2)], [deployment(2)])
    assert [(s.kind, s.name, s.action, s.target) for s in result.steps] == [
        ("Deployment", "web", "stop", "web-abc-0"),
        ("Deployment", "web", "stop", "web-abc-1"),
        ("Process", "api", "not-ready", ""),
    ]


def test_deleting_an_object_and_its_dependent_stops_both() -> None:
    db, api = running("db"), running("api", ("db", "Ready"))
    result = forecast_deletion([db, api], [api, db])
    assert [(s.name, s.action) for s in result.steps] == [("api", "stop"), ("db", "stop")]
    assert result.assumptions == ()
