"""Prometheus metrics: controller-runtime's names and labels, reconcile outcomes, queue timings
from the observer hooks, and queue counters and gauges read from the queue when rendered.

Every assertion reads the rendered text back with prometheus_client's parser.
"""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from setpoint.model import Kind
from setpoint.runtime.controller import Controller, ControllerSettings
from setpoint.runtime.informer import Informer
from setpoint.runtime.metrics import RECONCILE_RESULTS, Metrics
from setpoint.runtime.queue import WorkQueue
from setpoint.runtime.ratelimit import ItemExponentialLimiter
from setpoint.runtime.reconciler import Request, Result
from setpoint.store import Store
from setpoint.testing import ManualClock

TIMEOUT = 5.0

FAMILIES = {
    # name as the parser reports it (counters lose `_total`) -> type
    "controller_runtime_reconcile": "counter",
    "controller_runtime_reconcile_errors": "counter",
    "controller_runtime_reconcile_time_seconds": "histogram",
    "workqueue_depth": "gauge",
    "workqueue_adds": "counter",
    "workqueue_retries": "counter",
    "workqueue_queue_duration_seconds": "histogram",
    "workqueue_work_duration_seconds": "histogram",
    "workqueue_unfinished_work_seconds": "gauge",
    "workqueue_longest_running_processor_seconds": "gauge",
}


