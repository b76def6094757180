"""A PID controller, pure: no I/O, no clock reads. The caller passes the time to `update`.

    pid = PID(kp=2.0, ki=0.1, kd=1.0, setpoint=21.0, output_limits=(0.0, 1000.0))
    power = pid.update(measured_temperature, now=clock.monotonic())

What it does, in the order `update` does it:

* error `e = setpoint - measurement` (`error_map` applied, e.g. to wrap angles;
  `reverse=True` negates it, for plants where more output lowers the measurement);
* P: `kp * e`, or with `proportional_on_measurement` an accumulated `-kp * Δmeasurement`
  (no kick on setpoint changes, less overshoot on integrating plants);
* I: `+= ki * e * dt`, kept from winding up by `anti_windup`:
  `"clamp"` stops integrating past the point where the output saturates (with
  proportional on measurement, P + I is kept inside the limits, as in Brett Beauregard's
  PID library, so the output leaves a bound as soon as the measurement turns);
  `"back_calculation"` feeds `(saturated - unsaturated) * dt / tracking_time` back into
  the integral (Åström-Hägglund; `tracking_time` defaults to `sqrt(Ti * Td)`, or `Ti`);
* D: on the measurement by default (no kick on setpoint changes), through a first-order
  filter of time constant `derivative_filter`; it stays finite as `dt -> 0` (with no
  filter, a `dt` under a nanosecond keeps the previous D);
* output: P + I + D, clamped to `output_limits`.

With `sample_time`, an update less than `sample_time` after the last computed one
returns the last output unchanged. The first update after construction or `reset()` has
no earlier time, so it integrates nothing (dt = 0): whatever clock the caller uses, the
integral cannot jump. `set_auto_mode(False)` puts it in manual: `update` then only
tracks the measurement and returns the manual output; back to auto, the integral is set
so that the output continues from the manual one (bumpless transfer).

Nothing here is for compatibility: the tests' `SimplePidCompatible`
(tests/control/simple_pid_compat.py) computes what simple-pid 2.x computes (its faults
included), for checking this controller against it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

from setpoint.errors import Invalid

__all__ = ["PID", "AntiWindup"]

AntiWindup = Literal["clamp", "back_calculation"]

MIN_SLOPE_SECONDS = 1e-9
"""Below this `dt + derivative_filter`, a change of measurement has no measurable slope: the
derivative keeps its last value rather than divide by (almost) nothing."""


class PID:
    """A PID controller; see the module docstring for what each option does."""

    __slots__ = (
        "_auto",
        "_derivative",
        "_has_output",
        "_hi",
        "_integral",
        "_kd",
        "_ki",
        "_kp",
        "_last_error",
        "_last_input",
        "_last_output",
        "_last_time",
        "_lo",
        "_proportional",
        "_sign",
        "_tracking_gain",
        "anti_windup",
        "derivative_filter",
        "derivative_on_measurement",
        "error_map",
        "proportional_on_measurement",
        "sample_time",
        "setpoint",
        "tracking_time",
    )

    def __init__(
        self,
        kp: float = 1.0,
        ki: float = 0.0,
        kd: float = 0.0,
        setpoint: float = 0.0,
        *,
        sample_time: float | None = None,
        output_limits: tuple[float | None, float | None] = (None, None),
        anti_windup: AntiWindup = "clamp",
        tracking_time: float | None = None,
        derivative_on_measurement: bool = True,
        derivative_filter: float = 0.0,
        proportional_on_measurement: bool = False,
        reverse: bool = False,
        error_map: Callable[[float], float] | None = None,
        auto_mode: bool = True,
        starting_output: float = 0.0,
    ) -> None:
        if anti_windup not in ("clamp", "back_calculation"):
            raise Invalid(
                f"{anti_windup!r}: want 'clamp' or 'back_calculation'", field="anti_windup"
            )
        if sample_time is not None and sample_time < 0:
            raise Invalid(f"{sample_time}: must be >= 0", field="sample_time")
        if derivative_filter < 0:
            raise Invalid(f"{derivative_filter}: must be >= 0", field="derivative_filter")
        if tracking_time is not None and tracking_time <= 0:
            raise Invalid(f"{tracking_time}: must be > 0", field="tracking_time")
        self.setpoint = setpoint
        self.sample_time = sample_time
        self.anti_windup: AntiWindup = anti_windup
        self.tracking_time = tracking_time
        self.derivative_on_measurement = derivative_on_measurement
        self.derivative_filter = derivative_filter
        self.proportional_on_measurement = proportional_on_measurement
        self.error_map = error_map
        self._sign = -1.0 if reverse else 1.0
        self._auto = auto_mode
        self._lo: float | None = None
        self._hi: float | None = None
        self._kp = self._ki = self._kd = 0.0
        self._tracking_gain = 0.0
        self.tunings = (kp, ki, kd)
        self.output_limits = output_limits
        self._proportional = 0.0
        self._integral = 0.0
        self._derivative = 0.0
        self._last_time: float | None = None
        self._last_input: float | None = None
        self._last_error: float | None = None
        self._has_output = False
        self.reset()
        self._integral = self._clamp(starting_output)
        self._last_output = self._integral

    # -- the computation -----------------------------------------------------------------

    def update(self, measurement: float, now: float) -> float:
        """Take `measurement`, observed at `now` (seconds, the caller's clock); return the
        output. Raises `Invalid` if `now` is earlier than the previous update's."""
        last_time = self._last_time
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
            sample_time = self.sample_time
            if sample_time is not None and dt < sample_time and self._has_output:
                return self._last_output
        sign = self._sign
        error = self.setpoint - measurement
        if self.error_map is not None:
            error = self.error_map(error)
        error *= sign
        last_input = self._last_input
        d_input = 0.0 if last_input is None else sign * (measurement - last_input)

        if self.proportional_on_measurement:
            proportional = self._proportional - self._kp * d_input
        else:
            proportional = self._kp * error

        tau = self.derivative_filter
        if self.derivative_on_measurement:
            rate = -self._kd * d_input
        else:
            last_error = self._last_error
            rate = 0.0 if last_error is None else self._kd * (error - last_error)
        if tau + dt >= MIN_SLOPE_SECONDS:
            derivative = (tau * self._derivative + rate) / (tau + dt)
        else:
            derivative = self._derivative  # no time passed and no filter: no new slope

        integral = self._integral
        lo = self._lo
        hi = self._hi
        stepped = integral + self._ki * error * dt
        if self.anti_windup == "clamp":
            if self.proportional_on_measurement:
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
        else:
            unsaturated = proportional + stepped + derivative
            output = unsaturated
            if hi is not None and output > hi:
                output = hi
            elif lo is not None and output < lo:
                output = lo
            if output != unsaturated:
                gain = self._tracking_gain * dt
                stepped += (gain if gain < 1.0 else 1.0) * (output - unsaturated)

        self._proportional = proportional
        self._integral = stepped
        self._derivative = derivative
        self._last_output = output
        self._last_input = measurement
        self._last_error = error
        self._last_time = now
        self._has_output = True
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
        self._tracking_gain = 1.0 / max(self._tracking_seconds(), 1e-12)

    def _tracking_seconds(self) -> float:
        """Back-calculation's tracking time: as given, else sqrt(Ti * Td), else Ti."""
        if self.tracking_time is not None:
            return self.tracking_time
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
        if lo is not None and hi is not None and hi < lo:
            raise Invalid(f"lower limit {lo} is above upper limit {hi}", field="output_limits")
        self._lo = None if lo is None else float(lo)
        self._hi = None if hi is None else float(hi)
        if hasattr(self, "_last_output"):
            self._last_output = self._clamp(self._last_output)

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
            return
        if self._auto:
            return
        self._auto = True
        base = self._clamp(last_output if last_output is not None else self._last_output)
        last_input, last_time = self._last_input, self._last_time
        self.reset()
        self._last_input, self._last_time = last_input, last_time
        proportional = 0.0
        if not self.proportional_on_measurement and last_input is not None:
            error = self.setpoint - last_input
            if self.error_map is not None:
                error = self.error_map(error)
            proportional = self._kp * self._sign * error
            self._last_error = self._sign * error
        self._proportional = proportional
        self._integral = base - proportional
        self._last_output = base
        self._has_output = last_time is not None

    def reset(self) -> None:
        """Forget the history: terms to zero (the integral clamped to the limits), no last
        measurement, no last time; the next update starts afresh."""
        self._proportional = 0.0
        self._integral = self._clamp(0.0)
        self._derivative = 0.0
        self._last_input = None
        self._last_error = None
        self._last_time = None
        self._has_output = False

    def __repr__(self) -> str:
        kp, ki, kd = self.tunings
        return (
            f"PID(kp={kp!r}, ki={ki!r}, kd={kd!r}, setpoint={self.setpoint!r}, "
            f"sample_time={self.sample_time!r}, output_limits={self.output_limits!r}, "
            f"auto_mode={self._auto!r})"
        )
