"""The timeline of an etcd store (`setpoint.insight.timeline_etcd`), on a real etcd: batches
larger than one etcd transaction are written whole or not at all, a batch left half-way is
finished or forgotten, retention, the newest entries of a long timeline, keys kept apart
from the store's objects, readers catching up once beside a live recorder; and an engine on
an etcd store records a failure that `setpoint explain` and `setpoint timeline` read from
other processes, after the engine is gone.

The backend-parametrized tests in test_timeline_store.py run on etcd too; this file holds
what only etcd's limits (128 operations, ~1.5 MiB a request) and key layout make worth
testing. Waits are on the timeline's entries and the engine's output lines, bounded by
timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import grpc
import orjson
import pytest
import yaml
from timeline_support import of_type, wait_for_entries

from etcd_server import free_port
from setpoint.engine import builtin_kinds
from setpoint.errors import Invalid, StoreUnavailable
from setpoint.insight.recorder import Recorder
from setpoint.insight.timeline import Checkpoint, CheckpointMoved, Timeline
from setpoint.insight.timeline_etcd import EtcdTimeline
from setpoint.store import open_store
from setpoint.store.base import Actor, WriteOptions
from setpoint.store.etcd import prefix_end
from setpoint.store.etcd_api import etcdserverpb_pb2 as pb
from setpoint.store.etcd_api import etcdserverpb_pb2_grpc as pb_grpc
from setpoint.testing import ManualClock
from setpoint.workloads.process import PROCESS

T0 = 1_700_000_000.0
TIMEOUT = 60.0
"""Seconds any awaited condition may take before the test fails (never waited out)."""


def ref(name: str, namespace: str | None = "default") -> dict[str, Any]:
    return {"kind": "Process", "name": name, "namespace": namespace}


def log(ts: float, name: str = "db", line: str = "x", namespace: str = "default") -> dict[str, Any]:
    return {"ts": ts, "type": "log", "object": ref(name, namespace), "line": line}


def ts_key(ts: float) -> bytes:
    """How an entry's key spells its time: the float's bits as 16 hex digits, the sign bit
    flipped (for ts >= 0), so that keys sort as times do."""
    (bits,) = struct.unpack(">Q", struct.pack(">d", ts))
    return format(bits | 1 << 63, "016x").encode()


class Etcd:
    """Raw reads and writes of the etcd under a test's timeline, to see and set its keys."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.prefix = parse_qs(parts.query)["prefix"][0].encode()
        self.channel = grpc.insecure_channel(parts.netloc)
        self.kv = pb_grpc.KVStub(self.channel)  # type: ignore[no-untyped-call]

    def under(self, prefix: bytes = b"") -> list[bytes]:
        """The keys under `prefix` (after the store's own), in order."""
        start = self.prefix + prefix
        found = self.kv.Range(pb.RangeRequest(key=start, range_end=prefix_end(start)))
        return [kv.key[len(self.prefix) :] for kv in found.kvs]

    def put(self, key: bytes, value: bytes) -> None:
        self.kv.Put(pb.PutRequest(key=self.prefix + key, value=value))


@pytest.fixture
def url(etcd_server: Any) -> str:
    return str(etcd_server.new_url())


@pytest.fixture
def etcd(url: str) -> Iterator[Etcd]:
    raw = Etcd(url)
    yield raw
    raw.channel.close()


def test_a_batch_larger_than_a_transaction_is_written_whole_or_not_at_all(
    url: str, etcd: Etcd
) -> None:
    # 600 entries of 4 KiB, each twice (by time, by object): ~4.8 MiB and 1,200 keys, plus
    # 300 views: many times what one etcd transaction may carry.
    big = [log(T0 + i, f"p{i % 7}", "y" * 4096) for i in range(600)]
    views = {f"setpoint.dev/v1alpha1 Process default p{i}": {"n": i} for i in range(300)}
    with Timeline.open(url) as first, Timeline.open(url) as second:
        assert isinstance(first, EtcdTimeline)
        assert first.append_many(big, Checkpoint(10, views), after=0) == 600
        with pytest.raises(CheckpointMoved, match="from revision 0 to 10"):
            second.append_many(big, Checkpoint(11, {}), after=0)
        assert second.count() == 600  # nothing of the refused batch
        assert second.query() == big
        assert second.query(object=ref("p3")) == [e for e in big if e["object"]["name"] == "p3"]
        assert second.checkpoint() == Checkpoint(10, views)
        gone = {key: None for key in list(views)[:200]}
        second.append_many(big[:1], Checkpoint(12, gone), after=10)
        assert first.checkpoint() == Checkpoint(12, dict(list(views.items())[200:]))
    assert etcd.under(b"timeline/p/") == []  # no staging left behind


