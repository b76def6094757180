"""etcd benchmark: setpoint's `etcd://` store against a minimal direct etcd client, on the
same server, the same workload, in the same run.

Run with `./dev bench distributed_etcd` (or `uv run python bench/distributed_etcd.py`):
progress goes to stderr, the last stdout line is one JSON object. `bench/distributed.py`
calls `measure(args)` and folds the figures into its own line. Without `--etcd HOST:PORT`
a throwaway etcd member is started on loopback (tests/etcd_server.py; Debian's
`etcd-server`, fsync on as in production) and stopped at the end.

* `etcd_writes_per_s`: 64 coroutines creating objects at once, each its own names, through
  `open_store("etcd://...")` (one read-free transaction per create; the stored JSON is about
  1 KiB). Median of ROUNDS slices of `--etcd-seconds` each.
* `etcd_direct_writes_per_s`: the same creates through the etcd gRPC stubs alone (those of
  `setpoint.store.etcd_api`): one `Txn` (create only if absent, put the same JSON) per
  document, 64 at once, one channel. Rounds alternate with the above.
* `ratio_etcd_vs_direct`: the two medians divided (target >= 0.5).
* `etcd_watch_p50_ms`, `etcd_watch_p99_ms`: a second store (its own gRPC channel) watches
  the kind while 8 coroutines create WATCH_WRITES objects: from the moment a `create` was
  called to the moment the watcher received its revision; `etcd_watch_write_p99_ms` is the
  same writes' own latency (called to returned), the part of the former the watch does
  not add; `etcd_direct_watch_p99_ms` the same through the gRPC stubs alone (a Watch stream
  and Txn puts on two channels), the floor of this machine and server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import Field

from setpoint.model import Kind, Registry, Schema, codec
from setpoint.store import open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from etcd_server import EtcdServer, missing

API = "bench.setpoint.dev/v1"
WRITERS = 64
ROUNDS = 3
SECONDS = 3.0
WATCH_WRITES = 2000
WATCH_WRITERS = 8
PAYLOAD = "x" * 800  # the stored JSON is about 1 KiB


class DocSpec(Schema):
    n: int = Field(ge=0)
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


async def setpoint_writes(url: str, tag: str, seconds: float) -> float:
    """Creates per second by WRITERS coroutines on one `etcd://` store."""
    store = await open_store(url, make_registry())
    try:
        counts = [0] * WRITERS
        deadline = time.perf_counter() + seconds

        async def writer(w: int) -> None:
            while time.perf_counter() < deadline:
                await store.create(doc(f"{tag}-{w:03d}-{counts[w]:07d}", counts[w]))
                counts[w] += 1

        started = time.perf_counter()
        await asyncio.gather(*(writer(w) for w in range(WRITERS)))
        return sum(counts) / (time.perf_counter() - started)
    finally:
        await store.close()


async def direct_writes(address: str, tag: str, seconds: float) -> float:
    """The same creates through etcd's gRPC stubs and nothing else."""
    from grpc import aio

    from setpoint.store.etcd_api import etcdserverpb_pb2 as rpc
    from setpoint.store.etcd_api import etcdserverpb_pb2_grpc as rpc_grpc

    sample = doc("sample", 0)
    sample["metadata"].update(uid="0" * 36, generation=1, creationTimestamp="2026-01-01T00:00:00Z")
    value = codec.encode(sample)
    channel = aio.insecure_channel(address)
    kv = rpc_grpc.KVStub(channel)
    try:
        counts = [0] * WRITERS
        deadline = time.perf_counter() + seconds

        async def writer(w: int) -> None:
            while time.perf_counter() < deadline:
                key = f"/direct/{tag}/{w:03d}/{counts[w]:07d}".encode()
                compare = rpc.Compare(
                    key=key, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=0
                )
                put = rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value))
                response = await kv.Txn(rpc.TxnRequest(compare=[compare], success=[put]))
                assert response.succeeded
                counts[w] += 1

        started = time.perf_counter()
        await asyncio.gather(*(writer(w) for w in range(WRITERS)))
        return sum(counts) / (time.perf_counter() - started)
    finally:
        await channel.close()


async def watch_latency(url: str) -> tuple[list[float], list[float]]:
    """Milliseconds from `create` called to its event at a watcher on another store, and
    from `create` called to its return (the write's own share of the former)."""
    writing, watching = (
        await open_store(url, make_registry()),
        await open_store(url, make_registry()),
    )
    try:
        called: dict[str, float] = {}
        returned: dict[str, float] = {}
        received: dict[str, float] = {}
        events = watching.watch(API, "Doc", since=await watching.revision())

        async def watch() -> None:
            async for event in events:
                received[event.object["metadata"]["name"]] = time.perf_counter()
                if len(received) == WATCH_WRITES:
                    return

        async def write(w: int) -> None:
            for i in range(w, WATCH_WRITES, WATCH_WRITERS):
                name = f"watch-{i:06d}"
                called[name] = time.perf_counter()
                await writing.create(doc(name, i))
                returned[name] = time.perf_counter()

        watcher = asyncio.create_task(watch())
        await asyncio.gather(*(write(w) for w in range(WATCH_WRITERS)))
        await asyncio.wait_for(watcher, 120)
        return (
            [(received[name] - called[name]) * 1000 for name in called],
            [(returned[name] - called[name]) * 1000 for name in called],
        )
    finally:
        await writing.close()
        await watching.close()


