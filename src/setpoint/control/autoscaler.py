"""The `Autoscaler` kind (setpoint.dev/v1alpha1, namespaced, short name `as`) and its
controller: hold a metric at a target by scaling any kind with a scale subresource.

`spec`:

* `scaleTargetRef` {`apiVersion` (default setpoint.dev/v1alpha1), `kind`, `name`}: the
  object to scale, in the Autoscaler's namespace (a Deployment, or any kind registered
  with `scale=ScaleSubresource()`);
* `minReplicas` (1), `maxReplicas` (required);
* `metric`: one of `http` {`url`, `pointer`}, `prometheus` {`url`, `name`, `labels`},
  `command` {`args`} (see `setpoint.control.metrics_source`), and `target` (> 0),
  `targetType` `Value` (the metric is per replica: `ceil(current * metric / target)`)
  or `AverageValue` (the metric is a total to share: `ceil(metric / target)`),
  `tolerance` (0.1), `timeoutSeconds` (5);
* `algorithm`: `ratio` (the Kubernetes HPA's rule) or `pid` (`spec.pid`: `kp`, `ki`,
  `kd`, `deadband`, `relativeDeadband`, `noiseBand`, `downGain`; see
  `setpoint.control.scaling.PidGains`); the pid algorithm sees the metric as the
  `Value` form (per replica: an `AverageValue` metric is divided by the current count);
* `behavior`: as the HPA's, `scaleUp` / `scaleDown` each with
  `stabilizationWindowSeconds`, `selectPolicy` (Max | Min | Disabled) and `policies`
  [{`type` Pods | Percent, `value`, `periodSeconds`}]; what is left out takes the HPA's
  defaults (up: 0 s, max(4 pods, 100 %) per 15 s; down: 300 s, 100 % per 15 s), except
  that the pid algorithm's scale-down window defaults to 0 s (`PID_SCALE_DOWN`);
* `periodSeconds` (15): how often the metric is read and a decision made;
* `mode`: `auto` (the default) or `manual`: the controller still reads the metric every
  period and records it (`status.currentMetric`, `ScalingActive=False` with reason
  `ManualMode`) but decides nothing; if `manualReplicas` is set it scales the target to
  that count (within min/max). This is how `setpoint tune --autoscaler` drives the
  target. Back in `auto`, the history and the pid state start afresh from the current
  count (bumpless).

`status`: `currentReplicas`, `desiredReplicas`, `currentMetric` (the last value read),
`lastScaleTime`, `observedGeneration`, the HPA's conditions `AbleToScale`,
`ScalingActive` and `ScalingLimited` with its reasons, and `decisions`: the last 20
decisions that changed the replicas or wanted to (each with `time`, `metric`,
`current`, `recommendation`, `stabilized`, `limited`, `final`, `reason`).

The controller reads the target's scale, reads the metric, lets the pure
`setpoint.control.scaling.decide` decide, writes the scale (compare-and-swap on the
target's resourceVersion) and records `SuccessfulRescale`, or `FailedGetMetric` /
`FailedGetScale` / `FailedRescale` warnings. As the HPA, it keeps the recommendation and
scale-event history (and the pid algorithm's state) in memory: a restarted controller
starts them afresh from the current count. Time comes from the manager's clock.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from setpoint.clock import rfc3339
from setpoint.control.metrics_source import (
    CommandSource,
    HttpJsonSource,
    MetricSource,
    MetricUnavailable,
    PrometheusSource,
    read_metric,
)
from setpoint.control.scaling import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    PID_SCALE_DOWN,
    Behavior,
    Decision,
    History,
    PidAlgorithm,
    PidGains,
    ScalingPolicy,
    ScalingRules,
    average_value_replicas,
    decide,
    value_replicas,
)
from setpoint.errors import Conflict, Invalid, NotFound
from setpoint.model import Kind, Object, PrinterColumn, Schema, set_condition
from setpoint.runtime.controller import Controller
from setpoint.runtime.events import EventRecorder
from setpoint.runtime.manager import Manager
from setpoint.runtime.predicates import generation_changed
from setpoint.runtime.reconciler import Request, Result
from setpoint.runtime.scale import Scale, read_scale, write_scale

__all__ = [
    "ABLE_TO_SCALE",
    "AUTOSCALER",
    "MANUAL_MODE",
    "MAX_DECISIONS",
    "SCALING_ACTIVE",
    "SCALING_LIMITED",
    "AutoscalerController",
    "AutoscalerSpecSchema",
    "AutoscalerStatusSchema",
    "behavior_of",
    "metric_source_of",
    "setup",
]

log = logging.getLogger("setpoint.autoscaler")

ABLE_TO_SCALE = "AbleToScale"
SCALING_ACTIVE = "ScalingActive"
SCALING_LIMITED = "ScalingLimited"
MANUAL_MODE = "ManualMode"
"""The `ScalingActive` reason while `spec.mode` is `manual`."""
MAX_DECISIONS = 20

# -- the kind ------------------------------------------------------------------------


class ScaleTargetRefSchema(Schema):
    """The object to scale, in the Autoscaler's namespace."""

    api_version: str = "setpoint.dev/v1alpha1"
    kind: str = Field(min_length=1)
    name: str = Field(min_length=1)


