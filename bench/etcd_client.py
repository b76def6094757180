"""etcd client cost: what setpoint's `etcd://` store spends in its own process per write, and
how soon a watcher in it sees a write, through `open_store` alone, so that two versions of
the store's gRPC client (e.g. two checkouts) can be compared against one etcd server in one
session.

Run with `./dev bench etcd_client [--etcd HOST:PORT]`: progress goes to stderr, the last
stdout line is one JSON object. Without `--etcd` a throwaway etcd member is started on
loopback (tests/etcd_server.py) and stopped at the end. Give two checkouts the same
`--etcd` and take turns to compare them.

* `cpu_us_per_write`: process CPU time (every thread: gRPC's own too) per `store.create`
  of a document of about 1 KiB of JSON, WRITERS coroutines at once, WRITES creates a round;
  the median of ROUNDS rounds. CPU, not wall time: the etcd server's fsync and the other
  load on the machine move it much less.
* `writes_per_s`: the same rounds' rate (wall clock; the server's fsync bounds it).
* `watch_p50_ms`, `watch_p99_ms`: a second store (its own gRPC channel) watches the kind
  while one coroutine creates WATCH_WRITES documents one after another: from `create`
  called to the watcher holding its event.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from typing import Any

from distributed_etcd import etcd, percentile  # the throwaway etcd and the percentiles

from setpoint.model import Kind, Registry, Schema
from setpoint.store import open_store

API = "bench.setpoint.dev/v1"
WRITERS = 16
WRITES = 2000
ROUNDS = 5
WATCH_WRITES = 500
PAYLOAD = "x" * 800  # the stored JSON is about 1 KiB


class DocSpec(Schema):
    n: int = 0
    payload: str = ""


DOC = Kind(API, "Doc", "docs", namespaced=True, spec=DocSpec)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def make_registry() -> Registry:
    registry = Registry()
    registry.register(DOC)
    return registry


def doc(name: str, n: int) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Doc",
        "metadata": {"name": name},
        "spec": {"n": n, "payload": PAYLOAD},
    }


async def write_round(url: str, tag: str) -> tuple[float, float]:
    """(CPU microseconds per create, creates per second) of WRITES creates by WRITERS
    coroutines on one store."""
    store = await open_store(url, make_registry())
    try:

        async def writer(w: int) -> None:
            for i in range(w, WRITES, WRITERS):
                await store.create(doc(f"{tag}-{i:06d}", i))

        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(writer(w) for w in range(WRITERS)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        return cpu / WRITES * 1e6, WRITES / wall
    finally:
        await store.close()


async def watch_latency(url: str) -> list[float]:
    """Milliseconds from `create` called to its event at a watcher on another store."""
    writing, watching = (
        await open_store(url, make_registry()),
        await open_store(url, make_registry()),
    )
    try:
        called: dict[str, float] = {}
        received: dict[str, float] = {}
        events = watching.watch(API, "Doc", since=await watching.revision())

        async def watch() -> None:
            async for event in events:
                received[event.object["metadata"]["name"]] = time.perf_counter()
                if len(received) == WATCH_WRITES:
                    return

        watcher = asyncio.create_task(watch())
        for i in range(WATCH_WRITES):
            name = f"watch-{i:06d}"
            called[name] = time.perf_counter()
            await writing.create(doc(name, i))
        await asyncio.wait_for(watcher, 120)
        return [(received[name] - called[name]) * 1000 for name in called]
    finally:
        await writing.close()
        await watching.close()


async def measure(address: str) -> dict[str, Any]:
    url = f"etcd://{address}?prefix=/bench-client-{time.time_ns()}/"
    cpu: list[float] = []
    rates: list[float] = []
    for r in range(ROUNDS):
        cpu_us, rate = await write_round(url, f"w{r}")
        cpu.append(cpu_us)
        rates.append(rate)
        log(f"round {r}: {cpu_us:.0f} us CPU per create, {rate:.0f} creates/s")
    latencies = await watch_latency(url)
    return {
        "cpu_us_per_write": round(statistics.median(cpu), 1),
        "writes_per_s": round(statistics.median(rates)),
        "watch_p50_ms": round(percentile(latencies, 50), 2),
        "watch_p99_ms": round(percentile(latencies, 99), 2),
        "rounds_cpu_us": [round(x, 1) for x in cpu],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--etcd", help="HOST:PORT of an etcd to use (default: start one)")
    args = parser.parse_args()
    with etcd(args.etcd) as address:
        figures = asyncio.run(measure(address))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