def test_two_writers_racing_large_batches_record_each_stretch_once(url: str, etcd: Etcd) -> None:
    def write(timeline: Timeline, batch: list[dict[str, Any]], saved: int) -> str:
        try:
            timeline.append_many(batch, Checkpoint(saved + 1, {}), after=saved)
        except CheckpointMoved:
            return "moved"
        return str(batch[0]["object"]["name"])

    with Timeline.open(url) as first, Timeline.open(url) as second:
        for saved in range(3):  # three stretches, each raced for by both
            at = T0 + 1000 * saved
            one, two = ([log(at + i, who, "z" * 512) for i in range(200)] for who in "ab")
            with ThreadPoolExecutor(2) as pool:
                outcomes = sorted(pool.map(write, (first, second), (one, two), (saved, saved)))
            assert outcomes in (["a", "moved"], ["b", "moved"])
            assert first.query(since=at) == (one if outcomes[0] == "a" else two)
            assert first.checkpoint() == Checkpoint(saved + 1, {})
        assert first.count() == 3 * 200
    assert etcd.under(b"timeline/p/") == []


def test_a_batch_committed_by_a_writer_that_died_is_finished_by_the_next(
    url: str, etcd: Etcd
) -> None:
    """The state a writer leaves when it dies between its commit and putting the staged
    keys in place: the checkpoint names the batch; readers see its views, the next writer
    puts it in place first."""
    with Timeline.open(url) as timeline:
        timeline.append_many([log(T0)], Checkpoint(4, {"a": {"v": 1}, "b": {"v": 1}}), after=0)
    tag = b"000000000001cafe0001"
    entry = orjson.dumps(log(T0 + 1))
    suffix = b"/" + tag + b"/000000"
    etcd.put(b"timeline/p/" + tag, b"")
    later = ts_key(T0 + 1)
    etcd.put(b"timeline/p/" + tag + b"/e/" + later + suffix, entry)
    etcd.put(b"timeline/p/" + tag + b"/o/Process/db/" + later + suffix, entry)
    etcd.put(b"timeline/p/" + tag + b"/s/a", b"")  # a is gone
    etcd.put(b"timeline/p/" + tag + b"/s/c", b'{"v":3}')
    etcd.put(b"timeline/checkpoint", b'{"revision":5,"applying":"' + tag + b'"}')
    with Timeline.open(url) as timeline:
        assert timeline.checkpoint() == Checkpoint(5, {"b": {"v": 1}, "c": {"v": 3}})
        with pytest.raises(CheckpointMoved, match="from revision 4 to 5"):
            timeline.append_many([log(T0 + 9)], Checkpoint(6, {}), after=4)
        assert etcd.under(b"timeline/p/") == []  # put in place on the way
        assert timeline.count() == 2
        assert [e["ts"] for e in timeline.query(object=ref("db"))] == [T0, T0 + 1]
        timeline.append_many([log(T0 + 2)], Checkpoint(6, {"b": None}), after=5)
        assert timeline.checkpoint() == Checkpoint(6, {"c": {"v": 3}})


def test_staging_of_a_batch_that_never_committed_is_unseen_then_pruned(
    url: str, etcd: Etcd
) -> None:
    clock = ManualClock(T0)
    with Timeline.open(url, clock=clock) as timeline:
        timeline.append_many([log(T0)], Checkpoint(4, {"a": {"v": 1}}), after=0)
        stamp = format(int(T0 * 1000), "012x").encode()
        tag = stamp + b"0000beef"
        etcd.put(b"timeline/p/" + tag, b"")
        etcd.put(b"timeline/p/" + tag + b"/s/a", b"")
        assert timeline.checkpoint() == Checkpoint(4, {"a": {"v": 1}})
        assert timeline.query() == [log(T0)]
        assert timeline.prune(None, None) == 0
        assert etcd.under(b"timeline/p/") != []  # it might still be going on
        clock.advance(2 * 3600)
        assert timeline.prune(None, None) == 0
        assert etcd.under(b"timeline/p/") == []


def test_prune_by_age_and_count_takes_the_object_copies_too(url: str, etcd: Etcd) -> None:
    clock = ManualClock(T0 + 3000)
    with Timeline.open(url, clock=clock) as timeline:
        timeline.append_many(log(T0 + i, f"p{i % 3}") for i in range(2500))
        assert timeline.prune(max_age_s=1000, max_entries=None) == 2000  # ts < T0 + 2000 go
        assert timeline.query()[0]["ts"] == T0 + 2000
        assert timeline.prune(max_age_s=None, max_entries=10) == 490
        assert [e["ts"] for e in timeline.query()] == [T0 + i for i in range(2490, 2500)]
        p0 = [T0 + i for i in (2490, 2493, 2496, 2499)]
        assert [e["ts"] for e in timeline.query(object=ref("p0"))] == p0
        assert len(etcd.under(b"timeline/o/")) == 10
        with pytest.raises(Invalid, match="max_age_s"):
            timeline.prune(-1, None)


