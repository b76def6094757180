"""simple-pid's three known faults, each shown on simple-pid (or `SimplePidCompatible`, its
arithmetic behind our interface) and shown absent from our PID."""

from __future__ import annotations

import math

import simple_pid
from simple_pid_compat import SimplePidCompatible

from setpoint.control.pid import PID, Form, Limits


def _proportional_on_measurement_run(pid: PID | SimplePidCompatible) -> list[float]:
    """Measurement held below the setpoint until the output saturates, then above it."""
    outputs = []
    now = 0.0
    for measurement in [60.0] + [40.0] * 50 + [55.0] * 3:
        outputs.append(pid.update(measurement, now))
        now += 1.0
    return outputs


def test_proportional_on_measurement_leaves_the_bound_when_the_measurement_turns() -> None:
    """simple-pid issue #96: with proportional on measurement, its integral is clamped to the
    limits on its own, so P + I can sit far beyond the bound and the output stays stuck there
    after the measurement has crossed the setpoint."""
    options = dict(output_limits=(0.0, 100.0), proportional_on_measurement=True)
    ours = _proportional_on_measurement_run(
        PID(
            4.0,
            1.0,
            0.0,
            50.0,
            limits=Limits((0.0, 100.0)),
            form=Form(proportional_on_measurement=True),
        )
    )
    theirs = _proportional_on_measurement_run(
        SimplePidCompatible(4.0, 1.0, 0.0, 50.0, sample_time=None, **options)  # type: ignore[arg-type]
    )
    assert ours[50] == theirs[50] == 100.0  # saturated while below the setpoint
    # The measurement is now above the setpoint (error < 0): the output must come down.
    assert theirs[51:] == [100.0, 100.0, 100.0]  # the fault: stuck at the bound
    assert ours[51] < 100.0
    assert ours[51] > ours[52] > ours[53]


def test_the_derivative_stays_finite_when_no_time_passes() -> None:
    """simple-pid turns dt = 0 into 1e-16, so a measurement change gives a derivative of
    about 1e16 times the change."""
    theirs = simple_pid.PID(0.0, 0.0, 1.0, 0.0, sample_time=None, time_fn=lambda: 10.0)
    theirs(0.0)
    assert abs(theirs(1.0)) > 1e15  # the fault

    ours = PID(0.0, 0.0, 1.0, 0.0)
    ours.update(0.0, 9.0)
    before = ours.update(0.5, 10.0)
    assert before == -0.5
    assert ours.update(1.0, 10.0) == before  # no time, no filter: the slope is unknown, kept

    filtered = PID(0.0, 0.0, 1.0, 0.0, form=Form(derivative_filter=0.5))
    for dt in (1e-3, 1e-6, 1e-9, 0.0):
        filtered.reset()
        filtered.update(0.0, 10.0)
        derivative = filtered.update(1.0, 10.0 + dt)
        assert math.isfinite(derivative)
        assert abs(derivative) <= 1.0 / 0.5  # kd * |change| / filter time constant


def test_no_integral_jump_when_the_clock_is_not_the_one_at_construction() -> None:
    """simple-pid reads its clock at construction; swap `time_fn` afterwards (say to
    wall-clock seconds, or to a simulation starting at 0) and the first update integrates
    over the gap between the two clocks."""
    theirs = simple_pid.PID(0.0, 1.0, 0.0, 1.0, sample_time=None, time_fn=lambda: 100.0)
    theirs.time_fn = lambda: 1.7e9
    theirs(0.0)
    assert theirs.components[1] > 1e8  # the fault: an integral of error * 1.7e9 seconds

    ours = PID(0.0, 1.0, 0.0, 1.0)
    ours.update(0.0, 1.7e9)  # whatever the caller's clock reads, the first update is dt = 0
    assert ours.components[1] == 0.0
    ours.update(0.0, 1.7e9 + 2.0)
    assert ours.components[1] == 2.0  # error 1 for 2 seconds
