"""Benchmark: feedback control on simulated plants (fixed seeds), and the Autoscaler's figures.

Figures (the last stdout line is one JSON object; progress goes to stderr):

* `pid_step_ratio_vs_simple_pid`: the cost of one controller step, ours over
  simple-pid's, same configuration (gains, setpoint, output limits, no sample time),
  timed in the same run: `PID.update(measurement, now)` against simple-pid's fastest
  path, `pid(measurement, dt=...)` (no clock read). Median of `ROUNDS` rounds of
  `STEPS` calls, the two taking turns (target <= 1.0). `pid_step_ns` and
  `simple_pid_step_ns` are the medians per call.
* `thermostat_iae_autotuned`, `thermostat_iae_zn_manual`: integral of absolute error
  (degree-seconds) over two simulated hours of the default room (`RoomSchema()`, 0.02
  degrees of sensor noise, seed 1, a sample every 5 s): a setpoint step from 15 to 21
  degrees at t = 0, and at t = 3600 s a window opened (heat loss x 1.5) for good.
  *autotuned*: what `setpoint tune --plant sim` does: a relay experiment on the room,
  then the `min-iae` rule (a first-order-plus-dead-time model fitted to the relay
  record, gains chosen on the model). *zn_manual*: Ziegler-Nichols by hand: the exact
  ultimate gain and period of the room (what raising a P-only gain until the loop
  oscillates finds, at best; computed from the model, which a person does not have)
  through the Ziegler-Nichols table. Both use the same PID (clamping anti-windup, the
  derivative filtered at Td / 10). Target: autotuned <= zn_manual with
  `thermostat_overshoot_autotuned` <= 0.10 (overshoot of the step, a fraction).
  `thermostat_overshoot_zn_manual`, `thermostat_settling_s_*` (2% band) and
  `thermostat_iae_relay_zn` (relay Ku and Tu through the Ziegler-Nichols table) say more;
  `relay_ku`, `relay_tu_s`, `exact_ku`, `exact_tu_s` how close the relay came.
* Every figure of `bench/control_autoscaler.py` (its `measure()`), merged in.

`missed` names the targets this run did not meet. Prints figures only.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import simple_pid

from setpoint.control.pid import PID, Form, Limits
from setpoint.control.plant import RoomPlant, RoomSchema, RoomSettings
from setpoint.control.tuning import (
    MIN_IAE,
    Gains,
    RelayExperiment,
    gains_for,
    identify,
    integral_absolute_error,
    min_iae_gains,
    relay_tune,
    step_response,
)

STEPS = 100_000
ROUNDS = 7
SAMPLE = 5.0
HORIZON = 7200.0
WINDOW_AT = 3600.0
ROOM = RoomSchema(noise=0.02, seed=1).settings()


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def pid_step_ratio() -> dict[str, float]:
    """Per-call cost of ours against simple-pid's, same configuration, taking turns."""
    gains = (1.2, 0.4, 0.05)
    measurements = [20.0 + math.sin(i / 50.0) for i in range(1000)]
    ours_ns: list[float] = []
    theirs_ns: list[float] = []
    for _ in range(ROUNDS):
        ours = PID(*gains, setpoint=21.0, limits=Limits((0.0, 100.0)))
        theirs = simple_pid.PID(*gains, setpoint=21.0, output_limits=(0.0, 100.0), sample_time=None)
        update = ours.update
        start = time.perf_counter_ns()
        now = 0.0
        for i in range(STEPS):
            now += 0.01
            update(measurements[i % 1000], now)
        ours_ns.append((time.perf_counter_ns() - start) / STEPS)
        start = time.perf_counter_ns()
        for i in range(STEPS):
            theirs(measurements[i % 1000], 0.01)
        theirs_ns.append((time.perf_counter_ns() - start) / STEPS)
    ratios = [a / b for a, b in zip(ours_ns, theirs_ns, strict=True)]
    return {
        "pid_step_ratio_vs_simple_pid": round(statistics.median(ratios), 3),
        "pid_step_ns": round(statistics.median(ours_ns), 1),
        "simple_pid_step_ns": round(statistics.median(theirs_ns), 1),
    }


