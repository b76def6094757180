"""A PID controller, pure: no I/O, no clock reads. The caller passes the time to `update`.

    pid = PID(2.0, 0.1, 1.0, setpoint=21.0, limits=Limits(output=(0.0, 1000.0)))
    power = pid.update(measured_temperature, now=clock.monotonic())

The gains and the setpoint are arguments; the rest is in three small settings values:
`Limits` (the output's bounds and the anti-windup), `Form` (how each update forms its
terms) and `Start` (auto or manual, and the output it starts from).

What it does, in the order `update` does it:

* error `e = setpoint - measurement` (`Form.error_map` applied, e.g. to wrap angles;
  `Form.reverse` negates it, for plants where more output lowers the measurement);
* P: `kp * e`, or with `Form.proportional_on_measurement` an accumulated
  `-kp * Δmeasurement` (no kick on setpoint changes, less overshoot on integrating plants);
* I: `+= ki * e * dt`, kept from winding up by `Limits.anti_windup`:
  `"clamp"` stops integrating past the point where the output saturates (with
  proportional on measurement, P + I is kept inside the limits, as in Brett Beauregard's
  PID library, so the output leaves a bound as soon as the measurement turns);
  `"back_calculation"` feeds `(saturated - unsaturated) * dt / tracking_time` back into
  the integral (Åström-Hägglund; `Limits.tracking_time` defaults to `sqrt(Ti * Td)`, or
  `Ti`);
* D: on the measurement by default (no kick on setpoint changes), through a first-order
  filter of time constant `Form.derivative_filter`; it stays finite as `dt -> 0` (with no
  filter, a `dt` under a nanosecond keeps the previous D);
* output: P + I + D, clamped to `Limits.output`.

With `Form.sample_time`, an update less than `sample_time` after the last computed one
returns the last output unchanged. The first update after construction or `reset()` has
no earlier time, so it integrates nothing (dt = 0): whatever clock the caller uses, the
integral cannot jump. `set_auto_mode(False)` puts it in manual: `update` then only
tracks the measurement and returns the manual output; back to auto, the integral is set
so that the output continues from the manual one (bumpless transfer).

`update` is the hot path (a loop may call it thousands of times a second): the settings
are unpacked into plain attributes when set, `reverse` is folded into the gains' signs,
and nothing is stored that a later update does not read.

Nothing here is for compatibility: the tests' `SimplePidCompatible`
(tests/control/simple_pid_compat.py) computes what simple-pid 2.x computes (its faults
included), for checking this controller against it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from setpoint.errors import Invalid

__all__ = ["PID", "AntiWindup", "Form", "Limits", "Start"]

AntiWindup = Literal["clamp", "back_calculation"]

MIN_SLOPE_SECONDS = 1e-9
"""Below this `dt + derivative_filter`, a change of measurement has no measurable slope: the
derivative keeps its last value rather than divide by (almost) nothing."""


@dataclass(frozen=True, slots=True)
class Limits:
    """The output's bounds, and how the integral is kept from winding up against them."""

    output: tuple[float | None, float | None] = (None, None)
    """(lower, upper); None means unbounded on that side."""
    anti_windup: AntiWindup = "clamp"
    """"clamp" or "back_calculation" (see the module docstring)."""
    tracking_time: float | None = None
    """Back-calculation's tracking time, seconds; None: sqrt(Ti * Td), or Ti."""

    def __post_init__(self) -> None:
        if self.anti_windup not in ("clamp", "back_calculation"):
            raise Invalid(
                f"{self.anti_windup!r}: want 'clamp' or 'back_calculation'",
                field="limits.anti_windup",
            )
        if self.tracking_time is not None and self.tracking_time <= 0:
            raise Invalid(f"{self.tracking_time}: must be > 0", field="limits.tracking_time")
        _check_output_limits(self.output, "limits.output")


@dataclass(frozen=True, slots=True)
class Form:
    """How each update forms its terms (see the module docstring)."""

    sample_time: float | None = None
    """Seconds; an update sooner than this after the last computed one changes nothing."""
    proportional_on_measurement: bool = False
    derivative_on_measurement: bool = True
    derivative_filter: float = 0.0
    """Time constant of the first-order filter on D, seconds (Td / 10 is usual)."""
    reverse: bool = False
    """More output lowers the measurement (a cooler)."""
    error_map: Callable[[float], float] | None = None
    """Applied to the error, e.g. to wrap angles into (-pi, pi]."""

    def __post_init__(self) -> None:
        if self.sample_time is not None and self.sample_time < 0:
            raise Invalid(f"{self.sample_time}: must be >= 0", field="form.sample_time")
        if self.derivative_filter < 0:
            raise Invalid(f"{self.derivative_filter}: must be >= 0", field="form.derivative_filter")


