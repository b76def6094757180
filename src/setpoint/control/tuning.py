"""Relay auto-tuning (Åström-Hägglund), tuning rules, and step-response figures. Pure: no
I/O, no clock; time is passed in.

The relay experiment replaces the controller with an on/off switch around a bias: output
`bias + amplitude` while the measurement is below the setpoint, `bias - amplitude` while
above (with a `hysteresis` band against noise). Most plants then oscillate steadily; the
oscillation's period is the ultimate period `Tu`, and from its amplitude `a` the ultimate
gain is `Ku = 4 * amplitude / (pi * sqrt(a**2 - hysteresis**2))`. A rule turns (Ku, Tu)
into PID gains:

    rule               kp          Ti (kp/ki)   Td (kd/kp)
    ziegler-nichols    0.6 Ku      Tu / 2       Tu / 8      quarter decay: fast, overshoots
    tyreus-luyben      Ku / 2.2    2.2 Tu       Tu / 6.3    for lag-dominant plants
    some-overshoot     Ku / 3      Tu / 2       Tu / 3
    no-overshoot       Ku / 5      Tu / 2       Tu / 3

    min-iae            from a model: `identify` fits a first order plus dead time model to
                       the relay record, `min_iae_gains` picks the gains (of the form
                       above) with the least simulated IAE and at most 10% overshoot

`RelayExperiment` is the experiment as a state machine (`update(measurement, now)` gives
the output), so the same code tunes a simulated plant (`relay_tune`) or a live one.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from setpoint.control.pid import PID, Form, Limits
from setpoint.errors import Invalid

__all__ = [
    "MIN_IAE",
    "MIN_IAE_GRID",
    "RULES",
    "FirstOrderModel",
    "Gains",
    "RelayExperiment",
    "RelayResult",
    "Rule",
    "StepResponse",
    "gains_for",
    "identify",
    "integral_absolute_error",
    "min_iae_gains",
    "relay_tune",
    "step_response",
]


@dataclass(frozen=True, slots=True)
class Rule:
    """A tuning rule: kp = kp_factor * Ku, Ti = ti_factor * Tu, Td = td_factor * Tu."""

    kp_factor: float
    ti_factor: float
    td_factor: float
    description: str


RULES: dict[str, Rule] = {
    "ziegler-nichols": Rule(0.6, 0.5, 0.125, "quarter-decay response: fast, ~25% overshoot"),
    "tyreus-luyben": Rule(1 / 2.2, 2.2, 1 / 6.3, "less aggressive; for lag-dominant plants"),
    "some-overshoot": Rule(1 / 3, 0.5, 1 / 3, "Ziegler-Nichols softened: some overshoot"),
    "no-overshoot": Rule(0.2, 0.5, 1 / 3, "Ziegler-Nichols softened further: little overshoot"),
}
"""The rules `setpoint tune --rule` accepts, by name (and `MIN_IAE`, which needs a model)."""

MIN_IAE = "min-iae"
"""The model-based rule: see `min_iae_gains`."""

DERIVATIVE_FILTER_RATIO = 10.0
"""The derivative filter's time constant is Td over this (the usual N = 10)."""


@dataclass(frozen=True, slots=True)
class Gains:
    """PID gains, and the derivative filter's time constant that goes with them (Td / 10)."""

    kp: float
    ki: float
    kd: float
    derivative_filter: float = 0.0

    def as_dict(self) -> dict[str, float]:
        """As a Thermostat's `spec.pid`."""
        return {
            "kp": self.kp,
            "ki": self.ki,
            "kd": self.kd,
            "derivativeFilter": self.derivative_filter,
        }


def gains_for(ku: float, tu: float, rule: str) -> Gains:
    """PID gains from the ultimate gain and period by the named rule (see `RULES`)."""
    try:
        chosen = RULES[rule]
    except KeyError:
        names = ", ".join(sorted(RULES))
        raise Invalid(f"{rule!r}: no such rule; want one of {names}", field="rule") from None
    if not (ku > 0 and tu > 0):
        raise Invalid(f"Ku {ku} and Tu {tu} must be > 0")
    return _gains(chosen.kp_factor * ku, chosen.ti_factor * tu, chosen.td_factor * tu)


def _gains(kp: float, ti: float, td: float) -> Gains:
    return Gains(kp, kp / ti, kp * td, td / DERIVATIVE_FILTER_RATIO)


