"""The `Autoscaler` kind (setpoint.dev/v1alpha1, namespaced, short name `as`) and its
controller: hold a metric at a target by scaling any kind with a scale subresource.

`spec`:

* `scaleTargetRef` {`apiVersion` (default setpoint.dev/v1alpha1), `kind`, `name`}: the
  object to scale, in the Autoscaler's namespace (a Deployment, or any kind registered
  with `scale=ScaleSubresource()`);
* `minReplicas` (1), `maxReplicas` (required);
* `metric`: one of `http` {`url`, `pointer`}, `prometheus` {`url`, `name`, `labels`},
  `command` {`args`} (see `setpoint.control.metrics_source`; it runs as the target's
  children would: as its template's `user:`, or the engine's user without one, if the
  engine's `UserPolicy` allows it, with a child's minimal environment), and `target` (> 0),
  `targetType` `Value` (the metric is per replica: `ceil(current * metric / target)`)
  or `AverageValue` (the metric is a total to share: `ceil(metric / target)`),
  `tolerance` (0.1), `timeoutSeconds` (5);
* `algorithm`: `ratio` (the Kubernetes HPA's rule), `pid` (`spec.pid`: `kp`, `ki`,
  `kd`, `deadband`, `relativeDeadband`, `noiseBand`, `downGain`; see
  `setpoint.control.scaling.PidGains`) or `predictive` (no gains to set: see
  `setpoint.control.predictive`); the pid and predictive algorithms see the metric as
  the `Value` form (per replica: an `AverageValue` metric is divided by the current
  count);
* `arrivals` (optional, predictive only): one source as in `metric` (`http`,
  `prometheus`, `command`, and `timeoutSeconds`) giving the arrival rate of the target's
  load in requests a second, read with the metric: the algorithm's feed-forward above
  the target, where the metric counts the queue too. Unreadable, the period decides
  without it (`status.lastDecision.arrivalsError` says why);
* `behavior`: as the HPA's, `scaleUp` / `scaleDown` each with
  `stabilizationWindowSeconds`, `selectPolicy` (Max | Min | Disabled) and `policies`
  [{`type` Pods | Percent, `value`, `periodSeconds`}]; what is left out takes the HPA's
  defaults (up: 0 s, max(4 pods, 100 %) per 15 s; down: 300 s, 100 % per 15 s), except
  that the pid and predictive algorithms' scale-down window defaults to 0 s
  (`PID_SCALE_DOWN`) and the predictive one's scale-up to max(4 pods, 1000 %) per 15 s
  (`PREDICTIVE_SCALE_UP`);
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
`current`, `recommendation`, `stabilized`, `limited`, `final`, `reason`), and
`lastDecision`: why the last period decided what it did, changed or not: the
`algorithm`, the observation (`metric`, `current`, `arrivals`), each term of the
algorithm (ratio: `ratio`; pid: `p`, `i`, `d`; predictive: `setpoint.control.predictive.Terms`,
its prediction among them), its `recommendation`, and `stabilized`, `limited`, `final`
as the behaviour made them (`describe` prints it in one line).

The controller is observe -> plan -> apply. `observe` reads the target's scale and (when
the plan will use it, `wants_metric`) the metric; `plan` is pure (time is an argument): it
lets `setpoint.control.scaling.decide` decide and returns a frozen `Plan` holding the
rescale, the new status and conditions, the events and what to remember; `apply` writes
the scale (compare-and-swap on the target's resourceVersion; if the target refuses,
`refused(plan, error)` says what then), records the events (`SuccessfulRescale`, or the
warnings `FailedGetMetric`, `FailedGetScale`, `FailedRescale`) and writes the status only
if it changed. A failure is reported once: its warning is recorded when its condition
changes, so an unreachable metric costs no write period after period. As the HPA, it
keeps the recommendation and scale-event history (and the pid algorithm's state) in
memory: a restarted controller starts them afresh from the current count. Time comes
from the manager's clock. The spec is read once, typed (`spec_of`): its defaults are the
schema's and nowhere else.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from setpoint.clock import rfc3339
from setpoint.control.kinds import AUTOSCALER
from setpoint.control.metrics_source import (
    CommandSource,
    HttpJsonSource,
    MetricSource,
    MetricUnavailable,
    PrometheusSource,
    read_metric,
)
from setpoint.control.predictive import Observation, PredictiveState, Terms
from setpoint.control.predictive import step as predictive_step
from setpoint.control.scaling import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    PID_SCALE_DOWN,
    PREDICTIVE_SCALE_UP,
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
from setpoint.model import Kind, Object, Schema, set_condition
from setpoint.runtime.controller import Controller
from setpoint.runtime.events import EventRecorder
from setpoint.runtime.manager import Manager
from setpoint.runtime.predicates import generation_changed
from setpoint.runtime.reconciler import Request, Result
from setpoint.runtime.run_as import UserPolicy, UserRefused, user_of
from setpoint.runtime.scale import Scale, read_scale, write_scale
from setpoint.store import Actor, WriteOptions

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
    "Memory",
    "Observed",
    "PidSpecSchema",
    "Plan",
    "Rescale",
    "behavior_of",
    "decision_summary",
    "metric_source_of",
    "plan",
    "refused",
    "setup",
    "spec_of",
    "wants_metric",
]

log = logging.getLogger("setpoint.autoscaler")

ABLE_TO_SCALE = "AbleToScale"
SCALING_ACTIVE = "ScalingActive"
SCALING_LIMITED = "ScalingLimited"
MANUAL_MODE = "ManualMode"
"""The `ScalingActive` reason while `spec.mode` is `manual`."""
SCALE_WRITES = WriteOptions(actor=Actor(manager="controller/autoscaler"))
"""How the controller writes a target's scale: naming itself, so that the timeline does not
take the rescale for a person's change."""
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
        _check_one_source(self)
        return self


