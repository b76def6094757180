"""The Autoscaler's plan, pure: its schemas, what one period observed, and `plan`.

`plan(spec, observed, now)` is one period's decision: it lets
`setpoint.control.scaling.decide` decide and returns a frozen `Plan` holding the rescale,
the new status and conditions, the events and what to remember. `now` is wall-clock
seconds (conditions, timestamps); the monotonic seconds the behaviour's windows and the
pid algorithm count in travel in `Observed.monotonic`. A rescale the target refused is a
fact the next look observes (`Observed.rescale_error`): the plan then says what that
means (`refused`). No I/O, no clock (an import-linter contract holds it to that).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

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
from setpoint.model import Object, Schema, set_condition
from setpoint.model.scale import Scale
from setpoint.runtime.plan import Plan as KitPlan
from setpoint.runtime.plan import PlannedEvent
from setpoint.times import rfc3339

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
    monotonic: float = 0.0
    """When the period was observed, in the seconds the behaviour's windows and the pid
    algorithm count in (the clock's monotonic time)."""
    rescale_error: str | None = None
    """Why the target refused the rescale this period's plan tried (a conflict, the target
    gone or invalid): the plan is then what `refused` says."""


@dataclass(frozen=True, slots=True)
class Rescale:
    """Set the target's replicas (compare-and-swap on the scale that was read), and record
    `events` once it is set; if the target refuses, `refused` tells what then."""

    replicas: int
    resource_version: str
    reason: str
    status_if_refused: Mapping[str, Any]
    memory_if_refused: Memory | None
    events: tuple[PlannedEvent, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan(KitPlan):
    """Everything one period does: the rescale (if any), then the status to write (only
    written if it differs from the stored one), the events to record, what to remember
    (None: forget) and when to look again (`requeue_after`). `now` is the time it was
    decided at."""

    now: float
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


def plan(spec: AutoscalerSpecSchema, observed: Observed, now: float) -> Plan:
    """One period's decision, pure: `now` is wall-clock seconds (conditions, timestamps),
    `observed.monotonic` the seconds the behaviour's windows and the pid algorithm count
    in. A rescale the target refused (`observed.rescale_error`) makes it what `refused`
    says.

    A failure is reported once: its condition is set, and its warning event recorded only
    when the condition changes; the same failure on the next period changes nothing, so
    nothing is written. Never mutates `observed` (the pid state is copied before use).
    """
    decided = _decide(spec, observed, now)
    if observed.rescale_error is not None:
        return refused(decided, observed.rescale_error)
    return decided


def _decide(spec: AutoscalerSpecSchema, observed: Observed, now: float) -> Plan:
    monotonic = observed.monotonic
    status: dict[str, Any] = copy.deepcopy(dict(observed.status))
    status["observedGeneration"] = observed.generation
    events: list[PlannedEvent] = []
    out = _Draft(status, events, now)
    period = spec.period_seconds
    scale = observed.scale
    if scale is None:
        message = observed.scale_error or "the target's scale could not be read"
        out.report(ABLE_TO_SCALE, False, "FailedGetScale", message, event=message)
        return out.finish(observed.memory, None, period)
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
        return out.finish(observed.memory, None, period)
    memory = _remember(observed, spec)
    if wants_metric(spec, scale):
        if value is None:
            return out.finish(observed.memory, None, period)  # reported above
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
    return out.finish(replace(memory, history=decision.history), rescale, period)


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
        return out.finish(None, None, spec.period_seconds)
    replicas = min(max(spec.manual_replicas, spec.min_replicas), spec.max_replicas)
    out.status["desiredReplicas"] = replicas
    rescale = None
    if replicas != current:
        rescale = out.rescale(scale, replicas, "manual mode", None)
    return out.finish(None, rescale, spec.period_seconds)


def refused(plan: Plan, error: str) -> Plan:
    """What `plan` becomes when the target refuses its rescale (a conflict, the target gone
    or invalid): `AbleToScale` False (`FailedUpdateScale`), a `FailedRescale` warning (its
    only event: the period's others were recorded with the rescale it tried), and no scale
    event remembered. Pure."""
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
    warning = PlannedEvent(
        "FailedRescale",
        f"New size: {rescale.replicas}; reason: {rescale.reason}; error: {error}",
        warning=True,
    )
    return Plan(
        status=status,
        requeue_after=plan.requeue_after,
        now=plan.now,
        events=(warning,),
        memory=rescale.memory_if_refused,
    )


@dataclass(slots=True)
class _Draft:
    """The plan being written: the status and events so far (private to `plan`); `finish`
    makes it a `Plan`."""

    status: dict[str, Any]
    events: list[PlannedEvent]
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
            self.events.append(PlannedEvent(reason, event, warning=True))

    def rescale(
        self, scale: Scale, replicas: int, reason: str, memory_if_refused: Memory | None
    ) -> Rescale:
        """A rescale to `replicas`; the status as it stands is the one kept if it is refused.
        Its `SuccessfulRescale` event is the rescale's, recorded once it is done."""
        done = PlannedEvent("SuccessfulRescale", f"New size: {replicas}; reason: {reason}")
        rescale = Rescale(
            replicas,
            scale.resource_version,
            reason,
            copy.deepcopy(self.status),
            memory_if_refused,
            (done,),
        )
        self.status["lastScaleTime"] = rfc3339(self.now)
        self.report(
            ABLE_TO_SCALE,
            True,
            "SucceededRescale",
            f"the controller was able to update the target scale to {replicas}",
        )
        return rescale

    def finish(self, memory: Memory | None, rescale: Rescale | None, period: float) -> Plan:
        """The finished plan: the status and events written so far, `memory` to keep,
        `rescale` to carry out, and the next look in `period` seconds."""
        return Plan(
            status=self.status,
            requeue_after=period,
            now=self.now,
            events=tuple(self.events),
            memory=memory,
            rescale=rescale,
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
