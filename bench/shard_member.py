"""A shard member in a process of its own, and what drives a few of them: for the
multi-process sharding test (tests/runtime/test_sharding_processes.py) and
bench/distributed_shard.py.

As a program (`python bench/shard_member.py URL IDENTITY RECORDS [--work-ms MS] ...`) it
runs one `Manager` with coordination `shard` (or `--mode leader`) on the store at URL, with
one controller of `Item`s (namespace/name keys) whose reconcile awaits `--work-ms` of
simulated I/O. Every reconcile appends `S key identity t` when it starts and
`E key identity t` when it ends (`C` instead when it was cancelled) to RECORDS, each line
one unbuffered `write` with `t` on the host's monotonic clock, so a recorder, not an
assumption, shows who reconciled what when; a process killed mid-reconcile leaves an `S`
without its `E`. With `--rounds`, reconciles do nothing until the Round `default/go`
exists, and its creation puts every Item in line: one write starts the work of every
member. It prints `READY` once started, `SETTLED a,b,c` each time its shard membership
settles, and stops on SIGTERM.

As a module: `start_member`, `wait_settled`, `fill`, `go`, `Records`, `read_intervals`,
`wait_reconciled` and `overlaps` for drivers. Uses only the public runtime API.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from setpoint.model import Kind, Registry, Schema
from setpoint.runtime import Coordination, LeaseSettings, Manager, ManagerOptions, Request
from setpoint.store import Store, open_store

SCRIPT = Path(__file__).resolve()


class ItemSpec(Schema):
    n: int = 0


ITEM = Kind("bench.setpoint.dev/v1", "Item", "items", spec=ItemSpec)
ROUND = Kind("bench.setpoint.dev/v1", "Round", "rounds", spec=ItemSpec)
"""With `--rounds`: reconciles do their work only once the Round `default/go` exists."""


def registry() -> Registry:
    kinds = Registry()
    kinds.register(ITEM)
    kinds.register(ROUND)
    return kinds


# -- the member ----------------------------------------------------------------------


async def member(args: argparse.Namespace) -> None:
    store = await open_store(args.url, registry())
    lease = LeaseSettings(
        lease_duration=args.lease, renew_deadline=args.renew, retry_period=args.retry
    )
    options = ManagerOptions(
        coordination=Coordination(args.mode),
        leader_election_id=args.group,
        identity=args.identity,
        lease=lease,
        handle_signals=True,
        grace_period=5.0,
        garbage_collection=False,
        event_ttl=None,
    )
    manager = Manager(store, options=options)
    records = os.open(args.records, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    work = args.work_ms / 1000

    items, rounds = manager.cache(ITEM), manager.cache(ROUND)

    def every_item(_: object) -> list[Request]:
        return [Request(name, namespace) for namespace, name in items]

    async def reconcile(request: Request) -> None:
        if args.rounds and rounds.get("go", "default") is None:
            return  # not yet: the driver starts every member's work at once
        key = f"{request.namespace}/{request.name}"
        os.write(records, f"S {key} {args.identity} {time.monotonic()}\n".encode())
        mark = "C"  # cancelled, unless it gets to the end
        try:
            await asyncio.sleep(work)
            mark = "E"
        finally:
            os.write(records, f"{mark} {key} {args.identity} {time.monotonic()}\n".encode())

    builder = manager.controller("items").for_(ITEM).max_concurrent(args.workers)
    if args.rounds:
        builder.watches(ROUND, every_item)
    builder.complete(reconcile)
    shard = manager.shard

    async def announce() -> None:
        assert shard is not None
        seen = 0
        while True:
            view = await shard.wait_settled(seen)
            seen = shard.settlements
            print("SETTLED", ",".join(sorted(view.identities)), flush=True)

    if shard is not None:
        manager.add_runnable(announce)
    print("READY", flush=True)
    try:
        await manager.run()
    finally:
        os.close(records)
        await store.close()


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="a shard member (see the module docstring)")
    p.add_argument("url")
    p.add_argument("identity")
    p.add_argument("records")
    p.add_argument("--work-ms", type=float, default=5.0)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--lease", type=float, default=4.0)
    p.add_argument("--renew", type=float, default=3.0)
    p.add_argument("--retry", type=float, default=0.5)
    p.add_argument("--group", default="setpoint-manager", help="the shard group's name")
    p.add_argument("--mode", choices=["shard", "leader"], default="shard", help="coordination")
    p.add_argument(
        "--rounds",
        action="store_true",
        help="reconcile for real only once the Round default/go exists (its creation puts "
        "every Item in line): starts every member's work at one write",
    )
    return p.parse_args(argv)


# -- driving members -----------------------------------------------------------------


@dataclass
class Member:
    """A member process and what it said."""

    identity: str
    process: asyncio.subprocess.Process
    records: Path
    settled: str = ""
    """Its last `SETTLED` line's members (comma-separated, sorted)."""
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    reader: asyncio.Task[None] | None = None
    killed_at: float | None = None
    """When it was seen dead after a SIGKILL (host monotonic clock)."""

    async def kill(self) -> float:
        """SIGKILL it; return the monotonic time at which it is certainly dead."""
        self.process.kill()
        await self.process.wait()
        self.killed_at = time.monotonic()
        return self.killed_at

    async def stop(self, within: float = 30.0) -> int:
        """SIGTERM (graceful: in-flight reconciles finish, the lease is deleted); exit code."""
        if self.process.returncode is None:
            self.process.terminate()
        return await asyncio.wait_for(self.process.wait(), within)