def _check_one_source(schema: MetricSpecSchema | ArrivalsSpecSchema) -> None:
    given = [n for n in ("http", "prometheus", "command") if getattr(schema, n) is not None]
    if len(given) != 1:
        raise PydanticCustomError(
            "metric_source",
            "want exactly one of http, prometheus, command (got {given})",
            {"given": ", ".join(given) or "none"},
        )
    for name in ("http", "prometheus"):
        source = getattr(schema, name)
        if source is not None and not source.url.startswith(("http://", "https://")):
            raise PydanticCustomError(
                "metric_url", "{name}.url: want an http:// or https:// URL", {"name": name}
            )


class ArrivalsSpecSchema(Schema):
    """Where the arrival rate (requests a second) of the target's load comes from (exactly
    one source): the predictive algorithm's feed-forward."""

    http: HttpMetricSchema | None = None
    prometheus: PrometheusMetricSchema | None = None
    command: CommandMetricSchema | None = None
    timeout_seconds: float = Field(default=5.0, gt=0, le=300)

    @model_validator(mode="after")
    def _one_source(self) -> ArrivalsSpecSchema:
        _check_one_source(self)
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


class PidSpecSchema(Schema):
    """The pid algorithm's gains (`setpoint.control.scaling.PidGains` says what each does).

    The defaults were tuned once, on the autoscaler benchmark's world with three seeds
    other than the one it reports (see `bench/control_autoscaler.py`).
    """

    kp: float = 0.25
    ki: float = Field(default=1.0 / 60.0, ge=0)
    kd: float = Field(default=0.0, ge=0)
    deadband: float = Field(default=1.0, ge=0)
    relative_deadband: float = Field(default=0.15, ge=0, lt=1)
    noise_band: float = Field(default=0.0, ge=0)
    down_gain: float = Field(default=0.1, ge=0)

    def gains(self) -> PidGains:
        """These gains as the pid algorithm takes them."""
        return PidGains(
            kp=self.kp,
            ki=self.ki,
            kd=self.kd,
            deadband=self.deadband,
            relative_deadband=self.relative_deadband,
            noise_band=self.noise_band,
            down_gain=self.down_gain,
        )


