"""bench/api.py runs (`--quick`): its last line is one JSON object with every figure, and the
watch fan-out lost nothing. Timing decides nothing here; the figures are the bench's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "api.py"
KEYS = (
    "api_writes_per_s",
    "ratio_api_vs_store",
    "stack_writes_per_s",
    "watch_fanout_lost",
    "watch_fanout_p99_ms",
    "kubectl_get_10k_s",
    "kubectl_get_table_10k_s",
    "kubectl_get_json_10k_s",
    "python_client_list_10k_s",
)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_quick_bench_prints_its_figures_and_loses_no_event() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick"],
        capture_output=True,
        text=True,
        env=env,
        timeout=540,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert all(key in result for key in KEYS), result
    assert set(result["stack_writes_per_s"]) == {"uvicorn", "hypercorn"}
    assert result["watch_fanout_lost"] == 0