async def direct_watch_latency(address: str, tag: str) -> list[float]:
    """The same as `watch_latency` through the gRPC stubs alone: a Watch stream on its own
    channel, WATCH_WRITERS coroutines putting (create-if-absent) on another."""
    from grpc import aio

    from setpoint.store.etcd_api import etcdserverpb_pb2 as rpc
    from setpoint.store.etcd_api import etcdserverpb_pb2_grpc as rpc_grpc

    value = codec.encode(doc("sample", 0))
    prefix = f"/direct-watch/{tag}/".encode()
    writing, watching = aio.insecure_channel(address), aio.insecure_channel(address)
    kv = rpc_grpc.KVStub(writing)
    try:
        called: dict[bytes, float] = {}
        received: dict[bytes, float] = {}
        create = rpc.WatchCreateRequest(key=prefix, range_end=prefix[:-1] + b"0")
        ready = asyncio.Event()

        async def requests() -> Any:
            yield rpc.WatchRequest(create_request=create)
            await asyncio.Event().wait()  # keep the stream open

        async def watch() -> None:
            async for response in rpc_grpc.WatchStub(watching).Watch(requests()):
                ready.set()
                for event in response.events:
                    received[event.kv.key] = time.perf_counter()
                if len(received) == WATCH_WRITES:
                    return

        async def write(w: int) -> None:
            for i in range(w, WATCH_WRITES, WATCH_WRITERS):
                key = prefix + f"{i:06d}".encode()
                compare = rpc.Compare(
                    key=key, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=0
                )
                put = rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value))
                called[key] = time.perf_counter()
                await kv.Txn(rpc.TxnRequest(compare=[compare], success=[put]))

        watcher = asyncio.create_task(watch())
        await asyncio.wait_for(ready.wait(), 60)
        await asyncio.gather(*(write(w) for w in range(WATCH_WRITERS)))
        await asyncio.wait_for(watcher, 120)
        return [(received[key] - called[key]) * 1000 for key in called]
    finally:
        await writing.close()
        await watching.close()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


@contextlib.contextmanager
def etcd(address: str | None) -> Iterator[str]:
    """`address`, or that of a throwaway server started for the run."""
    if address:
        yield address
        return
    reason = missing()
    if reason is not None:
        raise RuntimeError(f"no etcd to measure: {reason}")
    with EtcdServer() as server:
        yield server.address


def measure(args: argparse.Namespace | None = None) -> dict[str, Any]:
    """The figures of the module docstring (runs its own event loop: call it from
    synchronous code). Optional in `args`: `etcd` (HOST:PORT of a
    server to use instead of starting one) and `etcd_seconds` (the length of one slice)."""
    address = getattr(args, "etcd", None)
    seconds = float(getattr(args, "etcd_seconds", None) or SECONDS)
    with etcd(address) as where:
        return asyncio.run(_measure(where, seconds))


async def _measure(address: str, seconds: float) -> dict[str, Any]:
    url = f"etcd://{address}?prefix=/bench-{time.time_ns()}/"
    ours: list[float] = []
    direct: list[float] = []
    for r in range(ROUNDS):
        order = [("setpoint", ours), ("direct", direct)]
        for name, rates in order if r % 2 == 0 else reversed(order):
            tag = f"{name}{r}"
            if name == "setpoint":
                rate = await setpoint_writes(url, tag, seconds)
            else:
                rate = await direct_writes(address, f"{time.time_ns()}-{tag}", seconds)
            rates.append(rate)
            log(f"round {r}: {name} {rate:.0f} creates/s")
    latencies, writes = await watch_latency(url)
    direct_latencies = await direct_watch_latency(address, str(time.time_ns()))
    ours_m, direct_m = statistics.median(ours), statistics.median(direct)
    figures = {
        "etcd_writes_per_s": round(ours_m),
        "etcd_direct_writes_per_s": round(direct_m),
        "ratio_etcd_vs_direct": round(ours_m / direct_m, 2),
        "etcd_watch_p50_ms": round(percentile(latencies, 50), 2),
        "etcd_watch_p99_ms": round(percentile(latencies, 99), 2),
        "etcd_watch_write_p99_ms": round(percentile(writes, 99), 2),
        "etcd_direct_watch_p99_ms": round(percentile(direct_latencies, 99), 2),
        "etcd_rounds": {"setpoint": [round(x) for x in ours], "direct": [round(x) for x in direct]},
    }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--etcd", help="HOST:PORT of an etcd to use (default: start one)")
    parser.add_argument(
        "--etcd-seconds", type=float, default=SECONDS, help="length of one throughput slice"
    )
    figures = measure(parser.parse_args())
    targets = {"ratio_etcd_vs_direct": 0.5}
    figures["missed"] = [k for k, v in targets.items() if figures[k] < v]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
