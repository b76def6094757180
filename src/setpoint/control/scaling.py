"""How many replicas: the Kubernetes HPA's rules, and a PID algorithm under the same behaviour.

Pure: no I/O, no clock reads (every function takes `now`, in seconds on the caller's
clock). It is a re-implementation of the HPA controller
(`pkg/controller/podautoscaler/horizontal.go` and `replica_calculator.go`):

* the **ratio** recommendation: `desired = ceil(current * metric / target)`, unless the
  ratio is within `tolerance` (0.1) of 1 (`value_replicas`); the per-replica average
  (`average_value_replicas`) and the per-pod form with unready and missing pods
  (`pods_replicas`) as the HPA computes them;
* the **behaviour**: the stabilization windows (`stabilize`: the recommendation is held
  between the lowest recommendation of the scale-up window and the highest of the
  scale-down window, defaults 0 s and 300 s), the rate policies (`limit_rate`: at most
  max(4 pods, 100 %) more per 15 s, at most 100 % fewer per 15 s by default, each policy
  counting the changes made within its period, `selectPolicy` Max, Min or Disabled) and
  min/max replicas; `decide` chains them as `reconcileAutoscaler` does and returns every
  intermediate figure, and the history to keep for next time;
* the **pid** algorithm (`PidAlgorithm`): a PID on the logarithm of `metric / target`
  whose output is the logarithm of the replica count. Load spread over replicas makes
  the metric about `load / replicas`, a product; in logs it is a sum with gain -1 at
  every size, so one set of gains works at 2 replicas and at 200. The error is referred
  to the PID's own last output (the count the behaviour actually set may differ), so it
  cannot wind up while held back. With `ki = 1 / period` and no other term it *is* the
  ratio rule (each period sets `current * metric / target`); the defaults (the Autoscaler
  schema's `PidSpecSchema`) instead integrate slowly, come down ten times slower than they
  go up and keep still within a deadband, which holds capacity through bursts without the
  HPA's 300 s window. The behaviour layer then applies as for the ratio rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from setpoint.control.pid import PID, Form, Limits, Start

__all__ = [
    "DEFAULT_BEHAVIOR",
    "DEFAULT_SCALE_DOWN",
    "DEFAULT_SCALE_UP",
    "PID_BEHAVIOR",
    "PID_SCALE_DOWN",
    "PREDICTIVE_BEHAVIOR",
    "PREDICTIVE_SCALE_UP",
    "TOLERANCE",
    "Behavior",
    "Decision",
    "History",
    "PidAlgorithm",
    "PidGains",
    "Recommendation",
    "ScaleEvent",
    "ScalingPolicy",
    "ScalingRules",
    "average_value_replicas",
    "decide",
    "limit_rate",
    "pods_replicas",
    "record_scale",
    "replicas_changed_in_period",
    "scale_down_limit",
    "scale_up_limit",
    "stabilize",
    "value_replicas",
]

TOLERANCE = 0.1
"""The HPA's default tolerance: no change while metric / target is within 10 % of 1."""

PolicyType = Literal["Pods", "Percent"]
SelectPolicy = Literal["Max", "Min", "Disabled"]


# -- the ratio recommendation (replica_calculator.go) ----------------------------------


def value_replicas(
    current: int, metric: float, target: float, *, tolerance: float = TOLERANCE
) -> int:
    """The HPA's replicas for a metric with a `Value` target: `ceil(current * metric /
    target)`, or `current` while `metric / target` is within `tolerance` of 1 (with no
    replicas at all: `ceil(metric / target)`)."""
    _check_target(target)
    ratio = max(metric, 0.0) / target
    if current == 0:
        return math.ceil(ratio)
    if abs(1.0 - ratio) <= tolerance:
        return current
    return math.ceil(ratio * current)


def average_value_replicas(
    current: int, total: float, target_average: float, *, tolerance: float = TOLERANCE
) -> int:
    """The HPA's replicas for a metric with an `AverageValue` target (the metric is a total
    to share out): `ceil(total / target_average)`, or `current` within `tolerance`."""
    _check_target(target_average)
    total = max(total, 0.0)
    if current > 0 and abs(1.0 - total / (target_average * current)) <= tolerance:
        return current
    return math.ceil(total / target_average)


