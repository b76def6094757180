"""The Autoscaler controller in a manager on an in-memory store, scaling a test kind with a
scale subresource on a metric served by a real child HTTP server. A manual clock makes
each period one step; waits go through the store's watch."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from control_autoscaler_support import (
    SCALED,
    autoscaler,
    condition,
    kinds,
    metrics_server,
    scaled,
    wait_for,
)

from setpoint.cli.describe import describe_object
from setpoint.control.autoscaler import AUTOSCALER, setup
from setpoint.errors import Invalid
from setpoint.model import Object
from setpoint.testing import (
    Harness,
    ManualClock,
    capture_events,
    free_port_range,
    reconcile_until_stable,
)

API, KIND = AUTOSCALER.api_version, AUTOSCALER.kind


def replicas(n: int) -> Callable[[Object], bool]:
    return lambda obj: obj["spec"]["replicas"] == n


def able(reason: str) -> Callable[[Object], bool]:
    return lambda obj: condition(obj, "AbleToScale").get("reason") == reason


async def test_ratio_on_a_prometheus_metric_scales_up_then_down_after_the_window(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    async with (
        metrics_server(tmp_path, 30.0) as server,
        Harness(registry=kinds(), clock=clock) as harness,
    ):
        setup(harness.manager)
        await harness.start()
        store = harness.store
        await store.create(scaled("web", 2))
        metric = {
            "prometheus": {
                "url": server.url("/metrics"),
                "name": "app_requests_in_flight",
                "labels": {"handler": "/"},
            },
            "target": 10,
        }
        async with capture_events(store) as events:
            await store.create(autoscaler("web", "web", metric))
            # 30 in flight per replica against 10: ceil(2 * 3) = 6 (= max(2 + 4, 2 * 2))
            await wait_for(store, SCALED.api_version, SCALED.kind, "web", replicas(6))
            await events.wait_event("SuccessfulRescale", involved_name="web")
        obj = await wait_for(store, API, KIND, "web", able("SucceededRescale"))
        status = obj["status"]
        assert status["currentMetric"] == 30.0
        assert status["desiredReplicas"] == 6
        assert condition(obj, "ScalingActive")["status"] == "True"
        assert status["decisions"][-1] | {"time": None} == {
            "time": None,
            "metric": 30.0,
            "current": 2,
            "recommendation": 6,
            "stabilized": 6,
            "limited": 6,
            "final": 6,
            "reason": "metric 30 above target 10",
        }
        await reconcile_until_stable(harness)

        server.set(15.0)  # 1.5x: ceil(6 * 1.5) = 9
        clock.advance(15)
        await wait_for(store, SCALED.api_version, SCALED.kind, "web", replicas(9))

        server.set(3.0)  # 0.3x: 3, but the 300 s scale-down window holds 9
        await reconcile_until_stable(harness)
        clock.advance(15)
        obj = await wait_for(store, API, KIND, "web", able("ScaleDownStabilized"))
        assert (await store.get(SCALED.api_version, SCALED.kind, "web", "default"))["spec"][
            "replicas"
        ] == 9
        assert obj["status"]["decisions"][-1]["recommendation"] == 3
        assert obj["status"]["decisions"][-1]["final"] == 9

        await reconcile_until_stable(harness)
        clock.advance(300)
        await wait_for(store, SCALED.api_version, SCALED.kind, "web", replicas(3))


async def test_pid_on_a_json_metric_scales_up(tmp_path: Path) -> None:
    clock = ManualClock()
    async with (
        metrics_server(tmp_path, 40.0) as server,
        Harness(registry=kinds(), clock=clock) as harness,
    ):
        setup(harness.manager)
        await harness.start()
        store = harness.store
        await store.create(scaled("api", 2))
        metric = {"http": {"url": server.url("/stats"), "pointer": "/app/inflight"}, "target": 10}
        await store.create(autoscaler("api", "api", metric, algorithm="pid", maxReplicas=12))
        await reconcile_until_stable(harness)
        for _ in range(8):
            clock.advance(15)
            await reconcile_until_stable(harness)
        target = await store.get(SCALED.api_version, SCALED.kind, "api", "default")
        assert target["spec"]["replicas"] > 2
        obj = await store.get(API, KIND, "api", "default")
        assert obj["status"]["currentMetric"] == 40.0
        assert all(d["final"] <= 12 for d in obj["status"]["decisions"])


async def test_predictive_with_arrivals_scales_in_one_step_and_describe_says_why(
    tmp_path: Path,
) -> None:
    """A JSON metric from a real server, the arrival rate from a real command reading a
    file. At the target (0.7 in flight per replica at 2 replicas, 70 requests a second)
    nothing moves and the algorithm learns 35 requests a second per needed replica; then
    x5 in flight and in arrivals is a need of 10, met in one step. `describe` prints the
    decision's observation, terms and prediction."""
    clock = ManualClock()
    rate = tmp_path / "arrivals"
    rate.write_text("70\n")
    async with (
        metrics_server(tmp_path, 0.7) as server,
        Harness(registry=kinds(), clock=clock) as harness,
    ):
        setup(harness.manager)
        await harness.start()
        store = harness.store
        await store.create(scaled("shop", 2))
        metric = {"http": {"url": server.url("/stats"), "pointer": "/app/inflight"}, "target": 0.7}
        read = f"print(open({str(rate)!r}).read())"
        arrivals = {"command": {"args": [sys.executable, "-c", read]}}
        await store.create(
            autoscaler(
                "shop", "shop", metric, algorithm="predictive", arrivals=arrivals, maxReplicas=40
            )
        )
        obj = await wait_for(
            store, API, KIND, "shop", lambda o: "lastDecision" in (o.get("status") or {})
        )
        assert obj["status"]["lastDecision"]["direction"] == "hold"
        await reconcile_until_stable(harness)
        server.set(3.5)
        rate.write_text("350\n")
        clock.advance(15)
        target = await wait_for(
            store, SCALED.api_version, SCALED.kind, "shop", lambda o: o["spec"]["replicas"] >= 10
        )
        obj = await wait_for(
            store,
            API,
            KIND,
            "shop",
            lambda o: o["status"]["lastDecision"]["direction"] == "up",
        )
        last = obj["status"]["lastDecision"]
        assert last["algorithm"] == "predictive"
        assert (last["metric"], last["current"], last["arrivals"]) == (3.5, 2, 350.0)
        assert (last["need"], last["load"]) == (10.0, 10.0)
        assert last["final"] == target["spec"]["replicas"]
        text = describe_object(obj, [], clock.now())
        assert "predictive: metric 3.5 at 2 replicas, arrivals 350.0/s" in text
        assert "need 10.0 (feedback), load 10.0" in text
        assert f"= prediction {last['prediction']}" in text
        assert f"final {last['final']}" in text