@dataclass(frozen=True, slots=True)
class RelayResult:
    """What a relay experiment found: `ku`, `tu` (seconds), the oscillation's `amplitude`
    (half peak to peak, measurement units), and the record of (time, measurement, output)."""

    ku: float
    tu: float
    amplitude: float
    record: tuple[tuple[float, float, float], ...]
    mean_output: float = 0.0
    mean_measurement: float = 0.0
    """Time averages over the measured oscillations (for `identify`)."""
    relay: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    """The experiment's (setpoint, bias, amplitude, hysteresis), to replay it on a model."""


class RelayExperiment:
    """The relay experiment as a state machine: feed it measurements, apply its output.

    It is `done` once `cycles` full oscillations have been seen after the first
    `settle_cycles` (which are discarded: the plant is still leaving its start).
    """

    def __init__(
        self,
        setpoint: float,
        *,
        bias: float,
        amplitude: float,
        hysteresis: float = 0.0,
        cycles: int = 4,
        settle_cycles: int = 2,
    ) -> None:
        if amplitude <= 0:
            raise Invalid(f"{amplitude}: must be > 0", field="amplitude")
        if hysteresis < 0:
            raise Invalid(f"{hysteresis}: must be >= 0", field="hysteresis")
        if cycles < 2:
            raise Invalid(f"{cycles}: must be >= 2", field="cycles")
        self.setpoint = setpoint
        self.bias = bias
        self.amplitude = amplitude
        self.hysteresis = hysteresis
        self.cycles = cycles
        self.settle_cycles = settle_cycles
        self._high: bool | None = None
        self._rises: list[float] = []  # times the relay switched to high
        self._record: list[tuple[float, float, float]] = []

    @property
    def done(self) -> bool:
        return len(self._rises) >= self.settle_cycles + self.cycles + 1

    def update(self, measurement: float, now: float) -> float:
        """Take a measurement at `now`; return the output to apply until the next one."""
        error = self.setpoint - measurement
        if self._high is None:
            self._high = error >= 0
        elif self._high and error < -self.hysteresis:
            self._high = False
        elif not self._high and error > self.hysteresis:
            self._high = True
            self._rises.append(now)
        output = self.bias + self.amplitude if self._high else self.bias - self.amplitude
        self._record.append((now, measurement, output))
        return output

    def result(self) -> RelayResult:
        """Ku and Tu from the oscillations after the settling ones. Raises `Invalid` if
        the experiment is not `done`."""
        if not self.done:
            raise Invalid(
                f"the relay experiment saw {max(0, len(self._rises) - 1)} oscillations; "
                f"it needs {self.settle_cycles + self.cycles}: run it longer"
            )
        rises = self._rises[self.settle_cycles :]
        tu = statistics.median(b - a for a, b in itertools.pairwise(rises))
        start, end = rises[0], rises[-1]
        window = [m for t, m, _ in self._record if start <= t <= end]
        amplitude = (max(window) - min(window)) / 2.0
        if amplitude <= self.hysteresis:
            raise Invalid("the oscillation is no larger than the hysteresis: lower hysteresis")
        ku = 4.0 * self.amplitude / (math.pi * math.sqrt(amplitude**2 - self.hysteresis**2))
        samples = [row for row in self._record if start <= row[0] <= end]
        span = samples[-1][0] - samples[0][0]
        mean_output = mean_measurement = 0.0
        for (t, m, u), (t_next, _, _) in itertools.pairwise(samples):
            mean_output += u * (t_next - t) / span
            mean_measurement += m * (t_next - t) / span
        return RelayResult(
            ku,
            tu,
            amplitude,
            tuple(self._record),
            mean_output,
            mean_measurement,
            (self.setpoint, self.bias, self.amplitude, self.hysteresis),
        )


def relay_tune(
    plant_step: Callable[[float, float], float],
    measurement: float,
    experiment: RelayExperiment,
    *,
    sample_time: float,
    max_time: float,
) -> RelayResult:
    """Run `experiment` against a simulated plant: `plant_step(output, dt)` applies the
    output for `dt` seconds and returns the next measurement; `measurement` is the first.
    Raises `Invalid` if the plant has not oscillated enough within `max_time` seconds."""
    now = 0.0
    while not experiment.done and now <= max_time:
        output = experiment.update(measurement, now)
        measurement = plant_step(output, sample_time)
        now += sample_time
    return experiment.result()


@dataclass(frozen=True, slots=True)
class FirstOrderModel:
    """A first order plus dead time plant: steady-state `gain` (measurement per unit of
    output), `time_constant` and `dead_time` in seconds."""

    gain: float
    time_constant: float
    dead_time: float


