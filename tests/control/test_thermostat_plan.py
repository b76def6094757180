"""The Thermostat's plan, pure: samples at intervals, target changes and mode switches that
Hypothesis picks, each planned from what the previous one kept; the plan never changes what
it observed, and what it decides stays within the spec."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.control.thermostat import (
    THERMOSTAT,
    TRACE_POINTS,
    Observed,
    Plan,
    ThermostatLoop,
    plan,
    spec_of,
)
from setpoint.model import get_condition

T0 = 1_700_000_000.0
GAINS = {"kp": 700.0, "ki": 5.0, "kd": 20000.0, "derivativeFilter": 20.0}


def spec(**fields: Any) -> Any:
    body: dict[str, Any] = {
        "target": 21.0,
        "pid": GAINS,
        "tolerance": 0.3,
        "plant": {"timeScale": 10.0, "noise": 0.02, "seed": 3},
    }
    body.update(fields)
    return spec_of({"spec": body})


def sample(
    thermostat: Any, status: dict[str, Any], loop: ThermostatLoop | None, elapsed: float
) -> Plan:
    observed = Observed("uid-1", 1, status, loop, elapsed)
    before = copy.deepcopy(status), _state(loop)
    decided = plan(thermostat, observed, now=T0 + elapsed)
    assert (observed.status, _state(observed.loop)) == before, "the plan changed its input"
    again = plan(thermostat, Observed("uid-1", 1, copy.deepcopy(status), loop, elapsed), now=T0)
    assert again.status["temperature"] == decided.status["temperature"]
    assert again.status["output"] == decided.status["output"]
    return decided


def _state(loop: ThermostatLoop | None) -> Any:
    if loop is None:
        return None
    return (
        loop.plant.temperature,
        loop.plant.time,
        tuple(loop.plant._history),  # type: ignore[attr-defined]
        loop.pid.components,
        loop.output,
        loop.within,
        repr(loop.trace),
        loop.step,
    )


steps = st.lists(
    st.tuples(
        st.floats(0.0, 5.0, allow_nan=False),  # real seconds since the last sample
        st.sampled_from([None, 19.0, 21.0, 23.0]),  # a new target, or none
        st.sampled_from([None, "auto", "manual"]),  # a mode switch, or none
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=40, deadline=None)
@given(steps=steps)
def test_every_sample_stays_within_the_spec(
    steps: list[tuple[float, float | None, str | None]],
) -> None:
    fields: dict[str, Any] = {"manualOutput": 900.0}
    status: dict[str, Any] = {}
    loop: ThermostatLoop | None = None
    for elapsed, target, mode in steps:
        if target is not None:
            fields["target"] = target
        if mode is not None:
            fields["mode"] = mode
        thermostat = spec(**fields)
        decided = sample(thermostat, status, loop, elapsed)
        new = dict(decided.status)
        assert decided.requeue_after == thermostat.sample_seconds
        assert 0.0 <= new["output"] <= thermostat.plant.max_power
        if thermostat.mode == "manual":
            assert new["output"] == 900.0
        assert len(new["trace"]) <= TRACE_POINTS
        assert new["step"]["after"] == thermostat.target
        ready = get_condition(new, "Ready")
        assert ready is not None
        wanted = thermostat.samples_within_tolerance
        assert (ready["status"] == "True") == (
            thermostat.mode == "auto" and new["samplesWithinTolerance"] >= wanted
        )
        THERMOSTAT.validate_status(new)  # what it writes is what its schema allows
        status, loop = new, decided.loop


def test_a_new_loop_resumes_from_the_status_bumplessly() -> None:
    thermostat = spec()
    status: dict[str, Any] = {}
    loop = None
    for _ in range(200):
        decided = sample(thermostat, status, loop, 1.0)
        status, loop = dict(decided.status), decided.loop
    resumed = sample(thermostat, status, None, 0.0)  # an engine that restarted
    assert abs(resumed.status["temperature"] - status["temperature"]) < 0.1
    assert abs(resumed.status["output"] - status["output"]) <= 0.05 * status["output"]
    assert resumed.status["step"] == status["step"]


def test_the_specs_defaults_are_the_schemas() -> None:
    thermostat = spec_of({"spec": {"target": 20.0, "pid": {"kp": 1.0}}})
    assert thermostat.tolerance == 0.5
    assert thermostat.samples_within_tolerance == 5
    assert thermostat.sample_seconds == 1.0
    assert thermostat.plant.settings().time_constant == 600.0
    assert thermostat.plant.time_scale == 1.0
    assert thermostat.plant.leak == 1.0
