"""The default-mode PID: anti-windup, bumpless transfer, reverse action, error maps, sample
time, reset, bad input."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.control.pid import PID, Form, Limits, Start
from setpoint.errors import Invalid


def _first_order(pid: PID, steps: int, setpoint_step_at: int = 0) -> list[tuple[float, float]]:
    """Close the loop around y' = (u - y) / 5, dt = 0.1; return (y, u) per step."""
    y, now, out = 0.0, 0.0, []
    for i in range(steps):
        if i == setpoint_step_at:
            pid.setpoint = 1.0
        u = pid.update(y, now)
        y += (u - y) * 0.1 / 5.0
        now += 0.1
        out.append((y, u))
    return out


def test_a_closed_loop_settles_at_the_setpoint() -> None:
    pid = PID(2.0, 0.5, 0.0, limits=Limits(output=(-10.0, 10.0)))
    y, _ = _first_order(pid, 2000)[-1]
    assert y == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("anti_windup", ["clamp", "back_calculation"])
def test_anti_windup_recovers_from_saturation_sooner(anti_windup: str) -> None:
    """After a long saturation, the output leaves the bound when the error changes sign,
    rather than after the integral has unwound."""
    limits = (0.0, 1.0)
    guarded = PID(1.0, 1.0, 0.0, 5.0, limits=Limits(limits, anti_windup))  # type: ignore[arg-type]
    for t in range(100):  # setpoint 5 is unreachable: saturated at 1 for 100 s
        guarded.update(0.0, float(t))
    assert guarded.update(0.0, 100.0) == 1.0
    guarded.setpoint = 0.0
    # Error now -0.5: with a wound-up integral (about 500) the output would stay at 1.
    assert guarded.update(0.5, 101.0) < 1.0


def test_bumpless_transfer_from_manual_to_auto() -> None:
    pid = PID(3.0, 0.2, 1.0, 10.0, limits=Limits(output=(0.0, 100.0)))
    pid.update(4.0, 0.0)
    pid.set_auto_mode(False, last_output=42.0)
    assert pid.update(5.0, 1.0) == 42.0  # manual: the output given
    assert pid.update(6.0, 2.0) == 42.0
    pid.set_auto_mode(True)
    first = pid.update(6.0, 3.0)
    # Continues from 42: only the integral of one second's error separates them.
    assert first == pytest.approx(42.0 + 0.2 * 4.0 * 1.0)


def test_reverse_action_drives_the_other_way() -> None:
    direct = PID(1.0, 0.0, 0.0, 20.0)
    reverse = PID(1.0, 0.0, 0.0, 20.0, form=Form(reverse=True))
    assert direct.update(25.0, 0.0) == -5.0
    assert reverse.update(25.0, 0.0) == 5.0  # a cooler: too warm means more output
    assert reverse.reverse


def test_error_map_wraps_angles() -> None:
    def wrap(e: float) -> float:
        return (e + math.pi) % (2 * math.pi) - math.pi

    pid = PID(1.0, 0.0, 0.0, setpoint=math.pi - 0.1, form=Form(error_map=wrap))
    # Measured just past -pi: the short way round is -0.2 rad, not 2*pi - 0.2.
    assert pid.update(-math.pi + 0.1, 0.0) == pytest.approx(-0.2)


def test_sample_time_holds_the_output_between_samples() -> None:
    pid = PID(1.0, 1.0, 0.0, 1.0, form=Form(sample_time=1.0))
    first = pid.update(0.0, 0.0)
    assert pid.update(0.5, 0.5) == first
    assert pid.update(0.25, 1.0) == 0.75 + 0.75  # P + I over the whole second


def test_components_add_up_to_the_unsaturated_output() -> None:
    pid = PID(2.0, 0.5, 0.3, 3.0, form=Form(derivative_filter=0.2))
    pid.update(0.0, 0.0)
    out = pid.update(1.0, 1.0)
    assert sum(pid.components) == pytest.approx(out)
    p, i, d = pid.components
    assert p == 4.0
    assert i == pytest.approx(1.0)
    assert d == pytest.approx(-0.3 * 1.0 / 1.2)


def test_reset_forgets_the_history() -> None:
    pid = PID(1.0, 1.0, 1.0, 1.0)
    pid.update(0.0, 0.0)
    pid.update(0.5, 1.0)
    pid.reset()
    assert pid.components == (0.0, 0.0, 0.0)
    pid.update(0.0, 50.0)
    assert pid.components == (1.0, 0.0, 0.0)  # first update after reset: dt = 0