class HttpMetricSchema(Schema):
    """A number at JSON `pointer` in the body of GET `url`."""

    url: str = Field(min_length=1)
    pointer: str = ""


class PrometheusMetricSchema(Schema):
    """The sum of the samples `name` carrying at least `labels`, scraped from `url`."""

    url: str = Field(min_length=1)
    name: str = Field(min_length=1)
    labels: dict[str, str] = Field(default_factory=dict)


class CommandMetricSchema(Schema):
    """The number a command (argv, no shell) prints."""

    args: list[str] = Field(min_length=1)


class MetricSpecSchema(Schema):
    """Where the metric comes from (exactly one source) and the value to hold it at."""

    http: HttpMetricSchema | None = None
    prometheus: PrometheusMetricSchema | None = None
    command: CommandMetricSchema | None = None
    target: float = Field(gt=0)
    target_type: Literal["Value", "AverageValue"] = "Value"
    tolerance: float = Field(default=0.1, ge=0, lt=1)
    timeout_seconds: float = Field(default=5.0, gt=0, le=300)

    @model_validator(mode="after")
    def _one_source(self) -> MetricSpecSchema:
        given = [n for n in ("http", "prometheus", "command") if getattr(self, n) is not None]
        if len(given) != 1:
            raise PydanticCustomError(
                "metric_source",
                "want exactly one of http, prometheus, command (got {given})",
                {"given": ", ".join(given) or "none"},
            )
        for name in ("http", "prometheus"):
            source = getattr(self, name)
            if source is not None and not source.url.startswith(("http://", "https://")):
                raise PydanticCustomError(
                    "metric_url", "{name}.url: want an http:// or https:// URL", {"name": name}
                )
        return self


class ScalingPolicySchema(Schema):
    """At most `value` pods (`Pods`) or percent (`Percent`) per `periodSeconds`."""

    type: Literal["Pods", "Percent"]
    value: int = Field(gt=0)
    period_seconds: int = Field(gt=0, le=1800)


class ScalingRulesSchema(Schema):
    """One direction of `behavior`; what is left out takes the HPA's default."""

    stabilization_window_seconds: int | None = Field(default=None, ge=0, le=3600)
    select_policy: Literal["Max", "Min", "Disabled"] | None = None
    policies: list[ScalingPolicySchema] | None = None


class BehaviorSchema(Schema):
    """The HPA's `behavior`."""

    scale_up: ScalingRulesSchema | None = None
    scale_down: ScalingRulesSchema | None = None


_DEFAULT_GAINS = PidGains()


