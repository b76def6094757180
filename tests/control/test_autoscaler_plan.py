"""The Autoscaler's plan, pure: periods simulated one after another against a world whose
load, metric failures and refused rescales Hypothesis picks; what the HPA promises is
checked at every period, and a failure is reported once and then writes nothing."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.control.autoscaler import (
    Memory,
    Observed,
    Plan,
    plan,
    refused,
    spec_of,
    wants_metric,
)
from setpoint.model import get_condition
from setpoint.runtime.plan import PlannedEvent
from setpoint.runtime.scale import Scale

T0 = 1_700_000_000.0


def spec(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "scaleTargetRef": {"kind": "Deployment", "name": "web"},
        "minReplicas": 1,
        "maxReplicas": 20,
        "metric": {"command": {"args": ["true"]}, "target": 10},
    }
    body.update(fields)
    return body


def typed(**fields: Any) -> Any:
    return spec_of({"spec": spec(**fields)})


def scale(replicas: int, version: str = "1") -> Scale:
    return Scale(replicas, replicas, None, version)


def condition(p: Plan, type_: str) -> dict[str, Any]:
    return get_condition(dict(p.status), type_) or {}


@dataclass
class World:
    """A target whose replicas are what the last accepted rescale set; the load is shared
    by the replicas, so the metric (a `Value`, per replica) is load / replicas."""

    replicas: int
    status: dict[str, Any]
    memory: Memory | None = None
    version: int = 1
    writes: int = 0

    def period(
        self,
        autoscaler: Any,
        load: float,
        now: float,
        *,
        metric_fails: bool = False,
        refuse: bool = False,
        arrivals: float | None = None,
    ) -> Plan:
        current = scale(self.replicas, str(self.version))
        wanted = wants_metric(autoscaler, current)
        observed = Observed(
            "uid-1",
            1,
            copy.deepcopy(self.status),
            current,
            metric=None if metric_fails or not wanted else load / max(self.replicas, 1),
            metric_error="GET http://app/metrics: connection refused"
            if metric_fails and wanted
            else None,
            memory=self.memory,
            arrivals=arrivals,
        )
        frozen = copy.deepcopy(observed)
        decided = plan(autoscaler, replace(observed, monotonic=now), T0 + now)
        again = plan(autoscaler, replace(copy.deepcopy(frozen), monotonic=now), T0 + now)
        assert _same(observed, frozen), "the plan changed what it observed"
        assert _same(decided, again), "the same world gave two plans"
        if decided.rescale is not None:
            assert decided.rescale.resource_version == str(self.version)
            if refuse:
                decided = refused(decided, "conflict")
                assert condition(decided, "AbleToScale")["reason"] == "FailedUpdateScale"
                assert decided.events[-1].reason == "FailedRescale"
            else:
                self.replicas = decided.rescale.replicas
                self.version += 1
        if decided.status != self.status:
            self.writes += 1
            self.status = copy.deepcopy(dict(decided.status))
        self.memory = decided.memory
        return decided


def _same(a: Any, b: Any) -> bool:
    """Equal, looking into the pid state (which compares by identity otherwise)."""
    return repr(_state(a)) == repr(_state(b))


def _state(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {k: _state(getattr(value, k)) for k in value.__dataclass_fields__}
    if hasattr(value, "__slots__") and not isinstance(value, tuple | str):
        return {k: _state(getattr(value, k, None)) for k in value.__slots__ if k != "error_map"}
    if isinstance(value, dict):
        return {k: _state(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_state(v) for v in value]
    return value


periods = st.lists(
    st.tuples(
        st.floats(0, 400, allow_nan=False),  # the load
        st.booleans(),  # the metric fails this period
        st.booleans(),  # the target refuses a rescale
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(
    periods=periods,
    start=st.integers(0, 30),
    low=st.integers(0, 5),
    span=st.integers(0, 15),
    algorithm=st.sampled_from(["ratio", "pid", "predictive"]),
)
def test_every_period_keeps_the_hpas_promises(
    periods: list[tuple[float, bool, bool]], start: int, low: int, span: int, algorithm: str
) -> None:
    high = max(low, 1) + span
    autoscaler = typed(minReplicas=low, maxReplicas=high, algorithm=algorithm, periodSeconds=15)
    world = World(start, {})
    for step, (load, fails, refuse) in enumerate(periods):
        before = world.replicas
        decided = world.period(autoscaler, load, 15.0 * step, metric_fails=fails, refuse=refuse)
        assert decided.requeue_after == 15
        assert decided.status["observedGeneration"] == 1
        assert decided.status["currentReplicas"] == before
        rescale = decided.rescale
        if rescale is None:
            continue
        assert rescale.replicas != before
        if before == 0 and low != 0:
            raise AssertionError("a target scaled to zero by hand is left alone")
        if low <= before <= high:
            assert low <= rescale.replicas <= high
            # the default scale-up policy: at most max(4 pods, 100 %) more per 15 s
            # (the predictive algorithm's: 1000 %)
            factor = 11 if algorithm == "predictive" else 2
            assert rescale.replicas <= max(before + 4, factor * before)
            assert not fails, "no metric, no decision"
        else:  # out of range: straight back to the nearest bound
            assert rescale.replicas == (high if before > high else low)


@settings(max_examples=20, deadline=None)
@given(start=st.integers(1, 20), load=st.floats(0, 400, allow_nan=False))
def test_a_metric_that_cannot_be_read_is_reported_once_then_nothing_is_written(
    start: int, load: float
) -> None:
    autoscaler = typed()
    world = World(start, {})
    world.period(autoscaler, load, 0.0)
    healthy = world.replicas
    first = world.period(autoscaler, load, 15.0, metric_fails=True)
    assert condition(first, "ScalingActive")["reason"] == "FailedGetMetric"
    assert [e.reason for e in first.events] == ["FailedGetMetric"]
    assert first.rescale is None
    writes = world.writes
    for step in range(2, 42):  # ten minutes of periods
        later = world.period(autoscaler, load, 15.0 * step, metric_fails=True)
        assert later.events == ()
        assert later.rescale is None
    assert world.writes == writes
    assert world.replicas == healthy


def test_the_first_failure_is_reported_then_the_same_one_is_quiet() -> None:
    autoscaler = typed()
    world = World(3, {})
    first = world.period(autoscaler, 30.0, 0.0, metric_fails=True)
    assert first.events == (
        PlannedEvent("FailedGetMetric", "GET http://app/metrics: connection refused", True),
    )
    assert condition(first, "ScalingActive")["message"] == (
        "the metric could not be read: GET http://app/metrics: connection refused"
    )
    second = world.period(autoscaler, 30.0, 15.0, metric_fails=True)
    assert second.events == ()
    assert second.status == first.status
    assert world.writes == 1


def test_a_scale_that_cannot_be_read_is_reported_once() -> None:
    autoscaler = typed()
    observed = Observed("uid-1", 1, {}, scale_error="cannot read the scale of Deployment/web")
    first = plan(autoscaler, replace(observed, monotonic=0.0), T0)
    assert condition(first, "AbleToScale")["reason"] == "FailedGetScale"
    assert [e.reason for e in first.events] == ["FailedGetScale"]
    second = plan(
        autoscaler, replace(replace(observed, status=first.status), monotonic=15), T0 + 15
    )
    assert second.events == ()
    assert second.status == first.status


def test_a_refused_rescale_keeps_no_scale_event_and_says_why() -> None:
    autoscaler = typed()
    world = World(2, {})
    decided = world.period(autoscaler, 60.0, 0.0)  # 30 per replica against 10: 6
    assert decided.rescale is not None
    assert decided.rescale.replicas == 6
    assert condition(decided, "AbleToScale")["reason"] == "SucceededRescale"
    assert decided.status["lastScaleTime"]
    assert decided.rescale.events == (
        PlannedEvent("SuccessfulRescale", "New size: 6; reason: metric 30 above target 10"),
    )
    assert decided.memory is not None
    assert len(decided.memory.history.scale_events) == 1
    no = refused(decided, "Conflict: stale resourceVersion")
    assert no.rescale is None
    assert "lastScaleTime" not in no.status
    assert condition(no, "AbleToScale")["message"].endswith("stale resourceVersion")
    assert no.events == (
        PlannedEvent(
            "FailedRescale",
            "New size: 6; reason: metric 30 above target 10; error: Conflict: stale "
            "resourceVersion",
            warning=True,
        ),
    )
    assert no.memory is not None
    assert no.memory.history.scale_events == ()


def test_manual_mode_records_the_metric_and_sets_the_manual_count_within_bounds() -> None:
    autoscaler = typed(mode="manual", manualReplicas=50, maxReplicas=8)
    world = World(3, {}, memory=Memory("uid-1", 1))
    decided = world.period(autoscaler, 30.0, 0.0)
    assert decided.rescale is not None
    assert decided.rescale.replicas == 8
    assert decided.status["currentMetric"] == 10.0
    assert condition(decided, "ScalingActive")["reason"] == "ManualMode"
    assert decided.memory is None  # back in auto, history and pid start afresh


def test_a_target_scaled_to_zero_disables_scaling_and_reads_no_metric() -> None:
    autoscaler = typed()
    assert not wants_metric(autoscaler, scale(0))
    decided = plan(autoscaler, replace(Observed("uid-1", 1, {}, scale(0)), monotonic=0.0), T0)
    assert decided.rescale is None
    assert decided.status["desiredReplicas"] == 0
    assert condition(decided, "ScalingActive")["reason"] == "ScalingDisabled"


def test_the_specs_defaults_are_the_schemas() -> None:
    autoscaler = typed()
    assert autoscaler.min_replicas == 1
    assert autoscaler.period_seconds == 15
    assert autoscaler.metric.tolerance == 0.1
    assert autoscaler.metric.timeout_seconds == 5
    assert autoscaler.mode == "auto"
    assert autoscaler.pid is None
    assert typed(algorithm="pid", pid={"kp": 0.5}).pid.gains().ki == 1.0 / 60.0


def test_the_predictive_algorithm_says_why_in_the_status() -> None:
    autoscaler = typed(algorithm="predictive", maxReplicas=100, periodSeconds=15)
    world = World(4, {})
    decided = world.period(autoscaler, 40.0, 0.0, arrivals=80.0)  # 10 per replica: 4 x 1
    assert decided.rescale is None
    last = decided.status["lastDecision"]
    assert last["algorithm"] == "predictive"
    assert (last["metric"], last["current"], last["arrivals"]) == (10.0, 4, 80.0)
    assert last["need"] == 4.0
    assert last["prediction"] == last["level"] + last["feedForward"] + last["backlog"]
    assert (last["direction"], last["final"]) == ("hold", 4)
    # a flash crowd, x10: one step, however far, within the 1000 % scale-up policy
    crowd = world.period(autoscaler, 400.0, 15.0, arrivals=800.0)
    assert crowd.rescale is not None
    assert crowd.rescale.replicas >= 40
    assert crowd.status["lastDecision"]["direction"] == "up"
    assert crowd.status["lastDecision"]["final"] == crowd.rescale.replicas


def test_the_pid_and_ratio_algorithms_say_why_too() -> None:
    for algorithm, terms in (("ratio", {"ratio"}), ("pid", {"ratio", "p", "i", "d"})):
        decided = World(2, {}).period(typed(algorithm=algorithm), 60.0, 0.0)
        last = decided.status["lastDecision"]
        assert last["algorithm"] == algorithm
        assert set(last) >= terms | {"metric", "current", "recommendation", "final"}
        assert last["ratio"] == 3.0  # 30 per replica against 10
    shared = {"command": {"args": ["true"]}, "target": 10, "targetType": "AverageValue"}
    decided = World(2, {}).period(typed(metric=shared), 120.0 * 2, 0.0)  # a total of 120
    assert decided.status["lastDecision"]["ratio"] == 6.0  # 60 per replica against 10


@settings(max_examples=20, deadline=None)
@given(load=st.floats(1, 400, allow_nan=False), start=st.integers(1, 20))
def test_a_steady_load_under_the_predictive_algorithm_soon_writes_nothing(
    load: float, start: int
) -> None:
    autoscaler = typed(algorithm="predictive", maxReplicas=100)
    world = World(start, {})
    for step in range(60):
        world.period(autoscaler, load, 15.0 * step, arrivals=load * 2)
    writes = world.writes
    for step in range(60, 100):  # ten more minutes of the same
        world.period(autoscaler, load, 15.0 * step, arrivals=load * 2)
    assert world.writes == writes