def test_tunings_and_limits_round_trip() -> None:
    pid = PID()
    pid.tunings = (1.0, 2.0, 3.0)
    pid.output_limits = (None, 5.0)
    assert pid.tunings == (1.0, 2.0, 3.0)
    assert pid.output_limits == (None, 5.0)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: Limits(output=(1.0, 0.0)), "limits.output"),
        (lambda: Limits(anti_windup="none"), "limits.anti_windup"),  # type: ignore[arg-type]
        (lambda: Limits(tracking_time=0.0), "limits.tracking_time"),
        (lambda: PID(kp=math.nan), "kp"),
        (lambda: Form(derivative_filter=-1.0), "form.derivative_filter"),
        (lambda: Form(sample_time=-1.0), "form.sample_time"),
        (lambda: PID().__setattr__("output_limits", (1.0, 0.0)), "output_limits"),
    ],
)
def test_bad_settings_name_the_field(make: object, field: str) -> None:
    with pytest.raises(Invalid) as info:
        make()  # type: ignore[operator]
    assert info.value.field == field


def test_time_going_backwards_is_refused() -> None:
    pid = PID()
    pid.update(0.0, 10.0)
    with pytest.raises(Invalid, match="backwards"):
        pid.update(0.0, 9.0)


@settings(max_examples=200, deadline=None)
@given(
    gains=st.tuples(*(st.floats(0, 10) for _ in range(3))),
    pom=st.booleans(),
    dom=st.booleans(),
    back=st.booleans(),
    tau=st.floats(0, 2),
    steps=st.lists(st.tuples(st.floats(-100, 100), st.floats(0, 5)), min_size=1, max_size=40),
)
def test_output_always_within_limits_and_finite(
    gains: tuple[float, float, float],
    pom: bool,
    dom: bool,
    back: bool,
    tau: float,
    steps: list[tuple[float, float]],
) -> None:
    pid = PID(
        *gains,
        setpoint=10.0,
        limits=Limits((-5.0, 5.0), "back_calculation" if back else "clamp"),
        form=Form(
            proportional_on_measurement=pom, derivative_on_measurement=dom, derivative_filter=tau
        ),
    )
    now = 0.0
    for measurement, dt in steps:
        now += dt
        out = pid.update(measurement, now)
        assert -5.0 <= out <= 5.0
        assert all(math.isfinite(c) for c in pid.components)


@settings(max_examples=200, deadline=None)
@given(
    gains=st.tuples(*(st.floats(-10, 10) for _ in range(3))),
    limits=st.tuples(st.none() | st.floats(-50, 0), st.none() | st.floats(0, 50)),
    tau=st.sampled_from([0.0, 0.5]),
    reverse=st.booleans(),
    steps=st.lists(
        st.tuples(st.floats(-100, 100), st.sampled_from([0.0, 1e-12, 0.01, 0.5, 3.0])),
        min_size=1,
        max_size=40,
    ),
)
def test_the_straight_path_computes_what_the_general_one_does(
    gains: tuple[float, float, float],
    limits: tuple[float | None, float | None],
    tau: float,
    reverse: bool,
    steps: list[tuple[float, float]],
) -> None:
    """`update` takes a straight path for the common form; an error map that changes nothing
    sends the same controller down the general one: the outputs and terms are equal."""
    straight = PID(
        *gains, 3.0, limits=Limits(limits), form=Form(derivative_filter=tau, reverse=reverse)
    )
    general = PID(
        *gains,
        3.0,
        limits=Limits(limits),
        form=Form(derivative_filter=tau, reverse=reverse, error_map=lambda e: e),
    )
    now = 0.0
    for measurement, dt in steps:
        now += dt
        assert straight.update(measurement, now) == general.update(measurement, now)
        assert straight.components == general.components


def test_the_settings_read_back_and_are_values() -> None:
    limits = Limits((0.0, 10.0), "back_calculation", tracking_time=2.0)
    form = Form(sample_time=0.5, derivative_filter=0.1, reverse=True)
    pid = PID(
        1.0, 0.5, 0.2, 4.0, limits=limits, form=form, start=Start(auto_mode=False, output=3.0)
    )
    assert (pid.limits, pid.form) == (limits, form)
    assert not pid.auto_mode
    assert pid.update(1.0, 0.0) == 3.0  # manual, at the starting output
    with pytest.raises(AttributeError):
        limits.output = (0.0, 1.0)  # type: ignore[misc]
    pid.output_limits = (0.0, 2.0)  # limits the output from now on
    assert pid.limits.output == (0.0, 2.0)
    assert pid.update(1.0, 1.0) == 2.0