def pods_replicas(
    current: int,
    *,
    ready_average: float,
    ready: int,
    target: float,
    unready: int = 0,
    missing: int = 0,
    tolerance: float = TOLERANCE,
) -> int:
    """The HPA's replicas for a per-pod metric (`calcPlainMetricReplicas`).

    `ready_average` is the metric averaged over the `ready` pods that report it;
    `unready` pods (not started yet) count as 0 when scaling up and are left out
    otherwise; `missing` pods (started, no metric) count as 0 when scaling up and as
    `target` when scaling down. A change of direction once they are counted, or a ratio
    within `tolerance`, keeps `current`.
    """
    _check_target(target)
    if ready <= 0:
        raise ValueError("no ready pod reports the metric")
    ratio = max(ready_average, 0.0) / target
    scale_up_with_unready = unready > 0 and ratio > 1.0
    if not scale_up_with_unready and missing == 0:
        if abs(1.0 - ratio) <= tolerance:
            return current
        return math.ceil(ratio * ready)
    total = ratio * target * ready
    counted = ready
    if missing:
        total += (target if ratio < 1.0 else 0.0) * missing
        counted += missing
    if scale_up_with_unready:
        counted += unready
    new_ratio = total / (target * counted)
    if abs(1.0 - new_ratio) <= tolerance or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current
    replicas = math.ceil(new_ratio * counted)
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return current
    return replicas


def _check_target(target: float) -> None:
    if not target > 0:
        raise ValueError(f"target must be > 0, not {target!r}")


# -- behaviour (horizontal.go) ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    """At most `value` pods (`Pods`) or `value` percent (`Percent`) per `period_seconds`."""

    type: PolicyType
    value: int
    period_seconds: int


@dataclass(frozen=True, slots=True)
class ScalingRules:
    """One direction of the behaviour: its stabilization window and its rate policies;
    `select_policy` Max picks the policy allowing the largest change, Min the smallest,
    Disabled allows none."""

    stabilization_window_seconds: int
    policies: tuple[ScalingPolicy, ...]
    select_policy: SelectPolicy = "Max"

    @property
    def longest_period(self) -> int:
        return max((p.period_seconds for p in self.policies), default=0)


DEFAULT_SCALE_UP = ScalingRules(
    0, (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15)), "Max"
)
"""The HPA's default scale-up: no stabilization, max(4 pods, 100 %) per 15 s."""
DEFAULT_SCALE_DOWN = ScalingRules(300, (ScalingPolicy("Percent", 100, 15),), "Max")
"""The HPA's default scale-down: 300 s stabilization, 100 % per 15 s."""


@dataclass(frozen=True, slots=True)
class Behavior:
    """`spec.behavior`: rules for scaling up and for scaling down."""

    scale_up: ScalingRules = DEFAULT_SCALE_UP
    scale_down: ScalingRules = DEFAULT_SCALE_DOWN