class AutoscalerSpecSchema(Schema):
    """What to scale, between which bounds, on which metric, how (module docstring)."""

    scale_target_ref: ScaleTargetRefSchema
    min_replicas: int = Field(default=1, ge=0)
    max_replicas: int = Field(ge=1)
    metric: MetricSpecSchema
    algorithm: Literal["ratio", "pid", "predictive"] = "ratio"
    pid: PidSpecSchema | None = None
    arrivals: ArrivalsSpecSchema | None = None
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
    last_decision: dict[str, Any] | None = None


# -- from the typed spec --------------------------------------------------------------


def spec_of(obj: Object) -> AutoscalerSpecSchema:
    """The typed spec of a stored Autoscaler: every default filled in, by the schema alone."""
    return AutoscalerSpecSchema.model_validate(obj["spec"])


def _rules(schema: ScalingRulesSchema | None, default: ScalingRules) -> ScalingRules:
    if schema is None:
        return default
    return ScalingRules(
        stabilization_window_seconds=default.stabilization_window_seconds
        if schema.stabilization_window_seconds is None
        else schema.stabilization_window_seconds,
        policies=default.policies
        if schema.policies is None
        else tuple(ScalingPolicy(p.type, p.value, p.period_seconds) for p in schema.policies),
        select_policy=schema.select_policy or default.select_policy,
    )


def behavior_of(spec: AutoscalerSpecSchema) -> Behavior:
    """The `Behavior` of an Autoscaler's spec, what it leaves out taken from the HPA's
    defaults, but no scale-down window for the pid and predictive algorithms
    (`PID_SCALE_DOWN`) and max(4 pods, 1000 %) per 15 s up for the predictive one
    (`PREDICTIVE_SCALE_UP`)."""
    wire = spec.behavior or BehaviorSchema()
    down = DEFAULT_SCALE_DOWN if spec.algorithm == "ratio" else PID_SCALE_DOWN
    up = PREDICTIVE_SCALE_UP if spec.algorithm == "predictive" else DEFAULT_SCALE_UP
    return Behavior(_rules(wire.scale_up, up), _rules(wire.scale_down, down))


def metric_source_of(metric: MetricSpecSchema | ArrivalsSpecSchema) -> MetricSource:
    """The `MetricSource` of an Autoscaler's `spec.metric` or `spec.arrivals` (the schema
    allows exactly one)."""
    if metric.http is not None:
        return HttpJsonSource(metric.http.url, metric.http.pointer)
    if metric.prometheus is not None:
        prom = metric.prometheus
        return PrometheusSource(prom.url, prom.name, dict(prom.labels))
    if metric.command is not None:
        return CommandSource(tuple(metric.command.args))
    raise Invalid("want exactly one of http, prometheus, command", field="spec.metric")


# -- observe -> plan (pure) -> apply ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Memory:
    """What one Autoscaler's decisions remember between periods (in memory, as the HPA's):
    the behaviour's history and, for the pid or predictive algorithm, its state; for the
    object `uid` at `generation` (a new generation starts them afresh)."""

    uid: str
    generation: int
    history: History = field(default_factory=History)
    pid: PidAlgorithm | None = None
    predictive: PredictiveState | None = None


@dataclass(frozen=True, slots=True)
class Observed:
    """What `observe` saw: the Autoscaler (uid, generation, status), the target's scale or
    why it could not be read, the metric or why it could not be read (it is read only when
    `wants_metric` says the plan will use it), the decisions' memory, and the arrival rate
    or why it could not be read (read with the metric, for the predictive algorithm when
    `spec.arrivals` is given)."""

    uid: str
    generation: int
    status: Mapping[str, Any]
    scale: Scale | None = None
    scale_error: str | None = None
    metric: float | None = None
    metric_error: str | None = None
    memory: Memory | None = None
    arrivals: float | None = None
    arrivals_error: str | None = None


