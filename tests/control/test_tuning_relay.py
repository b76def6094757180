"""Relay auto-tuning, the tuning rules, step-response figures, and the simulated room."""

from __future__ import annotations

import math

import pytest

from setpoint.control.pid import PID, Form, Limits
from setpoint.control.plant import RoomPlant, RoomSchema, RoomSettings
from setpoint.control.tuning import (
    RULES,
    RelayExperiment,
    gains_for,
    identify,
    integral_absolute_error,
    min_iae_gains,
    relay_tune,
    step_response,
)
from setpoint.errors import Invalid


def room(**fields: float) -> RoomSettings:
    """A room: the schema's defaults (its one definition) but for `fields`."""
    return RoomSchema(**fields).settings()


ROOM = room(time_constant=600.0, dead_time=60.0, gain=0.01, outside=10.0, initial=21.0)


def _ultimate(settings: RoomSettings) -> tuple[float, float]:
    """Ku and Tu of a first order plus dead time plant, from its frequency response:
    the frequency w where the phase is -180 degrees (atan(w T) + w L = pi)."""
    t, dead = settings.time_constant, settings.dead_time
    lo, hi = 1e-6, math.pi / dead
    for _ in range(200):
        w = (lo + hi) / 2
        if math.atan(w * t) + w * dead < math.pi:
            lo = w
        else:
            hi = w
    return math.sqrt(1 + (w * t) ** 2) / settings.gain, 2 * math.pi / w


def _relay(settings: RoomSettings) -> tuple[float, float]:
    plant = RoomPlant(settings)
    experiment = RelayExperiment(21.0, bias=1500.0, amplitude=1500.0)
    result = relay_tune(plant.step, plant.measure(), experiment, sample_time=1.0, max_time=1e5)
    return result.ku, result.tu


@pytest.mark.parametrize("dead_time", [30.0, 60.0, 120.0])
def test_relay_finds_the_ultimate_gain_and_period(dead_time: float) -> None:
    """The describing-function estimate is approximate (it ignores harmonics), so it is
    within a third of the exact figures, not equal to them."""
    settings = room(time_constant=600.0, dead_time=dead_time, gain=0.01, outside=10.0, initial=21.0)
    ku, tu = _relay(settings)
    exact_ku, exact_tu = _ultimate(settings)
    assert ku == pytest.approx(exact_ku, rel=0.33)
    assert tu == pytest.approx(exact_tu, rel=0.33)


def test_relay_with_hysteresis_against_noise() -> None:
    noisy = RoomSettings(**{**_fields(ROOM), "noise": 0.05, "seed": 7})
    plant = RoomPlant(noisy)
    experiment = RelayExperiment(21.0, bias=1500.0, amplitude=1500.0, hysteresis=0.15)
    result = relay_tune(plant.step, plant.measure(), experiment, sample_time=5.0, max_time=1e5)
    exact_ku, exact_tu = _ultimate(noisy)
    assert result.ku == pytest.approx(exact_ku, rel=0.4)
    assert result.tu == pytest.approx(exact_tu, rel=0.4)
    assert result.record[0][2] in (0.0, 3000.0)


def test_an_experiment_too_short_says_so() -> None:
    plant = RoomPlant(ROOM)
    experiment = RelayExperiment(21.0, bias=1500.0, amplitude=1500.0)
    with pytest.raises(Invalid, match="run it longer"):
        relay_tune(plant.step, plant.measure(), experiment, sample_time=1.0, max_time=300.0)


def test_rules_follow_their_tables() -> None:
    ku, tu = 100.0, 40.0
    zn = gains_for(ku, tu, "ziegler-nichols")
    assert (zn.kp, zn.ki, zn.kd) == pytest.approx((60.0, 60.0 / 20.0, 60.0 * 5.0))
    tl = gains_for(ku, tu, "tyreus-luyben")
    assert tl.kp == pytest.approx(ku / 2.2)
    assert tl.ki == pytest.approx(tl.kp / (2.2 * tu))
    assert gains_for(ku, tu, "no-overshoot").kp < gains_for(ku, tu, "some-overshoot").kp < zn.kp
    assert set(RULES) == {"ziegler-nichols", "tyreus-luyben", "some-overshoot", "no-overshoot"}
    with pytest.raises(Invalid) as info:
        gains_for(ku, tu, "guesswork")
    assert info.value.field == "rule"


def test_relay_tuned_gains_control_the_room() -> None:
    """Closing the loop with relay-tuned gains brings the room to its setpoint, and a
    gentler rule overshoots less than Ziegler-Nichols."""
    ku, tu = _relay(ROOM)
    overshoots = {}
    for rule in ("ziegler-nichols", "tyreus-luyben"):
        gains = gains_for(ku, tu, rule)
        plant = RoomPlant(RoomSettings(**{**_fields(ROOM), "initial": 15.0}))
        pid = PID(gains.kp, gains.ki, gains.kd, 21.0, limits=Limits((0.0, ROOM.max_power)))
        times, values, setpoints = [], [], []
        measurement = plant.measure()
        for i in range(1200):
            times.append(i * 5.0)
            values.append(measurement)
            setpoints.append(21.0)
            measurement = plant.step(pid.update(measurement, i * 5.0), 5.0)
        response = step_response(times, values, step_time=0.0, before=15.0, after=21.0)
        assert response.settling_time is not None
        assert values[-1] == pytest.approx(21.0, abs=0.05)
        assert integral_absolute_error(times, setpoints, values) > 0
        overshoots[rule] = response.overshoot
    assert overshoots["tyreus-luyben"] < overshoots["ziegler-nichols"]