DEFAULT_BEHAVIOR = Behavior()


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A recommendation made at `time`, before stabilization."""

    replicas: int
    time: float


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    """A change of `change` replicas (> 0 up, < 0 down) made at `time`."""

    change: int
    time: float


@dataclass(frozen=True, slots=True)
class History:
    """What the behaviour remembers between decisions: recent recommendations (for the
    stabilization windows) and recent scale events (for the rate policies)."""

    recommendations: tuple[Recommendation, ...] = ()
    scale_events: tuple[ScaleEvent, ...] = ()


def stabilize(
    history: Sequence[Recommendation],
    desired: int,
    current: int,
    behavior: Behavior,
    now: float,
) -> tuple[int, tuple[Recommendation, ...]]:
    """`stabilizeRecommendationWithBehaviors`: hold `desired` between the lowest
    recommendation of the scale-up window and the highest of the scale-down window (both
    including `desired`), starting from `current`. Returns the stabilized recommendation
    and the history with `desired` recorded and what no window can see any more dropped.
    """
    up_cutoff = now - behavior.scale_up.stabilization_window_seconds
    down_cutoff = now - behavior.scale_down.stabilization_window_seconds
    up_limit = desired
    down_limit = desired
    kept: list[Recommendation] = []
    for rec in history:
        if rec.time > up_cutoff:
            up_limit = min(up_limit, rec.replicas)
        if rec.time > down_cutoff:
            down_limit = max(down_limit, rec.replicas)
        if rec.time >= up_cutoff or rec.time >= down_cutoff:
            kept.append(rec)
    stabilized = max(current, up_limit)
    stabilized = min(stabilized, down_limit)
    kept.append(Recommendation(desired, now))
    return stabilized, tuple(kept)


def replicas_changed_in_period(
    events: Sequence[ScaleEvent], period: float, now: float
) -> tuple[int, int]:
    """`getReplicasChangePerPeriod` for both directions: (replicas added, replicas removed)
    by the events strictly within the last `period` seconds."""
    cutoff = now - period
    added = sum(e.change for e in events if e.time > cutoff and e.change > 0)
    removed = sum(-e.change for e in events if e.time > cutoff and e.change < 0)
    return added, removed


def scale_up_limit(
    current: int, events: Sequence[ScaleEvent], rules: ScalingRules, now: float
) -> int:
    """`calculateScaleUpLimitWithScalingRules`: the most replicas the policies allow now."""
    return _policy_limit(current, events, rules, now, up=True)


def scale_down_limit(
    current: int, events: Sequence[ScaleEvent], rules: ScalingRules, now: float
) -> int:
    """`calculateScaleDownLimitWithBehaviors`: the fewest replicas the policies allow now."""
    return _policy_limit(current, events, rules, now, up=False)


def _policy_limit(
    current: int, events: Sequence[ScaleEvent], rules: ScalingRules, now: float, *, up: bool
) -> int:
    """The limit each policy sets, from the replicas at the start of its period (`current`
    less what was added and plus what was removed within it), `up` or down; then the
    policy that allows the biggest change (`Max`, the default) or the smallest (`Min`)."""
    if rules.select_policy == "Disabled" or not rules.policies:
        return current
    proposals = []
    for policy in rules.policies:
        added, removed = replicas_changed_in_period(events, policy.period_seconds, now)
        start = current - added + removed
        if policy.type == "Pods":
            proposals.append(start + policy.value if up else start - policy.value)
        elif up:
            proposals.append(math.ceil(start * (1 + policy.value / 100)))
        else:
            proposals.append(int(start * (1 - policy.value / 100)))
    biggest = rules.select_policy != "Min"
    return max(proposals) if biggest == up else min(proposals)


def limit_rate(
    desired: int,
    current: int,
    min_replicas: int,
    max_replicas: int,
    events: Sequence[ScaleEvent],
    behavior: Behavior,
    now: float,
) -> tuple[int, str, str]:
    """`convertDesiredReplicasWithBehaviorRate`: `desired` within the rate policies and
    [min_replicas, max_replicas]; returns (replicas, reason, message) for `ScalingLimited`."""
    if desired > current:
        limit = max(scale_up_limit(current, events, behavior.scale_up, now), current)
        if max_replicas > limit:
            allowed, reason, message = (
                limit,
                "ScaleUpLimit",
                "the desired replica count is increasing faster than the maximum scale rate",
            )
        else:
            allowed, reason, message = (
                max_replicas,
                "TooManyReplicas",
                "the desired replica count is more than the maximum replica count",
            )
        if desired > allowed:
            return allowed, reason, message
    elif desired < current:
        limit = min(scale_down_limit(current, events, behavior.scale_down, now), current)
        if min_replicas < limit:
            allowed, reason, message = (
                limit,
                "ScaleDownLimit",
                "the desired replica count is decreasing faster than the maximum scale rate",
            )
        else:
            allowed, reason, message = (
                min_replicas,
                "TooFewReplicas",
                "the desired replica count is less than the minimum replica count",
            )
        if desired < allowed:
            return allowed, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def record_scale(
    events: Sequence[ScaleEvent], previous: int, new: int, behavior: Behavior, now: float
) -> tuple[ScaleEvent, ...]:
    """`storeScaleEvent`: the events with the change `previous -> new` added and those
    older than every policy period dropped."""
    horizon = max(behavior.scale_up.longest_period, behavior.scale_down.longest_period)
    kept = tuple(e for e in events if e.time >= now - horizon)
    if new == previous:
        return kept
    return (*kept, ScaleEvent(new - previous, now))


@dataclass(frozen=True, slots=True)
class Decision:
    """One scaling decision with every step that led to it.

    `recommendation` is what the algorithm asked for, `stabilized` that after the
    stabilization windows, `limited` that after the rate policies and min/max: the
    replicas to set (`replicas`; equal to `current` when nothing changes).
    `able_reason` / `limited_reason` (and messages) are the reasons of the HPA's
    `AbleToScale` and `ScalingLimited` conditions; `history` is what to remember.
    """

    current: int
    recommendation: int
    stabilized: int
    limited: int
    able_reason: str
    able_message: str
    limited_reason: str
    limited_message: str
    history: History

    @property
    def replicas(self) -> int:
        return self.limited

    @property
    def rescale(self) -> bool:
        return self.limited != self.current

    @property
    def scaling_limited(self) -> bool:
        return self.limited != self.stabilized


def decide(
    history: History,
    *,
    current: int,
    recommendation: int,
    min_replicas: int,
    max_replicas: int,
    behavior: Behavior,
    now: float,
) -> Decision:
    """`normalizeDesiredReplicasWithBehaviors` after the algorithm's `recommendation`,
    with the out-of-range cases of `reconcileAutoscaler` first (more replicas than
    `max_replicas`: back to it; fewer than `min_replicas`: up to it; no change is rate
    limited then). The returned history records the recommendation and any scale event.
    """
    if min_replicas < 0 or max_replicas < max(min_replicas, 1):
        raise ValueError(f"want 0 <= min ({min_replicas}) <= max ({max_replicas}), max >= 1")
    if current > max_replicas or current < min_replicas:
        bound = max_replicas if current > max_replicas else min_replicas
        reason = "TooManyReplicas" if current > max_replicas else "TooFewReplicas"
        events = record_scale(history.scale_events, current, bound, behavior, now)
        return Decision(
            current,
            recommendation,
            bound,
            bound,
            "SucceededRescale",
            f"the current replica count {current} is outside [{min_replicas}, {max_replicas}]",
            reason,
            f"the current replica count is outside [{min_replicas}, {max_replicas}]",
            replace(history, scale_events=events),
        )
    stabilized, recommendations = stabilize(
        history.recommendations, recommendation, current, behavior, now
    )
    if stabilized != recommendation:
        if recommendation >= current:
            able = (
                "ScaleUpStabilized",
                "recent recommendations were lower than current one, "
                "applying the lowest recent recommendation",
            )
        else:
            able = (
                "ScaleDownStabilized",
                "recent recommendations were higher than current one, "
                "applying the highest recent recommendation",
            )
    else:
        able = ("ReadyForNewScale", "recommended size matches current size")
    limited, limited_reason, limited_message = limit_rate(
        stabilized, current, min_replicas, max_replicas, history.scale_events, behavior, now
    )
    events = record_scale(history.scale_events, current, limited, behavior, now)
    return Decision(
        current,
        recommendation,
        stabilized,
        limited,
        able[0],
        able[1],
        limited_reason,
        limited_message,
        History(recommendations, events),
    )


# -- the pid algorithm -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PidGains:
    """Gains of the pid algorithm, on ln(metric / target), time in seconds.

    `kp` moves the output at once with the error; `ki` integrates it (`ki = 1 / period`
    alone is the ratio rule); `kd` acts on the measurement's slope (0: the metric is
    noisy, and the behaviour already limits the rate). `deadband` (replicas) and
    `relative_deadband` (a fraction of the current count, as the HPA's tolerance) are how
    far the PID's output must be from the current count before the recommendation
    changes. `noise_band` (ln units) softens small errors: an error `e` counts as
    `e * min(1, |e| / noise_band)` (gap action). `down_gain` scales the errors that ask
    for fewer replicas: below 1, capacity goes away slower than it comes, which is what
    lets the pid algorithm do without a scale-down window (`PID_BEHAVIOR`).

    No defaults here: they are the Autoscaler schema's (`PidSpecSchema().gains()` in
    `setpoint.control.autoscaler`), defined once.
    """

    kp: float
    ki: float
    kd: float
    deadband: float
    relative_deadband: float
    noise_band: float
    down_gain: float


PID_SCALE_DOWN = replace(DEFAULT_SCALE_DOWN, stabilization_window_seconds=0)
"""The pid algorithm's default scale-down: as the HPA's, with no stabilization window:
its slow `down_gain` already keeps capacity through noise, which the HPA's 300 s window
is there for (a window on top only delays it more)."""
PID_BEHAVIOR = Behavior(DEFAULT_SCALE_UP, PID_SCALE_DOWN)
"""The pid algorithm's default behaviour."""
PREDICTIVE_SCALE_UP = ScalingRules(
    0, (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 1000, 15)), "Max"
)
"""The predictive algorithm's default scale-up: max(4 pods, 1000 %) per 15 s. Its
recommendation is already the capacity the load will need when new replicas serve; the
HPA's 100 % would make a x10 crowd wait for four doublings, each paying the start-up."""
PREDICTIVE_BEHAVIOR = Behavior(PREDICTIVE_SCALE_UP, PID_SCALE_DOWN)
"""The predictive algorithm's default behaviour (`setpoint.control.predictive`): its own
hold does what the HPA's 300 s scale-down window is there for."""


