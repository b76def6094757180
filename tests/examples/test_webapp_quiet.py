"""examples/webapp under `setpoint up`, converged, with a real PostgreSQL: the engine is
quiet. Readiness probes run every second on db and every web replica, yet results that do
not change write nothing, so the store's revision grows by about one a second at most
(event aggregation, lease renewals) over a measured window.

The revision is read from the store's SQLite file (the `log` table's sequence), the way
another process sees it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from webapp_engine import Engine, ready_line, stage_webapp
from webapp_support import postgres_scratch_dir, processes_under, require_postgresql

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

WINDOW_S = 20.0
"""How long the converged engine is watched."""
WRITES_PER_S = 1.0
"""The most writes a second a converged engine may make."""


def revision(db: Path) -> int:
    """The store's revision: the last revision its log has handed out."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as conn:
        row = conn.execute(
            "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'log'), 0)"
        ).fetchone()
    return int(row[0])


def test_a_converged_webapp_writes_at_most_about_once_a_second() -> None:
    require_postgresql()
    with postgres_scratch_dir() as base:
        staged = stage_webapp(base)
        engine = Engine(base, staged.manifest)
        try:
            engine.expect(ready_line("Deployment/web"), "web Ready", within=180)
            db = base / ".setpoint" / "state.db"
            # A measurement over a window of wall time (the engine runs on it), not a wait
            # for something: what is checked is a count, which a slow machine only lowers.
            start, first = time.monotonic(), revision(db)
            time.sleep(WINDOW_S)
            elapsed, writes = time.monotonic() - start, revision(db) - first
            assert writes <= WRITES_PER_S * elapsed + 2, (
                f"{writes} writes in {elapsed:.1f}s; last lines: {engine.seen[-10:]}"
            )
            code, err = engine.stop()
            assert code == 0, err
        finally:
            engine.kill()
            for pid in processes_under(base):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
