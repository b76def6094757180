"""The timeline on an etcd store (`setpoint.insight.timeline_etcd`): append throughput, query
latency, retention.

Run with `./dev bench timeline_etcd` (about a minute; `--entries N` for another size). A
throwaway etcd member is started on loopback (tests/etcd_server.py; Debian's `etcd-server`
package). Progress goes to stderr; the last stdout line is one JSON object. Figures are
medians.

What is measured, and the key it is reported under:

* `append_per_s`: entries appended as the recorder writes a full batch: 500 at a time with
  a checkpoint of 50 views and `after` (each more than one etcd transaction: staged, then
  committed and put in place), filling a timeline of ENTRIES entries over SPAN_DAYS days
  (OBJECTS objects, types and sizes as bench/timeline.py makes them);
  `append_small_per_s`: batches of 20 (one transaction each), as a quiet recorder writes;
  `append_cpu_us_per_entry`: this process's CPU per entry of the large batches.
* `window_10m_ms` (and `window_10m_entries`, the median count), `object_history_ms` (one
  object's whole history), `object_window_1h_ms`: as bench/timeline.py.
* `newest_50_ms`: `query(limit=50)`, the newest entries (`setpoint timeline --limit 50`);
  `query_all_per_s`: entries per second of one `query()` of everything.
* `prune_per_s`: entries deleted per second by `prune(max_entries=ENTRIES // 2)`.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from setpoint.insight.timeline import Checkpoint, Timeline

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from etcd_server import EtcdServer, missing

OBJECTS = 1_000
SPAN_DAYS = 7
BATCH = 500
SMALL = 20
QUERIES = 100
T0 = 1_700_000_000.0


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def timed(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return (time.perf_counter() - started) * 1000.0, result


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples), 3)


def entry(i: int, entries: int, rng: random.Random) -> dict[str, Any]:
    """Entry `i` of `entries` spread evenly over SPAN_DAYS days, as bench/timeline.py's."""
    ts = T0 + i * (SPAN_DAYS * 86400.0 / entries)
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


def fill(timeline: Timeline, entries: int) -> dict[str, float]:
    rng = random.Random(1)
    views = {f"setpoint.dev/v1alpha1 Process default p{i}": {"generation": i} for i in range(50)}
    started, cpu = time.perf_counter(), time.process_time()
    saved = 0
    for start in range(0, entries, BATCH):
        batch = [entry(i, entries, rng) for i in range(start, min(start + BATCH, entries))]
        timeline.append_many(batch, Checkpoint(saved + 1, views), after=saved)
        saved += 1
        if start % 20_000 == 0:
            progress(f"  {start:,} entries")
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    small_started = time.perf_counter()
    small = 0
    for start in range(0, 2_000, SMALL):  # newer than the rest, as a live recorder's
        batch = [
            {**entry(i, entries, rng), "ts": T0 + SPAN_DAYS * 86400 + start + i}
            for i in range(SMALL)
        ]
        timeline.append_many(batch, Checkpoint(saved + 1, {}), after=saved)
        saved += 1
        small += len(batch)
    small_wall = time.perf_counter() - small_started
    return {
        "append_per_s": round(entries / wall),
        "append_small_per_s": round(small / small_wall),
        "append_cpu_us_per_entry": round(cpu / entries * 1e6, 1),
    }


def queries(timeline: Timeline) -> dict[str, Any]:
    rng = random.Random(2)
    span = SPAN_DAYS * 86400.0
    windows, counts, histories, hours, newest = [], [], [], [], []
    for _ in range(QUERIES):
        t = T0 + rng.random() * (span - 600)
        ms, found = timed(lambda t=t: timeline.query(since=t, until=t + 600))
        windows.append(ms)
        counts.append(len(found))
        about = {"kind": "Process", "name": f"p{rng.randrange(OBJECTS)}", "namespace": "default"}
        histories.append(timed(lambda about=about: timeline.query(object=about))[0])
        hours.append(
            timed(lambda about=about, t=t: timeline.query(object=about, since=t, until=t + 3600))[0]
        )
        newest.append(timed(lambda: timeline.query(limit=50))[0])
    ms, everything = timed(timeline.query)
    return {
        "query_all_per_s": round(len(everything) / (ms / 1000.0)),
        "window_10m_ms": median_ms(windows),
        "window_10m_entries": statistics.median(counts),
        "object_history_ms": median_ms(histories),
        "object_window_1h_ms": median_ms(hours),
        "newest_50_ms": median_ms(newest),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    entries = parser.parse_args().entries
    reason = missing()
    if reason is not None:
        raise SystemExit(f"bench/timeline_etcd.py: {reason}")
    with EtcdServer() as server, Timeline.open(server.new_url()) as timeline:
        progress(f"filling {entries:,} entries")
        figures: dict[str, Any] = {"bench": "timeline_etcd", "entries": entries}
        figures |= fill(timeline, entries)
        progress("querying")
        figures |= queries(timeline)
        progress("pruning")
        ms, gone = timed(lambda: timeline.prune(None, entries // 2))
        figures["prune_per_s"] = round(gone / (ms / 1000.0))
        figures["count_after_prune"] = timeline.count()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
