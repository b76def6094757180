"""The Thermostat controller in a manager, on an in-memory store, with a manual clock:
time moves only when the test says, and every sample is one reconcile."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.control.thermostat import THERMOSTAT, ThermostatController, setup, step_summary
from setpoint.errors import Invalid
from setpoint.model import Object, get_condition
from setpoint.runtime.reconciler import Request
from setpoint.testing import Harness, ManualClock, reconcile_until_stable

GAINS = {"kp": 700.0, "ki": 5.0, "kd": 20000.0, "derivativeFilter": 20.0}


def thermostat(name: str = "living-room", **spec: Any) -> Object:
    body: dict[str, Any] = {
        "target": 21.0,
        "pid": GAINS,
        "tolerance": 0.3,
        "samplesWithinTolerance": 5,
        "sampleSeconds": 1.0,
        "plant": {"timeScale": 10.0, "noise": 0.02, "seed": 3},
    }
    body.update(spec)
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Thermostat",
        "metadata": {"name": name, "namespace": "default"},
        "spec": body,
    }


async def _get(harness: Harness, name: str = "living-room") -> Object:
    return await harness.store.get(THERMOSTAT.api_version, THERMOSTAT.kind, name, "default")


async def _samples(harness: Harness, clock: ManualClock, count: int) -> None:
    for _ in range(count):
        clock.advance(1.0)
        await reconcile_until_stable(harness)


async def _until_ready(harness: Harness, clock: ManualClock, limit: int) -> int:
    for sample in range(limit):
        obj = await _get(harness)
        ready = get_condition(obj.get("status"), "Ready")
        if ready is not None and ready["status"] == "True":
            return sample
        clock.advance(1.0)
        await reconcile_until_stable(harness)
    raise AssertionError(f"not Ready after {limit} samples: {obj['status']}")


async def test_converges_to_the_target_and_reports_ready() -> None:
    clock = ManualClock()
    async with Harness(clock=clock) as harness:
        setup(harness.manager)
        await harness.start()
        await harness.store.create(thermostat())
        await reconcile_until_stable(harness)
        first = (await _get(harness))["status"]
        assert first["temperature"] == pytest.approx(15.0, abs=0.1)
        assert get_condition(first, "Ready")["reason"] == "Settling"  # type: ignore[index]
        await _until_ready(harness, clock, 200)
        status = (await _get(harness))["status"]
        assert abs(status["temperature"] - 21.0) <= 0.3
        assert status["samplesWithinTolerance"] >= 5
        assert status["output"] > 0.0  # the heater holds the room above the outside's 10
        assert set(status["components"]) == {"p", "i", "d"}
        assert get_condition(status, "Ready")["reason"] == "WithinTolerance"  # type: ignore[index]


async def test_a_new_target_is_a_new_step_and_describe_reports_it() -> None:
    clock = ManualClock()
    async with Harness(clock=clock) as harness:
        setup(harness.manager)
        await harness.start()
        await harness.store.create(thermostat())
        await reconcile_until_stable(harness)
        await _until_ready(harness, clock, 200)
        obj = await _get(harness)
        obj["spec"]["target"] = 19.0
        await harness.store.update(obj)
        await reconcile_until_stable(harness)
        await _samples(harness, clock, 150)
        obj = await _get(harness)
        step = obj["status"]["step"]
        assert (step["before"], step["after"]) == (21.0, 19.0)
        fields = dict(step_summary(obj, clock.now()))
        assert fields["Last Step"].startswith("21 -> 19")
        assert fields["Overshoot"].endswith("%")
        assert fields["Settling Time"].endswith("s")  # settled within the 1500 s simulated
        assert abs(obj["status"]["temperature"] - 19.0) <= 0.3


async def test_manual_mode_holds_the_output_and_returns_bumplessly() -> None:
    clock = ManualClock()
    async with Harness(clock=clock) as harness:
        setup(harness.manager)
        await harness.start()
        await harness.store.create(thermostat(mode="manual", manualOutput=1200.0))
        await reconcile_until_stable(harness)
        await _samples(harness, clock, 30)
        status = (await _get(harness))["status"]
        assert status["output"] == 1200.0
        assert get_condition(status, "Ready")["reason"] == "Manual"  # type: ignore[index]
        obj = await _get(harness)
        obj["spec"]["mode"] = "auto"
        await harness.store.update(obj)
        await reconcile_until_stable(harness)
        # The spec change is reconciled at once (no time has passed): the PID takes over
        # from 1200 W, not from zero.
        status = (await _get(harness))["status"]
        assert status["output"] == pytest.approx(1200.0, abs=50.0)
        # The step `describe` reports is the one from where manual mode left the room.
        assert status["step"]["before"] == pytest.approx(status["temperature"], abs=0.1)
        assert status["step"]["after"] == 21.0


async def test_a_restarted_controller_resumes_from_the_status() -> None:
    clock = ManualClock()
    async with Harness(clock=clock) as harness:
        setup(harness.manager)
        await harness.start()
        await harness.store.create(thermostat())
        await reconcile_until_stable(harness)
        await _until_ready(harness, clock, 200)
        await harness.stop()  # the engine goes away; the object and its status stay
        before = (await _get(harness))["status"]
        resumed = ThermostatController(harness.store, clock=clock)  # a new engine's
        await resumed.reconcile(Request("living-room", "default"))
        after = (await _get(harness))["status"]
    # The room did not fall back to its initial 15 degrees, nor the heater to zero.
    assert after["temperature"] == pytest.approx(before["temperature"], abs=0.1)
    assert after["output"] == pytest.approx(before["output"], rel=0.05)
    assert after["step"] == before["step"]


def test_a_spec_without_gains_is_refused_naming_the_field() -> None:
    obj = thermostat()
    del obj["spec"]["pid"]
    with pytest.raises(Invalid) as info:
        THERMOSTAT.validate(obj)
    assert info.value.field == "spec.pid"