def samples(metrics: Metrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of `metrics.render()`: (sample name, labels) -> value."""
    text = metrics.render().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(metrics: Metrics, sample: str, /, **labels: str) -> float:
    """One sample of `metrics.render()`: `value(m, "workqueue_depth", name="widgets")`."""
    found = samples(metrics)
    key = (sample, frozenset(labels.items()))
    assert key in found, f"no sample {sample}{labels} in {sorted({n for n, _ in found})}"
    return found[key]


def families(metrics: Metrics) -> dict[str, str]:
    text = metrics.render().decode()
    return {family.name: family.type for family in text_string_to_metric_families(text)}


def test_names_types_and_labels_are_controller_runtimes() -> None:
    clock = ManualClock()
    metrics = Metrics()
    queue: WorkQueue[str] = WorkQueue(clock=clock, observer=metrics.queue_observer("widgets"))
    metrics.track_queues(lambda: {"widgets": queue})

    assert families(metrics) == FAMILIES
    names = {name for name, _ in samples(metrics)}
    assert "controller_runtime_reconcile_total" in names
    assert "workqueue_adds_total" in names
    assert not any(name.endswith("_created") for name in names)
    label_names = {label for _, labels in samples(metrics) for label, _ in labels}
    assert label_names == {"controller", "result", "name", "le"}


def test_a_controllers_series_start_at_zero_when_its_queue_is_built() -> None:
    metrics = Metrics()
    metrics.queue_observer("widgets")

    for result in RECONCILE_RESULTS:
        assert (
            value(
                metrics, "controller_runtime_reconcile_total", controller="widgets", result=result
            )
            == 0
        )
    assert value(metrics, "controller_runtime_reconcile_errors_total", controller="widgets") == 0
    assert (
        value(metrics, "controller_runtime_reconcile_time_seconds_count", controller="widgets") == 0
    )
    assert value(metrics, "workqueue_queue_duration_seconds_count", name="widgets") == 0
    assert value(metrics, "workqueue_work_duration_seconds_count", name="widgets") == 0


def test_reconcile_outcomes_are_counted_by_result_and_timed() -> None:
    metrics = Metrics()
    outcomes = [
        ("success", 0.02),
        ("success", 0.2),
        ("error", 1.5),
        ("requeue", 0.001),
        ("requeue_after", 0.3),
        ("error", 70.0),
    ]
    for result, seconds in outcomes:
        metrics.on_reconcile("widgets", result, seconds)
    metrics.on_reconcile("gadgets", "success", 0.1)

    def total(result: str, controller: str = "widgets") -> float:
        return value(
            metrics, "controller_runtime_reconcile_total", controller=controller, result=result
        )

    assert [total(r) for r in RECONCILE_RESULTS] == [2, 2, 1, 1]
    assert total("success", "gadgets") == 1
    assert value(metrics, "controller_runtime_reconcile_errors_total", controller="widgets") == 2
    assert value(metrics, "controller_runtime_reconcile_errors_total", controller="gadgets") == 0
    name = "controller_runtime_reconcile_time_seconds"
    assert value(metrics, f"{name}_count", controller="widgets") == 6
    assert value(metrics, f"{name}_sum", controller="widgets") == pytest.approx(72.021)
    # controller-runtime's buckets: 5 ms first, 60 s last
    assert value(metrics, f"{name}_bucket", controller="widgets", le="0.005") == 1
    assert value(metrics, f"{name}_bucket", controller="widgets", le="0.2") == 3
    assert value(metrics, f"{name}_bucket", controller="widgets", le="1.5") == 5
    assert value(metrics, f"{name}_bucket", controller="widgets", le="60.0") == 5
    assert value(metrics, f"{name}_bucket", controller="widgets", le="+Inf") == 6


def test_time_in_line_and_in_processing_come_from_the_queue() -> None:
    clock = ManualClock()
    metrics = Metrics()
    queue: WorkQueue[str] = WorkQueue(clock=clock, observer=metrics.queue_observer("widgets"))

    queue.add("a")
    clock.advance(0.5)
    queue.add("b")
    clock.advance(1.5)
    a = queue.get_nowait()  # waited 2.0 s
    clock.advance(3.0)
    queue.done(a)  # worked 3.0 s
    b = queue.get_nowait()  # waited 4.5 s
    queue.done(b)  # worked 0 s

    wait = "workqueue_queue_duration_seconds"
    assert value(metrics, f"{wait}_count", name="widgets") == 2
    assert value(metrics, f"{wait}_sum", name="widgets") == pytest.approx(6.5)
    assert value(metrics, f"{wait}_bucket", name="widgets", le="1.0") == 0
    assert value(metrics, f"{wait}_bucket", name="widgets", le="10.0") == 2
    work = "workqueue_work_duration_seconds"
    assert value(metrics, f"{work}_count", name="widgets") == 2
    assert value(metrics, f"{work}_sum", name="widgets") == pytest.approx(3.0)
    # client-go's buckets: 10 ns to 1000 s, by tens
    assert value(metrics, f"{work}_bucket", name="widgets", le="1e-08") == 1
    assert value(metrics, f"{work}_bucket", name="widgets", le="1000.0") == 2


async def test_queue_counters_and_gauges_are_read_when_rendered() -> None:
    clock = ManualClock()
    metrics = Metrics()
    queue: WorkQueue[str] = WorkQueue(clock=clock, observer=metrics.queue_observer("widgets"))
    metrics.track_queues(lambda: {"widgets": queue})

    for key in ["a", "b", "c", "a"]:
        queue.add(key)
    assert value(metrics, "workqueue_depth", name="widgets") == 3
    assert value(metrics, "workqueue_adds_total", name="widgets") == 3

    a = queue.get_nowait()
    clock.advance(2.0)
    b = queue.get_nowait()
    clock.advance(1.0)
    assert value(metrics, "workqueue_depth", name="widgets") == 1
    assert value(metrics, "workqueue_longest_running_processor_seconds", name="widgets") == 3.0
    assert value(metrics, "workqueue_unfinished_work_seconds", name="widgets") == 4.0

    queue.done(a)
    queue.done(b)
    queue.add_rate_limited("a")
    queue.add_rate_limited("b")
    assert value(metrics, "workqueue_retries_total", name="widgets") == 2
    assert value(metrics, "workqueue_longest_running_processor_seconds", name="widgets") == 0
    assert value(metrics, "workqueue_unfinished_work_seconds", name="widgets") == 0
    queue.shutdown()


def test_the_queue_source_is_asked_at_every_render() -> None:
    clock = ManualClock()
    queues: dict[str, WorkQueue[str]] = {}
    metrics = Metrics(queues=lambda: queues)
    assert samples(metrics) == {}  # no controller, no queue: families without samples

    queues["widgets"] = WorkQueue(clock=clock)
    queues["widgets"].add("a")
    queues["gadgets"] = WorkQueue(clock=clock)
    assert value(metrics, "workqueue_depth", name="widgets") == 1
    assert value(metrics, "workqueue_depth", name="gadgets") == 0

    metrics.track_queues(lambda: {"other": queues["widgets"]})
    assert value(metrics, "workqueue_adds_total", name="other") == 1
    assert ("workqueue_depth", frozenset({("name", "widgets")})) not in samples(metrics)


def test_each_metrics_has_its_own_registry() -> None:
    first, second = Metrics(), Metrics()
    first.on_reconcile("widgets", "success", 0.1)
    second.queue_observer("widgets")

    assert (
        value(second, "controller_runtime_reconcile_total", controller="widgets", result="success")
        == 0
    )
    global_names = {family.name for family in REGISTRY.collect()}
    assert "controller_runtime_reconcile" not in global_names
    assert "workqueue_depth" not in global_names


def test_users_may_add_their_own_metrics_to_the_registry() -> None:
    from prometheus_client import Counter, Gauge

    metrics = Metrics()
    Counter("widgets_polished_total", "Widgets polished", registry=metrics.registry).inc(3)
    Gauge("widgets_created", "A gauge whose name ends in _created", registry=metrics.registry).set(
        7
    )

    assert value(metrics, "widgets_polished_total") == 3
    assert value(metrics, "widgets_created") == 7  # only counters' `_created` series are dropped
    assert ("widgets_polished_created", frozenset()) not in samples(metrics)


async def test_a_running_controller_reports_every_outcome(store: Store) -> None:
    """A real controller and queue: four keys, each with one of the outcomes; every
    reconcile takes 0.25 s on the manual clock."""
    clock = ManualClock()
    metrics = Metrics()
    kind = store.registry.resolve("widgets")
    assert isinstance(kind, Kind)
    last_started = asyncio.Event()

    async def reconcile(request: Request) -> Result | None:
        clock.advance(0.25)
        if request.name == "later":
            return Result(requeue_after=60)
        if request.name == "broken":
            last_started.set()
            raise RuntimeError("the widget is broken")
        return Result()

    controller = Controller(
        "widgets",
        reconcile,
        Informer(store, kind, clock=clock),
        # retries come back after 1000 s: never within this test
        settings=ControllerSettings(limiter=ItemExponentialLimiter(base=1000.0)),
        clock=clock,
        observer=metrics,
    )
    metrics.track_queues(lambda: {controller.name: controller.queue})
    for name in ["ok", "later", "fine", "broken"]:
        controller.enqueue(Request(name, "default"))

    running = asyncio.create_task(controller.run())
    await asyncio.wait_for(last_started.wait(), TIMEOUT)
    await controller.shutdown(grace=TIMEOUT)  # lets "broken" finish and be recorded
    await asyncio.wait_for(running, TIMEOUT)

    def total(result: str) -> float:
        return value(
            metrics, "controller_runtime_reconcile_total", controller="widgets", result=result
        )

    assert {r: total(r) for r in RECONCILE_RESULTS} == {
        "success": 2,
        "error": 1,
        "requeue": 0,  # controller-runtime's label; `Result(requeue=True)` is gone
        "requeue_after": 1,
    }
    assert value(metrics, "controller_runtime_reconcile_errors_total", controller="widgets") == 1
    time = "controller_runtime_reconcile_time_seconds"
    assert value(metrics, f"{time}_count", controller="widgets") == 4
    assert value(metrics, f"{time}_sum", controller="widgets") == pytest.approx(1.0)
    # all four went in line at 0 s; the n-th was taken after n reconciles of 0.25 s
    wait = "workqueue_queue_duration_seconds"
    assert value(metrics, f"{wait}_count", name="widgets") == 4
    assert value(metrics, f"{wait}_sum", name="widgets") == pytest.approx(1.5)
    work = "workqueue_work_duration_seconds"
    assert value(metrics, f"{work}_sum", name="widgets") == pytest.approx(1.0)
    assert value(metrics, "workqueue_adds_total", name="widgets") == 4
    assert value(metrics, "workqueue_retries_total", name="widgets") == 1  # the error
    assert value(metrics, "workqueue_depth", name="widgets") == 0
    assert value(metrics, "workqueue_unfinished_work_seconds", name="widgets") == 0