async def start_member(
    url: str,
    identity: str,
    directory: Path,
    *,
    lease: LeaseSettings,
    work_ms: float,
    workers: int = 4,
    group: str = "setpoint-manager",
    rounds: bool = False,
    mode: str = "shard",
) -> Member:
    """Start a member process; its records and stderr go to `directory`."""
    records = directory / f"{identity}.records"
    with (directory / f"{identity}.err").open("ab") as err:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(SCRIPT),
            url,
            identity,
            str(records),
            f"--work-ms={work_ms}",
            f"--workers={workers}",
            f"--lease={lease.lease_duration}",
            f"--renew={lease.renew_deadline}",
            f"--retry={lease.retry_period}",
            f"--group={group}",
            *(["--rounds"] if rounds else []),
            f"--mode={mode}",
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    started = Member(identity, process, records)

    async def read() -> None:
        assert process.stdout is not None
        while line := (await process.stdout.readline()).decode().split():
            if line[0] == "SETTLED":
                started.settled = line[1]
            started.changed.set()
        await process.wait()  # so that waiters woken now see its return code
        started.changed.set()

    started.reader = asyncio.create_task(read())
    return started


async def wait_settled(members: list[Member], within: float) -> None:
    """Return once every member's last settlement is on exactly `members`."""
    want = ",".join(sorted(m.identity for m in members))
    async with asyncio.timeout(within):
        for m in members:
            while m.settled != want:
                if m.process.returncode is not None:
                    raise RuntimeError(f"member {m.identity} exited ({m.process.returncode})")
                m.changed.clear()
                await m.changed.wait()


async def stop_all(members: list[Member]) -> None:
    for m in members:
        if m.process.returncode is None:
            m.process.kill()
        with contextlib.suppress(ProcessLookupError):
            await m.process.wait()
        if m.reader is not None:
            m.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await m.reader


async def go(store: Store) -> None:
    """Start the work of members started with `rounds`: create the Round `default/go`."""
    await store.create(
        {
            "apiVersion": ROUND.api_version,
            "kind": ROUND.kind,
            "metadata": {"name": "go", "namespace": "default"},
            "spec": {"n": 1},
        }
    )


