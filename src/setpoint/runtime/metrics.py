"""Prometheus metrics for controllers and their work queues, named as controller-runtime names them.

`Metrics` is a `ControllerObserver`: pass it as the manager's (or a
controller's) `observer=` and every reconcile and every key's time in line and
in processing is recorded. Counters and gauges that a `WorkQueue` already keeps
(depth, adds, retries, unfinished work) are not copied: they are read from
`WorkQueue.statistics()` when the metrics are rendered, from the queues that
`track_queues` names.

Series, with their labels:

* ``controller_runtime_reconcile_total{controller,result}`` (counter; result is
  success, error, requeue or requeue_after)
* ``controller_runtime_reconcile_errors_total{controller}`` (counter)
* ``controller_runtime_reconcile_time_seconds{controller}`` (histogram)
* ``workqueue_depth{name}``, ``workqueue_unfinished_work_seconds{name}``,
  ``workqueue_longest_running_processor_seconds{name}`` (gauges)
* ``workqueue_adds_total{name}``, ``workqueue_retries_total{name}`` (counters)
* ``workqueue_queue_duration_seconds{name}``,
  ``workqueue_work_duration_seconds{name}`` (histograms)

A queue's `name` is its controller's name. Each `Metrics` owns its own
`CollectorRegistry` (never the process-wide one), so several managers or tests
in one process do not share series; users may register their own metrics on
`Metrics.registry`. `render()` leaves out prometheus_client's `*_created`
series, which controller-runtime does not have.

This module does no I/O: serving the text is `setpoint.runtime.health`'s job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from setpoint.runtime.controller import ControllerObserver
from setpoint.runtime.queue import QueueObserver, WorkQueue

__all__ = ["RECONCILE_RESULTS", "Metrics", "QueueSource"]

RECONCILE_RESULTS = ("success", "error", "requeue", "requeue_after")
"""The values of the `result` label, as controller-runtime spells them (setpoint never
reports `requeue`: it has no `Result(requeue=True)`, which controller-runtime deprecated)."""

QueueSource = Callable[[], Mapping[str, WorkQueue[Any]]]
"""Returns the queues to report, by name; called each time the metrics are rendered."""

# controller-runtime's buckets (pkg/internal/controller/metrics).
RECONCILE_TIME_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5),
    *(0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0),
    *(6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0),
)
# controller-runtime's workqueue buckets: ExponentialBuckets(10e-9, 10, 12), 10 ns to 1000 s.
WORKQUEUE_DURATION_BUCKETS = tuple(10.0**exponent for exponent in range(-8, 4))


class Metrics(ControllerObserver):
    """Records reconciles and queue timings; `render()` returns them in Prometheus text format.

    Build one, pass it as `observer=`, and say where the queues are::

        metrics = Metrics()
        manager = Manager(store, observer=metrics)
        metrics.track_queues(lambda: {c.name: c.queue for c in manager.controllers})

    A controller's reconcile series appear, at zero, when the controller is
    built (it asks for its queue observer then) or first reports a reconcile;
    its queue's counters and gauges appear once the `track_queues` source
    returns the queue.
    """

    def __init__(self, *, queues: QueueSource | None = None) -> None:
        self.registry = CollectorRegistry()
        self._controllers: set[str] = set()
        self._queues: QueueSource = queues or _no_queues
        self._reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=self.registry,
        )
        self._reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=self.registry,
        )
        self._reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=RECONCILE_TIME_BUCKETS,
            registry=self.registry,
        )
        self._queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            ["name"],
            buckets=WORKQUEUE_DURATION_BUCKETS,
            registry=self.registry,
        )
        self._work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            ["name"],
            buckets=WORKQUEUE_DURATION_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_QueueStatisticsCollector(self._current_queues))

    def track_queues(self, source: QueueSource) -> None:
        """Report the queues `source()` returns (name -> queue), read at each render.

        Replaces the previous source. The source is called on every render, so
        it may name queues built after this call (e.g. a manager's controllers).
        """
        self._queues = source

    # -- ControllerObserver ------------------------------------------------------

    def on_reconcile(self, controller: str, result: str, seconds: float) -> None:
        """Count one reconcile of `controller` with outcome `result`, and time it."""
        if controller not in self._controllers:
            self._start_series(controller)
        self._reconcile_total.labels(controller, result).inc()
        if result == "error":
            self._reconcile_errors.labels(controller).inc()
        self._reconcile_time.labels(controller).observe(seconds)

    def queue_observer(self, controller: str) -> QueueObserver:
        """The observer for `controller`'s queue; also starts its series at zero."""
        self._start_series(controller)
        return _QueueDurations(
            self._queue_duration.labels(controller), self._work_duration.labels(controller)
        )

    # -- output -----------------------------------------------------------------

    def render(self) -> bytes:
        """Every series in the Prometheus text format 0.0.4, with the queues read now."""
        return generate_latest(_WithoutCreatedSeries(self.registry))

    def _start_series(self, controller: str) -> None:
        """Create `controller`'s reconcile series at zero, as controller-runtime does."""
        self._controllers.add(controller)
        for result in RECONCILE_RESULTS:
            self._reconcile_total.labels(controller, result)
        self._reconcile_errors.labels(controller)
        self._reconcile_time.labels(controller)

    def _current_queues(self) -> Mapping[str, WorkQueue[Any]]:
        return self._queues()


def _no_queues() -> Mapping[str, WorkQueue[Any]]:
    return {}


class _QueueDurations(QueueObserver):
    """One queue's time-in-line and time-in-processing histograms."""

    def __init__(self, queue_duration: Histogram, work_duration: Histogram) -> None:
        self._queue_duration = queue_duration
        self._work_duration = work_duration

    def on_get(self, wait_seconds: float) -> None:
        self._queue_duration.observe(wait_seconds)

    def on_done(self, work_seconds: float) -> None:
        self._work_duration.observe(work_seconds)


class _QueueStatisticsCollector:
    """Turns each queue's `statistics()` into gauges and counters when collected."""

    def __init__(self, queues: QueueSource) -> None:
        self._queues = queues

    def describe(self) -> Iterable[Metric]:
        """The families `collect` yields, without samples (lets the registry catch clashes)."""
        return _QueueFamilies()

    def collect(self) -> Iterable[Metric]:
        families = _QueueFamilies()
        for name, queue in sorted(self._queues().items()):
            stats = queue.statistics()
            families.depth.add_metric([name], stats.depth)
            families.adds.add_metric([name], stats.adds)
            families.retries.add_metric([name], stats.retries)
            families.unfinished.add_metric([name], stats.unfinished_work_seconds)
            families.longest.add_metric([name], stats.longest_running_seconds)
        return families


class _QueueFamilies:
    """The metric families read from `WorkQueue.statistics()`, empty until filled."""

    def __init__(self) -> None:
        labels = ["name"]
        self.depth = GaugeMetricFamily(
            "workqueue_depth", "Current depth of workqueue", labels=labels
        )
        self.adds = CounterMetricFamily(
            "workqueue_adds_total", "Total number of adds handled by workqueue", labels=labels
        )
        self.retries = CounterMetricFamily(
            "workqueue_retries_total", "Total number of retries handled by workqueue", labels=labels
        )
        self.unfinished = GaugeMetricFamily(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration. Large values indicate stuck threads. One can deduce "
            "the number of stuck threads by observing the rate at which this increases.",
            labels=labels,
        )
        self.longest = GaugeMetricFamily(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            labels=labels,
        )

    def __iter__(self) -> Iterator[Metric]:
        return iter((self.depth, self.adds, self.retries, self.unfinished, self.longest))


_TYPES_WITH_CREATED = frozenset({"counter", "histogram", "summary"})


class _WithoutCreatedSeries:
    """A view of a registry without prometheus_client's `*_created` samples."""

    def __init__(self, registry: Collector) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            if family.type in _TYPES_WITH_CREATED:
                created = family.name + "_created"
                family.samples = [s for s in family.samples if s.name != created]
            yield family
