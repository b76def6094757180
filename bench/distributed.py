"""Distributed stores benchmark: setpoint on PostgreSQL (and, when their modules are there,
on etcd and sharded across processes), against direct clients of the same servers and the
embedded SQLite store, all servers on this machine, in one run.

Run with `./dev bench distributed [--writes N] [--minutes M]`. Progress goes to stderr; the
last stdout line is one JSON object.

PostgreSQL figures (a server this script starts, as tests/postgresql_server.py does, with
the default durability: fsync on, synchronous_commit on):

* `pg_writes_per_s`: 64 coroutines in this process `create` objects at once, each its own
  names, through one `postgresql://` store (its group commit batches them), for SECONDS.
* `pg_direct_writes_per_s`: the same 64 writers through a minimal direct client: psycopg,
  one connection per writer, one autocommit `INSERT (key, data)` of the same JSON per
  write. `ratio_pg_vs_direct` is the first over the second (target >= 0.5).
* `sqlite_writes_per_s`: the first workload on `sqlite:///` in a temporary directory
  (`sync=full`, one fsync per commit).
* `pg_watch_xproc_p50_ms`, `pg_watch_xproc_p99_ms`: a child process watches through its own
  store; this one writes XPROC_WRITES updates, 5 ms apart, and records when each write
  returned (wall clock); the child records when it received each revision. Latency =
  received - returned (target p99 <= 50).
* `pg_compact_1m_s`, `pg_compact_max_write_stall_ms`: a store's log is filled with
  `--writes` rows (default 1,000,000) of 1,000 live objects, written server-side in bulk
  (one INSERT ... SELECT of the rows the store itself writes: filling through the store
  would take most of an hour here), then `compact` to keep the default 10,000 revisions
  is timed while a writer keeps creating objects one at a time; the stall is that
  writer's longest write during the compaction (`pg_write_p50_ms_during_compact` beside
  it; `pg_write_max_ms_without_compact` and `..._p50_...` are the same writer's in the
  BASELINE_S seconds before, the machine's own noise). `pg_log_mb_before`,
  `pg_log_mb_after` (after a plain VACUUM) and `pg_live_mb` (the objects table) show the
  sizes: a plain VACUUM makes the deleted rows' space reusable by new rows but does not
  give it back (VACUUM FULL would, under a lock).
* `hammer_*`: tests/store/postgresql_hammer.py for `--minutes` (3 writer processes x 6
  writers x 60 objects, 2 watcher processes); `hammer_problems` must be 0.

Then `measure(args) -> dict` of bench/distributed_etcd.py (etcd) and
bench/distributed_shard.py (sharding, given a fresh database on this PostgreSQL) when those
files exist; `ratio_sqlite_vs_etcd` is `sqlite_writes_per_s` over `etcd_direct_writes_per_s`
(the embedded default against the distributed engine itself, target >= 3).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the throwaway server and the hammer are test kit
sys.path.insert(0, str(ROOT / "tests" / "store"))
sys.path.insert(0, str(ROOT / "tests" / "conformance"))

from conformance_kit import API, make_registry, widget  # noqa: E402
from postgresql_hammer import hammer  # noqa: E402

from postgresql_server import BENCH_SETTINGS, PostgresServer, missing  # noqa: E402
from setpoint.store import open_store  # noqa: E402

WRITERS = 64
SECONDS = 5.0
XPROC_WRITES = 400
HISTORY = 10_000
LIVE_OBJECTS = 1000
BASELINE_S = 5.0


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else 0.0


async def timed_writers(write: Callable[[int, int], Awaitable[None]], seconds: float) -> float:
    """Writes per second of WRITERS coroutines calling `write(writer, i)` for `seconds`."""
    done = 0
    deadline = time.monotonic() + seconds

    async def run(writer: int) -> None:
        nonlocal done
        i = 0
        while time.monotonic() < deadline:
            await write(writer, i)
            i += 1
            done += 1

    began = time.monotonic()
    await asyncio.gather(*(run(w) for w in range(WRITERS)))
    return done / (time.monotonic() - began)


async def store_writes(url: str, seconds: float) -> float:
    store = await open_store(url, make_registry())
    try:
        return await timed_writers(
            lambda w, i: store.create(widget(f"w{w}-{i}", i, tags=["x"] * 8)), seconds
        )
    finally:
        await store.close()


async def direct_writes(url: str, seconds: float) -> float:
    """The minimal direct client: one connection per writer, one INSERT per write."""
    conns = [await psycopg.AsyncConnection.connect(url, autocommit=True) for _ in range(WRITERS)]
    await conns[0].execute("CREATE TABLE direct (key text PRIMARY KEY, data text NOT NULL)")
    try:
        return await timed_writers(
            lambda w, i: conns[w].execute(
                "INSERT INTO direct VALUES (%s, %s)",
                (f"w{w}-{i}", orjson.dumps(widget(f"w{w}-{i}", i, tags=["x"] * 8)).decode()),
            ),
            seconds,
        )
    finally:
        for conn in conns:
            await conn.close()


WATCH_CHILD = """
import asyncio, json, sys, time
sys.path.insert(0, sys.argv[2])
from conformance_kit import API, make_registry
from setpoint.store import open_store