Event = tuple[str, str, str]
"""(type, reason, message) of an event to record: `Normal` or `Warning`."""


@dataclass(frozen=True, slots=True)
class Rescale:
    """Set the target's replicas (compare-and-swap on the scale that was read); if the
    target refuses, `refused` tells what then."""

    replicas: int
    resource_version: str
    reason: str
    status_if_refused: Mapping[str, Any]
    events_if_refused: tuple[Event, ...]
    memory_if_refused: Memory | None


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything one period does: the rescale (if any), then the status to write (only
    written if it differs from the stored one), the events to record, what to remember
    (None: forget) and when to look again. `now` is the time it was decided at."""

    status: Mapping[str, Any]
    requeue_after: float
    now: float
    events: tuple[Event, ...] = ()
    memory: Memory | None = None
    rescale: Rescale | None = None


def wants_metric(spec: AutoscalerSpecSchema, scale: Scale) -> bool:
    """Whether `plan` uses the metric for this scale: always in manual mode (it is
    recorded); in auto mode only while the count is within [min, max] and not disabled
    by a target scaled to zero (as the HPA, which then reads no metric)."""
    if spec.mode == "manual":
        return True
    current = scale.replicas
    if current == 0 and spec.min_replicas != 0:
        return False
    return spec.min_replicas <= current <= spec.max_replicas


def plan(spec: AutoscalerSpecSchema, observed: Observed, *, now: float, monotonic: float) -> Plan:
    """One period's decision, pure: `now` is wall-clock seconds (conditions, timestamps),
    `monotonic` the seconds the behaviour's windows and the pid algorithm count in.

    A failure is reported once: its condition is set, and its warning event recorded only
    when the condition changes; the same failure on the next period changes nothing, so
    nothing is written. Never mutates `observed` (the pid state is copied before use).
    """
    status: dict[str, Any] = copy.deepcopy(dict(observed.status))
    status["observedGeneration"] = observed.generation
    events: list[Event] = []
    out = _Draft(status, events, now)
    period = spec.period_seconds
    scale = observed.scale
    if scale is None:
        message = observed.scale_error or "the target's scale could not be read"
        out.report(ABLE_TO_SCALE, False, "FailedGetScale", message, event=message)
        return out.plan(observed.memory, None, period)
    current = scale.replicas
    status["currentReplicas"] = current
    metric = spec.metric
    value = observed.metric
    if observed.metric_error is not None:
        out.report(
            SCALING_ACTIVE,
            False,
            "FailedGetMetric",
            f"the metric could not be read: {observed.metric_error}",
            event=observed.metric_error,
        )
    elif value is not None:
        status["currentMetric"] = value
    if spec.mode == "manual":
        return _plan_manual(spec, out, scale, value)
    if current == 0 and spec.min_replicas != 0:
        out.report(
            SCALING_ACTIVE,
            False,
            "ScalingDisabled",
            "scaling is disabled since the replica count of the target is zero",
        )
        status["desiredReplicas"] = 0
        return out.plan(observed.memory, None, period)
    memory = _remember(observed, spec)
    if wants_metric(spec, scale):
        if value is None:
            return out.plan(observed.memory, None, period)  # reported above
        if memory.predictive is not None:
            state, terms = _predict(spec, memory.predictive, current, value, observed, monotonic)
            recommendation = terms.recommendation
            memory = replace(memory, predictive=state)
            explained = _explain_predictive(terms, observed.arrivals_error)
        else:
            pid = copy.deepcopy(memory.pid)
            recommendation = _recommend(metric, pid, current, value, monotonic)
            memory = replace(memory, pid=pid)
            explained = _explain(metric, pid, current, value, recommendation)
        out.report(
            SCALING_ACTIVE,
            True,
            "ValidMetricFound",
            f"the controller was able to compute a replica count from the metric "
            f"({value:g}, target {metric.target:g})",
        )
    else:
        recommendation = current
        explained = None
    decision = decide(
        memory.history,
        current=current,
        recommendation=recommendation,
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
        behavior=behavior_of(spec),
        now=monotonic,
    )
    reason = _rescale_reason(decision, value if wants_metric(spec, scale) else None, metric)
    rescale = None
    if decision.rescale:
        refused = replace(
            memory, history=replace(decision.history, scale_events=memory.history.scale_events)
        )
        rescale = out.rescale(scale, decision.replicas, reason, refused)
    else:
        out.report(ABLE_TO_SCALE, True, decision.able_reason, decision.able_message)
    out.report(
        SCALING_LIMITED,
        decision.scaling_limited,
        decision.limited_reason,
        decision.limited_message,
    )
    status["desiredReplicas"] = decision.replicas
    if explained is not None:
        status["lastDecision"] = {
            **explained,
            "stabilized": decision.stabilized,
            "limited": decision.limited,
            "final": decision.replicas,
        }
    if decision.rescale or decision.recommendation != decision.current:
        entry = {
            "time": rfc3339(now),
            "metric": value if wants_metric(spec, scale) else None,
            "current": decision.current,
            "recommendation": decision.recommendation,
            "stabilized": decision.stabilized,
            "limited": decision.limited,
            "final": decision.replicas,
            "reason": reason if decision.rescale else decision.able_reason,
        }
        status["decisions"] = [*status.get("decisions", []), entry][-MAX_DECISIONS:]
    return out.plan(replace(memory, history=decision.history), rescale, period)


def _plan_manual(
    spec: AutoscalerSpecSchema, out: _Draft, scale: Scale, value: float | None
) -> Plan:
    """Manual mode: the metric recorded, nothing decided, the target set to
    `spec.manualReplicas` (within min/max) if it is given. The memory is forgotten: back in
    auto, history and pid start afresh (bumpless)."""
    current = scale.replicas
    if value is not None:
        out.report(
            SCALING_ACTIVE,
            False,
            MANUAL_MODE,
            f"manual mode: the metric ({value:g}, target {spec.metric.target:g}) is "
            "recorded, the replicas are spec.manualReplicas",
        )
    if spec.manual_replicas is None:
        out.status["desiredReplicas"] = current
        return out.plan(None, None, spec.period_seconds)
    replicas = min(max(spec.manual_replicas, spec.min_replicas), spec.max_replicas)
    out.status["desiredReplicas"] = replicas
    rescale = None
    if replicas != current:
        rescale = out.rescale(scale, replicas, "manual mode", None)
    return out.plan(None, rescale, spec.period_seconds)


def refused(plan: Plan, error: str) -> Plan:
    """What `plan` becomes when the target refuses its rescale (a conflict, the target gone
    or invalid): `AbleToScale` False (`FailedUpdateScale`), a `FailedRescale` warning, and
    no scale event remembered. Pure."""
    rescale = plan.rescale
    if rescale is None:
        return plan
    status = copy.deepcopy(dict(rescale.status_if_refused))
    set_condition(
        status,
        ABLE_TO_SCALE,
        False,
        reason="FailedUpdateScale",
        message=f"the controller was unable to update the target scale: {error}",
        now=plan.now,
    )
    warning = (
        "Warning",
        "FailedRescale",
        f"New size: {rescale.replicas}; reason: {rescale.reason}; error: {error}",
    )
    return Plan(
        status,
        plan.requeue_after,
        plan.now,
        events=(*rescale.events_if_refused, warning),
        memory=rescale.memory_if_refused,
    )


@dataclass(slots=True)
class _Draft:
    """The plan being written: the status and events so far (private to `plan`)."""

    status: dict[str, Any]
    events: list[Event]
    now: float

    def report(
        self, type_: str, value: bool, reason: str, message: str, *, event: str | None = None
    ) -> None:
        """Set a condition; with `event`, also record a warning, but only if the condition
        changed (a failure is reported once, not every period)."""
        changed = set_condition(
            self.status, type_, value, reason=reason, message=message, now=self.now
        )
        if event is not None and changed:
            self.events.append(("Warning", reason, event))

    def rescale(
        self, scale: Scale, replicas: int, reason: str, memory_if_refused: Memory | None
    ) -> Rescale:
        """A rescale to `replicas`; the status as it stands is the one kept if it is refused."""
        refused = Rescale(
            replicas,
            scale.resource_version,
            reason,
            copy.deepcopy(self.status),
            tuple(self.events),
            memory_if_refused,
        )
        self.status["lastScaleTime"] = rfc3339(self.now)
        self.report(
            ABLE_TO_SCALE,
            True,
            "SucceededRescale",
            f"the controller was able to update the target scale to {replicas}",
        )
        self.events.append(
            ("Normal", "SuccessfulRescale", f"New size: {replicas}; reason: {reason}")
        )
        return refused

    def plan(self, memory: Memory | None, rescale: Rescale | None, period: float) -> Plan:
        return Plan(
            self.status, period, self.now, events=tuple(self.events), memory=memory, rescale=rescale
        )


def _remember(observed: Observed, spec: AutoscalerSpecSchema) -> Memory:
    """The memory to decide with: the remembered one if it is this object's, with the pid
    or predictive state started afresh on a new generation (new gains or bounds) or
    created for its algorithm; a fresh one otherwise."""
    memory = observed.memory
    if memory is None or memory.uid != observed.uid:
        memory = Memory(observed.uid, observed.generation)
    if memory.generation != observed.generation:
        memory = replace(memory, generation=observed.generation, pid=None, predictive=None)
    if spec.algorithm == "predictive":
        return replace(memory, pid=None, predictive=memory.predictive or PredictiveState())
    memory = replace(memory, predictive=None)
    if spec.algorithm != "pid":
        return replace(memory, pid=None)
    if memory.pid is None:
        gains = (spec.pid or PidSpecSchema()).gains()
        pid = PidAlgorithm(spec.metric.target, spec.min_replicas, spec.max_replicas, gains)
        memory = replace(memory, pid=pid)
    return memory


def _recommend(
    metric: MetricSpecSchema, pid: PidAlgorithm | None, current: int, value: float, now: float
) -> int:
    """The algorithm's recommendation (`pid` is advanced: pass a copy)."""
    average = metric.target_type == "AverageValue"
    if pid is not None:
        per_replica = value / current if average and current else value
        return pid.recommend(current, per_replica, now)
    if average:
        return average_value_replicas(current, value, metric.target, tolerance=metric.tolerance)
    return value_replicas(current, value, metric.target, tolerance=metric.tolerance)