def identify(
    result: RelayResult, *, output: float, measurement: float, gain: float | None = None
) -> FirstOrderModel:
    """The first order plus dead time model that oscillates as the relay saw.

    The static gain comes from the average output and measurement against the operating
    point the plant held before the experiment (`output`, `measurement`), unless it is
    known and given as `gain` (an Autoscaler's plant, in logs, has gain 1: the metric per
    replica falls as the replicas rise, `ln(metric) = ln(load) - ln(replicas)`). A first guess
    of the time constant and dead time comes from Ku and Tu (|G(i w)| = 1 / Ku, phase -pi
    at w = 2 pi / Tu); since that describing-function estimate ignores harmonics, it is
    then refined by replaying the same relay experiment on the model (exactly simulated,
    same sampling) until it gives the observed period and amplitude.
    """
    if gain is None:
        if abs(result.mean_measurement - measurement) < result.amplitude:
            raise Invalid(
                "the relay oscillated around the point the plant rested at, so its static "
                "gain cannot be told from it: run the relay around another setpoint, more "
                f"than {result.amplitude:.3g} away (or use a rule from the table)"
            )
        change = result.mean_output - output
        gain = (result.mean_measurement - measurement) / change
    product = result.ku * gain
    if not product > 1.0:
        raise Invalid(
            f"Ku * K = {product:.3g} <= 1: the relay record does not fit a first order "
            "plant with dead time"
        )
    w = 2.0 * math.pi / result.tu
    wt = math.sqrt(product * product - 1.0)
    time_constant, dead_time = wt / w, (math.pi - math.atan(wt)) / w
    times = [row[0] for row in result.record]
    sample_time = statistics.median(b - a for a, b in itertools.pairwise(times))
    for _ in range(30):
        model = FirstOrderModel(gain, time_constant, dead_time)
        replay = _replay(model, result, output, measurement, sample_time)
        if replay is None:
            break
        tu_error = result.tu / replay.tu
        amplitude_error = result.amplitude / replay.amplitude
        if abs(tu_error - 1.0) < 1e-3 and abs(amplitude_error - 1.0) < 1e-3:
            break
        # The amplitude follows the dead time's share of the time constant; the period
        # scales with both.
        ratio = dead_time / time_constant * amplitude_error
        time_constant *= tu_error
        dead_time = ratio * time_constant
    return FirstOrderModel(gain, time_constant, dead_time)


def _replay(
    model: FirstOrderModel,
    result: RelayResult,
    output: float,
    measurement: float,
    sample_time: float,
) -> RelayResult | None:
    """The relay experiment of `result`, run on `model` from rest at the operating point."""
    setpoint, bias, amplitude, hysteresis = result.relay
    experiment = RelayExperiment(
        setpoint, bias=bias, amplitude=amplitude, hysteresis=hysteresis, cycles=4
    )
    plant = _FirstOrderSimulation(model, sample_time)
    y = measurement
    limit = int(200 * (model.time_constant + model.dead_time) / sample_time) + 1000
    for _ in range(limit):
        if experiment.done:
            return experiment.result()
        u = experiment.update(y, plant.time)
        y = measurement + plant.step(u - output)
    return None


class _FirstOrderSimulation:
    """A first order plus dead time plant in deviation variables, sampled every `dt` with
    the input held between samples; exact, for any dead time (not only whole samples)."""

    def __init__(self, model: FirstOrderModel, dt: float) -> None:
        self.model = model
        self.dt = dt
        self.time = 0.0
        self.y = 0.0
        whole, fraction = divmod(model.dead_time / dt, 1.0)
        self._fraction = fraction
        self._inputs = [0.0] * (int(whole) + 2)  # u[k-m-1], u[k-m], ..., newest last
        self._decay_first = math.exp(-fraction * dt / model.time_constant)
        self._decay_rest = math.exp(-(1.0 - fraction) * dt / model.time_constant)

    def step(self, u: float) -> float:
        """Hold input deviation `u` for one sample; return the output deviation after it."""
        inputs = self._inputs
        inputs.append(u)
        inputs.pop(0)
        gain = self.model.gain
        older, newer = inputs[0], inputs[1]
        y = gain * older + (self.y - gain * older) * self._decay_first
        y = gain * newer + (y - gain * newer) * self._decay_rest
        self.y = y
        self.time += self.dt
        return y


