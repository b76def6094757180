"""Benchmark: sharded controllers across processes (bench/shard_member.py), on one store.

Figures (the last stdout line is one JSON object; progress goes to stderr; every name but
`failover_s` starts with `shard_` or `failover_`, so bench/distributed.py merges them as they
are; `shard_store`, `shard_objects`, `shard_work_ms`, `shard_max_concurrent` and
`shard_loadavg_1m` say how it ran):

* `shard_1proc_objects_per_s`: `objects` (10,000) Items are created first; then one member
  process with `max_concurrent` 4, whose reconcile awaits `work_ms` (5) of simulated I/O,
  starts and settles; then one write (the Round `default/go`, see bench/shard_member.py)
  puts every Item in line; objects per second from that write until the member has
  finished reconciling the last one (its own records say when). `shard_3proc_objects_per_s`
  is the same with three members, each with `max_concurrent` 4, settled on each other
  before the write; `shard_ratio_3_vs_1` divides them (target >= 2.5: scale-out must pay).
* `failover_s`: after the 3-process round, one member is SIGKILLed; seconds from then
  (once it is dead) until a survivor starts reconciling one of its keys: the handover
  (target <= `shard_lease_duration_s` + 1). `failover_all_s`: until the survivors have
  reconciled every one of its keys again.
* `shard_overlapping_reconciles`: reconciles of one key by two processes at overlapping times,
  from every member's records, over both rounds (must be 0).

The store: `--store URL` (a PostgreSQL database, say; the rounds use their own shard groups
and delete their Items at the end), else a new SQLite file per round in a temp dir.
`measure(args)` runs it from another script (bench/distributed.py): `args` is
`parse_args([...])` or any object with those attributes; missing ones take the defaults.
`measure_async(args)` is the same for callers already in an event loop. Prints figures
only; nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from shard_member import (
    ITEM,
    ROUND,
    Member,
    fill,
    go,
    overlaps,
    read_intervals,
    registry,
    start_member,
    stop_all,
    wait_reconciled,
    wait_settled,
)

from setpoint.runtime.leases import LeaseSettings
from setpoint.runtime.sharding import HashRing
from setpoint.store import Store, open_store

WITHIN = 600.0
"""Seconds any one wait may take before the bench gives up."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", help="a store URL shared by the members (default: SQLite)")
    p.add_argument("--objects", type=int, default=10_000)
    p.add_argument("--work-ms", type=float, default=5.0)
    p.add_argument("--workers", type=int, default=4, help="max_concurrent in every process")
    p.add_argument("--lease", type=float, default=3.0, help="lease duration, seconds")
    p.add_argument("--renew", type=float, default=2.0, help="renew deadline, seconds")
    p.add_argument("--retry", type=float, default=0.5, help="retry period, seconds")
    return p.parse_args(argv)


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def delete_items(store: Store) -> None:
    """Delete every Item and Round (what a round leaves in a shared store)."""
    sem = asyncio.Semaphore(64)

    async def delete(kind: str, name: str) -> None:
        async with sem:
            await store.delete(ITEM.api_version, kind, name, "default")

    for kind in (ITEM, ROUND):
        objects, _ = await store.list(kind.api_version, kind.kind)
        await asyncio.gather(*(delete(kind.kind, o["metadata"]["name"]) for o in objects))


async def round_(
    args: argparse.Namespace, directory: Path, identities: list[str], *, failover: bool
) -> dict[str, Any]:
    directory.mkdir(parents=True)  # noqa: ASYNC240 - once, before anything runs
    url = args.store or f"sqlite:///{directory}/state.db"
    lease = LeaseSettings(
        lease_duration=args.lease, renew_deadline=args.renew, retry_period=args.retry
    )
    group = f"bench-{uuid.uuid4().hex[:8]}"
    store = await open_store(url, registry())
    members: list[Member] = []
    figures: dict[str, Any] = {}
    try:
        await delete_items(store)  # what an interrupted run left
        await fill(store, args.objects)
        for identity in identities:
            members.append(
                await start_member(
                    url,
                    identity,
                    directory,
                    lease=lease,
                    work_ms=args.work_ms,
                    workers=args.workers,
                    group=group,
                    rounds=True,
                )
            )
        await wait_settled(members, WITHIN)
        keys = {f"default/item-{i}" for i in range(args.objects)}
        start = time.monotonic()
        await go(store)
        done = await wait_reconciled(members, keys, by=set(identities), after=start, within=WITHIN)
        end = max(i.end for i in done)
        figures["objects_per_s"] = args.objects / (end - start)
        if failover:
            victim = members[1]
            ring = HashRing(identities)
            of_victim = {k for k in keys if ring.owner(k) == victim.identity}
            killed_at = await victim.kill()
            survivors = [m for m in members if m is not victim]
            by = {m.identity for m in survivors}
            again = await wait_reconciled(members, of_victim, by=by, after=killed_at, within=WITHIN)
            figures["failover_s"] = min(i.start for i in again) - killed_at
            figures["failover_all_s"] = max(i.end for i in again) - killed_at
        for m in members:
            if m.process.returncode is None:
                await m.stop()
        figures["overlaps"] = len(overlaps(read_intervals(members)))
        if args.store:
            await delete_items(store)
    finally:
        await stop_all(members)
        await store.close()
    return figures


async def measure_async(args: Any = None) -> dict[str, Any]:
    """Run both rounds; see the module docstring."""
    defaults = vars(parse_args([]))
    given = {k: getattr(args, k, v) for k, v in defaults.items()} if args is not None else {}
    options = argparse.Namespace(**{**defaults, **given})
    with tempfile.TemporaryDirectory(prefix="setpoint-shard-") as tmp:
        progress(f"1 process, {options.objects} objects ...")
        one = await round_(options, Path(tmp) / "one", ["a"], failover=False)
        progress(f"  {one['objects_per_s']:.0f} objects/s")
        progress(f"3 processes, {options.objects} objects, then one killed ...")
        three = await round_(options, Path(tmp) / "three", ["a", "b", "c"], failover=True)
        progress(f"  {three['objects_per_s']:.0f} objects/s, failover {three['failover_s']:.2f}s")
    figures: dict[str, Any] = {
        "shard_store": (options.store or "sqlite").split("://")[0],
        "shard_objects": options.objects,
        "shard_work_ms": options.work_ms,
        "shard_max_concurrent": options.workers,
        "shard_1proc_objects_per_s": round(one["objects_per_s"], 1),
        "shard_3proc_objects_per_s": round(three["objects_per_s"], 1),
        "shard_ratio_3_vs_1": round(three["objects_per_s"] / one["objects_per_s"], 2),
        "shard_lease_duration_s": options.lease,
        "failover_s": round(three["failover_s"], 3),
        "failover_all_s": round(three["failover_all_s"], 3),
        "shard_overlapping_reconciles": one["overlaps"] + three["overlaps"],
        "shard_loadavg_1m": round(os.getloadavg()[0], 2),
    }
    missed = []
    if figures["shard_ratio_3_vs_1"] < 2.5:
        missed.append("shard_ratio_3_vs_1")
    if figures["failover_s"] > options.lease + 1.0:
        missed.append("failover_s")
    if figures["shard_overlapping_reconciles"]:
        missed.append("shard_overlapping_reconciles")
    figures["missed"] = missed
    return figures


def measure(args: Any = None) -> dict[str, Any]:
    """`measure_async` in a new event loop."""
    return asyncio.run(measure_async(args))


if __name__ == "__main__":
    print(json.dumps(measure(parse_args())))