def test_step_response_figures() -> None:
    times = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    values = [0.0, 0.5, 1.2, 1.05, 0.99, 1.0, 1.0]
    response = step_response(times, values, step_time=0.0, before=0.0, after=1.0)
    assert response.overshoot == pytest.approx(0.2)
    assert response.peak == 1.2
    assert response.settling_time == 4.0  # within 2% from t = 4 on
    down = step_response(times, [2 - v for v in values], step_time=0.0, before=2.0, after=1.0)
    assert down.overshoot == pytest.approx(0.2)
    assert (
        step_response(times, [0.0] * 7, step_time=0.0, before=0.0, after=1.0).settling_time is None
    )


def test_the_room_settles_where_its_model_says_whatever_the_step_size() -> None:
    finals = []
    for dt in (1.0, 7.0, 60.0):
        plant = RoomPlant(room(initial=10.0, outside=10.0))
        for _ in range(int(6000 / dt)):
            plant.step(1000.0, dt)
        finals.append(plant.temperature)
    assert finals == pytest.approx([10.0 + 0.01 * 1000.0 * (1 - math.exp(-(6000 - 60) / 600))] * 3)


def test_the_room_feels_the_heater_only_after_the_dead_time() -> None:
    plant = RoomPlant(room(initial=10.0, outside=10.0, dead_time=60.0))
    for _ in range(59):
        plant.step(3000.0, 1.0)
    assert plant.temperature == 10.0
    plant.step(3000.0, 2.0)
    assert plant.temperature > 10.0


def test_an_open_window_cools_the_room() -> None:
    closed, open_ = RoomPlant(ROOM), RoomPlant(ROOM)
    open_.open_window(2.0)
    power = ROOM.steady_power(21.0)
    for _ in range(600):
        closed.step(power, 1.0)
        open_.step(power, 1.0)
    assert closed.temperature == pytest.approx(21.0)
    assert open_.temperature < 20.0


def test_noise_is_repeatable_with_a_seed() -> None:
    settings = room(noise=0.1, seed=42)
    a, b = RoomPlant(settings), RoomPlant(settings)
    assert [a.step(500.0, 1.0) for _ in range(5)] == [b.step(500.0, 1.0) for _ in range(5)]


def _fields(settings: RoomSettings) -> dict[str, float]:
    return {name: getattr(settings, name) for name in settings.__slots__}


@pytest.mark.parametrize("dead_time", [30.0, 60.0, 120.0])
def test_identify_recovers_the_rooms_model(dead_time: float) -> None:
    settings = room(time_constant=600.0, dead_time=dead_time, gain=0.01, outside=10.0, initial=15.0)
    plant = RoomPlant(settings)
    experiment = RelayExperiment(21.0, bias=1500.0, amplitude=1500.0)
    result = relay_tune(plant.step, plant.measure(), experiment, sample_time=5.0, max_time=1e5)
    model = identify(result, output=settings.steady_power(15.0), measurement=15.0)
    assert model.gain == pytest.approx(0.01, rel=0.05)
    assert model.time_constant == pytest.approx(600.0, rel=0.05)
    assert model.dead_time == pytest.approx(dead_time, rel=0.1)


def test_min_iae_gains_hold_the_overshoot_on_the_real_room() -> None:
    """Gains picked on the identified model, then used on the room itself (with noise):
    at most 10% overshoot, and settled."""
    settings = room(noise=0.02, seed=1)
    plant = RoomPlant(settings)
    experiment = RelayExperiment(21.0, bias=1500.0, amplitude=1500.0, hysteresis=0.05)
    result = relay_tune(plant.step, plant.measure(), experiment, sample_time=5.0, max_time=1e5)
    model = identify(result, output=settings.steady_power(15.0), measurement=15.0)
    gains = min_iae_gains(
        model,
        result.ku,
        result.tu,
        output_limits=(0.0, settings.max_power),
        operating_output=result.mean_output,
        sample_time=5.0,
    )
    closed_loop = RoomPlant(settings)
    pid = PID(
        gains.kp,
        gains.ki,
        gains.kd,
        21.0,
        limits=Limits((0.0, settings.max_power)),
        form=Form(derivative_filter=gains.derivative_filter),
    )
    times, values = [], []
    measurement = closed_loop.measure()
    for i in range(720):
        times.append(i * 5.0)
        values.append(measurement)
        measurement = closed_loop.step(pid.update(measurement, i * 5.0), 5.0)
    response = step_response(times, values, step_time=0.0, before=15.0, after=21.0)
    assert response.overshoot <= 0.10
    assert response.settling_time is not None


def test_identify_refuses_a_relay_around_the_resting_point() -> None:
    """Around the temperature the room rested at, the relay's averages equal the resting
    point's: the static gain cannot be measured, and it says so."""
    plant = RoomPlant(ROOM)  # at rest at 21
    experiment = RelayExperiment(21.0, bias=1500.0, amplitude=1500.0)
    result = relay_tune(plant.step, plant.measure(), experiment, sample_time=5.0, max_time=1e5)
    with pytest.raises(Invalid, match="another setpoint"):
        identify(result, output=ROOM.steady_power(21.0), measurement=21.0)
