"""Store benchmark: write throughput, watch latency and read latency of the SQLite store.

Run with `./dev bench store` (or `uv run python bench/store.py`). Progress goes to
stderr; the last stdout line is one JSON object. Takes well under two minutes.

Every store file lives in a fresh temporary directory, and every durable write,
setpoint's or the baseline's, pays the same durability: SQLite WAL with
`synchronous=FULL` (one fsync per commit). The machine may be shared and noisy (on a
shared virtual disk one fsync takes anywhere from 0.15 to 5 ms), so the write
throughputs are measured in ROUNDS rounds of short slices, each round running the
three modes in a different order on fresh files, and reported as medians; the ratios
divide medians of the same run (`rounds` shows every slice and the paired ratios).

What is measured, and the key it is reported under:

* `raw_commits_per_s`: stdlib `sqlite3`, a `(key TEXT PRIMARY KEY, data TEXT)` table,
  one INSERT + one COMMIT per document; the document is the exact JSON setpoint
  stores for one benchmark object (`doc_bytes`, about 1 KiB). The fsync floor on a
  real disk; on a throttled virtual disk, fsyncs issued back to back can each take
  longer than paced ones, and then setpoint's single writer may beat it (ratio > 1).
* `single_writer_per_s`: one coroutine `await store.create(...)`-ing objects one
  after another on `open_store("sqlite:////tmp/.../a.db")`. The object is of a
  registered kind whose `Schema` spec carries a string padded so that the stored
  JSON is about 1 KiB.
* `concurrent64_per_s`: 64 coroutines creating at once, each its own names (group
  commit should make this several fsyncs' worth).
* `ratio_single_vs_raw`, `ratio_concurrent_vs_raw`: the two above over the raw rate.
* `cpu_us_per_write`: this process's CPU time (all threads) per write in each mode.
* `nosync`: for diagnosis, the same three modes with `synchronous=OFF` (no fsync), so
  what remains is setpoint's own cost: `single_overhead_us` is what a single-writer
  create costs beyond a raw INSERT+COMMIT, hence `ratio_single_vs_raw` >= 0.5 holds
  only while the disk commits slower than `ratio_single_0.5_while_raw_below` per
  second; `concurrent64_per_s` here is the CPU ceiling of group commit, and
  `ratio_concurrent_3_while_raw_below` a third of it.
* `memory_single_writer_per_s`: the single-writer loop on `memory://` (information:
  the cost of setpoint's own per-write work without any I/O).
* `watch_p50_ms`, `watch_p99_ms`: in-process watch latency over WATCH_WRITES
  sequential `update`s of one object, the process otherwise idle: from the moment
  `await store.update(...)` returned (perf_counter, keyed by the returned
  resourceVersion) to the moment a watcher task received that revision. The store wakes
  the watchers and then the writer from one callback after commit, so a watcher usually
  has the revision before the writer's call returns: the figures can be below zero.
* `watch_xproc_p50_ms`, `watch_xproc_p99_ms`: a child process (this script with
  `--watch-child`, its own event loop) opens the same file and watches; it prints
  "ready" once its watch has delivered a priming update, then the parent writes
  XPROC_WRITES updates with a 5 ms pause between them (part of the load pattern)
  and records wall-clock (`time.time()`) write-returned times; the child records
  wall-clock receipt times and prints them as JSON when it has seen the last
  revision (or after a timeout). Latency per revision = receipt - write returned.
* `get_p50_ms_100k`, `get_p99_ms_100k`: with GET_OBJECTS objects stored, latency of
  `store.get(...)` of random existing names over GET_CALLS calls (after 100 untimed
  warm-up calls). The filling phase is a separate open of the same file with
  `?sync=off` and FILL_WRITERS concurrent creators (group commit batches them); the
  file is then closed and reopened with the default `sync=full` for the reads.
  `fill_per_s` reports the filling rate, for information.
* `list_100k_s`: one full `list` of those objects, for information.

Targets (reported under `targets` / `missed`, never asserted): ratio_single_vs_raw
>= 0.5, ratio_concurrent_vs_raw >= 3, watch_p99_ms <= 5, watch_xproc_p99_ms <= 100,
get_p99_ms_100k <= 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Any

from setpoint.model import Kind, Registry, Schema
from setpoint.store import Store, open_store

API = "bench.setpoint.dev/v1"
SCRIPT = os.path.abspath(__file__)
DOC_BYTES = 1024
ROUNDS = 6
NOSYNC_ROUNDS = 2
RAW_SECONDS = 1.0
SINGLE_SECONDS = 1.0
CONCURRENT_SECONDS = 1.5
CONCURRENT_WRITERS = 64
MEMORY_SECONDS = 1.0
WARMUP_WRITES = 50
WATCH_WRITES = 500
XPROC_WRITES = 300
XPROC_PAUSE = 0.005
XPROC_TIMEOUT = 60.0
GET_OBJECTS = 100_000
FILL_WRITERS = 256
GET_CALLS = 5_000
TARGETS: dict[str, tuple[str, float]] = {
    "ratio_single_vs_raw": (">=", 0.5),
    "ratio_concurrent_vs_raw": (">=", 3.0),
    "watch_p99_ms": ("<=", 5.0),
    "watch_xproc_p99_ms": ("<=", 100.0),
    "get_p99_ms_100k": ("<=", 1.0),
}


class DocSpec(Schema):
    payload: str
    index: int = 0


DOC = Kind(API, "Doc", "docs", namespaced=True, spec=DocSpec)
_payload = "x"


def make_registry() -> Registry:
    registry = Registry()
    registry.register(DOC)
    return registry


def doc(name: str, index: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Doc",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"payload": _payload, "index": index},
    }


def log(message: str) -> None:
    print(f"[bench store {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), nearest-rank on sorted values."""
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


