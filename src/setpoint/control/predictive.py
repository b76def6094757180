"""The predictive scaling algorithm: the replicas the load will need by the time new ones
serve, from Holt's linear trend on the load, with the arrival rate as feed-forward when it
is given. Pure: no I/O, no clock reads (time is an argument, in seconds on the caller's
clock), no training. The user sets the target and the bounds; the settings have one
default (`DEFAULT_SETTINGS`, chosen on the benchmark's tuning seeds, see
`bench/control_autoscaler.py`).

Each period (`step`), in replicas:

* **need** (feedback) = `current * metric / target`: the ratio rule's figure without its
  rounding or tolerance. Below the target it is the load; above it the metric (requests
  in flight) also counts what queued, and a queue is not load: it drains.
* **load**: the need, except above the target when the arrival rate is given: then
  `arrivals / rate`, where `rate` (arrivals per needed replica) is learned while the
  metric is below the target. Without arrivals the need counts at most
  `saturation_factor` x current, so that one queue does not ask for the maximum.
* **level**, **trend**: Holt's linear trend on the load (time constants `level_seconds`,
  `trend_seconds`, exact for any gap between calls).
* **feed_forward** = `trend * horizon_seconds` (a replica's start-up plus a period),
  counted only rising and beyond `trend_threshold` x level (a slope within the noise
  moves nothing), at most the level.
* **backlog** = `drain` x (need - load): extra replicas while a queue drains.
* **prediction** = level + feed_forward + backlog.

Then, gain-scheduled by direction: **up** when the prediction is above the current count
by more than `up_tolerance`, at once and all the way, to `ceil(prediction * (1 +
up_margin))` (a flash crowd of x10 pays the start-up once, not once per doubling);
**down** only when both the highest load of the last `hold_seconds` (`held`) and the
prediction are below the current count by more than `down_tolerance`, in one step, to
`ceil(max(held, prediction) * (1 + up_margin))`. The hold keeps the capacity of a burst
for the next one; because it holds the load and not the metric, a queue's inflated
figure is not held for five minutes as the HPA holds it; the prediction keeps a count
that a backlog or a rise just asked for (without it, the period after an up for a
draining queue could fall back to `held` and the next go up again).

`step(state, observation, settings)` returns the new state and a `Terms` value with every
figure of the decision, which the Autoscaler's status and `describe` show.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "DEFAULT_SETTINGS",
    "Observation",
    "PredictiveSettings",
    "PredictiveState",
    "Terms",
    "step",
]


@dataclass(frozen=True, slots=True)
class PredictiveSettings:
    """How the predictive algorithm looks ahead and when it moves (module docstring)."""

    horizon_seconds: float = 45.0
    level_seconds: float = 10.0
    trend_seconds: float = 15.0
    trend_threshold: float = 0.35
    up_tolerance: float = 0.1
    up_margin: float = 0.05
    down_tolerance: float = 0.2
    hold_seconds: float = 300.0
    saturation_factor: float = 4.0
    rate_gain: float = 0.1
    drain: float = 0.1

    def __post_init__(self) -> None:
        for name in (
            "horizon_seconds",
            "hold_seconds",
            "up_tolerance",
            "up_margin",
            "trend_threshold",
            "drain",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, not {getattr(self, name)!r}")
        for name in ("level_seconds", "trend_seconds"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, not {getattr(self, name)!r}")
        if not 0 <= self.down_tolerance < 1:
            raise ValueError(f"down_tolerance must be in [0, 1), not {self.down_tolerance!r}")
        if not 0 < self.rate_gain <= 1:
            raise ValueError(f"rate_gain must be in (0, 1], not {self.rate_gain!r}")
        if not self.saturation_factor >= 1:
            raise ValueError(f"saturation_factor must be >= 1, not {self.saturation_factor!r}")


DEFAULT_SETTINGS = PredictiveSettings()
"""The one default setting (module docstring)."""


@dataclass(frozen=True, slots=True)
class Observation:
    """One period's input: the metric per current replica, the current count, the
    target and bounds, the time (seconds on the caller's clock) and, if known, the
    arrival rate over the period (requests a second)."""

    metric: float
    current: int
    target: float
    min_replicas: int
    max_replicas: int
    now: float
    arrivals: float | None = None


@dataclass(frozen=True, slots=True)
class PredictiveState:
    """What the algorithm remembers between periods: Holt's level and trend (replicas,
    replicas a second), the time of the last step, the loads within the hold, the
    arrivals per needed replica (once learned) and the last load."""

    level: float | None = None
    trend: float = 0.0
    time: float | None = None
    recent: tuple[tuple[float, float], ...] = ()
    rate_per_replica: float | None = None
    last_load: float | None = None


@dataclass(frozen=True, slots=True)
class Terms:
    """Why one decision was made: the observation, each term and the recommendation.

    Observed: `metric`, `arrivals` (None: not given), `current`. Terms, in replicas:
    `need` = current * metric / target (feedback); `load`, the need without the backlog
    (from the arrivals above the target, once learned; else `need`, at most
    `saturation_factor` x current); `level` and `trend` (per second), Holt's on the load;
    `feed_forward` = trend * horizon (0 within the noise); `backlog` = drain x (need -
    load); `prediction` = level + feed_forward + backlog; `held` the highest load of the
    hold. Decided: `direction` `up`, `down` or `hold`, and the `recommendation`.
    """

    metric: float
    arrivals: float | None
    current: int
    need: float
    load: float
    level: float
    trend: float
    feed_forward: float
    backlog: float
    prediction: float
    held: float
    direction: str
    recommendation: int

    def as_dict(self) -> dict[str, float | int | str | None]:
        """The terms as the Autoscaler's status holds them (rounded for reading)."""
        return {
            "metric": round(self.metric, 4),
            "arrivals": None if self.arrivals is None else round(self.arrivals, 3),
            "current": self.current,
            "need": round(self.need, 3),
            "load": round(self.load, 3),
            "level": round(self.level, 3),
            "trendPerSecond": round(self.trend, 4),
            "feedForward": round(self.feed_forward, 3),
            "backlog": round(self.backlog, 3),
            "prediction": round(self.prediction, 3),
            "held": round(self.held, 3),
            "direction": self.direction,
            "recommendation": self.recommendation,
        }


