"""bench/explain_live.py --quick runs end to end on the real webapp: every fault kind is
injected, seen failing, explained through the CLI and healed, and the last stdout line is
the JSON the issue asks for. It checks that the bench works, not the figures it measures.

Slow (about seven minutes: PostgreSQL, two stacks, fourteen live faults and a start-up);
needs PostgreSQL's binaries, and root for the store's tmpfs (without it the store is a plain
directory).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "explain_live.py"
PG = ROOT / "examples" / "webapp" / "pg.py"
KINDS = {
    "web_bad_config",
    "db_stopped_or_moved",
    "port_taken",
    "bad_migration",
    "missing_binary",
    "readiness_404",
    "dependency_changed",
    "probe_too_tight",
    "two_faults",
    "memory_limit_lowered",
    "secret_changed",
    "env_file_edited",
    "service_selector",
    "autoscaler_min",
    "db_init_startup",
}


@pytest.mark.slow
@pytest.mark.timeout(1500)  # 7 min on a shared machine; the suite's default is 120 s
def test_quick_run_scores_every_fault_kind() -> None:
    found = subprocess.run(
        [sys.executable, str(PG), "bin", "postgres"], capture_output=True, text=True, check=False
    )
    if found.returncode != 0:
        pytest.fail(found.stderr.strip(), pytrace=False)
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--seed", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=1400, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "error" not in result, done.stderr[-3000:]
    assert result["not_observed"] == [], done.stderr[-3000:]
    assert set(result["per_fault"]) == KINDS
    assert result["per_fault"]["db_init_startup"]["count"] == 2
    for key in ("live_ac1", "live_ac3", "startup_ac1", "healthy_says_nothing_wrong"):
        assert 0.0 <= result[key] <= 1.0
    assert result["healthy_calls"] > 0
    assert result["explain_ms_p95"] > 0
    assert result["seed"] == 1
    assert result["worst_fault"]["kind"] in KINDS
