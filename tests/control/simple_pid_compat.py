"""simple-pid 2.0.1's arithmetic behind `setpoint.control.pid.PID`'s interface, for checking
the two against each other. Pure: no I/O, no clock reads (the time is an argument of `update`).

    pid = SimplePidCompatible(2.0, 0.1, 1.0, setpoint=21.0, start_time=clock())
    output = pid.update(measurement, now=clock())

computes what `simple_pid.PID(2.0, 0.1, 1.0, setpoint=21.0, time_fn=clock)` returns when
called with `measurement`, to 1e-9 (tests/control/test_pid_compat.py compares them on random
sequences). It keeps simple-pid's known faults, which the production `PID` does not have:
the integral is clamped to the output limits whatever P is (with proportional on
measurement the output can stay stuck at a bound: simple-pid issue #96); a zero `dt` is
taken as 1e-16 (the derivative explodes); the first update integrates over the time since
construction or the last reset (an integral jump when the clock is not the one it was built
with). No derivative filter, no back-calculation, no reverse action.

Not for controlling anything: use `PID`. This module exists so that the production
controller carries no compatibility branches.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from setpoint.errors import Invalid

__all__ = ["SimplePidCompatible"]


class SimplePidCompatible:
    """simple-pid 2.0.1's `PID`, operation for operation, with `update(measurement, now)`."""

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
        "_seen",
        "derivative_on_measurement",
        "error_map",
        "proportional_on_measurement",
        "sample_time",
        "setpoint",
    )

    def __init__(
        self,
        kp: float = 1.0,
        ki: float = 0.0,
        kd: float = 0.0,
        setpoint: float = 0.0,
        *,
        sample_time: float | None = 0.01,
        output_limits: tuple[float | None, float | None] = (None, None),
        auto_mode: bool = True,
        proportional_on_measurement: bool = False,
        differential_on_measurement: bool = True,
        error_map: Callable[[float], float] | None = None,
        starting_output: float = 0.0,
        start_time: float = 0.0,
    ) -> None:
        if sample_time is not None and sample_time < 0:
            raise Invalid(f"{sample_time}: must be >= 0", field="sample_time")
        self.setpoint = setpoint
        self.sample_time = sample_time
        self.proportional_on_measurement = proportional_on_measurement
        self.derivative_on_measurement = differential_on_measurement
        self.error_map = error_map
        self._auto = auto_mode
        self._kp = self._ki = self._kd = 0.0
        self.tunings = (kp, ki, kd)
        self._lo: float | None = None
        self._hi: float | None = None
        self.output_limits = output_limits
        self._seen = start_time
        """The time of the last call: simple-pid's reset() reads its clock."""
        self._proportional = 0.0
        self._integral = 0.0
        self._derivative = 0.0
        self._last_input: float | None = None
        self._last_error: float | None = None
        self._last_time = start_time
        self._has_output = False
        self._integral = self._clamp(starting_output)
        self._last_output = self._integral

    def update(self, measurement: float, now: float) -> float:
        """simple-pid's `PID.__call__(measurement)` with its clock reading `now`."""
        self._seen = now
        if not self._auto:
            return self._last_output
        dt = now - self._last_time if (now - self._last_time) else 1e-16
        if dt < 0.0:
            raise Invalid(f"time went backwards ({now} < {self._last_time})", field="now")
        if self.sample_time is not None and dt < self.sample_time and self._has_output:
            return self._last_output
        error = self.setpoint - measurement
        last_input = self._last_input
        d_input = measurement - (last_input if last_input is not None else measurement)
        last_error = self._last_error
        d_error = error - (last_error if last_error is not None else error)
        if self.error_map is not None:
            error = self.error_map(error)
        if not self.proportional_on_measurement:
            self._proportional = self._kp * error
        else:
            self._proportional -= self._kp * d_input
        self._integral = self._clamp(self._integral + self._ki * error * dt)
        if self.derivative_on_measurement:
            self._derivative = -self._kd * d_input / dt
        else:
            self._derivative = self._kd * d_error / dt
        output = self._clamp(self._proportional + self._integral + self._derivative)
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

    @property
    def output_limits(self) -> tuple[float | None, float | None]:
        """(lower, upper); None means unbounded on that side. Setting them clamps the
        integral and the last output, as simple-pid does."""
        return self._lo, self._hi

    @output_limits.setter
    def output_limits(self, limits: tuple[float | None, float | None] | None) -> None:
        lo, hi = (None, None) if limits is None else limits
        if lo is not None and hi is not None and hi < lo:
            raise Invalid(f"lower limit {lo} is above upper limit {hi}", field="output_limits")
        self._lo = None if lo is None else float(lo)
        self._hi = None if hi is None else float(hi)
        if hasattr(self, "_last_output"):
            self._integral = self._clamp(self._integral)
            self._last_output = self._clamp(self._last_output)

    @property
    def auto_mode(self) -> bool:
        """True when `update` computes the output; False in manual."""
        return self._auto

    def set_auto_mode(self, enabled: bool, last_output: float | None = None) -> None:
        """simple-pid's: to manual, nothing else changes (`update` returns the last output);
        back to auto, a reset with the integral at `last_output` (default 0)."""
        if not enabled:
            self._auto = False
            return
        if self._auto:
            return
        self._auto = True
        self.reset()
        self._integral = self._clamp(last_output if last_output is not None else 0.0)

    def reset(self) -> None:
        """Terms to zero (the integral clamped to the limits), no last measurement; the last
        time is the time of the last call (simple-pid's reset reads its clock)."""
        self._proportional = 0.0
        self._integral = self._clamp(0.0)
        self._derivative = 0.0
        self._last_input = None
        self._last_error = None
        self._last_time = self._seen
        self._has_output = False
