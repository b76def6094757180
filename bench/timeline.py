"""Timeline benchmark: append throughput, and query latency in a 1,000,000-entry timeline.

Run with `uv run python bench/timeline.py` (about a minute). Progress goes to stderr;
the last stdout line is one JSON object. Figures are medians; baselines are measured
in the same run, on the same file.

What is measured, and the key it is reported under:

* `append_per_s`: entries appended through `Timeline.append_many` in batches of 500
  (one transaction each, WAL, synchronous=NORMAL, as the recorder writes), while
  filling a fresh file with ENTRIES entries: OBJECTS objects, entries spread evenly
  over SPAN_DAYS days, types and sizes like a recorder's (changes with a diff, log
  lines, conditions, exits). `append_cpu_us_per_entry` is this process's CPU per
  entry (a shared machine moves it less than the wall clock), `db_bytes_per_entry`
  the file size per entry.
* `window_10m_ms`: `query(since=t, until=t+600)` for QUERIES random 10-minute windows
  (about ENTRIES / (SPAN_DAYS * 144) entries each); `window_10m_entries` is the
  median count returned. `window_10m_noindex_ms` is the same SQL with the ts index
  disabled (`NOT INDEXED`): the baseline a full scan costs.
* `object_history_ms`: `query(object=...)` of one random object's whole history
  (ENTRIES / OBJECTS entries); `object_window_1h_ms` one object over one hour.
* `recorder_overhead`: `store.update_status` throughput on a SQLite store
  (`?sync=off`, so only CPU counts) with and without a `Recorder` on the same file
  recording every update: `updates_per_s_without`, `updates_per_s_with`, their ratio.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from setpoint.insight.recorder import Recorder
from setpoint.insight.timeline import Timeline
from setpoint.model import Kind, Registry, Schema
from setpoint.store import open_store

ENTRIES = 1_000_000
OBJECTS = 1_000
SPAN_DAYS = 7
BATCH = 500
QUERIES = 200
UPDATES = 2_000
T0 = 1_700_000_000.0


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def entry(i: int, rng: random.Random) -> dict[str, Any]:
    ts = T0 + i * (SPAN_DAYS * 86400.0 / ENTRIES)
    ref = {"kind": "Process", "name": f"p{rng.randrange(OBJECTS)}", "namespace": "default"}
    pick = rng.random()
    if pick < 0.5:
        return {"ts": ts, "type": "log", "object": ref, "line": f"GET /x {i} 200 in 3ms"}
    if pick < 0.75:
        cond = {"type": "Ready", "status": "False", "reason": "ReadinessProbeFailed"}
        return {"ts": ts, "type": "condition", "object": ref, "condition": cond}
    if pick < 0.95:
        diff = {"spec.args[2]": [f"--max-conn={i}", f"--max-conn={i + 1}"]}
        return {"ts": ts, "type": "change", "object": ref, "diff": diff, "actor": "alice@h"}
    return {"ts": ts, "type": "exit", "object": ref, "exitCode": 1, "signal": None}


def fill(timeline: Timeline) -> tuple[float, float]:
    """Entries appended per second (wall clock), and CPU microseconds per entry."""
    rng = random.Random(1)
    started, cpu = time.perf_counter(), time.process_time()
    for start in range(0, ENTRIES, BATCH):
        timeline.append_many(entry(i, rng) for i in range(start, start + BATCH))
        if start % 200_000 == 0:
            progress(f"  {start:,} entries")
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return ENTRIES / wall, cpu / ENTRIES * 1e6


def timed(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return (time.perf_counter() - started) * 1000.0, result


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples), 3)


def queries(timeline: Timeline, path: Path) -> dict[str, Any]:
    import sqlite3

    rng = random.Random(2)
    span = SPAN_DAYS * 86400.0
    windows, counts, scans, histories, hours = [], [], [], [], []
    raw = sqlite3.connect(path)
    scan = "SELECT body FROM timeline NOT INDEXED WHERE ts >= ? AND ts < ? ORDER BY ts, id"
    for i in range(QUERIES):
        t = T0 + rng.random() * (span - 600)
        ms, found = timed(lambda t=t: timeline.query(since=t, until=t + 600))
        windows.append(ms)
        counts.append(len(found))
        if i < 10:
            scans.append(timed(lambda t=t: raw.execute(scan, (t, t + 600)).fetchall())[0])
        about = {"kind": "Process", "name": f"p{rng.randrange(OBJECTS)}", "namespace": "default"}
        histories.append(timed(lambda about=about: timeline.query(object=about))[0])
        hours.append(
            timed(lambda about=about, t=t: timeline.query(object=about, since=t, until=t + 3600))[0]
        )
    raw.close()
    return {
        "window_10m_ms": median_ms(windows),
        "window_10m_entries": statistics.median(counts),
        "window_10m_noindex_ms": median_ms(scans),
        "object_history_ms": median_ms(histories),
        "object_window_1h_ms": median_ms(hours),
    }


class BenchSpec(Schema):
    size: int = 0


class BenchStatus(Schema):
    seen: int = 0
    conditions: list[dict[str, Any]] = []


async def update_rate(directory: Path, with_recorder: bool) -> float:
    registry = Registry()
    registry.register(
        Kind("bench.setpoint.dev/v1", "Thing", "things", spec=BenchSpec, status=BenchStatus)
    )
    store = await open_store(f"sqlite:///{directory / 'store.db'}?sync=off", registry=registry)
    recorder_task = None
    timeline = Timeline.open(directory / "store.db")
    try:
        obj = await store.create(
            {
                "apiVersion": "bench.setpoint.dev/v1",
                "kind": "Thing",
                "metadata": {"name": "a", "namespace": "default"},
                "spec": {"size": 1},
            }
        )
        if with_recorder:
            recorder = Recorder(store, timeline)
            recorder_task = asyncio.create_task(recorder.run())
            await recorder.wait_watching()
        started = time.perf_counter()
        for i in range(UPDATES):
            status = "True" if i % 2 else "False"
            obj["status"] = {"seen": i, "conditions": [{"type": "Ready", "status": status}]}
            obj = await store.update_status(obj)
        rate = UPDATES / (time.perf_counter() - started)
        if recorder_task is not None:
            deadline = time.monotonic() + 30
            while timeline.count() < UPDATES and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.05)  # a benchmark waiting for the recorder to catch up
            progress(f"  recorded {timeline.count()} entries for {UPDATES} updates")
        return rate
    finally:
        if recorder_task is not None:
            recorder_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await recorder_task
        timeline.close()
        await store.close()


async def overhead(root: Path) -> dict[str, Any]:
    without, with_ = [], []
    for round_ in range(3):
        for mode in (False, True) if round_ % 2 == 0 else (True, False):
            directory = root / f"overhead-{round_}-{mode}"
            directory.mkdir()
            (with_ if mode else without).append(await update_rate(directory, mode))
    a, b = statistics.median(without), statistics.median(with_)
    return {
        "updates_per_s_without": round(a),
        "updates_per_s_with": round(b),
        "ratio_with_vs_without": round(b / a, 3),
    }


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "timeline.db"
        timeline = Timeline.open(path)
        progress(f"filling {ENTRIES:,} entries in batches of {BATCH}")
        rate, cpu_us = fill(timeline)
        size = path.stat().st_size + Path(f"{path}-wal").stat().st_size
        progress(f"append: {rate:,.0f} entries/s; querying")
        result: dict[str, Any] = {
            "entries": ENTRIES,
            "append_per_s": round(rate),
            "append_cpu_us_per_entry": round(cpu_us, 1),
            "db_bytes_per_entry": round(size / ENTRIES, 1),
        }
        result.update(queries(timeline, path))
        timeline.close()
        progress(f"queries: {result}")
        progress("recorder overhead")
        result["recorder_overhead"] = asyncio.run(overhead(root))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