def exact_ultimate(settings: RoomSettings) -> tuple[float, float]:
    """Ku and Tu of the room's model: where atan(w T) + w L = pi."""
    t, dead = settings.time_constant, settings.dead_time
    lo, hi = 1e-9, math.pi / dead
    for _ in range(200):
        w = (lo + hi) / 2
        lo, hi = (w, hi) if math.atan(w * t) + w * dead < math.pi else (lo, w)
    return math.sqrt(1 + (w * t) ** 2) / settings.gain, 2 * math.pi / w


def scenario(gains: Gains) -> dict[str, float]:
    """The setpoint step and the window, closed around the room with `gains`."""
    plant = RoomPlant(ROOM)
    pid = PID(
        gains.kp,
        gains.ki,
        gains.kd,
        21.0,
        limits=Limits((0.0, ROOM.max_power)),
        form=Form(derivative_filter=gains.derivative_filter),
    )
    times: list[float] = []
    values: list[float] = []
    measurement = plant.measure()
    for k in range(int(HORIZON / SAMPLE)):
        now = k * SAMPLE
        if now == WINDOW_AT:
            plant.open_window(1.5)
        times.append(now)
        values.append(measurement)
        measurement = plant.step(pid.update(measurement, now), SAMPLE)
    before = int(WINDOW_AT / SAMPLE)
    response = step_response(
        times[:before], values[:before], step_time=0.0, before=ROOM.initial, after=21.0
    )
    return {
        "iae": round(integral_absolute_error(times, [21.0] * len(times), values), 1),
        "overshoot": round(response.overshoot, 4),
        "settling_s": -1.0 if response.settling_time is None else response.settling_time,
    }


def thermostat() -> dict[str, Any]:
    progress("relay experiment on the simulated room ...")
    plant = RoomPlant(ROOM)
    experiment = RelayExperiment(21.0, bias=1500.0, amplitude=1500.0, hysteresis=0.05)
    result = relay_tune(plant.step, plant.measure(), experiment, sample_time=SAMPLE, max_time=1e5)
    model = identify(result, output=ROOM.steady_power(ROOM.initial), measurement=ROOM.initial)
    progress(f"  Ku {result.ku:.1f}, Tu {result.tu:.1f} s; model {model}")
    autotuned = min_iae_gains(
        model,
        result.ku,
        result.tu,
        output_limits=(0.0, ROOM.max_power),
        operating_output=result.mean_output,
        sample_time=SAMPLE,
    )
    exact_ku, exact_tu = exact_ultimate(ROOM)
    manual = gains_for(exact_ku, exact_tu, "ziegler-nichols")
    relay_zn = gains_for(result.ku, result.tu, "ziegler-nichols")
    figures: dict[str, Any] = {
        "relay_ku": round(result.ku, 1),
        "relay_tu_s": round(result.tu, 1),
        "exact_ku": round(exact_ku, 1),
        "exact_tu_s": round(exact_tu, 1),
    }
    for name, gains in (("autotuned", autotuned), ("zn_manual", manual), ("relay_zn", relay_zn)):
        progress(f"closed loop, {name}: {gains}")
        run = scenario(gains)
        figures[f"thermostat_iae_{name}"] = run["iae"]
        figures[f"thermostat_overshoot_{name}"] = run["overshoot"]
        figures[f"thermostat_settling_s_{name}"] = run["settling_s"]
    figures["thermostat_autotune_rule"] = MIN_IAE
    return figures


def autoscaler() -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import control_autoscaler  # type: ignore[import-not-found]
    except ImportError as exc:
        progress(f"bench/control_autoscaler.py not importable: {exc}")
        return {"autoscaler_error": str(exc)}
    progress("autoscaler figures (bench/control_autoscaler.py) ...")
    figures: dict[str, Any] = control_autoscaler.measure()
    return figures


def main() -> None:
    progress(f"PID step cost, {ROUNDS} rounds of {STEPS} calls ...")
    figures: dict[str, Any] = pid_step_ratio()
    progress(f"  {figures}")
    figures.update(thermostat())
    missed = []
    if figures["pid_step_ratio_vs_simple_pid"] > 1.0:
        missed.append("pid_step_ratio_vs_simple_pid")
    if figures["thermostat_iae_autotuned"] > figures["thermostat_iae_zn_manual"]:
        missed.append("thermostat_iae_autotuned")
    if figures["thermostat_overshoot_autotuned"] > 0.10:
        missed.append("thermostat_overshoot_autotuned")
    scaler = autoscaler()
    missed += [str(m) for m in scaler.pop("missed", [])]
    figures.update(scaler)
    figures["missed"] = missed
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