def _predict(
    spec: AutoscalerSpecSchema,
    state: PredictiveState,
    current: int,
    value: float,
    observed: Observed,
    now: float,
) -> tuple[PredictiveState, Terms]:
    """One step of the predictive algorithm on the metric as `Value` (per replica)."""
    metric = spec.metric
    per_replica = value / current if metric.target_type == "AverageValue" and current else value
    seen = Observation(
        per_replica,
        current,
        metric.target,
        spec.min_replicas,
        spec.max_replicas,
        now,
        observed.arrivals,
    )
    return predictive_step(state, seen)


def _explain_predictive(terms: Terms, arrivals_error: str | None) -> dict[str, Any]:
    """`status.lastDecision` of the predictive algorithm: every term (`Terms.as_dict`)."""
    explained: dict[str, Any] = {"algorithm": "predictive", **terms.as_dict()}
    if arrivals_error is not None:
        explained["arrivalsError"] = arrivals_error
    return explained


def _explain(
    metric: MetricSpecSchema,
    pid: PidAlgorithm | None,
    current: int,
    value: float,
    recommendation: int,
) -> dict[str, Any]:
    """`status.lastDecision` of the ratio or pid algorithm: the observation, the ratio of
    the metric per replica to the target and, for the pid, its proportional, integral and
    derivative terms (in ln(replicas))."""
    per_replica = value / current if metric.target_type == "AverageValue" and current else value
    explained: dict[str, Any] = {
        "algorithm": "pid" if pid is not None else "ratio",
        "metric": round(value, 4),
        "current": current,
        "ratio": round(per_replica / metric.target, 4),
    }
    if pid is not None:
        p, i, d = pid.components
        explained.update({"p": round(p, 4), "i": round(i, 4), "d": round(d, 4)})
    explained["recommendation"] = recommendation
    return explained