def min_iae_gains(
    model: FirstOrderModel,
    ku: float,
    tu: float,
    *,
    output_limits: tuple[float, float],
    operating_output: float,
    sample_time: float,
    max_overshoot: float = 0.1,
) -> Gains:
    """The `min-iae` rule: among gains of the Ziegler-Nichols form (kp a fraction of Ku, Ti
    and Td fractions of Tu; the grid `MIN_IAE_GRID`), those with the least integral of
    absolute error on `model`, simulated, for a setpoint step of a fifth of the output
    range's effect followed by a load of a fifth of the range, with at most
    `max_overshoot` on the step. Deterministic; about a second of CPU."""
    lo, hi = output_limits
    span = hi - lo
    step = abs(model.gain) * span / 5.0
    load = span / 5.0
    best: tuple[float, Gains] | None = None
    for kp_factor, ti_factor, td_factor in MIN_IAE_GRID:
        gains = _gains(kp_factor * ku, ti_factor * tu, td_factor * tu)
        iae, overshoot = _simulate(
            model, gains, output_limits, operating_output, step, load, sample_time, tu
        )
        if overshoot <= max_overshoot and (best is None or iae < best[0]):
            best = (iae, gains)
    if best is None:
        raise Invalid(f"no gains on the grid keep the overshoot under {max_overshoot:.0%}")
    return best[1]


MIN_IAE_GRID: tuple[tuple[float, float, float], ...] = tuple(
    (kp, ti, td)
    for kp in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    for ti in (0.3, 0.4, 0.5, 0.7, 1.0, 1.5, 2.2)
    for td in (0.0, 0.08, 0.125, 0.16, 0.25)
)
"""(kp / Ku, Ti / Tu, Td / Tu) candidates of `min_iae_gains`: Ziegler-Nichols is
(0.6, 0.5, 0.125); the named rules lie inside this box."""


def _simulate(
    model: FirstOrderModel,
    gains: Gains,
    limits: tuple[float, float],
    operating_output: float,
    step: float,
    load: float,
    dt: float,
    tu: float,
) -> tuple[float, float]:
    """IAE and step overshoot of `gains` on `model` (deviation variables, the plant starting
    `step` below the setpoint at rest), the load arriving halfway."""
    phase = 15.0 * tu
    steps = int(2 * phase / dt)
    lo, hi = limits
    start_output = operating_output - step / model.gain
    pid = PID(
        gains.kp,
        gains.ki,
        gains.kd,
        step,  # y is the deviation from the starting rest point, `step` below the setpoint
        limits=Limits(output=(lo - start_output, hi - start_output)),
        form=Form(derivative_filter=gains.derivative_filter),
    )
    plant = _FirstOrderSimulation(model, dt)
    y = 0.0
    iae = 0.0
    peak = 0.0
    for k in range(steps):
        now = k * dt
        u = pid.update(y, now)
        y = plant.step(u - load if now >= phase else u)
        iae += abs(step - y) * dt
        if now < phase:
            peak = max(peak, y)
    return iae, max(0.0, (peak - step) / step)


@dataclass(frozen=True, slots=True)
class StepResponse:
    """Figures of a step response: `overshoot` as a fraction of the step (0.1 = 10%),
    `settling_time` (seconds from the step until it stays within the band, None if it never
    does), `peak` the extreme value reached in the step's direction."""

    overshoot: float
    settling_time: float | None
    peak: float


def step_response(
    times: Sequence[float],
    values: Sequence[float],
    *,
    step_time: float,
    before: float,
    after: float,
    band: float = 0.02,
) -> StepResponse:
    """Overshoot and settling time of `values` after the setpoint stepped from `before` to
    `after` at `step_time`; the settling band is `band` times the step (either side)."""
    size = after - before
    if size == 0:
        raise Invalid("the setpoint did not change: no step to analyse")
    direction = 1.0 if size > 0 else -1.0
    tolerance = abs(size) * band
    peak = after
    settled_at: float | None = None
    for t, v in zip(times, values, strict=True):
        if t < step_time:
            continue
        if direction * (v - peak) > 0:
            peak = v
        if abs(v - after) > tolerance:
            settled_at = None
        elif settled_at is None:
            settled_at = t
    overshoot = max(0.0, direction * (peak - after) / abs(size))
    return StepResponse(overshoot, None if settled_at is None else settled_at - step_time, peak)


def integral_absolute_error(
    times: Sequence[float], setpoints: Sequence[float], values: Sequence[float]
) -> float:
    """The integral of |setpoint - value| over time (rectangles, left value per interval)."""
    total = 0.0
    for i in range(len(times) - 1):
        total += abs(setpoints[i] - values[i]) * (times[i + 1] - times[i])
    return total