async def main():
    store = await open_store(sys.argv[1], make_registry())
    events = store.watch(API, "Widget", since=await store.revision())
    print("ready", flush=True)
    seen = {}
    last = int(sys.argv[3])
    async for event in events:
        seen[event.revision] = time.time()
        if event.object["spec"]["size"] == last:
            break
    print(json.dumps(seen), flush=True)
    await store.close()

asyncio.run(main())
"""


async def xproc_watch(url: str) -> list[float]:
    store = await open_store(url, make_registry())
    obj = await store.create(widget("watched", 0))
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        WATCH_CHILD,
        url,
        str(ROOT / "tests" / "conformance"),
        str(XPROC_WRITES),
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None
    assert (await child.stdout.readline()).strip() == b"ready"
    returned: dict[int, float] = {}
    for size in range(1, XPROC_WRITES + 1):
        obj["spec"]["size"] = size
        obj = await store.update(obj)
        returned[int(obj["metadata"]["resourceVersion"])] = time.time()
        await asyncio.sleep(0.005)
    received = json.loads(await asyncio.wait_for(child.stdout.readline(), 120))
    await child.wait()
    await store.close()
    return [max(0.0, (received[str(r)] - t) * 1000) for r, t in returned.items()]


async def compaction(url: str, writes: int) -> dict[str, float]:
    store = await open_store(url, make_registry())
    await store.create(widget("seed"))
    sample = orjson.dumps(widget("x", 1, tags=["x"] * 8)).decode()
    progress(f"  filling the log with {writes} rows ...")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO setpoint_log SELECT g + 1, 'MODIFIED', %s, 'Widget', 'default',"
            " 'live-' || (g %% %s), %s, NULL, NULL FROM generate_series(1, %s) g",
            (API, LIVE_OBJECTS, sample, writes),
        )
        conn.execute(
            "INSERT INTO setpoint_objects SELECT %s, 'Widget', 'default', 'live-' || g,"
            " %s - g, %s FROM generate_series(0, %s) g",
            (API, writes, sample, LIVE_OBJECTS - 1),
        )
        conn.execute("UPDATE setpoint_meta SET value = %s WHERE key = 'revision'", (writes + 1,))
        conn.execute("VACUUM ANALYZE setpoint_log")
        size = "SELECT pg_total_relation_size(%s) / 1048576.0"
        before = float(conn.execute(size, ("setpoint_log",)).fetchone()[0])  # type: ignore[index]
    # Our store read the revision when it opened: a fresh one sees the filled log.
    await store.close()
    store = await open_store(url, make_registry())
    latencies: list[float] = []
    compacting = True

    async def keep_writing() -> None:
        i = 0
        while compacting:
            began = time.perf_counter()
            await store.create(widget(f"during-{i}", i))
            latencies.append((time.perf_counter() - began) * 1000)
            i += 1

    writer = asyncio.create_task(keep_writing())
    await asyncio.sleep(BASELINE_S)  # the same writer without compaction, to compare
    baseline, latencies[:] = list(latencies), []
    began = time.perf_counter()
    await store.compact(await store.revision() - HISTORY)
    took = time.perf_counter() - began
    compacting = False
    await writer
    await store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM setpoint_log")
        after = float(conn.execute(size, ("setpoint_log",)).fetchone()[0])  # type: ignore[index]
        live = float(conn.execute(size, ("setpoint_objects",)).fetchone()[0])  # type: ignore[index]
    return {
        "pg_compact_writes": writes,
        "pg_compact_1m_s": round(took * 1_000_000 / writes, 2),
        "pg_compact_s": round(took, 2),
        "pg_compact_max_write_stall_ms": round(max(latencies, default=0.0), 1),
        "pg_write_p50_ms_during_compact": round(percentile(latencies, 50), 2),
        "pg_write_max_ms_without_compact": round(max(baseline, default=0.0), 1),
        "pg_write_p50_ms_without_compact": round(percentile(baseline, 50), 2),
        "pg_writes_during_compact": len(latencies),
        "pg_log_mb_before": round(before, 1),
        "pg_log_mb_after": round(after, 1),
        "pg_live_mb": round(live, 2),
    }


def optional_measure(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """`measure(args)` of bench/NAME.py, or {} when that file is not there."""
    path = Path(__file__).with_name(f"{name}.py")
    if not path.exists():
        progress(f"{name}: not there, skipped")
        return {}
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    progress(f"{name} ...")
    try:
        figures: dict[str, Any] = module.measure(args)
    except Exception as exc:  # one part failing must not lose the others' figures
        progress(f"{name} failed: {exc!r}")
        return {f"{name}_error": repr(exc)}
    return figures


async def postgresql(server: PostgresServer, args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    progress(f"PostgreSQL store, {WRITERS} writers, {args.seconds}s ...")
    figures["pg_writes_per_s"] = round(await store_writes(server.new_url(), args.seconds), 1)
    progress(f"  {figures['pg_writes_per_s']} writes/s; direct client ...")
    figures["pg_direct_writes_per_s"] = round(
        await direct_writes(server.new_url(), args.seconds), 1
    )
    figures["ratio_pg_vs_direct"] = round(
        figures["pg_writes_per_s"] / figures["pg_direct_writes_per_s"], 2
    )
    progress(f"  direct {figures['pg_direct_writes_per_s']} writes/s; SQLite store ...")
    with tempfile.TemporaryDirectory(prefix="setpoint-bench-") as tmp:
        sqlite = await store_writes(f"sqlite:///{tmp}/state.db", args.seconds)
    figures["sqlite_writes_per_s"] = round(sqlite, 1)
    progress(f"  SQLite {figures['sqlite_writes_per_s']} writes/s; watch across processes ...")
    latencies = await xproc_watch(server.new_url())
    figures["pg_watch_xproc_p50_ms"] = round(percentile(latencies, 50), 2)
    figures["pg_watch_xproc_p99_ms"] = round(percentile(latencies, 99), 2)
    progress(f"  p99 {figures['pg_watch_xproc_p99_ms']} ms; compaction ...")
    figures.update(await compaction(server.new_url(), args.writes))
    progress(f"  {figures['pg_compact_s']}s, stall {figures['pg_compact_max_write_stall_ms']} ms")
    return figures


def run_hammer(server: PostgresServer, minutes: float) -> dict[str, Any]:
    progress(f"hammer, {minutes} min ...")
    url = server.new_url("hammer")
    asyncio.run(_create(url))
    with tempfile.TemporaryDirectory(prefix="setpoint-hammer-") as tmp:
        outcome = hammer(url, minutes * 60, Path(tmp))
    problems = outcome.problems()
    for problem in problems[:10]:
        progress(f"  {problem}")
    return {
        "hammer_seconds": round(outcome.seconds, 1),
        "hammer_revisions": outcome.final,
        "hammer_writes_per_s": round(outcome.final / outcome.seconds, 1),
        "hammer_lists_checked": sum(w["lists_checked"] for w in outcome.watchers),
        "hammer_problems": len(problems),
    }


async def _create(url: str) -> None:
    await (await open_store(url, make_registry())).close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writes", type=int, default=1_000_000, help="log rows to compact")
    parser.add_argument("--minutes", type=float, default=1.0, help="hammer duration (0: none)")
    parser.add_argument("--seconds", type=float, default=SECONDS, help="one throughput slice")
    args = parser.parse_args()
    if (reason := missing()) is not None:
        sys.exit(f"PostgreSQL: {reason}")
    figures: dict[str, Any] = {"loadavg_1m": round(os.getloadavg()[0], 2)}
    with PostgresServer(BENCH_SETTINGS) as server:
        figures.update(asyncio.run(postgresql(server, args)))
        if args.minutes > 0:
            figures.update(run_hammer(server, args.minutes))
        missed = [
            name
            for name, ok in (
                ("ratio_pg_vs_direct", figures["ratio_pg_vs_direct"] >= 0.5),
                ("pg_watch_xproc_p99_ms", figures["pg_watch_xproc_p99_ms"] <= 50),
                ("pg_compact_max_write_stall_ms", figures["pg_compact_max_write_stall_ms"] <= 100),
                ("hammer_problems", figures.get("hammer_problems", 0) == 0),
            )
            if not ok
        ]
        etcd = optional_measure("distributed_etcd", args)
        shard_args = argparse.Namespace(store=server.new_url("shard"))
        shard = optional_measure("distributed_shard", shard_args)
    for part in (etcd, shard):
        missed += part.pop("missed", [])
        figures.update(part)
    if figures.get("etcd_direct_writes_per_s"):
        figures["ratio_sqlite_vs_etcd"] = round(
            figures["sqlite_writes_per_s"] / figures["etcd_direct_writes_per_s"], 2
        )
        if figures["ratio_sqlite_vs_etcd"] < 3:
            missed.append("ratio_sqlite_vs_etcd")
    figures["missed"] = missed
    figures["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