def _rescale_reason(decision: Decision, metric: float | None, spec: MetricSpecSchema) -> str:
    if metric is None:
        return decision.limited_message
    if decision.replicas > decision.current:
        return f"metric {metric:g} above target {spec.target:g}"
    if decision.replicas < decision.current:
        return f"metric {metric:g} below target {spec.target:g}"
    return "no change"


def decision_summary(obj: Object, now: float) -> list[tuple[str, str]]:
    """`describe`'s header fields for an Autoscaler: why the last period decided what it
    did (`status.lastDecision`): the observation, the prediction and each term."""
    del now
    last = (obj.get("status") or {}).get("lastDecision")
    if not isinstance(last, dict):
        return [("Last Decision", "<none>")]
    algorithm = last.get("algorithm", "?")
    seen = f"metric {last.get('metric')} at {last.get('current')} replicas"
    if last.get("arrivals") is not None:
        seen += f", arrivals {last['arrivals']}/s"
    if algorithm == "predictive":
        terms = (
            f"need {last.get('need')} (feedback), load {last.get('load')}, "
            f"level {last.get('level')} + feed-forward {last.get('feedForward')} "
            f"(trend {last.get('trendPerSecond')}/s) + backlog {last.get('backlog')} "
            f"= prediction {last.get('prediction')}; held {last.get('held')}; "
            f"{last.get('direction')}"
        )
    elif algorithm == "pid":
        terms = (
            f"ratio {last.get('ratio')}; P {last.get('p')}, I {last.get('i')}, D {last.get('d')}"
        )
    else:
        terms = f"ratio {last.get('ratio')}"
    fields = [
        ("Last Decision", f"{algorithm}: {seen}"),
        ("Terms", terms),
        (
            "Replicas",
            f"recommended {last.get('recommendation')}, stabilized {last.get('stabilized')}, "
            f"limited {last.get('limited')}, final {last.get('final')}",
        ),
    ]
    if last.get("arrivalsError"):
        fields.append(("Arrivals Error", str(last["arrivalsError"])))
    return fields