# -- calibration ------------------------------------------------------------------


async def calibrate() -> str:
    """Size the payload so the stored JSON is about DOC_BYTES; return one stored JSON."""
    global _payload
    rng = random.Random(42)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 "
    store = await open_store("memory://", make_registry())
    try:
        _payload = ""
        empty = await store.create(doc("calibrate-0000000"))
        overhead = len(json.dumps(empty, separators=(",", ":")))
        _payload = "".join(rng.choice(alphabet) for _ in range(DOC_BYTES - overhead))
        stored = await store.create(doc("calibrate-0000001"))
        return json.dumps(stored, separators=(",", ":"), ensure_ascii=False)
    finally:
        await store.close()


# -- write throughput -------------------------------------------------------------


def raw_round(path: str, data: str, seconds: float, sync: str = "FULL") -> int:
    """stdlib sqlite3: one INSERT + one COMMIT per document until `seconds` pass; the count."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={sync}")
        conn.execute("CREATE TABLE objects (key TEXT PRIMARY KEY, data TEXT NOT NULL)")
        prefix = f"{API}/Doc/default/raw-"

        def insert(i: int) -> None:
            conn.execute("BEGIN")
            conn.execute("INSERT INTO objects VALUES (?, ?)", (f"{prefix}{i:07d}", data))
            conn.execute("COMMIT")

        for i in range(WARMUP_WRITES):
            insert(i)
        count, deadline = 0, time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            insert(WARMUP_WRITES + count)
            count += 1
        return count
    finally:
        conn.close()


async def single_writer(store: Store, prefix: str, seconds: float) -> int:
    """One coroutine creating objects one after another until `seconds` pass; the count."""
    count, deadline = 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        await store.create(doc(f"{prefix}-{count:07d}", count))
        count += 1
    return count


async def concurrent_writers(store: Store, prefix: str, writers: int, seconds: float) -> int:
    """`writers` coroutines creating (each its own names) until `seconds` pass; the count."""
    counts = [0] * writers
    deadline = time.perf_counter() + seconds

    async def writer(w: int) -> None:
        while time.perf_counter() < deadline:
            await store.create(doc(f"{prefix}-{w:03d}-{counts[w]:07d}", counts[w]))
            counts[w] += 1

    await asyncio.gather(*(writer(w) for w in range(writers)))
    return sum(counts)


MODES = ("raw", "single", "concurrent64")
SECONDS = {"raw": RAW_SECONDS, "single": SINGLE_SECONDS, "concurrent64": CONCURRENT_SECONDS}


async def measure(
    mode: str, path: str, data: str, seconds: float, sync: str
) -> tuple[float, float]:
    """One timed slice of `mode` on a fresh file: (writes per second, CPU µs per write).

    CPU is this process's (all threads); the warm-up writes are neither timed nor counted.
    """
    if mode == "raw":
        cpu, start = time.process_time(), time.perf_counter()
        count = await asyncio.to_thread(raw_round, path, data, seconds, sync.upper())
        count += WARMUP_WRITES
    else:
        query = "" if sync == "full" else f"?sync={sync}"
        store = await open_store(f"sqlite:///{path}{query}", make_registry())
        try:
            for i in range(WARMUP_WRITES):
                await store.create(doc(f"warm-{i:07d}"))
            cpu, start = time.process_time(), time.perf_counter()
            if mode == "single":
                count = await single_writer(store, "single", seconds)
            else:
                count = await concurrent_writers(store, "conc", CONCURRENT_WRITERS, seconds)
        finally:
            await store.close()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    for suffix in ("", "-wal", "-shm"):  # dropping the file also drops its unwritten pages
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)
    return count / elapsed, cpu / count * 1e6


async def throughput(root: str, data: str) -> dict[str, Any]:
    """ROUNDS rounds, each running the three modes in a different order (every order of
    the three once when ROUNDS is 6), so no mode always follows the heaviest one."""
    rates: dict[str, list[float]] = {m: [] for m in MODES}
    cpus: dict[str, list[float]] = {m: [] for m in MODES}
    orders = list(itertools.permutations(MODES))
    for r in range(ROUNDS):
        for mode in orders[r % len(orders)]:
            rate, cpu = await measure(mode, f"{root}/{mode}-{r}.db", data, SECONDS[mode], "full")
            rates[mode].append(rate)
            cpus[mode].append(cpu)
            log(f"round {r + 1}/{ROUNDS}: {mode:13s} {rate:8.0f} writes/s {cpu:6.0f} µs CPU each")
    nosync: dict[str, list[float]] = {m: [] for m in MODES}
    for r in range(NOSYNC_ROUNDS):
        for mode in orders[r % len(orders)]:
            rate, _ = await measure(mode, f"{root}/nosync-{mode}-{r}.db", data, 0.5, "off")
            nosync[mode].append(rate)
    memory_store = await open_store("memory://", make_registry())
    try:
        start = time.perf_counter()
        memory = await single_writer(memory_store, "mem", MEMORY_SECONDS)
        memory /= time.perf_counter() - start
    finally:
        await memory_store.close()
    raw_m, single_m, conc_m = (statistics.median(rates[m]) for m in MODES)
    n_raw, n_single, n_conc = (statistics.median(nosync[m]) for m in MODES)
    overhead_us = (1 / n_single - 1 / n_raw) * 1e6
    log(
        f"medians: raw {raw_m:.0f}, single {single_m:.0f}, concurrent64 {conc_m:.0f} writes/s;"
        f" sync=off: raw {n_raw:.0f}, single {n_single:.0f}, concurrent64 {n_conc:.0f};"
        f" memory:// {memory:.0f}"
    )
    return {
        "raw_commits_per_s": round(raw_m),
        "single_writer_per_s": round(single_m),
        "concurrent64_per_s": round(conc_m),
        "ratio_single_vs_raw": round(single_m / raw_m, 3),
        "ratio_concurrent_vs_raw": round(conc_m / raw_m, 3),
        "memory_single_writer_per_s": round(memory),
        "rounds": {
            **{m: [round(x) for x in rates[m]] for m in MODES},
            "ratio_single_vs_raw": [
                round(s / r, 2) for s, r in zip(rates["single"], rates["raw"], strict=True)
            ],
            "ratio_concurrent_vs_raw": [
                round(c / r, 2) for c, r in zip(rates["concurrent64"], rates["raw"], strict=True)
            ],
        },
        "cpu_us_per_write": {m: round(statistics.median(cpus[m])) for m in MODES},
        "nosync": {
            "raw_per_s": round(n_raw),
            "single_per_s": round(n_single),
            "concurrent64_per_s": round(n_conc),
            "single_overhead_us": round(overhead_us),
            "ratio_single_0.5_while_raw_below": round(1e6 / overhead_us)
            if overhead_us > 0
            else None,
            "ratio_concurrent_3_while_raw_below": round(n_conc / 3),
        },
    }


# -- watch latency ----------------------------------------------------------------


async def watch_in_process(root: str, data: str) -> dict[str, Any]:
    store = await open_store(f"sqlite:///{root}/w.db", make_registry())
    try:
        obj = await store.create(doc("watched"))
        since = int(obj["metadata"]["resourceVersion"])
        primed, finished = asyncio.Event(), asyncio.Event()
        received: dict[int, float] = {}
        sent: dict[int, float] = {}
        last = since + 1 + WATCH_WRITES  # one priming update, then the timed ones

        async def watcher() -> None:
            async for event in store.watch(API, "Doc", "default", since=since):
                received[event.revision] = time.perf_counter()
                if event.revision == since + 1:
                    primed.set()
                if event.revision >= last:
                    finished.set()
                    return

        task = asyncio.create_task(watcher())
        try:
            obj["spec"]["index"] = -1
            obj = await store.update(obj)
            await asyncio.wait_for(primed.wait(), 30)
            for i in range(WATCH_WRITES):
                obj["spec"]["index"] = i
                obj = await store.update(obj)
                sent[int(obj["metadata"]["resourceVersion"])] = time.perf_counter()
            await asyncio.wait_for(finished.wait(), 30)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    finally:
        await store.close()
    latencies = [received[rev] - t for rev, t in sent.items() if rev in received]
    result = {
        "watch_p50_ms": ms(pct(latencies, 50)),
        "watch_p99_ms": ms(pct(latencies, 99)),
        "watch_max_ms": ms(max(latencies)),
    }
    log(f"in-process watch over {len(latencies)} updates: {result}")
    return result


async def watch_child(path: str, since: int, last: int, give_up_after: float) -> None:
    """The child of the cross-process watch: watch, record receipt times, print them."""
    store = await open_store(f"sqlite:///{path}", make_registry())
    received: dict[int, float] = {}

    async def consume() -> None:
        async for event in store.watch(API, "Doc", "default", since=since):
            received[event.revision] = time.time()
            if event.revision == since + 1:
                print("ready", flush=True)
            if event.revision >= last:
                return

    try:
        async with asyncio.timeout(give_up_after):
            await consume()
    except TimeoutError:
        pass
    finally:
        await store.close()
    print(json.dumps({"received": received}), flush=True)


async def watch_cross_process(root: str, data: str) -> dict[str, Any]:
    path = f"{root}/x.db"
    store = await open_store(f"sqlite:///{path}", make_registry())
    proc: asyncio.subprocess.Process | None = None
    sent: dict[int, float] = {}
    try:
        obj = await store.create(doc("watched"))
        since = int(obj["metadata"]["resourceVersion"])
        last = since + 1 + XPROC_WRITES
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            SCRIPT,
            "--watch-child",
            path,
            str(since),
            str(last),
            str(XPROC_TIMEOUT),
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        obj["spec"]["index"] = -1
        obj = await store.update(obj)  # priming: the child says "ready" once it sees this
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        if line.strip() != b"ready":
            raise RuntimeError(f"watch child said {line!r}, not ready")
        for i in range(XPROC_WRITES):
            obj["spec"]["index"] = i
            obj = await store.update(obj)
            sent[int(obj["metadata"]["resourceVersion"])] = time.time()
            await asyncio.sleep(XPROC_PAUSE)
        out, _ = await asyncio.wait_for(proc.communicate(), XPROC_TIMEOUT + 10)
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        await store.close()
    report = json.loads(out.decode().strip().splitlines()[-1])
    received = {int(rev): t for rev, t in report["received"].items()}
    latencies = [received[rev] - t for rev, t in sent.items() if rev in received]
    result = {
        "watch_xproc_p50_ms": ms(pct(latencies, 50)),
        "watch_xproc_p99_ms": ms(pct(latencies, 99)),
        "watch_xproc_max_ms": ms(max(latencies)),
        "watch_xproc_missed": len(sent) - len(latencies),
    }
    log(f"cross-process watch over {len(latencies)} updates: {result}")
    return result


# -- reads at 100k objects --------------------------------------------------------


async def reads(root: str, data: str) -> dict[str, Any]:
    path = f"{root}/g.db"
    names = [f"obj-{i:07d}" for i in range(GET_OBJECTS)]
    fill = await open_store(f"sqlite:///{path}?sync=off", make_registry())
    start = time.perf_counter()
    try:
        next_index = 0

        async def filler() -> None:
            nonlocal next_index
            while next_index < GET_OBJECTS:
                i = next_index
                next_index += 1
                await fill.create(doc(names[i], i))
                if i and i % 25_000 == 0:
                    log(f"filled {i} objects")

        await asyncio.gather(*(filler() for _ in range(FILL_WRITERS)))
    finally:
        await fill.close()
    fill_rate = GET_OBJECTS / (time.perf_counter() - start)
    log(f"filled {GET_OBJECTS} objects at {fill_rate:.0f}/s (sync=off, {FILL_WRITERS} writers)")

    store = await open_store(f"sqlite:///{path}", make_registry())
    try:
        rng = random.Random(7)
        for _ in range(100):
            await store.get(API, "Doc", rng.choice(names))
        latencies = []
        for _ in range(GET_CALLS):
            name = rng.choice(names)
            t0 = time.perf_counter()
            await store.get(API, "Doc", name)
            latencies.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        items, _ = await store.list(API, "Doc")
        list_s = time.perf_counter() - t0
        assert len(items) == GET_OBJECTS, len(items)
    finally:
        await store.close()
    result = {
        "get_p50_ms_100k": ms(pct(latencies, 50)),
        "get_p99_ms_100k": ms(pct(latencies, 99)),
        "list_100k_s": round(list_s, 3),
        "fill_per_s": round(fill_rate),
    }
    log(f"reads at {GET_OBJECTS}: {result}")
    return result


# -- main -------------------------------------------------------------------------


def missed(result: dict[str, Any]) -> list[str]:
    out = []
    for key, (op, bound) in TARGETS.items():
        value = result.get(key)
        ok = value is not None and (value >= bound if op == ">=" else value <= bound)
        if not ok:
            out.append(key)
    return out


async def main() -> dict[str, Any]:
    started = time.perf_counter()
    root = tempfile.mkdtemp(prefix="setpoint-bench-store-")
    try:
        data = await calibrate()
        log(f"document: {len(data)} bytes of JSON; files in {root}")
        result: dict[str, Any] = {
            "python": sys.version.split()[0],
            "sqlite": sqlite3.sqlite_version,
            "durability": "WAL+synchronous=FULL",
            "doc_bytes": len(data),
        }
        for section in (throughput, watch_in_process, watch_cross_process, reads):
            try:
                result |= await section(root, data)
            except Exception as exc:  # report the others; the JSON line still comes last
                log(f"{section.__name__} failed: {exc!r}")
                result[f"{section.__name__}_error"] = repr(exc)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result["targets"] = {key: f"{op} {bound:g}" for key, (op, bound) in TARGETS.items()}
    result["missed"] = missed(result)
    result["total_s"] = round(time.perf_counter() - started, 1)
    log(f"done in {result['total_s']} s; targets missed: {result['missed'] or 'none'}")
    return result


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--watch-child":
        child_path, child_since, child_last, child_timeout = sys.argv[2:6]
        asyncio.run(
            watch_child(child_path, int(child_since), int(child_last), float(child_timeout))
        )
    else:
        print(json.dumps(asyncio.run(main())))