def test_the_newest_of_a_long_timeline_oldest_first(url: str) -> None:
    clock = ManualClock(T0 + 30 * 86400)
    with Timeline.open(url, clock=clock) as timeline:
        # One entry an hour for 30 days, a change every 5th: the newest are far apart.
        entries = [
            {**log(T0 + 3600 * i), "type": "change" if i % 5 == 0 else "log"} for i in range(720)
        ]
        timeline.append_many(entries)
        assert timeline.query(limit=3) == entries[-3:]
        assert timeline.query(limit=2, types=["change"]) == [entries[710], entries[715]]
        assert timeline.query(limit=2, until=T0 + 3600 * 10) == entries[8:10]
        assert timeline.query(limit=5, since=T0 + 3600 * 718) == entries[718:]
        assert timeline.query(limit=1000) == entries
        assert timeline.query(limit=0) == []
        in_the_future = log(T0 + 40 * 86400)
        timeline.append(in_the_future)
        assert timeline.query(limit=1) == [in_the_future]
        timeline.append(log(T0 - 1))  # written last, the oldest of all
        assert timeline.query(limit=2) == [entries[-1], in_the_future]
        assert timeline.query(limit=1, until=T0) == [log(T0 - 1)]


def test_windows_over_bursts_gaps_and_any_time(url: str) -> None:
    """Reads go by slices of time sized to what they find: a burst of thousands within a
    second, gaps of years, times before 1970; every window the same as a plain filter."""
    burst = [T0 + i / 4096 for i in range(3000)]
    times = [-5e9, -1.0, 0.0, 1e-9, 3.0, T0 - 1e8, *burst, T0 + 7, T0 + 1e6, T0 + 3e8]
    entries = [log(ts, f"p{i % 2}") for i, ts in enumerate(times)]
    with Timeline.open(url, clock=ManualClock(T0)) as timeline:
        timeline.append_many(entries[::-1])  # stored in any order, read by time
        assert timeline.query() == entries
        for since, until in [
            (None, 0.0),
            (-1.0, 1.0),
            (T0, T0 + 0.5),
            (T0 + 0.5, None),
            (T0 - 1e9, T0 + 1e7),
            (T0 + 1e9, None),
        ]:
            expected = [
                e
                for e in entries
                if (since is None or e["ts"] >= since) and (until is None or e["ts"] < until)
            ]
            assert timeline.query(since=since, until=until) == expected, (since, until)
            assert timeline.query(since=since, until=until, limit=7) == expected[-7:]
            p1 = [e for e in expected if e["object"]["name"] == "p1"]
            assert timeline.query(object=ref("p1"), since=since, until=until) == p1


def test_objects_by_namespace_and_odd_names(url: str) -> None:
    with Timeline.open(url) as timeline:
        here, there = log(T0, "a/b"), log(T0 + 1, "a/b", namespace="other")
        bare = {"ts": T0 + 2, "type": "log", "object": {"kind": "Node", "name": "n1"}}
        timeline.append_many([here, there, bare, log(T0 + 3, "a")])
        assert timeline.query(object=ref("a/b")) == [here]
        assert timeline.query(object=ref("a/b", namespace=None)) == [here, there]
        assert timeline.query(object={"kind": "Node", "name": "n1", "namespace": ""}) == [bare]
        assert timeline.query(object=ref("a", namespace=None)) == [log(T0 + 3, "a")]


def test_refusals_are_one_line_and_write_nothing(url: str) -> None:
    with Timeline.open(url) as timeline:
        with pytest.raises(Invalid, match="too large for etcd"):
            timeline.append_many([log(T0), log(T0 + 1, line="x" * 600_000)])
        assert timeline.count() == 0
    with pytest.raises(Invalid, match="want etcd://host:port"):
        Timeline.open("etcd://127.0.0.1:2379?prefix=/no-slash")
    nowhere = Timeline.open(f"etcd://127.0.0.1:{free_port()}")  # nothing listens there
    with nowhere, pytest.raises(StoreUnavailable, match="did not answer"):
        nowhere.count()


async def test_the_timeline_keeps_apart_from_the_stores_objects(url: str, etcd: Etcd) -> None:
    store = await open_store(url, builtin_kinds())
    try:
        obj = {
            "apiVersion": "setpoint.dev/v1alpha1",
            "kind": "Process",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"args": ["sleep", "1"]},
        }
        await store.create(obj)
        with Timeline.open(url, clock=ManualClock(T0 + 10)) as timeline:
            timeline.append_many([log(T0 + i) for i in range(5)], Checkpoint(1, {"k": {}}))
            timeline.prune(max_age_s=0, max_entries=0)
            assert timeline.count() == 0
        items, _ = await store.list("setpoint.dev/v1alpha1", "Process")
        assert [o["metadata"]["name"] for o in items] == ["db"]
    finally:
        await store.close()
    outside = [k for k in etcd.under() if not k.startswith(b"timeline/")]
    assert outside == [b"o/setpoint.dev/v1alpha1/Process/default/db", b"store"]