class PidSpecSchema(Schema):
    """The pid algorithm's gains (`setpoint.control.scaling.PidGains`)."""

    kp: float = _DEFAULT_GAINS.kp
    ki: float = Field(default=_DEFAULT_GAINS.ki, ge=0)
    kd: float = Field(default=_DEFAULT_GAINS.kd, ge=0)
    deadband: float = Field(default=_DEFAULT_GAINS.deadband, ge=0)
    relative_deadband: float = Field(default=_DEFAULT_GAINS.relative_deadband, ge=0, lt=1)
    noise_band: float = Field(default=_DEFAULT_GAINS.noise_band, ge=0)
    down_gain: float = Field(default=_DEFAULT_GAINS.down_gain, ge=0)


class AutoscalerSpecSchema(Schema):
    """What to scale, between which bounds, on which metric, how (module docstring)."""

    scale_target_ref: ScaleTargetRefSchema
    min_replicas: int = Field(default=1, ge=0)
    max_replicas: int = Field(ge=1)
    metric: MetricSpecSchema
    algorithm: Literal["ratio", "pid"] = "ratio"
    pid: PidSpecSchema | None = None
    behavior: BehaviorSchema | None = None
    period_seconds: float = Field(default=15.0, gt=0, le=3600)
    mode: Literal["auto", "manual"] = "auto"
    manual_replicas: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalerSpecSchema:
        if self.min_replicas > self.max_replicas:
            raise PydanticCustomError(
                "replica_bounds",
                "minReplicas ({low}) is above maxReplicas ({high})",
                {"low": self.min_replicas, "high": self.max_replicas},
            )
        return self


class AutoscalerStatusSchema(Schema):
    """What the controller observed and decided (module docstring)."""

    current_replicas: int | None = None
    desired_replicas: int | None = None
    current_metric: float | None = None
    last_scale_time: str | None = None
    observed_generation: int | None = None
    conditions: list[dict[str, Any]] = Field(default_factory=list)
    decisions: list[dict[str, Any]] = Field(default_factory=list)


AUTOSCALER = Kind(
    "setpoint.dev/v1alpha1",
    "Autoscaler",
    spec=AutoscalerSpecSchema,
    status=AutoscalerStatusSchema,
    namespaced=True,
    plural="autoscalers",
    short_names=("as",),
    columns=(
        PrinterColumn("TARGET", "spec.scaleTargetRef.name"),
        PrinterColumn("METRIC", "status.currentMetric", ".3g"),
        PrinterColumn("REPLICAS", "status.currentReplicas"),
        PrinterColumn("DESIRED", "status.desiredReplicas"),
    ),
)
"""The `Autoscaler` kind."""


# -- from the wire form ----------------------------------------------------------------


def _rules(wire: dict[str, Any] | None, default: ScalingRules) -> ScalingRules:
    if not wire:
        return default
    policies = wire.get("policies")
    return ScalingRules(
        stabilization_window_seconds=int(
            wire.get("stabilizationWindowSeconds", default.stabilization_window_seconds)
        ),
        policies=default.policies
        if policies is None
        else tuple(
            ScalingPolicy(p["type"], int(p["value"]), int(p["periodSeconds"])) for p in policies
        ),
        select_policy=wire.get("selectPolicy") or default.select_policy,
    )


def behavior_of(spec: dict[str, Any]) -> Behavior:
    """The `Behavior` of an Autoscaler's (validated) spec, defaults filled in: the HPA's,
    but no scale-down window for the pid algorithm (`PID_SCALE_DOWN`)."""
    wire = spec.get("behavior") or {}
    down = PID_SCALE_DOWN if spec.get("algorithm") == "pid" else DEFAULT_SCALE_DOWN
    return Behavior(
        _rules(wire.get("scaleUp"), DEFAULT_SCALE_UP),
        _rules(wire.get("scaleDown"), down),
    )


def metric_source_of(metric: dict[str, Any]) -> MetricSource:
    """The `MetricSource` of an Autoscaler's (validated) `spec.metric`."""
    if metric.get("http"):
        return HttpJsonSource(metric["http"]["url"], metric["http"].get("pointer", ""))
    if metric.get("prometheus"):
        prom = metric["prometheus"]
        return PrometheusSource(prom["url"], prom["name"], dict(prom.get("labels") or {}))
    if metric.get("command"):
        return CommandSource(tuple(metric["command"]["args"]))
    raise Invalid("want exactly one of http, prometheus, command", field="spec.metric")