_NEED_LIMIT = 1e9
"""A need beyond this (a metric of 1e300) is held here so the arithmetic stays finite."""


def step(
    state: PredictiveState,
    seen: Observation,
    settings: PredictiveSettings = DEFAULT_SETTINGS,
) -> tuple[PredictiveState, Terms]:
    """One period: the new state and the decision's `Terms` (module docstring)."""
    if not seen.target > 0:
        raise ValueError(f"target must be > 0, not {seen.target!r}")
    current = max(seen.current, 0)
    metric = seen.metric if math.isfinite(seen.metric) else _NEED_LIMIT
    feedback = min(max(metric, 0.0) * max(current, 1) / seen.target, _NEED_LIMIT)
    rate = state.rate_per_replica
    arrivals = seen.arrivals
    if arrivals is not None and arrivals > 0 and 0 < feedback <= current:
        # below the target nothing queues: the metric is the load; learn what a replica
        # at the target serves
        sample = arrivals / feedback
        rate = sample if rate is None else rate + settings.rate_gain * (sample - rate)
    capped = min(feedback, max(current, 1) * settings.saturation_factor)
    if feedback > current and arrivals is not None and rate:
        # above the target the metric counts the queue too: the arrivals say what the
        # load is; the rest of the metric is backlog, drained by a share of it
        load = min(feedback, arrivals / rate)
    else:
        load = capped
    backlog = settings.drain * max(capped - load, 0.0)
    if state.level is None:
        level, trend = load, 0.0
    elif state.time is None or seen.now <= state.time:
        level, trend = load, state.trend  # no time has passed: the new figure, the old slope
    else:
        dt = seen.now - state.time
        alpha = 1.0 - math.exp(-dt / settings.level_seconds)
        beta = 1.0 - math.exp(-dt / settings.trend_seconds)
        prior = state.level + state.trend * dt
        level = prior + alpha * (load - prior)
        trend = state.trend + beta * ((level - state.level) / dt - state.trend)
    level = max(level, 0.0)
    feed_forward = min(max(trend, 0.0) * settings.horizon_seconds, level)
    rising = state.last_load is None or load > state.last_load
    if feed_forward < settings.trend_threshold * level or not rising:
        feed_forward = 0.0  # a slope within the noise, or one that stopped
    prediction = level + feed_forward + backlog
    cutoff = seen.now - settings.hold_seconds
    recent = (*(r for r in state.recent if r[0] > cutoff), (seen.now, load))
    held = max(p for _, p in recent)
    low, high = seen.min_replicas, seen.max_replicas
    direction, wanted = "hold", current
    if prediction > current * (1 + settings.up_tolerance) and current < high:
        direction, wanted = "up", math.ceil(prediction * (1 + settings.up_margin))
    elif max(held, prediction) < current * (1 - settings.down_tolerance) and current > low:
        # never below the prediction: a backlog still draining keeps its replicas
        settle = max(held, prediction)
        direction, wanted = "down", math.ceil(settle * (1 + settings.up_margin))
    recommendation = max(low, min(high, wanted))
    if recommendation != wanted or recommendation == current:  # the bounds decided
        direction = (
            "up" if recommendation > current else "down" if recommendation < current else "hold"
        )
    terms = Terms(
        metric=seen.metric,
        arrivals=seen.arrivals,
        current=seen.current,
        need=feedback,
        load=load,
        level=level,
        trend=trend,
        feed_forward=feed_forward,
        backlog=backlog,
        prediction=prediction,
        held=held,
        direction=direction,
        recommendation=recommendation,
    )
    return PredictiveState(level, trend, seen.now, recent, rate, load), terms
