"""When a process-compose project's `setpoint up` ends by itself (`setpoint.cli.run_end.
project_end`): every member ended or skipped, skipped transitively, `exit_on_skipped` at
once, and never on a status of an earlier spec or restart request. Pure: objects in."""

from __future__ import annotations

from typing import Any

from setpoint.cli.run_end import project_end
from setpoint.model import Object


def member(
    name: str,
    phase: str | None,
    *,
    kind: str = "Process",
    depends_on: dict[str, str] | None = None,
    started: bool = True,
    annotations: dict[str, str] | None = None,
    **status: Any,
) -> Object:
    """A Process or Job of a project as an informer has it: generation 1, `phase`, its
    child of this spec started or not, `dependsOn` as {Kind/name: condition}."""
    state: dict[str, Any] = {"observedGeneration": 1, "conditions": [], **status}
    if phase is not None:
        state["phase"] = phase
    if started:
        state["startedGeneration"] = 1
        state["lastExit"] = {"code": 0 if phase == "Succeeded" else 1}
    if phase == "Succeeded" and kind == "Job":
        state["conditions"] = [{"type": "Complete", "status": "True"}]
    deps = [
        {"kind": ref.split("/")[0], "name": ref.split("/")[1], "condition": condition}
        for ref, condition in (depends_on or {}).items()
    ]
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": "default",
            "generation": 1,
            "annotations": {"setpoint.dev/compose-project": "p.yaml", **(annotations or {})},
        },
        "spec": {"dependsOn": deps},
        "status": state,
    }


def project(*members: Object) -> dict[str, Object]:
    return {f"{m['kind']}/{m['metadata']['name']}": m for m in members}


def test_the_run_ends_with_0_once_every_member_has_ended() -> None:
    ended = project(member("a", "Succeeded"), member("b", "Failed"))
    end = project_end(ended)
    assert end is not None
    assert end.code == 0
    assert end.why == "every process has ended (2 ended): stopping"
    assert project_end({}) is None


def test_a_member_still_running_waiting_or_suspended_keeps_the_run_going() -> None:
    for phase in ("Running", "Pending", "CrashLoopBackOff", "Suspended", None):
        assert project_end(project(member("a", "Succeeded"), member("b", phase))) is None


def test_a_status_of_an_earlier_spec_or_restart_request_is_not_an_end() -> None:
    old_spec = member("b", "Succeeded", observedGeneration=0)
    assert project_end(project(member("a", "Succeeded"), old_spec)) is None
    asked = member("b", "Succeeded", annotations={"setpoint.dev/restartedAt": "t2"})
    assert project_end(project(asked)) is None
    asked["status"]["restartedAt"] = "t2"  # the run asked for has ended
    assert project_end(project(asked)) is not None


def test_dependents_of_a_dependency_that_can_no_longer_be_met_are_skipped() -> None:
    members = project(
        member("seed", "Failed", kind="Job"),
        member("app", "Waiting", started=False, depends_on={"Job/seed": "Complete"}),
        member("report", "Waiting", started=False, depends_on={"Process/app": "Completed"}),
        member("tidy", "Succeeded", depends_on={"Job/seed": "Completed"}),
    )
    end = project_end(members)
    assert end is not None
    assert end.code == 0
    assert end.why == (
        "every process has ended (2 ended, 2 skipped: Process/app: Job/seed ended without "
        "being Complete; Process/report: Process/app was skipped): stopping"
    )


def test_a_dependency_that_can_still_be_met_keeps_its_dependent_waiting() -> None:
    for seed in (
        member("seed", "Running", kind="Job"),  # may still succeed
        member("seed", "Succeeded", kind="Job", annotations={"setpoint.dev/restartedAt": "t"}),
    ):
        waiting = member("app", "Waiting", started=False, depends_on={"Job/seed": "Complete"})
        assert project_end(project(seed, waiting)) is None
    # a dependency outside the project may yet be created: not skipped
    outside = member("app", "Waiting", started=False, depends_on={"Process/elsewhere": "Ready"})
    assert project_end(project(member("a", "Succeeded"), outside)) is None


def test_exit_on_skipped_ends_the_run_with_1_at_once() -> None:
    members = project(
        member("server", "Failed"),
        member(
            "client",
            "Waiting",
            started=False,
            depends_on={"Process/server": "Ready"},
            annotations={"setpoint.dev/exit-on-skipped": "true"},
        ),
        member("other", "Running"),
    )
    end = project_end(members)
    assert end is not None
    assert end.code == 1
    assert end.why == (
        "Process/client was skipped: Process/server ended without being Ready "
        "(setpoint.dev/exit-on-skipped): stopping everything"
    )
