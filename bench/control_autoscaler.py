"""Autoscaler benchmark: the `predictive` algorithm against the Kubernetes HPA's rules on
simulated days of eight shapes (or on days given as traces), per shape and per seed.

The world: each second's arrivals (Poisson around a day's rates, or a trace's counts)
join one queue served first-in first-out, as a fluid, by the ready replicas at
`SERVICE_RATE` requests a second each. A new replica serves `START_DELAY` seconds after
it was asked for (and costs from the start); a removed one stops at once. A second is an
SLO violation when the queue would take more than `SLO_DELAY` seconds to drain.

What the autoscalers see, every `PERIOD` seconds: the requests in flight (in service plus
queued) per ready replica, averaged over the period, and the ready and starting counts.
Both hold `TARGET` within [MIN_REPLICAS, MAX_REPLICAS] on the same arrivals. The HPA is
`setpoint.control.scaling`'s re-implementation of `calcPlainMetricReplicas` (starting
pods count as 0 when scaling up; 10 % tolerance) with the default behaviour (0 s / 300 s
stabilization, max(4 pods, 100 %) / 100 % per 15 s). The predictive algorithm
(`setpoint.control.predictive`, default settings, `PREDICTIVE_BEHAVIOR`) sees the in
flight per *current* replica, as the Autoscaler kind gives it a per-replica metric, and
the mean arrivals a second over the period (what the kind's `spec.arrivals` gives it);
`metric_only` is the same algorithm without the arrivals.

The shapes (`SHAPES`, each seeded): `bursty` (a day's sine between 20 and 150 req/s,
surges of x1.5-3 for 5-20 minutes about once an hour, bursts of x1.5-3 for 15-90 s about
eight an hour, slow jitter), `surges_only` (the same without the bursts), `diurnal_two_peaks`,
`flash_crowd` (x10 in 30 s, for 10 minutes, three a day on a quiet base), `slow_ramp`
(20 to 180 req/s over eight hours and back), `step_down` (150 to 30 req/s in a second),
`batch_spikes` (x4 for two minutes every half hour), `quiet` (a flat 40 req/s with
noise). `--trace FILE` (repeatable) runs a CSV of arrivals per second instead: one row a
second, 86,400 rows, the first column a count >= 0 (a header row is skipped).

Figures, per shape (or trace) and per seed: `replica_minutes_ratio` and
`slo_violation_minutes_ratio` (predictive / hpa; 0 when both are 0, null when only the
HPA's is 0), `scale_events` of each, `reaction_s` of each: the median over the day's steps
up of the seconds from a step up to the ready capacity that serves it. A step up starts
at the first second whose 10-s mean of arrivals is >= 1.5 times the mean of the minute
before it (and at least two replicas' worth above it), at most one every ten minutes; it
is served when ready replicas x SERVICE_RATE reach the highest 10-s mean of its next
minute (600 s if never). `replica_minutes_at_target_ratio`: what a clairvoyant scaler
holding the target exactly (`at_target`) pays, over the HPA's: no scaler that holds the
user's target can go much below it. `replica_minutes_at_limit_ratio`: what a clairvoyant
scaler that ignores the target and holds only the SLO pays (`at_limit`: each second the
capacity of the peak of the next START_DELAY + PERIOD seconds, at 100 % busy, since in
this fluid queue nothing waits below it), over the HPA's: the floor for any scaler that
runs as hot as the SLO allows. Targets (issue 28), on every shape and seed:
`replica_minutes_ratio` <= 0.75, `slo_violation_minutes_ratio` <= 1.0, scale events <=
the HPA's, and on the flash crowd `reaction_s` <= 0.5 x the HPA's. `missed` lists every
(shape, seed, figure) that misses; `worst_shape` is the shape with the highest
replica-minutes ratio. Tuning (`--tune`) saw only `TUNING_SEEDS`; the report runs
`REPORT_SEEDS` (the JSON says both). `--plot FILE.svg` draws each shape's first report
day (arrivals and each scaler's ready capacity) with its figures. Deterministic; run
alone: `./dev bench control_autoscaler` (about half a minute; `--tune` a few minutes).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from setpoint.control.predictive import (
    DEFAULT_SETTINGS,
    Observation,
    PredictiveSettings,
    PredictiveState,
    step,
)
from setpoint.control.scaling import (
    DEFAULT_BEHAVIOR,
    PREDICTIVE_BEHAVIOR,
    Behavior,
    History,
    decide,
    pods_replicas,
)

DAY = 24 * 3600
PERIOD = 15
SERVICE_RATE = 10.0  # requests / s per ready replica
START_DELAY = 30  # seconds from asking for a replica to it serving
SLO_DELAY = 0.5  # seconds of queue
TARGET = 0.7  # requests in flight per replica
MIN_REPLICAS = 2
MAX_REPLICAS = 100
TUNING_SEEDS = (1, 2)
"""The seeds `--tune` ran on (within 1-99); never reported."""
REPORT_SEEDS = (100, 101, 102)
"""The seeds reported (100 and up); the tuning never saw them."""
TUNING = """
Chosen by hand-driven grids on TUNING_SEEDS of every shape (the algorithm's shape changed
between grids: the saturation cap, then the arrivals' share, then the trend threshold);
the last grid is `TUNING_GRID`, and `--tune` reruns it. Then, with the scale-down kept at
or above the prediction, `drain` (0.5, 0.25, 0.1, 0), `up_tolerance` (0.1-0.2),
`down_tolerance` (0.2-0.25) and `hold_seconds` (300-450) were checked on seeds 1-6 of
every shape (0.1, 0.1, 0.2, 300 kept: drain 0 and up_tolerance 0.2 cost SLO minutes,
the others replica-minutes). Rule: among the settings whose
SLO-violation ratio is <= 1.0 on every shape and tuning seed, the one with the lowest
worst-shape scale-events ratio (ties: the lowest worst replica-minutes ratio).
"""
TUNING_GRID = {
    "up_tolerance": (0.1, 0.2),
    "down_tolerance": (0.15, 0.2),
    "up_margin": (0.05, 0.1),
}
TARGETS = {"replica_minutes_ratio": 0.75, "slo_violation_minutes_ratio": 1.0}
REACTION_TARGET = 0.5  # x the HPA's, on the flash crowd


# -- days -----------------------------------------------------------------------------


def _jitter(rng: np.random.Generator, spread: float, seconds: float = 120.0) -> np.ndarray:
    """Slow log-normal jitter: AR(1) in logs, time constant `seconds`, `spread` sd."""
    phi = math.exp(-1 / seconds)
    noise = rng.normal(0, spread * math.sqrt(1 - phi * phi), DAY)
    out = np.empty(DAY)
    level = 0.0
    for i, n in enumerate(noise.tolist()):
        level = phi * level + n
        out[i] = level
    return np.exp(out)


def _spikes(
    rng: np.random.Generator, per_hour: float, lengths: tuple[float, float], ramp: float
) -> np.ndarray:
    """x1.5 to x3 at random times: linear ramp over `ramp` s, decay over the last fifth."""
    spikes = np.ones(DAY)
    for start in rng.uniform(0, DAY, rng.poisson(per_hour * 24)).astype(int):
        height = rng.uniform(1.5, 3.0)
        length = int(rng.uniform(*lengths))
        steps = np.arange(length)
        rise = np.minimum(1.0, (steps + 1) / ramp)
        decay = np.minimum(1.0, (length - steps) / max(1.0, length / 5))
        shape = 1 + (height - 1) * rise * decay
        end = min(DAY, start + length)
        spikes[start:end] = np.maximum(spikes[start:end], shape[: end - start])
    return spikes


_T = np.arange(DAY, dtype=float)


def _diurnal(night: float, midday: float) -> np.ndarray:
    return night + (midday - night) * 0.5 * (1 - np.cos(2 * np.pi * _T / DAY))


def bursty(rng: np.random.Generator, *, bursts: bool = True) -> np.ndarray:
    surges = _spikes(rng, 1.0, (300, 1200), 60)
    short = _spikes(rng, 8.0, (15, 90), 5) if bursts else np.ones(DAY)
    return _diurnal(20, 150) * np.maximum(surges, short) * _jitter(rng, 0.1)


def surges_only(rng: np.random.Generator) -> np.ndarray:
    return bursty(rng, bursts=False)


def diurnal_two_peaks(rng: np.random.Generator) -> np.ndarray:
    hours = _T / 3600
    peaks = [(rng.uniform(9, 11), 130.0), (rng.uniform(18, 21), 110.0)]
    rates = 20 + sum(h * np.exp(-0.5 * ((hours - at) / 1.5) ** 2) for at, h in peaks)
    return np.asarray(rates) * _jitter(rng, 0.1)


def flash_crowd(rng: np.random.Generator) -> np.ndarray:
    rates = np.full(DAY, 30.0) * _jitter(rng, 0.1)
    for start in np.sort(rng.uniform(3600, DAY - 3600, 3)).astype(int):
        up = np.minimum(1.0, (np.arange(600) + 1) / 30)  # x10 within 30 s, 10 minutes
        down = np.minimum(1.0, (600 - np.arange(600)) / 30)
        rates[start : start + 600] *= 1 + 9 * np.minimum(up, down)
    return rates


def slow_ramp(rng: np.random.Generator) -> np.ndarray:
    hours = _T / 3600
    start = rng.uniform(1, 3)
    rise = np.clip((hours - start) / 8, 0, 1)
    fall = np.clip((hours - start - 12) / 8, 0, 1)
    return (20 + 160 * (rise - fall)) * _jitter(rng, 0.1)


def step_down(rng: np.random.Generator) -> np.ndarray:
    at = int(rng.uniform(6, 18) * 3600)
    rates = np.where(at > _T, 150.0, 30.0)
    return rates * _jitter(rng, 0.1)


def batch_spikes(rng: np.random.Generator) -> np.ndarray:
    rates = np.full(DAY, 40.0)
    offset = int(rng.uniform(0, 1800))
    for start in range(offset, DAY, 1800):
        ramp = np.minimum(1.0, (np.arange(120) + 1) / 5)
        end = min(DAY, start + 120)
        rates[start:end] *= 1 + 3 * ramp[: end - start]
    return rates * _jitter(rng, 0.1)


def quiet(rng: np.random.Generator) -> np.ndarray:
    return np.full(DAY, 40.0) * _jitter(rng, 0.15)


SHAPES: dict[str, Callable[[np.random.Generator], np.ndarray]] = {
    "bursty": bursty,
    "surges_only": surges_only,
    "diurnal_two_peaks": diurnal_two_peaks,
    "flash_crowd": flash_crowd,
    "slow_ramp": slow_ramp,
    "step_down": step_down,
    "batch_spikes": batch_spikes,
    "quiet": quiet,
}


def arrivals_of(shape: str, seed: int) -> np.ndarray:
    """The arrivals of each second of the day of `shape` and `seed` (Poisson)."""
    index = list(SHAPES).index(shape)
    rng = np.random.default_rng([seed, index])
    rates = SHAPES[shape](rng)
    return rng.poisson(rates).astype(float)


class TraceError(ValueError):
    """A trace file that cannot be used (one line saying why)."""


def read_trace(path: Path) -> np.ndarray:
    """A CSV of arrivals per second: 86,400 rows, the first column a number >= 0 (one
    header row allowed)."""
    try:
        with path.open(newline="") as handle:
            rows = [row for row in csv.reader(handle) if row and any(c.strip() for c in row)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TraceError(f"{path}: cannot read: {exc}") from None
    if rows:
        try:
            float(rows[0][0])
        except ValueError:
            rows = rows[1:]  # a header
    if len(rows) != DAY:
        raise TraceError(f"{path}: want {DAY} rows (one a second), got {len(rows)}")
    values = np.empty(DAY)
    for line, row in enumerate(rows, start=1):
        try:
            value = float(row[0])
        except ValueError:
            raise TraceError(f"{path}: row {line}: {row[0]!r} is not a number") from None
        if not math.isfinite(value) or value < 0:
            raise TraceError(f"{path}: row {line}: want a count >= 0, got {row[0]!r}")
        values[line - 1] = value
    return values


# -- the scalers ------------------------------------------------------------------------


class Hpa:
    """The HPA: `pods_replicas` then `decide` with the default behaviour."""

    sees_arrivals = False

    def __init__(self, behavior: Behavior = DEFAULT_BEHAVIOR) -> None:
        self.behavior = behavior
        self.history = History()

    def step(
        self,
        current: int,
        average: float,
        ready: int,
        starting: int,
        now: float,
        arrivals: float | None = None,
    ) -> int:
        if ready > 0:
            recommendation = pods_replicas(
                current, ready_average=average, ready=ready, unready=starting, target=TARGET
            )
        else:
            recommendation = current
        return self._decide(current, recommendation, now)

    def _decide(self, current: int, recommendation: int, now: float) -> int:
        decision = decide(
            self.history,
            current=current,
            recommendation=recommendation,
            min_replicas=MIN_REPLICAS,
            max_replicas=MAX_REPLICAS,
            behavior=self.behavior,
            now=now,
        )
        self.history = decision.history
        return decision.replicas


class Predictive(Hpa):
    """The predictive algorithm on the in flight per current replica, then `decide`."""

    def __init__(
        self, settings: PredictiveSettings = DEFAULT_SETTINGS, *, sees_arrivals: bool = True
    ) -> None:
        super().__init__(PREDICTIVE_BEHAVIOR)
        self.sees_arrivals = sees_arrivals
        self.settings = settings
        self.state = PredictiveState()

    def step(
        self,
        current: int,
        average: float,
        ready: int,
        starting: int,
        now: float,
        arrivals: float | None = None,
    ) -> int:
        per_current = average * ready / current if current else average
        seen = Observation(per_current, current, TARGET, MIN_REPLICAS, MAX_REPLICAS, now, arrivals)
        self.state, terms = step(self.state, seen, self.settings)
        return self._decide(current, terms.recommendation, now)


@dataclass
class Outcome:
    replica_minutes: float
    slo_violation_minutes: float
    scale_events: int
    ready: np.ndarray = field(repr=False)


def simulate(arrivals: np.ndarray, scaler: Hpa) -> Outcome:
    """One day of `arrivals` (per second) under `scaler`, from the replicas that hold the
    target for the first minute's arrivals (both scalers start alike, without a queue)."""
    first = float(np.mean(arrivals[:60])) if len(arrivals) else 0.0
    replicas = min(max(MIN_REPLICAS, math.ceil(first / (SERVICE_RATE * TARGET))), MAX_REPLICAS)
    ready_at: deque[int] = deque()  # when the starting replicas become ready
    ready = replicas
    queue = 0.0
    in_flight_sum = 0.0
    arrived_sum = 0.0
    replica_seconds = 0
    violation_seconds = 0
    events = 0
    ready_log = np.empty(len(arrivals), dtype=np.int32)
    for now, arrived in enumerate(arrivals.tolist()):
        while ready_at and ready_at[0] <= now:
            ready_at.popleft()
            ready += 1
        ready_log[now] = ready
        capacity = ready * SERVICE_RATE
        work = queue + arrived
        arrived_sum += arrived
        served = work if work < capacity else capacity
        queue = work - served
        in_flight_sum += (served / SERVICE_RATE + queue) / (ready if ready > 1 else 1)
        replica_seconds += replicas
        if queue > SLO_DELAY * capacity:
            violation_seconds += 1
        if (now + 1) % PERIOD == 0:
            wanted = scaler.step(
                replicas,
                in_flight_sum / PERIOD,
                ready,
                len(ready_at),
                now,
                arrived_sum / PERIOD if scaler.sees_arrivals else None,
            )
            in_flight_sum = arrived_sum = 0.0
            if wanted != replicas:
                events += 1
            if wanted > replicas:
                ready_at.extend([now + START_DELAY] * (wanted - replicas))
            else:
                for _ in range(replicas - wanted):  # the starting ones go first
                    if ready_at:
                        ready_at.pop()
                    else:
                        ready -= 1
            replicas = wanted
    return Outcome(replica_seconds / 60, violation_seconds / 60, events, ready_log)


def _means(arrivals: np.ndarray, width: int) -> np.ndarray:
    """m[t] = mean of arrivals over (t - width, t] (shorter at the start)."""
    total = np.concatenate(([0.0], np.cumsum(arrivals)))
    t = np.arange(len(arrivals))
    low = np.maximum(t + 1 - width, 0)
    return (total[t + 1] - total[low]) / (t + 1 - low)


def steps_up(arrivals: np.ndarray) -> list[tuple[int, float]]:
    """The steps up of a day: (start second, level to serve) (module docstring)."""
    recent = _means(arrivals, 10)
    before = np.concatenate((np.full(10, np.inf), _means(arrivals, 60)[:-10]))
    rising = (recent >= 1.5 * before) & (recent - before >= 2 * SERVICE_RATE)
    found: list[tuple[int, float]] = []
    for t in np.flatnonzero(rising).tolist():
        if found and t < found[-1][0] + 600:
            continue
        found.append((t, float(recent[t : t + 60].max())))
    return found


def reaction_s(steps: Sequence[tuple[int, float]], ready: np.ndarray) -> float | None:
    """The median of the seconds from each step up to a ready capacity that serves it."""
    if not steps:
        return None
    times = []
    for start, level in steps:
        window = ready[start : start + 600] * SERVICE_RATE
        served = np.flatnonzero(window >= level)
        times.append(float(served[0]) if len(served) else 600.0)
    return float(statistics.median(times))


# -- figures ----------------------------------------------------------------------------


def at_target(arrivals: np.ndarray) -> float:
    """The replica-minutes of a clairvoyant scaler that holds the target exactly: each
    minute, ceil(that minute's mean arrivals / (SERVICE_RATE x TARGET)) replicas, at least
    MIN_REPLICAS, ready at once. What any scaler holding the target must pay, about."""
    whole = len(arrivals) // 60 * 60
    minutes = arrivals[:whole].reshape(-1, 60).mean(axis=1)
    return float(np.maximum(np.ceil(minutes / (SERVICE_RATE * TARGET)), MIN_REPLICAS).sum())


def at_limit(arrivals: np.ndarray) -> float:
    """The replica-minutes of a clairvoyant scaler that runs as hot as the SLO allows: each
    second, the replicas whose capacity (SERVICE_RATE each, a queue grows beyond it) meets
    the highest 10-s mean of arrivals of the next START_DELAY + PERIOD seconds, at least
    MIN_REPLICAS, changed every second. What a scaler ignoring the target and holding only
    the SLO would pay, at best."""
    if not len(arrivals):
        return 0.0
    look = START_DELAY + PERIOD
    recent = _means(arrivals, 10)
    padded = np.concatenate((recent, np.full(look, recent[-1])))
    peak = np.lib.stride_tricks.sliding_window_view(padded, look + 1).max(axis=1)
    replicas = np.maximum(np.ceil(peak[: len(arrivals)] / SERVICE_RATE), MIN_REPLICAS)
    return float(replicas.sum() / 60)


def _ratio(ours: float, theirs: float) -> float | None:
    if theirs:
        return round(ours / theirs, 4)
    return 0.0 if not ours else None


def day_figures(
    arrivals: np.ndarray, settings: PredictiveSettings = DEFAULT_SETTINGS
) -> tuple[dict[str, Any], dict[str, Outcome]]:
    """The figures of one day, and each scaler's outcome."""
    outcomes = {
        "hpa": simulate(arrivals, Hpa()),
        "predictive": simulate(arrivals, Predictive(settings)),
    }
    hpa, ours = outcomes["hpa"], outcomes["predictive"]
    alone = simulate(arrivals, Predictive(settings, sees_arrivals=False))
    steps = steps_up(arrivals)
    figures: dict[str, Any] = {
        "replica_minutes_ratio": _ratio(ours.replica_minutes, hpa.replica_minutes),
        "slo_violation_minutes_ratio": _ratio(
            ours.slo_violation_minutes, hpa.slo_violation_minutes
        ),
        "replica_minutes": {k: round(o.replica_minutes, 1) for k, o in outcomes.items()},
        "slo_violation_minutes": {
            k: round(o.slo_violation_minutes, 2) for k, o in outcomes.items()
        },
        "scale_events": {k: o.scale_events for k, o in outcomes.items()},
        "steps_up": len(steps),
        "reaction_s": {k: reaction_s(steps, o.ready) for k, o in outcomes.items()},
        "replica_minutes_at_target_ratio": _ratio(at_target(arrivals), hpa.replica_minutes),
        "replica_minutes_at_limit_ratio": _ratio(at_limit(arrivals), hpa.replica_minutes),
        "metric_only": {
            "replica_minutes_ratio": _ratio(alone.replica_minutes, hpa.replica_minutes),
            "slo_violation_minutes_ratio": _ratio(
                alone.slo_violation_minutes, hpa.slo_violation_minutes
            ),
            "scale_events": alone.scale_events,
            "reaction_s": reaction_s(steps, alone.ready),
        },
    }
    return figures, outcomes


def misses(name: str, seed: int | None, figures: dict[str, Any]) -> list[str]:
    """What `figures` misses of the targets, as `shape/seed: figure value`."""
    where = f"{name}/{seed}" if seed is not None else name
    out = []
    for key, bound in TARGETS.items():
        value = figures[key]
        if value is None or value > bound:
            out.append(f"{where}: {key} {value} > {bound}")
    events = figures["scale_events"]
    if events["predictive"] > events["hpa"]:
        out.append(f"{where}: scale_events {events['predictive']} > hpa {events['hpa']}")
    if name == "flash_crowd":
        ours, theirs = figures["reaction_s"]["predictive"], figures["reaction_s"]["hpa"]
        if ours is None or theirs is None or ours > REACTION_TARGET * theirs:
            out.append(f"{where}: reaction_s {ours} > {REACTION_TARGET} x hpa {theirs}")
    return out


def run_shapes(
    seeds: Sequence[int], settings: PredictiveSettings = DEFAULT_SETTINGS
) -> tuple[dict[str, Any], list[str], dict[str, dict[str, Outcome]]]:
    """Every shape on every seed: figures per shape (per seed, and the worst of each
    ratio), the misses, and the outcomes of the first seed (for the plot)."""
    shapes: dict[str, Any] = {}
    missed: list[str] = []
    first: dict[str, dict[str, Outcome]] = {}
    for name in SHAPES:
        per_seed = {}
        for seed in seeds:
            figures, outcomes = day_figures(arrivals_of(name, seed), settings)
            per_seed[str(seed)] = figures
            missed += misses(name, seed, figures)
            first.setdefault(name, outcomes)
        shapes[name] = {"seeds": per_seed, **_worst(per_seed.values())}
    return shapes, missed, first


def _worst(days: Any) -> dict[str, Any]:
    days = list(days)
    out: dict[str, Any] = {}
    for key in TARGETS:
        values = [d[key] for d in days]
        out[f"max_{key}"] = None if None in values else max(values)
    out["max_scale_events_ratio"] = max(
        _ratio(d["scale_events"]["predictive"], d["scale_events"]["hpa"]) or 0.0 for d in days
    )
    return out


def tune(seeds: Sequence[int]) -> dict[str, Any]:
    """`TUNING_GRID` on `seeds` (tuning seeds only): every setting's worst figures, and
    the one the rule in `TUNING` keeps."""
    rows = []
    for values in itertools.product(*TUNING_GRID.values()):
        chosen = dict(zip(TUNING_GRID, values, strict=True))
        shapes, _, _ = run_shapes(seeds, replace(DEFAULT_SETTINGS, **chosen))
        row = {
            **chosen,
            "worst_replica_minutes_ratio": _worst_of(shapes, "max_replica_minutes_ratio"),
            "worst_slo_violation_minutes_ratio": _worst_of(
                shapes, "max_slo_violation_minutes_ratio"
            ),
            "worst_scale_events_ratio": _worst_of(shapes, "max_scale_events_ratio"),
        }
        print(json.dumps(row), file=sys.stderr)
        rows.append(row)
    ok = [r for r in rows if r["worst_slo_violation_minutes_ratio"] <= 1.0] or rows
    best = min(ok, key=lambda r: (r["worst_scale_events_ratio"], r["worst_replica_minutes_ratio"]))
    return {"tuning_seeds": list(seeds), "grid": rows, "kept": best}


def _worst_of(shapes: dict[str, Any], key: str) -> float:
    return max(math.inf if s[key] is None else s[key] for s in shapes.values())


# -- the plot ---------------------------------------------------------------------------


def write_svg(
    path: Path, shapes: dict[str, Any], first: dict[str, dict[str, Outcome]], seed: int
) -> None:
    """Each shape's day of `seed`: arrivals and each scaler's ready capacity (5-minute means),
    with the shape's figures; a small SVG written by hand."""
    width, height, cols = 440, 170, 2
    rows = math.ceil(len(first) / cols)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width * cols}" '
        f'height="{height * rows + 30}" font-family="sans-serif" font-size="11">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="8" y="18" font-size="13">Arrivals (grey), ready capacity of the HPA (red) '
        f"and of the predictive algorithm (blue), req/s, 5-minute means, seed {seed}</text>",
    ]
    for i, (name, outcomes) in enumerate(first.items()):
        x0, y0 = (i % cols) * width, 30 + (i // cols) * height
        arrivals = arrivals_of(name, seed).reshape(-1, 300).mean(axis=1)
        series = {
            "#999": arrivals,
            "#d62728": outcomes["hpa"].ready.reshape(-1, 300).mean(axis=1) * SERVICE_RATE,
            "#1f77b4": outcomes["predictive"].ready.reshape(-1, 300).mean(axis=1) * SERVICE_RATE,
        }
        top = max(float(s.max()) for s in series.values()) or 1.0
        plot_w, plot_h = width - 50, height - 50
        parts.append(
            f'<rect x="{x0 + 40}" y="{y0 + 22}" width="{plot_w}" height="{plot_h}" '
            'fill="none" stroke="#ccc"/>'
        )
        figures = shapes[name]["seeds"][str(seed)]
        parts.append(
            f'<text x="{x0 + 40}" y="{y0 + 16}">{name}: replica-min '
            f"x{figures['replica_minutes_ratio']}, "
            f"SLO x{figures['slo_violation_minutes_ratio']}</text>"
        )
        parts.append(f'<text x="{x0 + 4}" y="{y0 + 30}">{top:.0f}</text>')
        parts.append(f'<text x="{x0 + 4}" y="{y0 + 22 + plot_h}">0</text>')
        for colour, values in series.items():
            step_x = plot_w / (len(values) - 1)
            points = " ".join(
                f"{x0 + 40 + j * step_x:.1f},{y0 + 22 + plot_h * (1 - v / top):.1f}"
                for j, v in enumerate(values.tolist())
            )
            parts.append(
                f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1"/>'
            )
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")


# -- main -------------------------------------------------------------------------------


def measure(seeds: Sequence[int] = REPORT_SEEDS, plot: Path | None = None) -> dict[str, Any]:
    """The figures of every shape on `seeds` (module docstring)."""
    started = time.perf_counter()
    shapes, missed, first = run_shapes(seeds)
    if plot is not None:
        write_svg(plot, shapes, first, seeds[0])
    worst = max(shapes, key=lambda n: shapes[n]["max_replica_minutes_ratio"] or math.inf)
    return {
        "autoscaler_algorithm": "predictive",
        "autoscaler_tuning_seeds": list(TUNING_SEEDS),
        "autoscaler_report_seeds": list(seeds),
        "autoscaler_shapes": shapes,
        "autoscaler_worst_shape": worst,
        "autoscaler_worst_replica_minutes_ratio": shapes[worst]["max_replica_minutes_ratio"],
        "missed": missed,
        "autoscaler_seconds": round(time.perf_counter() - started, 1),
    }


def measure_traces(paths: Sequence[Path]) -> dict[str, Any]:
    """The figures of each trace (module docstring)."""
    traces: dict[str, Any] = {}
    missed: list[str] = []
    for path in paths:
        figures, _ = day_figures(read_trace(path))
        traces[str(path)] = figures
        missed += misses(str(path), None, figures)
    return {
        "autoscaler_algorithm": "predictive",
        "autoscaler_traces": traces,
        "missed": missed,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, action="append", help="a CSV of arrivals per second")
    parser.add_argument("--plot", type=Path, help="write the shapes' plot (SVG) here")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(REPORT_SEEDS))
    parser.add_argument("--tune", action="store_true", help="grid-search on the tuning seeds")
    args = parser.parse_args(argv)
    if args.tune:
        print(json.dumps(tune(TUNING_SEEDS)))
        return 0
    if any(seed in TUNING_SEEDS for seed in args.seeds):
        print(
            f"error: seeds {TUNING_SEEDS} were seen by the tuning; report others", file=sys.stderr
        )
        return 2
    try:
        if args.trace:
            print(json.dumps(measure_traces(args.trace)))
            return 0
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("autoscaler: eight shapes of day, HPA rules vs predictive ...", file=sys.stderr)
    print(json.dumps(measure(args.seeds, args.plot)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
