"""bench/scale.py runs at a small size: its last line is one JSON object with every figure
of issue 27's scale run, and no watcher lost an acknowledged write. Timing decides nothing
here; the figures are the bench's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from api_kit import kubectl_binary

BENCH = Path(__file__).resolve().parents[2] / "bench" / "scale.py"
SMALL = ["--kinds", "3", "--objects-per-kind", "5", "--steady-s", "1", "--rate", "30"]
SMALL += ["--profile-s", "1", "--procs", "3", "--idle-s", "1"]
KEYS = (
    "load_objects_per_s",
    "mutating_p99_ms",
    "watch_p99_ms",
    "watch_lost",
    "kubectl_api_resources_cold_s",
    "kubectl_get_kind_s",
    "server_rss_mb",
    "server_rss_after_watchers_mb",
    "db_mb",
    "live_mb",
    "procs_up_all_ready_s",
    "engine_idle_cpu_pct",
    "engine_rss_mb",
    "per_child_overhead_pss_mb",
    "missed",
    "held_back_by",
)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_small_scale_run_prints_every_figure_and_loses_no_event() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    kubectl = Path(kubectl_binary())  # the pinned one (or skipped), first on the PATH
    env["PATH"] = f"{kubectl.parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        [sys.executable, str(BENCH), *SMALL],
        capture_output=True,
        text=True,
        env=env,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert all(key in result for key in KEYS), result
    assert result["watch_lost"] == 0
    assert result["load_objects"] == 15
    assert result["procs_ready"] == 3
    assert Path(result["server_profile"]).is_file()
    Path(result["server_profile"]).unlink()