@dataclass(frozen=True, slots=True)
class Start:
    """How the controller starts: computing (auto) or in manual, and from which output."""

    auto_mode: bool = True
    output: float = 0.0
    """The integral starts here (clamped to the limits): the first output, if P and D are 0."""


def _check_output_limits(limits: tuple[float | None, float | None], field: str) -> None:
    lo, hi = limits
    if lo is not None and hi is not None and hi < lo:
        raise Invalid(f"lower limit {lo} is above upper limit {hi}", field=field)


class PID:
    """A PID controller; see the module docstring for what each setting does."""

    __slots__ = (
        "_auto",
        "_back_calculation",
        "_common_form",
        "_derivative",
        "_error_map",
        "_hi",
        "_high",
        "_integral",
        "_kd",
        "_kd_negated",
        "_kd_signed",
        "_ki",
        "_ki_signed",
        "_kp",
        "_kp_signed",
        "_last_error",
        "_last_input",
        "_last_output",
        "_last_time",
        "_lo",
        "_low",
        "_on_error",
        "_on_measurement",
        "_proportional",
        "_sample_time",
        "_sign",
        "_tracking_gain",
        "_tracking_time",
        "derivative_filter",
        "setpoint",
    )

    def __init__(
        self,
        kp: float = 1.0,
        ki: float = 0.0,
        kd: float = 0.0,
        setpoint: float = 0.0,
        *,
        limits: Limits = Limits(),
        form: Form = Form(),
        start: Start = Start(),
    ) -> None:
        self.setpoint = setpoint
        self._sample_time = form.sample_time
        self._back_calculation = limits.anti_windup == "back_calculation"
        self._tracking_time = limits.tracking_time
        self._on_error = not form.derivative_on_measurement
        self.derivative_filter = form.derivative_filter
        self._on_measurement = form.proportional_on_measurement
        self._error_map = form.error_map
        self._sign = -1.0 if form.reverse else 1.0
        self._auto = start.auto_mode
        self._common_form = False
        self._lo: float | None = None
        self._hi: float | None = None
        self._low = -math.inf
        self._high = math.inf
        self._last_output = 0.0
        self._proportional = 0.0
        self._integral = 0.0
        self._derivative = 0.0
        self._last_input: float | None = None
        self._last_error: float | None = None
        self._last_time: float | None = None
        self.tunings = (kp, ki, kd)
        self.output_limits = limits.output
        self.reset()
        self._integral = self._clamp(start.output)
        self._last_output = self._integral
        self._set_form()

    def _set_form(self) -> None:
        """Whether `update` may take its straight path (see there)."""
        self._common_form = (
            self._auto
            and self._sample_time is None
            and self._error_map is None
            and not self._on_measurement
            and not self._on_error
            and not self._back_calculation
        )

    # -- the computation -----------------------------------------------------------------

    def update(self, measurement: float, now: float) -> float:
        """Take `measurement`, observed at `now` (seconds, the caller's clock); return the
        output. Raises `Invalid` if `now` is earlier than the previous update's."""
        last_time = self._last_time
        if not self._common_form or last_time is None:
            return self._update(measurement, now, last_time)
        # The common form (auto; P on the error, D on the measurement, clamping, no sample
        # time, no error map) after a first update, in a straight line: what `_update`
        # computes, with fewer questions asked (tests/control/test_pid_behaviour.py checks
        # that the two agree). The gains carry the sign of `reverse`; an unbounded side is
        # an infinite bound.
        dt = now - last_time
        if dt < 0.0:
            raise Invalid(f"time went backwards ({now} < {last_time})", field="now")
        error = self.setpoint - measurement
        proportional = self._kp_signed * error
        last_input: float = self._last_input  # type: ignore[assignment]  # set with last_time
        rate = self._kd_negated * (measurement - last_input)
        tau = self.derivative_filter
        if tau == 0.0:
            derivative = rate / dt if dt >= MIN_SLOPE_SECONDS else self._derivative
        elif tau + dt >= MIN_SLOPE_SECONDS:
            derivative = (tau * self._derivative + rate) / (tau + dt)
        else:
            derivative = self._derivative
        integral = self._integral
        stepped = integral + self._ki_signed * error * dt
        # Integrate no further than the point where the output saturates.
        if stepped > integral:
            room = self._high - proportional - derivative
            if stepped > room:
                stepped = integral if integral > room else room
        elif stepped < integral:
            room = self._low - proportional - derivative
            if stepped < room:
                stepped = integral if integral < room else room
        output = proportional + stepped + derivative
        if output > self._high:
            output = self._high
        elif output < self._low:
            output = self._low
        self._proportional = proportional
        self._integral = stepped
        self._derivative = derivative
        self._last_output = output
        self._last_input = measurement
        self._last_time = now
        return output

    def _update(self, measurement: float, now: float, last_time: float | None) -> float:
        """`update` in every form: manual, sample time, error map, proportional on
        measurement, derivative on error, back-calculation, the first update."""
        if not self._auto:
            self._last_input = measurement
            self._last_time = now
            return self._last_output
        if last_time is None:
            dt = 0.0
        else:
            dt = now - last_time
            if dt < 0.0:
                raise Invalid(f"time went backwards ({now} < {last_time})", field="now")
            sample_time = self._sample_time
            if sample_time is not None and dt < sample_time:
                return self._last_output
        # The gains carry the sign of `reverse`: error and slope stay as measured.
        error = self.setpoint - measurement
        error_map = self._error_map
        if error_map is not None:
            error = error_map(error)
        last_input = self._last_input
        d_input = 0.0 if last_input is None else measurement - last_input

        on_measurement = self._on_measurement
        if on_measurement:
            proportional = self._proportional - self._kp_signed * d_input
        else:
            proportional = self._kp_signed * error

        if self._on_error:
            last_error = self._last_error
            rate = 0.0 if last_error is None else self._kd_signed * (error - last_error)
            self._last_error = error
        else:
            rate = self._kd_negated * d_input
        tau = self.derivative_filter
        if tau == 0.0:  # as below, in one division
            derivative = rate / dt if dt >= MIN_SLOPE_SECONDS else self._derivative
        elif tau + dt >= MIN_SLOPE_SECONDS:
            derivative = (tau * self._derivative + rate) / (tau + dt)
        else:
            derivative = self._derivative  # no time passed and no filter: no new slope

        integral = self._integral
        lo = self._lo
        hi = self._hi
        stepped = integral + self._ki_signed * error * dt
        if self._back_calculation:
            unsaturated = proportional + stepped + derivative
            output = unsaturated
            if hi is not None and output > hi:
                output = hi
            elif lo is not None and output < lo:
                output = lo
            if output != unsaturated:
                gain = self._tracking_gain * dt
                stepped += (gain if gain < 1.0 else 1.0) * (output - unsaturated)
        else:
            if on_measurement:
                # P + I stay inside the limits: the output leaves a bound as soon as P turns.
                if hi is not None and stepped > hi - proportional:
                    stepped = hi - proportional
                if lo is not None and stepped < lo - proportional:
                    stepped = lo - proportional
            else:
                # Integrate no further than the point where the output saturates.
                if hi is not None and stepped > integral:
                    room = hi - proportional - derivative
                    if stepped > room:
                        stepped = integral if integral > room else room
                if lo is not None and stepped < integral:
                    room = lo - proportional - derivative
                    if stepped < room:
                        stepped = integral if integral < room else room
            output = proportional + stepped + derivative
            if hi is not None and output > hi:
                output = hi
            elif lo is not None and output < lo:
                output = lo

        self._proportional = proportional
        self._integral = stepped
        self._derivative = derivative
        self._last_output = output
        self._last_input = measurement
        self._last_time = now
        return output

    def _clamp(self, value: float) -> float:
        if self._hi is not None and value > self._hi:
            return self._hi
        if self._lo is not None and value < self._lo:
            return self._lo
        return value

    # -- state and settings --------------------------------------------------------------

    @property
    def components(self) -> tuple[float, float, float]:
        """The P, I and D terms of the last update."""
        return self._proportional, self._integral, self._derivative

    @property
    def tunings(self) -> tuple[float, float, float]:
        """The gains (kp, ki, kd)."""
        return self._kp, self._ki, self._kd

    @tunings.setter
    def tunings(self, gains: tuple[float, float, float]) -> None:
        kp, ki, kd = gains
        for name, value in (("kp", kp), ("ki", ki), ("kd", kd)):
            if not math.isfinite(value):
                raise Invalid(f"{value}: must be a finite number", field=name)
        self._kp, self._ki, self._kd = float(kp), float(ki), float(kd)
        sign = self._sign
        self._kp_signed, self._ki_signed, self._kd_signed = sign * kp, sign * ki, sign * kd
        self._kd_negated = -self._kd_signed
        self._tracking_gain = 1.0 / max(self._tracking_seconds(), 1e-12)

    def _tracking_seconds(self) -> float:
        """Back-calculation's tracking time: as given, else sqrt(Ti * Td), else Ti."""
        if self._tracking_time is not None:
            return self._tracking_time
        if self._ki == 0.0 or self._kp == 0.0:
            return 1.0
        ti = abs(self._kp / self._ki)
        td = abs(self._kd / self._kp)
        return math.sqrt(ti * td) if td > 0.0 else ti

    @property
    def output_limits(self) -> tuple[float | None, float | None]:
        """(lower, upper); None means unbounded on that side."""
        return self._lo, self._hi

    @output_limits.setter
    def output_limits(self, limits: tuple[float | None, float | None] | None) -> None:
        lo, hi = (None, None) if limits is None else limits
        _check_output_limits((lo, hi), "output_limits")
        self._low = -math.inf if lo is None else float(lo)
        self._high = math.inf if hi is None else float(hi)
        self._lo = None if lo is None else self._low
        self._hi = None if hi is None else self._high
        self._last_output = self._clamp(self._last_output)

    @property
    def limits(self) -> Limits:
        """The output's limits and the anti-windup, as now set."""
        anti_windup: AntiWindup = "back_calculation" if self._back_calculation else "clamp"
        return Limits(self.output_limits, anti_windup, self._tracking_time)

    @property
    def form(self) -> Form:
        """How each update forms its terms, as now set."""
        return Form(
            sample_time=self._sample_time,
            proportional_on_measurement=self._on_measurement,
            derivative_on_measurement=not self._on_error,
            derivative_filter=self.derivative_filter,
            reverse=self.reverse,
            error_map=self._error_map,
        )

    @property
    def auto_mode(self) -> bool:
        """True when `update` computes the output; False in manual."""
        return self._auto

    @property
    def reverse(self) -> bool:
        """True when more output lowers the measurement (a cooler, say)."""
        return self._sign < 0.0

    def set_auto_mode(self, enabled: bool, last_output: float | None = None) -> None:
        """Switch to auto (`enabled`) or manual.

        Going to manual, `last_output` (if given) is the output `update` returns until
        auto again. Going to auto from manual, the output continues from `last_output`
        (default: the manual output): the integral absorbs the difference, so the plant
        sees no bump.
        """
        if not enabled:
            if last_output is not None:
                self._last_output = self._clamp(last_output)
            self._auto = False
            self._common_form = False
            return
        if self._auto:
            return
        self._auto = True
        self._set_form()
        base = self._clamp(last_output if last_output is not None else self._last_output)
        last_input, last_time = self._last_input, self._last_time
        self.reset()
        self._last_input, self._last_time = last_input, last_time
        proportional = 0.0
        if not self._on_measurement and last_input is not None:
            error = self.setpoint - last_input
            if self._error_map is not None:
                error = self._error_map(error)
            proportional = self._kp_signed * error
            self._last_error = error
        self._proportional = proportional
        self._integral = base - proportional
        self._last_output = base

    def reset(self) -> None:
        """Forget the history: terms to zero (the integral clamped to the limits), no last
        measurement, no last time; the next update starts afresh."""
        self._proportional = 0.0
        self._integral = self._clamp(0.0)
        self._derivative = 0.0
        self._last_input = None
        self._last_error = None
        self._last_time = None

    def __repr__(self) -> str:
        kp, ki, kd = self.tunings
        return (
            f"PID(kp={kp!r}, ki={ki!r}, kd={kd!r}, setpoint={self.setpoint!r}, "
            f"limits={self.limits!r}, form={self.form!r}, auto_mode={self._auto!r})"
        )