async def test_a_recorder_on_an_etcd_store_catches_up_once_then_records_live(url: str) -> None:
    store = await open_store(url, builtin_kinds())
    readers = [Timeline.open(url) for _ in range(4)]
    db = {
        "apiVersion": PROCESS.api_version,
        "kind": PROCESS.kind,
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"args": ["sleep", "1"]},
    }
    try:
        await store.create(db, options=WriteOptions(actor=Actor("alice@h", "setpoint", None)))
        changed = await store.get(PROCESS.api_version, PROCESS.kind, "db", "default")
        changed["spec"]["args"] = ["sleep", "2"]
        await store.update(changed, options=WriteOptions(actor=Actor("bob@h", "setpoint", None)))
        # Four readers at once (explain, the dashboard...): one stretch, recorded once.
        counts = await asyncio.gather(*(Recorder(store, t).catch_up() for t in readers))
        assert sum(1 for c in counts if c) == 1
        writes = of_type(readers[0].query(object=ref("db")), "write")
        assert [(w["verb"], w["user"]) for w in writes] == [
            ("create", "alice@h"),
            ("update", "bob@h"),
        ]
        live = Recorder(store, readers[1])
        task = asyncio.create_task(live.run())
        try:
            async with asyncio.timeout(TIMEOUT):
                await live.wait_watching()
            assert readers[2].recording()
            assert await Recorder(store, readers[3]).catch_up() == 0  # left to the live one
            await store.delete(PROCESS.api_version, PROCESS.kind, "db", "default")
            entries = await wait_for_entries(
                readers[2], lambda es: "deleted" in [e.get("action") for e in es], object=ref("db")
            )
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert [e.get("action") for e in of_type(entries, "change")] == ["created", "deleted"]
        assert not readers[2].recording()  # it said so on its way out
    finally:
        for timeline in readers:
            timeline.close()
        await store.close()


# -- an engine on an etcd store -------------------------------------------------------


def manifest(args: list[str]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "setpoint.dev/v1alpha1",
            "kind": "Process",
            "metadata": {"name": "cache"},
            "spec": {"args": args, "restartPolicy": "Always"},
        }
    )


def test_an_engine_records_in_etcd_what_other_processes_explain(tmp_path: Path, url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    (tmp_path / "cache.yaml").write_text(manifest(["sleep", "600"]))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "setpoint", "--store", url, *args]
        return subprocess.run(
            argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=TIMEOUT
        )

    def explain(at: str) -> list[dict[str, Any]]:
        got = cli("explain", "process/cache", "--at", at, "-o", "json")
        assert got.returncode == 0, got.stderr
        answer: list[dict[str, Any]] = json.loads(got.stdout)
        return answer

    engine = subprocess.Popen(
        [sys.executable, "-m", "setpoint", "--store", url, "up", "cache.yaml"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )

    def expect(*words: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        assert engine.stdout is not None
        for line in engine.stdout:  # ends if the engine dies
            if all(word in line for word in words):
                return
            if time.monotonic() > deadline:
                break
        raise AssertionError(f"no line with {words} from setpoint up")

    try:
        expect("Process/cache", "ready=True")
        # The change that breaks it: the cache now exits at once, over and over.
        (tmp_path / "broken.yaml").write_text(manifest(["sh", "-c", "exit 3"]))
        assert cli("apply", "-f", "broken.yaml").returncode == 0
        expect("Process/cache", "ready=False")
        deadline = time.monotonic() + TIMEOUT
        while True:  # the recorder writes on its own: read until it did
            at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))
            answer = explain(at)
            if answer and answer[0]["entry"]["type"] == "change":
                break
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)
    finally:
        engine.send_signal(signal.SIGTERM)
        try:
            assert engine.wait(timeout=TIMEOUT) == 0
        finally:
            if engine.poll() is None:
                os.killpg(engine.pid, signal.SIGKILL)
                engine.wait()
    top = answer[0]["entry"]
    assert top["object"]["name"] == "cache"
    assert top["diff"]["spec.args[0]"] == ["sleep", "sh"]
    assert explain(at) == answer  # the engine is gone: the store's cluster kept it
    got = cli("timeline", "process/cache", "--type", "change,exit", "-o", "json")
    assert got.returncode == 0, got.stderr
    kept = json.loads(got.stdout)
    assert [e["type"] for e in kept][:2] == ["change", "change"]  # created, then broken
    assert any(e["type"] == "exit" and e.get("exitCode") == 3 for e in kept)
    assert not (tmp_path / ".setpoint" / "state.db").exists()  # nothing kept in a file
