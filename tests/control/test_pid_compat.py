"""`SimplePidCompatible` computes what `simple_pid.PID` computes, configured the same
way and fed the same random sequences (measurements, time steps including zero, setpoint
and limit changes, auto/manual switches, resets)."""

from __future__ import annotations

import math
import random

import pytest
import simple_pid
from simple_pid_compat import SimplePidCompatible


class FakeTime:
    """simple-pid's `time_fn`: returns what the test set."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def _wrap(error: float) -> float:
    return (error + math.pi) % (2 * math.pi) - math.pi


def _close(ours: float, theirs: float) -> bool:
    return abs(ours - theirs) <= 1e-9 * max(1.0, abs(theirs))


def _configuration(rng: random.Random) -> dict[str, object]:
    lo = rng.choice([None, rng.uniform(-50, 0)])
    hi = rng.choice([None, rng.uniform(0, 50)])
    return {
        "kp": rng.uniform(0, 5),
        "ki": rng.uniform(0, 2),
        "kd": rng.choice([0.0, rng.uniform(0, 1)]),
        "setpoint": rng.uniform(-10, 10),
        "sample_time": rng.choice([None, 0.01, 0.5]),
        "output_limits": (lo, hi),
        "proportional_on_measurement": rng.random() < 0.5,
        "differential_on_measurement": rng.random() < 0.5,
        "error_map": rng.choice([None, _wrap]),
        "starting_output": rng.uniform(-5, 5),
    }


def _pair(
    config: dict[str, object], start: float
) -> tuple[SimplePidCompatible, simple_pid.PID, FakeTime]:
    clock = FakeTime(start)
    kp, ki, kd, setpoint = (config[k] for k in ("kp", "ki", "kd", "setpoint"))
    options = {k: v for k, v in config.items() if k not in ("kp", "ki", "kd", "setpoint")}
    theirs = simple_pid.PID(kp, ki, kd, setpoint, time_fn=clock, **options)
    ours = SimplePidCompatible(kp, ki, kd, setpoint, start_time=start, **options)  # type: ignore[arg-type]
    return ours, theirs, clock


def _run(seed: int, steps: int = 400) -> int:
    """Feed one random sequence to both; return how many outputs were compared."""
    rng = random.Random(seed)
    config = _configuration(rng)
    start = rng.uniform(0, 1000)
    ours, theirs, clock = _pair(config, start)
    measurement = rng.uniform(-10, 10)
    compared = 0
    for step in range(steps):
        roll = rng.random()
        if roll < 0.03:
            setpoint = rng.uniform(-10, 10)
            ours.setpoint = theirs.setpoint = setpoint
        elif roll < 0.05:
            limits = (
                rng.choice([None, rng.uniform(-50, 0)]),
                rng.choice([None, rng.uniform(0, 50)]),
            )
            ours.output_limits = theirs.output_limits = limits
        elif roll < 0.07:
            gains = (rng.uniform(0, 5), rng.uniform(0, 2), rng.uniform(0, 1))
            ours.tunings = theirs.tunings = gains
        elif roll < 0.09:
            enabled = rng.random() < 0.5
            last = rng.choice([None, rng.uniform(-10, 10)])
            ours.set_auto_mode(enabled, last)
            theirs.set_auto_mode(enabled, last)
        elif roll < 0.10:
            ours.reset()
            theirs.reset()
        dt = rng.choice([0.0, 1e-6, rng.uniform(0.0, 1.0), rng.uniform(0.0, 0.02)])
        clock.now += dt
        measurement += rng.gauss(0, 1)
        got = ours.update(measurement, clock.now)
        want = theirs(measurement)
        assert ours.auto_mode == theirs.auto_mode
        if want is None:  # manual mode before any output: simple-pid has none to give
            continue
        assert _close(got, want), f"seed {seed} step {step}: ours {got!r}, simple-pid {want!r}"
        for mine, its in zip(ours.components, theirs.components, strict=True):
            assert _close(mine, its), (
                f"seed {seed} step {step}: {ours.components} vs {theirs.components}"
            )
        compared += 1
    return compared


@pytest.mark.parametrize("seed", range(60))
def test_matches_simple_pid_on_random_sequences(seed: int) -> None:
    assert _run(seed) > 100


def test_the_random_sequences_cover_every_option() -> None:
    """The seeds above exercise each option both ways (else the comparison proves little)."""
    seen: set[tuple[str, object]] = set()
    for seed in range(60):
        config = _configuration(random.Random(seed))
        seen.add(("pom", config["proportional_on_measurement"]))
        seen.add(("dom", config["differential_on_measurement"]))
        seen.add(("map", config["error_map"] is None))
        seen.add(("sample", config["sample_time"]))
        seen.add(("lo", config["output_limits"][0] is None))  # type: ignore[index]
        seen.add(("hi", config["output_limits"][1] is None))  # type: ignore[index]
    assert len(seen) == 2 + 2 + 2 + 3 + 2 + 2


def test_zero_time_step_gives_simple_pids_huge_derivative() -> None:
    """Compatibility includes the fault: dt = 0 is taken as 1e-16."""
    config: dict[str, object] = {
        "kp": 0.0,
        "ki": 0.0,
        "kd": 1.0,
        "setpoint": 0.0,
        "sample_time": None,
    }
    ours, theirs, clock = _pair(config, 5.0)
    clock.now = 6.0
    assert ours.update(1.0, clock.now) == theirs(1.0)
    assert ours.update(2.0, clock.now) == theirs(2.0) == pytest.approx(-1e16)
