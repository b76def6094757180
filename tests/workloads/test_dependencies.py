"""dependsOn, pure: which dependency is unmet and why, cycles, and the cache index and
mapper that wake dependents."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from setpoint.model import Object
from setpoint.runtime.cache import Cache
from setpoint.runtime.reconciler import Request
from setpoint.workloads.dependencies import (
    DEPENDS_ON_INDEX,
    Dependency,
    dependency_keys,
    dependents_of,
    find_cycle,
    holds,
    unmet,
)


def obj(
    name: str,
    *,
    conditions: list[dict[str, Any]] | None = None,
    depends_on: list[dict[str, Any]] | None = None,
    namespace: str = "default",
) -> Object:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
        "spec": {"args": ["x"], "dependsOn": depends_on or []},
        "status": {"conditions": conditions or []},
    }


def lookup_in(*objects: Object) -> Any:
    table = {(o["kind"], o["metadata"]["name"], o["metadata"]["namespace"]): o for o in objects}
    return lambda kind, name, namespace: table.get((kind, name, namespace))


def dep(name: str, condition: str = "Ready", **extra: Any) -> Dependency:
    return Dependency.model_validate(
        {"kind": "Process", "name": name, "condition": condition, **extra}
    )


def test_all_met() -> None:
    db = obj("db", conditions=[{"type": "Ready", "status": "True"}])
    assert unmet([dep("db")], lookup_in(db), namespace="default") is None
    assert unmet([], lookup_in(), namespace="default") is None


def test_absent_dependency() -> None:
    message = unmet([dep("db")], lookup_in(), namespace="default")
    assert message == "waiting for Process/db to be Ready: it does not exist"


def test_not_yet_reported() -> None:
    message = unmet([dep("db")], lookup_in(obj("db")), namespace="default")
    assert message == "waiting for Process/db to be Ready"


def test_reported_false_gives_its_reason() -> None:
    db = obj("db", conditions=[{"type": "Ready", "status": "False", "reason": "CrashLoopBackOff"}])
    message = unmet([dep("db")], lookup_in(db), namespace="default")
    assert message == "Process/db is not Ready: CrashLoopBackOff"


def test_first_unmet_is_named_and_conditions_differ() -> None:
    db = obj("db", conditions=[{"type": "Ready", "status": "True"}])
    migrate = obj("migrate", conditions=[{"type": "Ready", "status": "False"}])
    deps = [dep("db"), dep("migrate", "Complete"), dep("other")]
    assert unmet(deps, lookup_in(db, migrate), namespace="default") == (
        "waiting for Process/migrate to be Complete"
    )


def test_namespace_defaults_to_the_dependents() -> None:
    db = obj("db", namespace="prod", conditions=[{"type": "Ready", "status": "True"}])
    assert unmet([dep("db")], lookup_in(db), namespace="prod") is None
    assert unmet([dep("db")], lookup_in(db), namespace="dev") is not None
    assert unmet([dep("db", namespace="prod")], lookup_in(db), namespace="dev") is None


def test_find_cycle() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    assert find_cycle({"a": ["b"], "b": ["a"]}) == ["a", "b", "a"]
    assert find_cycle({"a": ["a"]}) == ["a", "a"]
    assert find_cycle({"x": ["a"], "a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}) is None


@given(st.dictionaries(st.sampled_from("abcdef"), st.lists(st.sampled_from("abcdef"))))
def test_find_cycle_returns_a_real_cycle(edges: dict[str, list[str]]) -> None:
    cycle = find_cycle(edges)
    if cycle is None:
        # No cycle: a topological order exists (Kahn's algorithm consumes every node).
        nodes = set(edges) | {t for ts in edges.values() for t in ts}
        remaining = {n: set(edges.get(n, ())) for n in nodes}
        while remaining:
            free = [n for n, ts in remaining.items() if not ts & set(remaining)]
            assert free, f"find_cycle missed a cycle in {edges}"
            for n in free:
                del remaining[n]
    else:
        assert cycle[0] == cycle[-1]
        for a, b in itertools.pairwise(cycle):
            assert b in edges.get(a, ())


def test_index_and_mapper_wake_dependents() -> None:
    cache = Cache({DEPENDS_ON_INDEX: dependency_keys})
    web = obj("web", depends_on=[{"kind": "Process", "name": "db"}])
    other = obj("other", depends_on=[{"kind": "Process", "name": "db", "namespace": "prod"}])
    cache.put(web)
    cache.put(other)
    cache.put(obj("db"))
    assert list(dependency_keys(web)) == ["Process/default/db"]
    mapper = dependents_of(cache)
    assert list(mapper(obj("db"))) == [Request("web", "default")]
    assert list(mapper(obj("db", namespace="prod"))) == [Request("other", "default")]
    assert list(mapper(obj("web"))) == []


# -- Started and Completed (process-compose's process_started / process_completed) -------


def child(
    name: str,
    *,
    kind: str = "Process",
    generation: int = 1,
    phase: str | None = None,
    started_generation: int | None = None,
    last_exit: dict[str, Any] | None = None,
    conditions: list[dict[str, Any]] | None = None,
) -> Object:
    status: dict[str, Any] = {"conditions": conditions or []}
    if phase is not None:
        status["phase"] = phase
    if started_generation is not None:
        status["startedGeneration"] = started_generation
    if last_exit is not None:
        status["lastExit"] = last_exit
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name, "namespace": "default", "generation": generation},
        "status": status,
    }


def test_started_once_a_child_of_the_current_spec_has_started() -> None:
    started = dep("db", "Started")
    assert holds(started, child("db", phase="Waiting")) == (
        "waiting for Process/db to be Started (phase Waiting)"
    )
    assert holds(started, child("db", phase="Running", started_generation=1)) is None
    # Its startup probe has not passed yet.
    assert holds(started, child("db", phase="Starting", started_generation=1)) is not None
    # It stays Started after its child exited, even while it backs off to restart...
    crashed = {"code": 1, "reason": "exited with code 1"}
    looping = child("db", phase="CrashLoopBackOff", started_generation=1, last_exit=crashed)
    assert holds(started, looping) is None
    # ...but not once its spec changed (a new child has to start).
    assert holds(started, child("db", generation=2, phase="Running", started_generation=1))


def test_completed_once_the_child_exited_for_good_whatever_its_code() -> None:
    completed = dep("seed", "Completed")
    failed = {"code": 3, "reason": "exited with code 3"}
    assert holds(completed, child("seed", phase="Running", started_generation=1)) == (
        "waiting for Process/seed to be Completed (phase Running)"
    )
    assert (
        holds(completed, child("seed", phase="Failed", started_generation=1, last_exit=failed))
        is None
    )
    ok = {"code": 0, "reason": "exited with code 0"}
    job = Dependency.model_validate({"kind": "Job", "name": "seed", "condition": "Completed"})
    assert (
        holds(job, child("seed", kind="Job", phase="Succeeded", started_generation=1, last_exit=ok))
        is None
    )
    # Will be restarted: not completed.
    looping = child("seed", phase="CrashLoopBackOff", started_generation=1, last_exit=failed)
    assert holds(completed, looping) is not None
    # Failed to start at all (no child ran for this spec): not completed.
    assert holds(completed, child("seed", phase="Failed")) is not None
    # A finished run of an earlier spec does not count.
    old = child("seed", generation=2, phase="Succeeded", started_generation=1, last_exit=ok)
    assert holds(completed, old) is not None


def test_no_condition_holds_while_a_restart_is_not_yet_honoured() -> None:
    """`setpoint restart job/seed` (and `up` running a process-compose file again): what
    the Job reports is of the run before until the request is honoured, so a dependent does
    not start on it."""
    ok = {"code": 0, "reason": "exited with code 0"}
    done = child(
        "seed",
        kind="Job",
        phase="Succeeded",
        started_generation=1,
        last_exit=ok,
        conditions=[{"type": "Complete", "status": "True"}],
    )
    job = Dependency.model_validate({"kind": "Job", "name": "seed", "condition": "Complete"})
    assert holds(job, done) is None
    done["metadata"]["annotations"] = {"setpoint.dev/restartedAt": "2026-12-07T07:00:00.000000Z"}
    assert holds(job, done) == "waiting for Job/seed to run again (setpoint restart)"
    for condition in ("Completed", "Started"):
        assert holds(job.model_copy(update={"condition": condition}), done) is not None
    done["status"]["restartedAt"] = "2026-12-07T07:00:00.000000Z"  # honoured: it ran again
    assert holds(job, done) is None


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"condition": "Healthy"},
            "'Healthy' is not a condition: want one of Ready, Complete, Started, Completed",
        ),
        (
            {"condition": "process_completed"},
            "'process_completed' is not a condition: want one of Ready, Complete, Started,"
            " Completed; for process-compose's process_completed, write Completed",
        ),
        (
            {"kind": "Deployment", "condition": "Started"},
            "condition Started is for a Process or a Job, not a Deployment",
        ),
    ],
)
def test_wrong_conditions_are_refused_naming_the_valid_ones(
    entry: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        Dependency.model_validate({"kind": "Process", "name": "db", **entry})
    assert caught.value.errors()[0]["msg"] == message


def test_started_and_completed_accept_every_name_of_process_and_job() -> None:
    for kind in ("Process", "process", "proc", "processes", "Job", "jobs"):
        Dependency.model_validate({"kind": kind, "name": "x", "condition": "Completed"})


_PHASES = st.sampled_from(
    [None, "Pending", "Waiting", "Starting", "Running", "Succeeded", "Failed", "CrashLoopBackOff"]
)
_CONDITION = st.sampled_from([None, "True", "False", "Unknown"])


@st.composite
def dependencies(draw: st.DrawFn) -> Object:
    conditions = [
        {"type": type_, "status": value, "reason": "Because"}
        for type_ in ("Ready", "Complete")
        if (value := draw(_CONDITION)) is not None
    ]
    exit_ = draw(st.sampled_from([None, {"code": 0, "reason": "ok"}, {"code": 2, "reason": "no"}]))
    return child(
        "d",
        generation=draw(st.integers(1, 3)),
        phase=draw(_PHASES),
        started_generation=draw(st.sampled_from([None, 1, 2, 3])),
        last_exit=exit_,
        conditions=conditions,
    )


@given(dependencies())
def test_what_each_condition_means(obj: Object) -> None:
    status = obj["status"]
    met = {
        c: holds(dep("d", c), obj) is None for c in ("Ready", "Complete", "Started", "Completed")
    }
    # Completed implies Started: a child that exited had started.
    assert not met["Completed"] or met["Started"]
    # Neither holds for a spec no child has started for yet.
    if status.get("startedGeneration") != obj["metadata"]["generation"]:
        assert not met["Started"]
        assert not met["Completed"]
    # Completed: ended for good, after running.
    if met["Completed"]:
        assert status["phase"] in ("Succeeded", "Failed")
        assert status["lastExit"] is not None
    # Ready and Complete are the conditions of those names, whatever the phase says.
    for type_ in ("Ready", "Complete"):
        assert met[type_] == (condition_status(obj, type_) == "True")


def condition_status(obj: Object, type_: str) -> str | None:
    found = [c for c in obj["status"]["conditions"] if c["type"] == type_]
    return found[0]["status"] if found else None


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "gone"]),
            st.sampled_from(["Ready", "Complete", "Started", "Completed"]),
        ),
        max_size=5,
    ),
    st.data(),
)
def test_unmet_names_the_first_dependency_that_does_not_hold(
    entries: list[tuple[str, str]], data: st.DataObject
) -> None:
    world = {name: data.draw(dependencies()) for name in ("a", "b", "c")}
    for name, obj_ in world.items():
        obj_["metadata"]["name"] = name
    deps = [dep(name, condition) for name, condition in entries]
    found = unmet(deps, lambda kind, name, namespace: world.get(name), namespace="default")
    reasons = [holds(d, world.get(d.name)) for d in deps]
    assert found == next((r for r in reasons if r is not None), None)