async def fill(store: Store, count: int, *, writers: int = 64, prefix: str = "item") -> None:
    """Create `count` Items (`default/{prefix}-{i}`) with `writers` concurrent writers."""
    names = iter(range(count))

    async def write() -> None:
        for i in names:
            await store.create(
                {
                    "apiVersion": ITEM.api_version,
                    "kind": ITEM.kind,
                    "metadata": {"name": f"{prefix}-{i}", "namespace": "default"},
                    "spec": {"n": i},
                }
            )

    await asyncio.gather(*(write() for _ in range(writers)))


@dataclass(frozen=True, slots=True)
class Interval:
    """One reconcile: `key` by `identity` from `start` to `end` (host monotonic seconds)."""

    key: str
    identity: str
    start: float
    end: float
    finished: bool = True
    """False if it was cancelled or its process killed before it ended."""


class Records:
    """The members' records, read as they grow (each call reads only what was appended)."""

    def __init__(self, members: list[Member]) -> None:
        self.members = members
        self.finished: list[Interval] = []
        self.cut: list[Interval] = []
        """Reconciles that were cancelled."""
        self._read: dict[str, int] = {}
        self._open: dict[str, dict[str, float]] = {}

    def read(self) -> list[Interval]:
        """Every reconcile recorded so far, finished or not; one a member has not ended
        runs until now, or until the member was seen dead after a SIGKILL."""
        for m in self.members:
            if not m.records.exists():
                continue
            with m.records.open("rb") as f:
                f.seek(self._read.get(m.identity, 0))
                data = f.read()
            whole = data[: data.rfind(b"\n") + 1]  # a line cut short waits (or was killed)
            self._read[m.identity] = self._read.get(m.identity, 0) + len(whole)
            open_ = self._open.setdefault(m.identity, {})
            for line in whole.decode().splitlines():
                mark, key, identity, at = line.split()
                if mark == "S":
                    open_[key] = float(at)
                elif key in open_:
                    done = Interval(key, identity, open_.pop(key), float(at), mark == "E")
                    (self.finished if done.finished else self.cut).append(done)
        running = [
            Interval(key, m.identity, start, m.killed_at or time.monotonic(), finished=False)
            for m in self.members
            for key, start in self._open.get(m.identity, {}).items()
        ]
        return [*self.finished, *self.cut, *running]


def read_intervals(members: list[Member]) -> list[Interval]:
    """Every reconcile the members recorded (see `Records.read`)."""
    return Records(members).read()


async def wait_reconciled(
    members: list[Member], keys: set[str], *, by: set[str], after: float, within: float
) -> list[Interval]:
    """Wait until each of `keys` was reconciled to the end by one of `by`, starting after
    `after` (host monotonic time); return those reconciles. Reads what the records gained
    every 100 ms: a condition, polled."""
    records = Records(members)
    done: dict[str, Interval] = {}
    seen = 0
    async with asyncio.timeout(within):
        while True:
            records.read()
            for i in records.finished[seen:]:
                if i.start > after and i.identity in by and i.key in keys:
                    done.setdefault(i.key, i)
            seen = len(records.finished)
            if len(done) == len(keys):
                return list(done.values())
            for m in members:
                if m.identity in by and m.process.returncode is not None:
                    raise RuntimeError(f"member {m.identity} exited ({m.process.returncode})")
            await asyncio.sleep(0.1)


def overlaps(intervals: list[Interval]) -> list[tuple[Interval, Interval]]:
    """Pairs of reconciles of one key by two processes at overlapping times."""
    by_key: dict[str, list[Interval]] = defaultdict(list)
    for interval in intervals:
        by_key[interval.key].append(interval)
    found: list[tuple[Interval, Interval]] = []
    for runs in by_key.values():
        runs.sort(key=lambda i: i.start)
        latest = runs[0]
        for run in runs[1:]:
            if run.start < latest.end:
                found.append((latest, run))
            if run.end > latest.end:
                latest = run
    return found


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("setpoint.sharding").setLevel(logging.INFO)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(member(parse(sys.argv[1:])))