def _gains(spec: dict[str, Any]) -> PidGains:
    wire = spec.get("pid") or {}
    defaults = PidGains()
    return PidGains(
        kp=float(wire.get("kp", defaults.kp)),
        ki=float(wire.get("ki", defaults.ki)),
        kd=float(wire.get("kd", defaults.kd)),
        deadband=float(wire.get("deadband", defaults.deadband)),
        noise_band=float(wire.get("noiseBand", defaults.noise_band)),
        down_gain=float(wire.get("downGain", defaults.down_gain)),
        relative_deadband=float(wire.get("relativeDeadband", defaults.relative_deadband)),
    )


# -- the controller ----------------------------------------------------------------------


@dataclass
class _Memory:
    """What one Autoscaler's decisions remember between periods (in memory, as the HPA)."""

    uid: str
    generation: int
    history: History
    pid: PidAlgorithm | None = None


class AutoscalerController:
    """Reconciles Autoscalers: one decision per `periodSeconds` (module docstring)."""

    def __init__(self, manager: Manager, events: EventRecorder) -> None:
        self.manager = manager
        self.store = manager.store
        self.clock = manager.clock
        self.events = events
        self._memory: dict[tuple[str, str], _Memory] = {}

    def attach(self, manager: Manager) -> Controller:
        """Register with `manager`; return the controller."""
        return (
            manager.controller("autoscaler")
            .for_(AUTOSCALER, predicates=[generation_changed])
            .complete(self)
        )

    async def reconcile(self, request: Request) -> Result | None:
        key = (request.namespace, request.name)
        try:
            obj = await self.store.get(
                AUTOSCALER.api_version, AUTOSCALER.kind, request.name, request.namespace or None
            )
        except NotFound:
            self._memory.pop(key, None)
            return None
        if obj["metadata"].get("deletionTimestamp"):
            self._memory.pop(key, None)
            return None
        spec: dict[str, Any] = obj["spec"]
        period = float(spec.get("periodSeconds", 15.0))
        status: dict[str, Any] = copy.deepcopy(obj.get("status") or {})
        before = copy.deepcopy(status)
        status["observedGeneration"] = obj["metadata"].get("generation")
        try:
            await self._evaluate(obj, spec, status, key)
        finally:
            if status != before:
                updated = copy.deepcopy(obj)
                updated["status"] = status
                # changed or gone meanwhile: the next look sees the new one
                with contextlib.suppress(NotFound, Conflict):
                    await self.store.update_status(updated)
        return Result(requeue_after=period)

    async def _evaluate(
        self, obj: Object, spec: dict[str, Any], status: dict[str, Any], key: tuple[str, str]
    ) -> None:
        now = self.clock.now()
        generation = int(obj["metadata"].get("generation", 1))
        ref = spec["scaleTargetRef"]
        namespace = obj["metadata"].get("namespace")
        try:
            target_kind = self.store.registry.get(
                ref.get("apiVersion", AUTOSCALER.api_version), ref["kind"]
            )
            scale = await read_scale(self.store, target_kind, ref["name"], namespace)
        except (NotFound, Invalid) as exc:
            message = f"cannot read the scale of {ref['kind']}/{ref['name']}: {exc}"
            self._condition(status, ABLE_TO_SCALE, False, "FailedGetScale", message, now)
            await self.events.warning(obj, "FailedGetScale", message)
            return
        if spec.get("mode") == "manual":
            self._memory.pop(key, None)  # back in auto, history and pid start afresh
            await self._manual(obj, spec, status, scale, now)
            return
        memory = self._remember(obj, key, spec, generation)
        current = scale.replicas
        status["currentReplicas"] = current
        min_replicas = int(spec.get("minReplicas", 1))
        max_replicas = int(spec["maxReplicas"])
        if current == 0 and min_replicas != 0:
            self._condition(
                status,
                SCALING_ACTIVE,
                False,
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
                now,
            )
            status["desiredReplicas"] = 0
            return
        metric_value: float | None = None
        if min_replicas <= current <= max_replicas:
            metric = spec["metric"]
            metric_value = await self._read_metric(obj, metric, status, now)
            if metric_value is None:
                return
            recommendation = self._recommend(spec, memory, current, metric_value)
            self._condition(
                status,
                SCALING_ACTIVE,
                True,
                "ValidMetricFound",
                f"the controller was able to compute a replica count from the metric "
                f"({metric_value:g}, target {float(metric['target']):g})",
                now,
            )
        else:
            recommendation = current
        decision = decide(
            memory.history,
            current=current,
            recommendation=recommendation,
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            behavior=behavior_of(spec),
            now=self.clock.monotonic(),
        )
        await self._apply(obj, status, memory, decision, scale, metric_value, now)

    async def _read_metric(
        self, obj: Object, metric: dict[str, Any], status: dict[str, Any], now: float
    ) -> float | None:
        """The metric's value, recorded in `status.currentMetric`; None (and `ScalingActive`
        False, a `FailedGetMetric` event) when it cannot be read."""
        try:
            value = await read_metric(
                metric_source_of(metric), within=float(metric.get("timeoutSeconds", 5.0))
            )
        except MetricUnavailable as exc:
            message = f"the metric could not be read: {exc}"
            self._condition(status, SCALING_ACTIVE, False, "FailedGetMetric", message, now)
            await self.events.warning(obj, "FailedGetMetric", str(exc))
            return None
        status["currentMetric"] = value
        return value

    async def _manual(
        self, obj: Object, spec: dict[str, Any], status: dict[str, Any], scale: Scale, now: float
    ) -> None:
        """Manual mode: read and record the metric, decide nothing, and set the target to
        `spec.manualReplicas` (within min/max) if it is given."""
        current = scale.replicas
        status["currentReplicas"] = current
        metric = spec["metric"]
        value = await self._read_metric(obj, metric, status, now)
        if value is not None:
            self._condition(
                status,
                SCALING_ACTIVE,
                False,
                MANUAL_MODE,
                f"manual mode: the metric ({value:g}, target {float(metric['target']):g}) is "
                "recorded, the replicas are spec.manualReplicas",
                now,
            )
        wanted = spec.get("manualReplicas")
        if wanted is None:
            status["desiredReplicas"] = current
            return
        replicas = min(max(int(wanted), int(spec.get("minReplicas", 1))), int(spec["maxReplicas"]))
        status["desiredReplicas"] = replicas
        if replicas == current:
            return
        await self._rescale(obj, status, scale, replicas, "manual mode", now)

    async def _rescale(
        self,
        obj: Object,
        status: dict[str, Any],
        scale: Scale,
        replicas: int,
        reason: str,
        now: float,
    ) -> bool:
        """Write `replicas` to the target's scale (compare-and-swap on the scale read), with
        its condition and event; whether it was written."""
        ref = obj["spec"]["scaleTargetRef"]
        target_kind = self.store.registry.get(
            ref.get("apiVersion", AUTOSCALER.api_version), ref["kind"]
        )
        try:
            await write_scale(
                self.store,
                target_kind,
                ref["name"],
                obj["metadata"].get("namespace"),
                replicas,
                resource_version=scale.resource_version,
            )
        except (Conflict, NotFound, Invalid) as exc:
            message = f"New size: {replicas}; reason: {reason}; error: {exc}"
            await self.events.warning(obj, "FailedRescale", message)
            self._condition(
                status,
                ABLE_TO_SCALE,
                False,
                "FailedUpdateScale",
                f"the controller was unable to update the target scale: {exc}",
                now,
            )
            return False
        status["lastScaleTime"] = rfc3339(now)
        self._condition(
            status,
            ABLE_TO_SCALE,
            True,
            "SucceededRescale",
            f"the controller was able to update the target scale to {replicas}",
            now,
        )
        await self.events.normal(
            obj, "SuccessfulRescale", f"New size: {replicas}; reason: {reason}"
        )
        return True

    def _remember(
        self, obj: Object, key: tuple[str, str], spec: dict[str, Any], generation: int
    ) -> _Memory:
        uid = str(obj["metadata"].get("uid", ""))
        memory = self._memory.get(key)
        if memory is None or memory.uid != uid:
            memory = _Memory(uid, generation, History())
            self._memory[key] = memory
        if memory.generation != generation:  # new gains or bounds: the pid starts afresh
            memory.generation = generation
            memory.pid = None
        if spec.get("algorithm") == "pid" and memory.pid is None:
            memory.pid = PidAlgorithm(
                float(spec["metric"]["target"]),
                int(spec.get("minReplicas", 1)),
                int(spec["maxReplicas"]),
                _gains(spec),
            )
        if spec.get("algorithm") != "pid":
            memory.pid = None
        return memory

    def _recommend(self, spec: dict[str, Any], memory: _Memory, current: int, metric: float) -> int:
        metric_spec = spec["metric"]
        target = float(metric_spec["target"])
        tolerance = float(metric_spec.get("tolerance", 0.1))
        average = metric_spec.get("targetType") == "AverageValue"
        if memory.pid is not None:
            per_replica = metric / current if average and current else metric
            return memory.pid.recommend(current, per_replica, self.clock.monotonic())
        if average:
            return average_value_replicas(current, metric, target, tolerance=tolerance)
        return value_replicas(current, metric, target, tolerance=tolerance)

    async def _apply(
        self,
        obj: Object,
        status: dict[str, Any],
        memory: _Memory,
        decision: Decision,
        scale: Scale,
        metric: float | None,
        now: float,
    ) -> None:
        spec = obj["spec"]
        ref = spec["scaleTargetRef"]
        reason = _rescale_reason(decision, metric, spec)
        if decision.rescale:
            if not await self._rescale(obj, status, scale, decision.replicas, reason, now):
                memory.history = replace(decision.history, scale_events=memory.history.scale_events)
                return
            memory.history = decision.history
            log.info(
                "autoscaler %s/%s: %s %d -> %d (%s)",
                obj["metadata"].get("namespace"),
                obj["metadata"]["name"],
                ref["name"],
                decision.current,
                decision.replicas,
                reason,
            )
        else:
            memory.history = decision.history
            self._condition(
                status, ABLE_TO_SCALE, True, decision.able_reason, decision.able_message, now
            )
        self._condition(
            status,
            SCALING_LIMITED,
            decision.scaling_limited,
            decision.limited_reason,
            decision.limited_message,
            now,
        )
        status["desiredReplicas"] = decision.replicas
        if decision.rescale or decision.recommendation != decision.current:
            entry = {
                "time": rfc3339(now),
                "metric": metric,
                "current": decision.current,
                "recommendation": decision.recommendation,
                "stabilized": decision.stabilized,
                "limited": decision.limited,
                "final": decision.replicas,
                "reason": reason if decision.rescale else decision.able_reason,
            }
            decisions = [*status.get("decisions", []), entry]
            status["decisions"] = decisions[-MAX_DECISIONS:]

    def _condition(
        self, status: dict[str, Any], type_: str, value: bool, reason: str, message: str, now: float
    ) -> None:
        set_condition(status, type_, value, reason=reason, message=message, now=now)


def _rescale_reason(decision: Decision, metric: float | None, spec: dict[str, Any]) -> str:
    if metric is None:
        return decision.limited_message
    target = float(spec["metric"]["target"])
    if decision.replicas > decision.current:
        return f"metric {metric:g} above target {target:g}"
    if decision.replicas < decision.current:
        return f"metric {metric:g} below target {target:g}"
    return "no change"


def setup(manager: Manager) -> Controller:
    """Add the Autoscaler controller to `manager`; return the controller."""
    reconciler = AutoscalerController(manager, manager.event_recorder("autoscaler"))
    return reconciler.attach(manager)