# -- the controller ----------------------------------------------------------------------


class AutoscalerController:
    """Reconciles Autoscalers: one decision per `periodSeconds` (module docstring):
    `observe` reads the Autoscaler, the target's scale and the metric; `plan` decides;
    `apply` writes the scale, the status (if it changed) and the events."""

    def __init__(
        self, manager: Manager, events: EventRecorder, users: UserPolicy | None = None
    ) -> None:
        self.manager = manager
        self.users = users or UserPolicy()
        self.store = manager.store
        self.clock = manager.clock
        self.events = events
        self._memory: dict[tuple[str, str], Memory] = {}

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
        spec = spec_of(obj)
        observed = await self.observe(obj, spec, self._memory.get(key))
        decided = plan(spec, observed, now=self.clock.now(), monotonic=self.clock.monotonic())
        decided = await self.apply(obj, spec, decided)
        if decided.memory is None:
            self._memory.pop(key, None)
        else:
            self._memory[key] = decided.memory
        return Result(requeue_after=decided.requeue_after)

    async def observe(
        self, obj: Object, spec: AutoscalerSpecSchema, memory: Memory | None
    ) -> Observed:
        """Read the target's scale and, if the plan will use it, the metric."""
        meta = obj["metadata"]
        seen = Observed(
            str(meta.get("uid", "")),
            int(meta.get("generation", 1)),
            obj.get("status") or {},
            memory=memory,
        )
        ref = spec.scale_target_ref
        try:
            target_kind = self.store.registry.get(ref.api_version, ref.kind)
            scale = await read_scale(self.store, target_kind, ref.name, meta.get("namespace"))
        except (NotFound, Invalid) as exc:
            message = f"cannot read the scale of {ref.kind}/{ref.name}: {exc}"
            return replace(seen, scale_error=message)
        seen = replace(seen, scale=scale)
        if not wants_metric(spec, scale):
            return seen
        try:
            value = await self._read(spec.metric, target_kind, ref.name, meta)
        except MetricUnavailable as exc:
            return replace(seen, metric_error=str(exc))
        seen = replace(seen, metric=value)
        if spec.algorithm == "predictive" and spec.arrivals is not None and spec.mode == "auto":
            try:
                arrivals = await self._read(spec.arrivals, target_kind, ref.name, meta)
            except MetricUnavailable as exc:
                return replace(seen, arrivals_error=str(exc))
            seen = replace(seen, arrivals=arrivals)
        return seen

    async def _read(
        self,
        spec: MetricSpecSchema | ArrivalsSpecSchema,
        target_kind: Kind,
        name: str,
        meta: Mapping[str, Any],
    ) -> float:
        """The number `spec`'s source gives (`MetricUnavailable` if none)."""
        source = metric_source_of(spec)
        if isinstance(source, CommandSource):
            source = await self._command_as_target(source, target_kind, name, meta)
        return await read_metric(source, within=spec.timeout_seconds)

    async def _command_as_target(
        self, source: CommandSource, target_kind: Kind, name: str, meta: Mapping[str, Any]
    ) -> CommandSource:
        """`source` run as the target's children run (`user_of`: a Deployment's template
        `user:`; none: the engine's user), if this engine may (`UserPolicy`); else
        `MetricUnavailable` saying why. A command in an Autoscaler gets no more power than
        one in a Process of the same namespace: its author could write either."""
        try:
            target = await self.store.get(
                target_kind.api_version, target_kind.kind, name, meta.get("namespace")
            )
            account = self.users.account(user_of(target))
        except (NotFound, UserRefused) as exc:
            raise MetricUnavailable(f"command {source.args[0]!r}: {exc}") from None
        return replace(source, account=account)

    async def apply(self, obj: Object, spec: AutoscalerSpecSchema, decided: Plan) -> Plan:
        """Carry out `decided`: the rescale first (if the target refuses it, what `refused`
        says instead), then the events, then the status if it changed. Returns the plan
        carried out."""
        rescale = decided.rescale
        if rescale is not None:
            ref = spec.scale_target_ref
            namespace = obj["metadata"].get("namespace")
            try:
                await write_scale(
                    self.store,
                    self.store.registry.get(ref.api_version, ref.kind),
                    ref.name,
                    namespace,
                    rescale.replicas,
                    resource_version=rescale.resource_version,
                    options=SCALE_WRITES,  # the timeline names who rescaled, not `unknown`
                )
            except (Conflict, NotFound, Invalid) as exc:
                decided = refused(decided, str(exc))
            else:
                log.info(
                    "autoscaler %s/%s: %s scaled to %d (%s)",
                    namespace,
                    obj["metadata"]["name"],
                    ref.name,
                    rescale.replicas,
                    rescale.reason,
                )
        for type_, reason, message in decided.events:
            await self.events.record(obj, type_, reason, message)
        if decided.status != (obj.get("status") or {}):
            updated = copy.deepcopy(obj)
            updated["status"] = dict(decided.status)
            # changed or gone meanwhile: the next look sees the new one
            with contextlib.suppress(NotFound, Conflict):
                await self.store.update_status(updated)
        return decided


def setup(manager: Manager, *, users: UserPolicy | None = None) -> Controller:
    """Add the Autoscaler controller to `manager`; return the controller. `users` says whom
    command metrics may run as (default: `UserPolicy()`, the engine's own rule)."""
    reconciler = AutoscalerController(manager, manager.event_recorder("autoscaler"), users)
    return reconciler.attach(manager)
