"""bench/control_autoscaler.py: `--trace FILE` runs a day from outside (one clear error line
for a bad file), and its pieces on short days: a flash crowd is served sooner by the
predictive algorithm than by the HPA, whose scale-down window the simulation keeps. Timing decides
nothing here; the figures are the bench's."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "control_autoscaler.py"
DAY = 86_400


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCH.parent))
    try:
        import control_autoscaler

        yield control_autoscaler
    finally:
        sys.path.remove(str(BENCH.parent))


def run_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["5"] * 100, "want 86400 rows (one a second), got 100"),
        (["5"] * 99 + ["many"] + ["5"] * (DAY - 100), "row 100: 'many' is not a number"),
        (["5"] * (DAY - 1) + ["-1"], "row 86400: want a count >= 0, got '-1'"),
    ],
)
def test_a_bad_trace_is_refused_in_one_line(tmp_path: Path, rows: list[str], message: str) -> None:
    trace = tmp_path / "day.csv"
    trace.write_text("\n".join(rows) + "\n")
    done = run_bench("--trace", str(trace))
    assert done.returncode == 2
    assert done.stderr == f"error: {trace}: {message}\n"
    assert done.stdout == ""


def test_a_missing_trace_is_refused_in_one_line(tmp_path: Path) -> None:
    done = run_bench("--trace", str(tmp_path / "nowhere.csv"))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {tmp_path / 'nowhere.csv'}: cannot read:")
    assert done.stderr.count("\n") == 1


def test_the_tuning_seeds_are_not_reported() -> None:
    done = run_bench("--seeds", "1", "100")
    assert done.returncode == 2
    assert "seen by the tuning" in done.stderr


def test_a_trace_is_reported_against_the_hpa(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    rates = np.full(DAY, 40.0)
    rates[30_000:30_600] = 400.0  # a crowd of x10 for ten minutes
    trace = tmp_path / "day.csv"
    trace.write_text("arrivals\n" + "\n".join(str(n) for n in rng.poisson(rates)) + "\n")
    done = run_bench("--trace", str(trace))
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.splitlines()[-1])
    day = figures["autoscaler_traces"][str(trace)]
    assert set(day) >= {
        "replica_minutes_ratio",
        "slo_violation_minutes_ratio",
        "scale_events",
        "reaction_s",
        "metric_only",
    }
    assert day["steps_up"] >= 1
    assert set(day["scale_events"]) == {"hpa", "predictive"}
    assert isinstance(figures["missed"], list)


def test_a_flash_crowd_is_served_sooner_than_by_the_hpa(bench: ModuleType) -> None:
    rng = np.random.default_rng(3)
    rates = np.full(2 * 3600, 30.0)
    ramp = np.minimum(1.0, (np.arange(600) + 1) / 30)
    rates[3600:4200] *= 1 + 9 * ramp  # x10 in 30 s, for ten minutes
    arrivals = rng.poisson(rates).astype(float)
    steps = bench.steps_up(arrivals)
    assert len(steps) == 1
    assert 3600 <= steps[0][0] <= 3630
    hpa = bench.simulate(arrivals, bench.Hpa())
    ours = bench.simulate(arrivals, bench.Predictive())
    assert bench.reaction_s(steps, ours.ready) < bench.reaction_s(steps, hpa.ready)
    assert ours.replica_minutes < hpa.replica_minutes


def test_the_slo_allows_less_than_the_target_and_the_bench_says_how_much(
    bench: ModuleType,
) -> None:
    """In the bench's fluid queue nothing waits below 100 % busy: a clairvoyant scaler
    holding only the SLO (`at_limit`) pays less than one holding the target
    (`at_target`), and a day's figures report both floors against the HPA."""
    rng = np.random.default_rng(11)
    arrivals = rng.poisson(np.full(DAY, 70.0)).astype(float)
    assert bench.at_limit(arrivals) < bench.at_target(arrivals)
    assert bench.at_limit(arrivals) >= 7 * DAY / 60  # at least 70 / 10 replicas a minute
    figures, _ = bench.day_figures(arrivals)
    assert (
        0 < figures["replica_minutes_at_limit_ratio"] < figures["replica_minutes_at_target_ratio"]
    )


def test_the_hpa_in_the_simulation_keeps_its_scale_down_window(bench: ModuleType) -> None:
    """After a crowd the HPA keeps its highest count for the 300 s of its window."""
    rates = np.full(3600, 20.0)
    rates[600:900] = 400.0
    hpa = bench.simulate(np.asarray(rates), bench.Hpa())
    ready = hpa.ready.astype(int)
    peak = int(np.argmax(ready))
    assert ready[peak] > 20
    assert (ready[peak : peak + 300] == ready[peak]).all()
