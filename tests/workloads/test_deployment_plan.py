"""The Deployment planner, pure: rolling updates simulated step by step against a world in
which replicas become ready and go away at random moments (Hypothesis picks them), and
the invariants Kubernetes promises checked at every step."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.errors import Invalid
from setpoint.model import get_condition
from setpoint.workloads.deployment import (
    DEPLOYMENT,
    DeploymentSpecSchema,
    Desired,
    Observed,
    Plan,
    Replica,
    Revision,
    plan,
    resolve_bound,
    substitute,
    template_hash,
)


def desired(
    hash_: str = "new",
    *,
    replicas: int = 3,
    max_surge: int = 1,
    max_unavailable: int = 0,
    recreate: bool = False,
    ports: tuple[int, int] | None = None,
    **spec: Any,
) -> Desired:
    """A Deployment `web` at generation 2 whose template hashes to `hash_`; `spec` gives
    more fields of its spec (snake_case)."""
    strategy: dict[str, Any] = (
        {"type": "Recreate"}
        if recreate
        else {"rollingUpdate": {"maxSurge": max_surge, "maxUnavailable": max_unavailable}}
    )
    body: dict[str, Any] = {
        "replicas": replicas,
        "strategy": strategy,
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"args": [hash_]}},
        **spec,
    }
    if ports is not None:
        body["portRange"] = {"start": ports[0], "end": ports[1]}
    return Desired("web", 2, DeploymentSpecSchema.model_validate(body), hash_)


def cond(status: Mapping[str, Any], type_: str) -> dict[str, Any]:
    return get_condition(dict(status), type_) or {}


class World:
    """Replicas that become ready `lag` steps after creation and vanish `lag` steps
    after deletion; the planner is asked once per step."""

    def __init__(self, rng: random.Random, replicas: list[Replica], *, stuck: bool = False) -> None:
        self.rng = rng
        self.stuck = stuck
        """New replicas never get ready."""
        self.replicas = {r.name: r for r in replicas}
        self.pending_ready: dict[str, int] = {}
        self.pending_gone: dict[str, int] = {}
        self.status: dict[str, Any] = {"observedGeneration": 1}

    def observed(self, revisions: tuple[Revision, ...] = ()) -> Observed:
        return Observed(tuple(self.replicas.values()), revisions, self.status)

    def step(self, d: Desired, now: float) -> None:
        self.carry_out(d, plan(d, self.observed(), now), now)

    def carry_out(self, d: Desired, out: Plan, now: float) -> None:
        self.status = dict(out.status)
        for new in out.create:
            assert new.name not in self.replicas, "a name is reused while still in use"
            self.replicas[new.name] = Replica(new.name, d.hash, port=new.port)
            if not self.stuck:
                self.pending_ready[new.name] = self.rng.randint(0, 3)
        for name in out.delete:
            r = self.replicas[name]
            self.replicas[name] = dataclasses.replace(r, deleting=True, ready=False)
            self.pending_gone[name] = self.rng.randint(0, 3)
            self.pending_ready.pop(name, None)
        for name, left in list(self.pending_ready.items()):
            if left == 0:
                r = self.replicas[name]
                self.replicas[name] = dataclasses.replace(r, ready=True, ready_since=now)
                del self.pending_ready[name]
            else:
                self.pending_ready[name] = left - 1
        for name, left in list(self.pending_gone.items()):
            if left == 0:
                del self.replicas[name], self.pending_gone[name]
            else:
                self.pending_gone[name] = left - 1

    def live(self) -> list[Replica]:
        return [r for r in self.replicas.values() if not r.deleting]


@settings(max_examples=60, deadline=None)
@given(
    replicas=st.integers(1, 8),
    surge=st.integers(0, 3),
    unavailable=st.integers(0, 3),
    seed=st.integers(0, 2**32),
)
def test_a_rolling_update_keeps_its_bounds_and_converges(
    replicas: int, surge: int, unavailable: int, seed: int
) -> None:
    if surge == 0 and unavailable == 0:
        unavailable = 1
    old = [Replica(f"web-old-{i}", "old", ready=True, ready_since=0.0) for i in range(replicas)]
    world = World(random.Random(seed), old)
    d = desired(replicas=replicas, max_surge=surge, max_unavailable=unavailable)
    for t in range(1, 200):
        world.step(d, float(t))
        live = world.live()
        assert len(live) <= replicas + surge
        available = [r for r in live if r.available(float(t), 0)]
        assert len(available) >= replicas - unavailable
        if all(r.hash == "new" and r.ready for r in live) and len(live) == replicas:
            break
    else:
        pytest.fail(f"did not converge: {world.replicas}")
    world.step(d, 300.0)
    assert cond(world.status, "Ready")["status"] == "True"
    assert world.status["updatedReplicas"] == replicas
    assert cond(world.status, "Progressing")["reason"] == "NewReplicaSetAvailable"


@settings(max_examples=40, deadline=None)
@given(
    replicas=st.integers(1, 5),
    stuck=st.booleans(),
    remediation=st.sampled_from(["none", "rollback"]),
    seed=st.integers(0, 2**32),
)
def test_a_second_look_at_the_same_world_changes_nothing(
    replicas: int, stuck: bool, remediation: str, seed: int
) -> None:
    """Level-triggered and quiet: whatever the world, planning again from the status just
    planned (nothing observed has changed) gives the same status, the same actions and
    no event, so a controller that looks twice writes once. (`restart` is left out: it
    restarts once per missed deadline, and says so in the next look.)"""
    old = [Replica(f"web-old-{i}", "old", ready=True, ready_since=0.0) for i in range(replicas)]
    world = World(random.Random(seed), old, stuck=stuck)
    world.status = {"observedGeneration": 1, "lastCompleteRevision": 1}
    revisions = (Revision("web-old", "old", 1, {"spec": {"args": ["old"]}}),
                 Revision("web-new", "new", 2))  # fmt: skip
    d = desired(replicas=replicas, progress_deadline_seconds=3, remediation=remediation)
    for t in range(1, 30):
        observed = world.observed(revisions)
        first = plan(d, observed, float(t))
        again = plan(d, dataclasses.replace(observed, status=first.status), float(t))
        assert again.status == first.status
        assert again.events == ()
        assert (again.create, again.delete) == (first.create, first.delete)
        assert again.rollback == first.rollback
        world.carry_out(d, first, float(t))


@settings(max_examples=40, deadline=None)
@given(start=st.integers(0, 6), target=st.integers(0, 6), seed=st.integers(0, 2**32))
def test_scaling_reaches_the_count_with_unique_ports(start: int, target: int, seed: int) -> None:
    ports = [18000 + i for i in range(start)]
    existing = [
        Replica(f"web-new-{i}", "new", port=p, ready=True, ready_since=0.0)
        for i, p in enumerate(ports)
    ]
    world = World(random.Random(seed), existing)
    d = desired(replicas=target, ports=(18000, 18009))
    for t in range(1, 60):
        world.step(d, float(t))
        held = [r.port for r in world.replicas.values()]
        assert len(held) == len(set(held)), "two replicas hold one port"
        assert all(p is not None and 18000 <= p <= 18009 for p in held)
    assert len(world.live()) == target


def test_ports_another_program_holds_are_skipped() -> None:
    out = plan(desired(ports=(100, 103)), Observed(busy_ports=frozenset({100, 102})), 0.0)
    assert [c.port for c in out.create] == [101, 103]
    assert (
        "no free port in portRange 100-103 for 1 replica(s)"
        in (cond(out.status, "ReplicaFailure")["message"])
    )


def test_a_missed_deadline_stalls_without_remediation() -> None:
    stuck = [Replica("web-new-0", "new"), *(Replica(f"o{i}", "old", ready=True) for i in range(3))]
    d = desired(progress_deadline_seconds=600)
    first = plan(d, Observed(tuple(stuck), (), {"observedGeneration": 1}), 1000.0)
    assert first.requeue_after == pytest.approx(600.001)
    later = plan(dataclasses.replace(d), Observed(tuple(stuck), (), first.status), 1601.0)
    assert cond(later.status, "Progressing")["reason"] == "ProgressDeadlineExceeded"
    assert cond(later.status, "Stalled")["status"] == "True"
    assert cond(later.status, "Ready")["reason"] == "ProgressDeadlineExceeded"
    assert [(e.reason, e.warning) for e in later.events] == [("ProgressDeadlineExceeded", True)]
    assert later.rollback is None
    again = plan(d, Observed(tuple(stuck), (), later.status), 1700.0)
    assert not again.events, "the deadline is reported once, not at every look"


STUCK_STATUS = {
    "observedGeneration": 2,
    "lastProgressTime": "1970-01-01T00:00:00Z",
    "updatedReplicas": 1,
    "readyReplicas": 3,
    "availableReplicas": 3,
    "oldReplicas": 3,
}
"""The last status of a rollout stuck since time 0: one new replica never got ready."""


def test_a_missed_deadline_rolls_back_to_the_last_complete_revision() -> None:
    stuck = [Replica("web-new-0", "new"), *(Replica(f"o{i}", "old", ready=True) for i in range(3))]
    revisions = (Revision("web-old", "old", 1), Revision("web-new", "new", 2))
    status = {**STUCK_STATUS, "lastCompleteRevision": 1}
    out = plan(desired(remediation="rollback"), Observed(tuple(stuck), revisions, status), 700.0)
    assert out.rollback is not None
    assert out.rollback.revision == 1
    assert cond(out.status, "Stalled") == {}
    assert [e.reason for e in out.events] == ["ProgressDeadlineExceeded", "RolledBack"]


def test_a_missed_deadline_restarts_unready_replicas_with_restart() -> None:
    stuck = [Replica("web-new-0", "new"), *(Replica(f"o{i}", "old", ready=True) for i in range(3))]
    status = STUCK_STATUS
    out = plan(desired(remediation="restart"), Observed(tuple(stuck), (), status), 700.0)
    assert "web-new-0" in out.delete
    assert out.status["lastProgressTime"] == "1970-01-01T00:11:40.000Z"


def test_revisions_are_numbered_renumbered_on_undo_and_pruned() -> None:
    first = plan(desired(), Observed(), 0.0)
    assert (first.create_revision, first.revision) == (True, 1)
    revisions = tuple(Revision(f"web-h{i}", f"h{i}", i) for i in range(1, 6))
    back = plan(desired("h2", revision_history_limit=2), Observed((), revisions), 0.0)
    assert (back.renumber_revision, back.revision) == (True, 6)
    assert back.delete_revisions == ("web-h1", "web-h3")


def test_unmet_dependencies_hold_back_the_first_replicas() -> None:
    out = plan(desired(), Observed(unmet="Job/migrate is not Complete"), 0.0)
    assert out.create == ()
    assert cond(out.status, "Ready")["reason"] == "WaitingForDependency"
    assert cond(out.status, "Ready")["message"] == "Job/migrate is not Complete"
    running = (Replica("web-new-0", "new", ready=True),)
    later = plan(desired(replicas=1), Observed(running, (), {}, "Process/db is not Ready"), 0.0)
    assert cond(later.status, "Ready")["reason"] == "DependencyNotReady"
    assert later.delete == (), "running replicas are kept while a dependency is down"


def test_recreate_removes_every_old_replica_before_creating() -> None:
    old = tuple(Replica(f"o{i}", "old", ready=True) for i in range(3))
    out = plan(desired(recreate=True), Observed(old), 0.0)
    assert sorted(out.delete) == ["o0", "o1", "o2"]
    assert out.create == ()
    going = tuple(dataclasses.replace(r, deleting=True) for r in old)
    assert plan(desired(recreate=True), Observed(going), 0.0).create == ()
    assert len(plan(desired(recreate=True), Observed(), 0.0).create) == 3


def test_min_ready_seconds_delays_availability_and_requeues() -> None:
    ready = (Replica("web-new-0", "new", ready=True, ready_since=100.0),)
    out = plan(desired(replicas=1, min_ready_seconds=5), Observed(ready, (), {}), 102.0)
    assert out.status["availableReplicas"] == 0
    assert out.requeue_after == pytest.approx(3.001)
    assert (
        plan(desired(replicas=1, min_ready_seconds=5), Observed(ready), 105.0).status[
            "availableReplicas"
        ]
        == 1
    )


def test_bounds_and_substitution() -> None:
    assert resolve_bound("25%", 3, up=True) == 1
    assert resolve_bound("25%", 3, up=False) == 0
    assert resolve_bound(2, 3, up=True) == 2
    template = {"args": ["app", "$(PORT)", "--name=$(REPLICA)"], "tcp": {"port": "$(PORT)"}}
    assert substitute(template, port=8080, replica="web-1") == {
        "args": ["app", "8080", "--name=web-1"],
        "tcp": {"port": 8080},
    }
    assert template_hash({"a": 1, "b": 2}) == template_hash({"b": 2, "a": 1})


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ({"template": {"spec": {"args": ["x"]}}}, "labels"),
        (
            {"template": {"metadata": {"labels": {"a": "b"}}, "spec": {"args": ["$(PORT)"]}}},
            "portRange",
        ),
        (
            {"template": {"metadata": {"labels": {"a": "b"}}, "spec": {"args": []}}},
            "args",
        ),
        (
            {
                "replicas": 3,
                "portRange": {"start": 10, "end": 12},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"args": ["x"]}},
            },
            "portRange has 3 ports",
        ),
        (
            {
                "selector": {"matchLabels": {"a": "c"}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"args": ["x"]}},
            },
            "does not match",
        ),
    ],
)
def test_bad_specs_are_refused_naming_the_problem(spec: dict[str, Any], match: str) -> None:
    obj = {
        "apiVersion": DEPLOYMENT.api_version,
        "kind": DEPLOYMENT.kind,
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec,
    }
    with pytest.raises(Invalid, match=match) as caught:
        DEPLOYMENT.validate(obj)
    assert caught.value.field is not None
    assert caught.value.field.startswith("spec")