_LOG_RATIO_LIMIT = math.log(100.0)
"""ln(metric / target) is clipped to +-ln 100: a metric of 0 must not be -infinity."""


@dataclass
class PidAlgorithm:
    """The pid algorithm for one autoscaler: a `PID` whose output is ln(replicas) and
    whose measurement is ln(metric / target), referred to the PID's own last output.

    The behaviour layer may hold the count away from what the PID asked (a stabilization
    window, a rate policy, min/max, the rounding), and someone may scale the target by
    hand. The metric is measured at the count actually set, so the PID is given
    `ln(metric / target) + ln(current) - last_output`: the error as it would be at its
    own output (in logs the plant is `ln(load) - ln(replicas)`, so this is exact up to
    noise). It then cannot wind up while held back, and needs no tracking.
    Call `recommend(current, metric, now)` once per period. State lives in memory; a new
    one starts from the current count without a bump.
    """

    target: float
    min_replicas: int
    max_replicas: int
    gains: PidGains
    _pid: PID | None = field(default=None, init=False, repr=False)
    _last_output: float | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        _check_target(self.target)

    def _controller(self, current: int) -> PID:
        if self._pid is None:
            low = math.log(max(self.min_replicas, 1))
            high = math.log(max(self.max_replicas, 1))
            self._pid = PID(
                self.gains.kp,
                self.gains.ki,
                self.gains.kd,
                0.0,
                limits=Limits(output=(low, high)),
                form=Form(reverse=True, error_map=self._shape_error),
                start=Start(output=math.log(max(current, 1))),
            )
        return self._pid

    def _shape_error(self, error: float) -> float:
        # `error` is -ln(metric / target): negative asks for more replicas.
        band = self.gains.noise_band
        if band > 0 and abs(error) < band:
            error *= abs(error) / band
        if error > 0:
            error *= self.gains.down_gain
        return error

    @property
    def components(self) -> tuple[float, float, float]:
        """The PID's (P, I, D) terms of the last recommendation, in ln(replicas); zeros
        before the first."""
        return (0.0, 0.0, 0.0) if self._pid is None else self._pid.components

    def recommend(self, current: int, metric: float, now: float) -> int:
        """The replica count the PID asks for, given the current count and the metric."""
        pid = self._controller(current)
        ratio = max(metric, 0.0) / self.target
        measurement = (
            -_LOG_RATIO_LIMIT
            if ratio <= 0
            else min(max(math.log(ratio), -_LOG_RATIO_LIMIT), _LOG_RATIO_LIMIT)
        )
        if self._last_output is not None and current > 0:
            measurement += math.log(current) - self._last_output
        output = pid.update(measurement, now)
        self._last_output = output
        wanted = math.exp(output)
        if abs(wanted - current) < max(self.gains.deadband, self.gains.relative_deadband * current):
            return current
        # never against the metric: no more replicas while it is below the target, no
        # fewer while it is above (the integral may still be on its way back)
        if (wanted > current and ratio < 1.0) or (wanted < current and ratio > 1.0):
            return current
        return max(self.min_replicas, min(self.max_replicas, round(wanted)))