async def test_a_metric_that_cannot_be_read_is_reported_and_nothing_scales() -> None:
    clock = ManualClock()
    async with Harness(registry=kinds(), clock=clock) as harness:
        setup(harness.manager)
        await harness.start()
        store = harness.store
        await store.create(scaled("batch", 3))
        metric = {"command": {"args": [sys.executable, "-c", "print('many')"]}, "target": 5}
        async with capture_events(store) as events:
            await store.create(autoscaler("batch", "batch", metric))
            await events.wait_event("FailedGetMetric", involved_name="batch")
        obj = await wait_for(
            store,
            API,
            KIND,
            "batch",
            lambda o: condition(o, "ScalingActive").get("reason") == "FailedGetMetric",
        )
        message = condition(obj, "ScalingActive")["message"]
        assert "'many' is not a number" in message
        assert "\n" not in message
        target = await store.get(SCALED.api_version, SCALED.kind, "batch", "default")
        assert target["spec"]["replicas"] == 3


async def test_a_command_metric_with_average_value_shares_the_total() -> None:
    clock = ManualClock()
    async with Harness(registry=kinds(), clock=clock) as harness:
        setup(harness.manager)
        await harness.start()
        store = harness.store
        await store.create(scaled("queue", 1))
        metric = {
            "command": {"args": [sys.executable, "-c", "print(42)"]},
            "target": 10,
            "targetType": "AverageValue",
        }
        await store.create(autoscaler("queue", "queue", metric))
        await wait_for(store, SCALED.api_version, SCALED.kind, "queue", replicas(5))


async def test_a_missing_target_is_reported() -> None:
    async with Harness(registry=kinds(), clock=ManualClock()) as harness:
        setup(harness.manager)
        await harness.start()
        metric = {"command": {"args": ["true"]}, "target": 1}
        await harness.store.create(autoscaler("lost", "nowhere", metric))
        obj = await wait_for(harness.store, API, KIND, "lost", able("FailedGetScale"))
        assert condition(obj, "AbleToScale")["status"] == "False"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"metric": {"target": 1}}, "spec.metric"),
        ({"minReplicas": 5, "maxReplicas": 2}, "spec"),
        ({"metric": {"http": {"url": "ftp://x"}, "target": 1}}, "spec.metric"),
        ({"metric": {"command": {"args": ["true"]}, "target": 0}}, "spec.metric.target"),
        ({"algorithm": "magic"}, "spec.algorithm"),
    ],
)
async def test_bad_specs_are_refused_naming_the_field(spec: dict[str, object], field: str) -> None:
    async with Harness(registry=kinds()) as harness:
        obj: Object = autoscaler("bad", "x", {"command": {"args": ["true"]}, "target": 1})
        obj["spec"].update(spec)
        with pytest.raises(Invalid) as caught:
            await harness.store.create(obj)
        assert caught.value.field == field


async def test_an_unreachable_metric_is_reported_once_then_nothing_is_written() -> None:
    """Quiet when nothing changes: after the first report (condition and warning), ten
    periods in ten seconds of an unreachable metric write nothing to the store."""
    clock = ManualClock()
    port = free_port_range(1)  # nothing listens there: connection refused at once
    async with Harness(registry=kinds(), clock=clock) as harness:
        setup(harness.manager)
        await harness.start()
        store = harness.store
        await store.create(scaled("web", 3))
        metric = {"http": {"url": f"http://127.0.0.1:{port}/stats"}, "target": 10}
        async with capture_events(store) as events:
            await store.create(autoscaler("web", "web", metric, periodSeconds=1))
            await events.wait_event("FailedGetMetric", involved_name="web")
        await wait_for(
            store,
            API,
            KIND,
            "web",
            lambda o: condition(o, "ScalingActive").get("reason") == "FailedGetMetric",
        )
        await reconcile_until_stable(harness)
        before = await store.revision()
        for _ in range(10):
            clock.advance(1.0)
            await reconcile_until_stable(harness)
        assert await store.revision() == before
        target = await store.get(SCALED.api_version, SCALED.kind, "web", "default")
        assert target["spec"]["replicas"] == 3
