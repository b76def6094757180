"""Chaos run: examples/webapp under `setpoint up` for N minutes while a writer changes the
store and faults are injected at random moments; a recorder checks the invariants throughout.

Run with `./dev bench chaos [--minutes 5 | --seconds 90] [--seed 1] [--idle-seconds 30]
[--faults KIND,...] [--keep-logs DIR]`, as root (for the mounts). Progress goes to stderr,
one line per fault; the last stdout line is one JSON object. Prints figures only; nothing
here passes or fails.

The world (bench/chaos_world.py): a copy of examples/webapp in a private temp dir, with free
ports (the Service's, PostgreSQL's and the replicas' range), its scripts run by this
interpreter, and `backoff.resetAfterSeconds: 5` on `db` and the web template (a kill from
outside looks like a crash: with the default 600 s, the second kill of one replica waits
10 s, the third 20 s...). The store is `sqlite:///<tmp>/store/state.db` on a tmpfs of its
own (children's state files and logs beside it); `setpoint up` runs in the staged directory.

Faults, one at a time, in a seeded order (each kind once per shuffled round), each injected
a random 2-6 s after the world converged from the previous one:

* `engine_kill`: SIGKILL `up`, start it again 0-1.5 s later.
* `engine_kill_busy`: SIGKILL a Ready web replica, then `up` 0-0.5 s later (while it
  restarts the replica), and start `up` again at once.
* `postgres_kill`, `replica_kill`: SIGKILL the `db` Process's pid (the postmaster), or a
  Ready web replica's.
* `migrate_kill`: a new Job `chaos-migrate-N` is created with migrate's spec, a migrations
  directory of its own whose last file sleeps 3 s in its transaction, and
  `backoff.initialSeconds: 1`; its attempt is SIGKILLed 1-2.5 s after it appears.
* `replica_stop`: SIGSTOP a Ready replica for 3-6 s, then SIGCONT.
* `port_next`: a stranger listens on the lowest free port of the Deployment's range (the
  next replica's), and a web replica is deleted: its replacement must go elsewhere. The
  stranger leaves after 8 s.
* `port_service`: `up` is SIGKILLed, a stranger listens on the Service's port, `up` is
  started again; the stranger leaves after 5 s.
* `readonly_store`: the store directory is read-only for 3-5 s. A remount of the tmpfs
  is refused while files are open for writing (SQLite's are), so a read-only bind mount
  is put over the directory: opens, creates and renames through the path fail with EROFS;
  descriptors opened earlier still write. Which one happened is in `readonly_store`.
* `disk_full`: the store's tmpfs is filled to the last byte for 3-5 s (ENOSPC).
* `second_engine`: a second `up` of the same manifests on the same store; it should be
  refused at once. If it still runs after SECOND_ENGINE_S it gets SIGTERM, and the
  fault is lifted when it has exited; `second_engine` in the JSON says what happened.

`--faults KIND,...` restricts the run to some kinds.

Alongside: a writer (a store handle in this process) writes every WRITE_INTERVAL_S,
alternately creating a Lease `chaos-NNNNN` and updating the annotation of the Lease
`chaos-counter` (compare-and-swap), and every CLI_EVERY_S runs `setpoint apply -f` of a
Lease `chaos-cli-N`; it records every write that was acknowledged. A load thread sends GET
/ through the Service one connection at a time. A watchdog restarts `up` if it exits by
itself (as systemd's `Restart=always` would) and records each such exit.

Figures (the invariants):

* `lost_writes`: acknowledged writes not in the store at the end: a created Lease missing,
  or the counter not at its last acknowledged value (or a later one that was attempted).
* `duplicate_processes`: times one managed object ran twice. Every DUPLICATE_SCAN_S, /proc
  is scanned for SETPOINT_MARKER (the supervisor's environment marker, unique per object)
  under the temp dir; a marker's roots are its processes whose parent lacks the marker.
  Two roots for at least DUPLICATE_MIN_S count once (shorter overlaps are listed under
  `duplicates_transient`).
* `orphans`: processes of the temp dir still alive after `up` got SIGTERM and exited.
* `converge_p95_s`: per fault, from the moment it is lifted (a kill; the SIGCONT; the
  stranger leaving the Service port; the disk given back; the second `up` gone;
  `port_next` from its start) to
  all Ready again: `up` running; every object of the manifests in the store; every
  Process, Job, Deployment and Service `Ready=True` and not being deleted; each Process's
  status pid alive with its marker; the Deployment's ready replicas as wanted; and the
  Service's /healthz answering 200; seen so at every
  check (every CONVERGE_POLL_S) for STABLE_S, the time being the start of that stretch (a
  restarted `up` first shows the old statuses, then resets them). Nearest-rank p95;
  a fault that did not converge within CONVERGE_TIMEOUT_S counts as that timeout and is
  listed under `not_converged`.
* `failed_requests_outside_faults`: failed requests (no answer or not 200) that started
  and ended outside every fault window (from the injection to 1 s after convergence).
* `idle_writes_per_s`: store revisions per second over `--idle-seconds` after the last
  fault converged, with the writer stopped (the load continues); `idle_writers` names the
  objects written then.

`missed` names the targets not met: lost_writes 0, duplicate_processes 0, orphans 0,
converge_p95_s <= 15, idle_writes_per_s <= 1, and convergence after the last fault.
Clean-up (also on Ctrl-C, SIGTERM or an error): stopped processes resumed, strangers
closed, the disk given back, `up` stopped, every process of the temp dir killed, the
tmpfs unmounted and the directory removed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos_world import (
    World,
    all_processes,
    bindable,
    instances,
    proc_info,
    progress,
    runs,
    stranger,
)

from setpoint.engine import builtin_kinds
from setpoint.errors import Error, StoreClosed
from setpoint.model import READY, Kind, Object, is_true
from setpoint.runtime import LEASE
from setpoint.store import open_store
from setpoint.store.base import Store
from setpoint.workloads.deployment import DEPLOYMENT
from setpoint.workloads.job import JOB
from setpoint.workloads.process import PROCESS
from setpoint.workloads.service import SERVICE

NAMESPACE = "default"
KINDS = (PROCESS, JOB, DEPLOYMENT, SERVICE)
FAULT_KINDS = (
    "engine_kill",
    "engine_kill_busy",
    "postgres_kill",
    "replica_kill",
    "migrate_kill",
    "replica_stop",
    "port_next",
    "port_service",
    "readonly_store",
    "disk_full",
    "second_engine",
)
STARTUP_TIMEOUT_S = 240.0
CONVERGE_TIMEOUT_S = 60.0
CONVERGE_POLL_S = 0.25
STABLE_S = 3.0
GAP_S = (2.0, 6.0)
MAX_FAULTS = 1000
WRITE_INTERVAL_S = 0.25
WRITE_TIMEOUT_S = 10.0
MAX_WRITES = 100_000
CLI_EVERY_S = 10.0
REQUEST_TIMEOUT_S = 3.0
REQUEST_PAUSE_S = 0.05
MAX_REQUESTS = 1_000_000
DUPLICATE_SCAN_S = 0.5
DUPLICATE_MIN_S = 1.0
WATCHDOG_S = 0.5
FAULT_GRACE_S = 1.0
SETTLE_S = 5.0
SECOND_ENGINE_S = 8.0
TARGETS = {"converge_p95_s": 15.0, "idle_writes_per_s": 1.0}
PAUSE_MIGRATION = "SELECT pg_sleep(3);\n"


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), nearest-rank on sorted values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def ref(obj: Object) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def lease(name: str, seq: int) -> Object:
    return {
        "apiVersion": LEASE.api_version,
        "kind": LEASE.kind,
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": {"chaos/seq": str(seq)}},
        "spec": {"holderIdentity": "chaos-writer"},
    }


# -- requests through the Service ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Request:
    started: float
    ended: float
    ok: bool
    reason: str


class Load:
    """GET / through the Service, one connection at a time, in a thread."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.done: list[Request] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="chaos load", daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set() and len(self.done) < MAX_REQUESTS:
            started = time.monotonic()
            ok, reason = True, ""
            try:
                with urllib.request.urlopen(self.url, timeout=REQUEST_TIMEOUT_S) as response:
                    response.read()
            except urllib.error.HTTPError as error:
                ok, reason = False, f"HTTP {error.code}"
                error.close()
            except (OSError, ValueError) as error:
                ok, reason = False, str(error)[:80]
            self.done.append(Request(started, time.monotonic(), ok, reason))
            self.stop.wait(REQUEST_PAUSE_S)


def healthz(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


# -- the writer ----------------------------------------------------------------------------


@dataclass
class Writes:
    """What the writer was told: acknowledged creates, and the counter's history."""

    created: dict[str, int] = field(default_factory=dict)
    counter_acked: int = 0
    counter_acks: int = 0
    counter_attempted: list[int] = field(default_factory=list)
    failed: dict[str, int] = field(default_factory=dict)
    cli_acked: list[str] = field(default_factory=list)
    cli_failed: list[str] = field(default_factory=list)

    def fail(self, error: BaseException) -> None:
        name = type(error).__name__
        self.failed[name] = self.failed.get(name, 0) + 1


async def write_loop(world: World, writes: Writes, stop: asyncio.Event, deadline: float) -> None:
    """Write until `stop` or `deadline`: see the module docstring."""
    store = await open_store(world.store_url, builtin_kinds())
    try:
        seq = 0
        next_cli = time.monotonic() + CLI_EVERY_S
        while not stop.is_set() and time.monotonic() < deadline and seq < MAX_WRITES:
            seq += 1
            try:
                async with asyncio.timeout(WRITE_TIMEOUT_S):
                    if seq % 2:
                        await store.create(lease(f"chaos-{seq:05d}", seq))
                        writes.created[f"chaos-{seq:05d}"] = seq
                    else:
                        writes.counter_attempted.append(seq)
                        await bump_counter(store, seq)
                        writes.counter_acked = seq
                        writes.counter_acks += 1
            except (Error, OSError, TimeoutError) as error:
                writes.fail(error)
                if isinstance(error, StoreClosed):  # a broken handle: start afresh
                    with contextlib.suppress(Exception):
                        await store.close()
                    store = await open_store(world.store_url, builtin_kinds())
            except Exception as error:
                writes.fail(error)
            if time.monotonic() >= next_cli:
                next_cli = time.monotonic() + CLI_EVERY_S
                await cli_write(world, writes, len(writes.cli_acked) + len(writes.cli_failed))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), WRITE_INTERVAL_S)
    finally:
        with contextlib.suppress(Exception):
            await store.close()


async def bump_counter(store: Store, seq: int) -> None:
    obj = await store.get(LEASE.api_version, LEASE.kind, "chaos-counter", NAMESPACE)
    obj["metadata"].setdefault("annotations", {})["chaos/seq"] = str(seq)
    await store.update(obj)


async def cli_write(world: World, writes: Writes, n: int) -> None:
    name = f"chaos-cli-{n}"
    path = world.tmp / f"{name}.json"
    path.write_text(json.dumps(lease(name, n)))
    try:
        done = await asyncio.to_thread(world.cli, "apply", "-f", str(path))
    except OSError as error:
        writes.cli_failed.append(f"{name}: {error}")
        return
    if done.returncode == 0:
        writes.cli_acked.append(name)
    else:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        shape = " (after a traceback)" if "Traceback" in done.stderr else ""
        writes.cli_failed.append(f"{name}: exit {done.returncode}{shape}: {last}")


async def lost_writes(store: Store, writes: Writes) -> list[str]:
    """The acknowledged writes the store does not have."""
    items, _ = await store.list(LEASE.api_version, LEASE.kind, NAMESPACE)
    found = {o["metadata"]["name"]: o for o in items}
    lost = []
    for name, seq in writes.created.items():
        obj = found.get(name)
        if obj is None or obj["metadata"].get("annotations", {}).get("chaos/seq") != str(seq):
            lost.append(f"create {name}")
    lost += [f"apply {name} (CLI)" for name in writes.cli_acked if name not in found]
    counter = found.get("chaos-counter")
    value = int(((counter or {}).get("metadata", {}).get("annotations") or {}).get("chaos/seq", -1))
    later = [s for s in writes.counter_attempted if s >= writes.counter_acked]
    if writes.counter_acked and value not in later:
        lost.append(f"counter at {value}, last acknowledged {writes.counter_acked}")
    return lost


# -- the recorder --------------------------------------------------------------------------


@dataclass
class Duplicate:
    marker: str
    first: float
    last: float
    roots: dict[int, str]


@dataclass
class Fault:
    kind: str
    at: float
    lifted: float
    note: str
    converged_at: float | None = None

    @property
    def converge_s(self) -> float | None:
        return None if self.converged_at is None else max(0.0, self.converged_at - self.lifted)


class Recorder:
    """Watches the world: readiness, duplicates in /proc, the engine's own exits."""

    def __init__(self, world: World, store: Store) -> None:
        self.world = world
        self.store = store
        self.names: dict[str, str] = {}
        self.why_not = ""
        self.open: dict[str, Duplicate] = {}
        self.duplicates: list[Duplicate] = []
        self.engine_exits: list[dict[str, Any]] = []
        self.engine_lock = asyncio.Lock()
        self.healthz = f"http://127.0.0.1:{world.service_port}/healthz"

    async def not_ready(self) -> str | None:
        """None when everything is Ready (see the module docstring), else the first reason."""
        if not self.world.engine_alive():
            return "up is not running"
        seen = set()
        for kind in KINDS:
            items, _ = await self.store.list(kind.api_version, kind.kind, NAMESPACE)
            for obj in items:
                seen.add(ref(obj))
                if why := self._not_ready(kind, obj):
                    return why
        if missing := [ref(o) for o in self.world.objects if ref(o) not in seen]:
            return f"{missing[0]} is not in the store"
        if not await asyncio.to_thread(healthz, self.healthz):
            return "the Service's /healthz does not answer 200"
        return None

    def _not_ready(self, kind: Kind, obj: Object) -> str | None:
        meta, status = obj["metadata"], obj.get("status") or {}
        self.names[meta["uid"]] = ref(obj)
        if meta.get("deletionTimestamp"):
            return f"{ref(obj)} is being deleted"
        if not is_true(status, READY):
            return f"{ref(obj)} is not Ready"
        if status.get("observedGeneration", meta.get("generation")) != meta.get("generation"):
            return f"{ref(obj)}: generation {meta.get('generation')} not observed yet"
        if kind is PROCESS:
            pid = status.get("pid")
            if not runs(int(pid) if pid else None, meta["uid"]):
                return f"{ref(obj)}: its pid {pid} is not running"
        if kind is DEPLOYMENT:
            want = obj["spec"].get("replicas", 1)
            if status.get("readyReplicas") != want or status.get("replicas") != want:
                return f"{ref(obj)}: {status.get('readyReplicas')}/{want} ready"
        return None

    async def wait_ready(self, within: float) -> float | None:
        """monotonic time from which everything was seen Ready for STABLE_S without a break
        (a restarted `up` first shows the old statuses, then resets them); None when that
        has not happened within `within` seconds."""
        deadline = time.monotonic() + within + STABLE_S
        since: float | None = None
        self.why_not = ""
        while time.monotonic() < deadline:
            try:
                why = await self.not_ready()
            except Exception as error:
                why = f"store read failed: {error}"
            now = time.monotonic()
            if why is None:
                since = now if since is None else since
                if now - since >= STABLE_S:
                    return since
            else:
                since, self.why_not = None, why
            await asyncio.sleep(CONVERGE_POLL_S)
        return None

    async def scan_duplicates(self, stop: asyncio.Event) -> None:
        inside = str(self.world.tmp)
        while not stop.is_set():
            procs = await asyncio.to_thread(all_processes)
            now = time.monotonic()
            roots = instances(procs, inside)
            for marker, found in roots.items():
                if len(found) < 2:
                    continue
                dup = self.open.setdefault(marker, Duplicate(marker, now, now, {}))
                dup.last = now
                dup.roots.update({p.pid: p.cmdline[:120] for p in found})
            for marker in [m for m in self.open if len(roots.get(m, [])) < 2]:
                self.duplicates.append(self.open.pop(marker))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), DUPLICATE_SCAN_S)
        self.duplicates += self.open.values()
        self.open.clear()

    async def watchdog(self, stop: asyncio.Event) -> None:
        """Restart `up` when it exits by itself; record each exit."""
        while not stop.is_set():
            async with self.engine_lock:
                engine = self.world.engine
                if engine is not None and engine.poll() is not None and not stop.is_set():
                    tail = self.world.engine_log_tail()
                    self.engine_exits.append(
                        {"at": time.monotonic(), "code": engine.returncode, "tail": tail}
                    )
                    progress(f"up exited by itself (code {engine.returncode}): {tail[-3:]}")
                    await asyncio.sleep(1.0)
                    self.world.start_engine()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), WATCHDOG_S)


# -- the faults ----------------------------------------------------------------------------


class Injector:
    """Injects one fault at a time; each returns a Fault, or None when it could not."""

    def __init__(self, world: World, store: Store, recorder: Recorder, rng: random.Random):
        self.world = world
        self.store = store
        self.recorder = recorder
        self.rng = rng
        self.migrations = 0
        self.releases: list[asyncio.Task[None]] = []
        self.second_outcomes: list[str] = []

    async def inject(self, kind: str) -> Fault | None:
        fault: Fault | None = await getattr(self, kind)()
        return fault

    async def _processes(self, **labels: str) -> list[Object]:
        items, _ = await self.store.list(PROCESS.api_version, PROCESS.kind, NAMESPACE)
        return [
            p
            for p in items
            if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items())
            and not p["metadata"].get("deletionTimestamp")
        ]

    async def _live_pid(self, obj: Object) -> int | None:
        pid = (obj.get("status") or {}).get("pid")
        return int(pid) if pid and runs(int(pid), obj["metadata"]["uid"]) else None

    async def _replica(self) -> tuple[str, int] | None:
        replicas = await self._processes(app="web")
        self.rng.shuffle(replicas)
        for obj in replicas:
            if (pid := await self._live_pid(obj)) is not None:
                return obj["metadata"]["name"], pid
        return None

    async def _kill(self, pid: int) -> float:
        """SIGKILL `pid`; the time of the kill, returned once the process is gone (a signal
        is delivered when its target next runs: a check made at once may still see it)."""
        os.kill(pid, signal.SIGKILL)
        at = time.monotonic()
        for _ in range(200):
            if proc_info(pid) is None:
                break
            await asyncio.sleep(0.01)
        return at

    async def engine_kill(self) -> Fault:
        async with self.recorder.engine_lock:
            pid = self.world.engine.pid if self.world.engine else -1
            self.world.kill_engine()
            at = time.monotonic()
            pause = self.rng.uniform(0.0, 1.5)
            await asyncio.sleep(pause)
            self.world.start_engine()
        note = f"up pid {pid} killed, started again {pause:.1f}s later"
        return Fault("engine_kill", at, at, note)

    async def engine_kill_busy(self) -> Fault | None:
        """A replica killed, then `up` killed while it restarts the replica."""
        if (found := await self._replica()) is None:
            return None
        name, pid = found
        async with self.recorder.engine_lock:
            at = await self._kill(pid)
            await asyncio.sleep(self.rng.uniform(0.0, 0.5))
            engine = self.world.engine.pid if self.world.engine else -1
            self.world.kill_engine()
            self.world.start_engine()
        note = f"{name} pid {pid}, then up pid {engine} {time.monotonic() - at:.2f}s later"
        return Fault("engine_kill_busy", at, at, note)

    async def postgres_kill(self) -> Fault | None:
        db = await self._processes(app="db")
        pid = await self._live_pid(db[0]) if db else None
        if pid is None:
            return None
        at = await self._kill(pid)
        return Fault("postgres_kill", at, at, f"db (postmaster) pid {pid}")

    async def replica_kill(self) -> Fault | None:
        if (found := await self._replica()) is None:
            return None
        name, pid = found
        at = await self._kill(pid)
        return Fault("replica_kill", at, at, f"{name} pid {pid}")

    async def migrate_kill(self) -> Fault | None:
        self.migrations += 1
        n = self.migrations
        source = self.world.base / "examples" / "webapp" / "migrations"
        target = self.world.tmp / "chaos-migrations" / f"m{n}"
        shutil.copytree(source, target)
        (target / f"{100 + n:03d}_chaos_pause_{n}.sql").write_text(PAUSE_MIGRATION)
        target.parent.chmod(0o755)
        job = copy.deepcopy(self.world.object("Job", "migrate"))
        job["metadata"] = {"name": f"chaos-migrate-{n}", "namespace": NAMESPACE}
        job["spec"]["args"] = [*job["spec"]["args"], "--migrations", str(target)]
        job["spec"]["backoff"] = {"initialSeconds": 1}
        created = await self.store.create(job)
        uid = created["metadata"]["uid"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            roots = instances(await asyncio.to_thread(all_processes), str(self.world.tmp))
            found = [p for m, ps in roots.items() if m.endswith(f":{uid}") for p in ps]
            if found:
                pid = found[0].pid
                await asyncio.sleep(self.rng.uniform(1.0, 2.5))
                if not runs(pid, uid):
                    progress(f"chaos-migrate-{n} ended before its kill")
                    return None
                at = await self._kill(pid)
                return Fault("migrate_kill", at, at, f"chaos-migrate-{n} pid {pid} mid-run")
            await asyncio.sleep(0.05)
        progress(f"chaos-migrate-{n} did not start within 30s")
        return None

    async def replica_stop(self) -> Fault | None:
        if (found := await self._replica()) is None:
            return None
        name, pid = found
        hold = self.rng.uniform(3.0, 6.0)
        at = time.monotonic()
        os.kill(pid, signal.SIGSTOP)
        self.world.stopped_pids.add(pid)
        try:
            await asyncio.sleep(hold)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
            self.world.stopped_pids.discard(pid)
        return Fault("replica_stop", at, time.monotonic(), f"{name} pid {pid} for {hold:.1f}s")

    async def port_next(self) -> Fault | None:
        replicas = await self._processes(app="web")
        held = {p for r in replicas for p in r["spec"].get("ports", [])}
        low, high = self.world.port_range
        free = [p for p in range(low, high + 1) if p not in held and bindable(p)]
        victim = self.rng.choice(replicas) if replicas else None
        if not free or victim is None or (sock := stranger(free[0])) is None:
            return None
        self.world.strangers.append(sock)
        at = time.monotonic()
        name = victim["metadata"]["name"]
        await self.store.delete(PROCESS.api_version, PROCESS.kind, name, NAMESPACE)
        self.releases.append(asyncio.create_task(self._release(sock, 8.0)))
        return Fault("port_next", at, at, f"port {free[0]} taken, {name} deleted")

    async def _release(self, sock: Any, after: float) -> None:
        try:
            await asyncio.sleep(after)
        finally:
            sock.close()
            with contextlib.suppress(ValueError):
                self.world.strangers.remove(sock)

    async def port_service(self) -> Fault | None:
        port = self.world.service_port
        async with self.recorder.engine_lock:
            self.world.kill_engine()
            at = time.monotonic()
            sock = None
            for _ in range(20):
                if (sock := stranger(port)) is not None:
                    break
                await asyncio.sleep(0.05)
            self.world.start_engine()
        if sock is None:
            return Fault("engine_kill", at, at, f"(port {port} could not be taken)")
        self.world.strangers.append(sock)
        await self._release(sock, 5.0)
        return Fault("port_service", at, time.monotonic(), f"port {port} held 5s, up restarted")

    async def second_engine(self) -> Fault:
        """A second `up` on the same store: refused, or SIGTERMed after SECOND_ENGINE_S."""
        proc = self.world.start_second_engine()
        at = time.monotonic()
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(proc.wait, SECOND_ENGINE_S)
        if proc.poll() is not None:
            outcome = f"refused (exit {proc.returncode}) after {time.monotonic() - at:.1f}s"
        else:
            proc.send_signal(signal.SIGTERM)
            try:
                code = await asyncio.to_thread(proc.wait, 90)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = await asyncio.to_thread(proc.wait)
            outcome = f"ran {SECOND_ENGINE_S:g}s, then SIGTERM: exit {code} after " + (
                f"{time.monotonic() - at - SECOND_ENGINE_S:.1f}s"
            )
        said = [line for line in self.world.second_engine_log_tail() if "stopping" in line
                or "error" in line.lower()][-1:]  # fmt: skip
        self.second_outcomes.append(f"{outcome}; {said}")
        return Fault("second_engine", at, time.monotonic(), f"second up {outcome} {said}")

    async def readonly_store(self) -> Fault | None:
        return await self._disk("readonly_store", self.world.store_readonly,
                                self.world.store_writable)  # fmt: skip

    async def disk_full(self) -> Fault | None:
        return await self._disk("disk_full", self.world.store_full, self.world.store_not_full)

    async def _disk(self, kind: str, break_it: Any, mend_it: Any) -> Fault | None:
        at = time.monotonic()
        if (why := await asyncio.to_thread(break_it)) is not None:
            progress(f"{kind}: unavailable: {why}")
            return None
        hold = self.rng.uniform(3.0, 5.0)
        try:
            await asyncio.sleep(hold)
        finally:
            await asyncio.to_thread(mend_it)
        return Fault(kind, at, time.monotonic(), f"for {hold:.1f}s")


# -- the run -------------------------------------------------------------------------------


def fault_order(rng: random.Random, kinds: list[str]) -> Any:
    """Every kind once per round, each round shuffled."""
    for _ in range(MAX_FAULTS):
        round_ = list(kinds)
        rng.shuffle(round_)
        yield from round_


async def chaos(
    world: World, seconds: float, seed: int, idle_s: float, kinds: list[str]
) -> dict[str, Any]:
    rng = random.Random(seed)
    result: dict[str, Any] = {"seed": seed, "seconds": seconds}
    started = time.monotonic()
    world.stage()
    if world.mounted is not None:
        kinds = [k for k in kinds if k not in ("readonly_store", "disk_full")]
        result["readonly_store"] = f"unavailable: {world.mounted}"
    if not kinds:
        raise RuntimeError("no fault kind left to inject")
    world.start_engine()
    store = await open_store(world.store_url, builtin_kinds())
    recorder = Recorder(world, store)
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    load = Load(f"http://127.0.0.1:{world.service_port}/")
    writes = Writes()
    faults: list[Fault] = []
    injector = Injector(world, store, recorder, rng)
    try:
        progress(f"staged in {world.tmp}; waiting for everything to be Ready")
        ready_at = await recorder.wait_ready(STARTUP_TIMEOUT_S)
        if ready_at is None:
            raise RuntimeError(f"not Ready after {STARTUP_TIMEOUT_S:g}s: {recorder.why_not}")
        result["startup_s"] = round(ready_at - started, 1)
        progress(f"all Ready after {result['startup_s']}s; faults for {seconds:g}s")
        await store.create(lease("chaos-counter", 0))
        load.thread.start()
        writer_stop = asyncio.Event()
        deadline = time.monotonic() + seconds
        writer = asyncio.create_task(write_loop(world, writes, writer_stop, deadline + 600))
        tasks += [
            asyncio.create_task(recorder.scan_duplicates(stop)),
            asyncio.create_task(recorder.watchdog(stop)),
        ]
        order = fault_order(rng, kinds)
        while time.monotonic() < deadline and len(faults) < MAX_FAULTS:
            await asyncio.sleep(rng.uniform(*GAP_S))
            if time.monotonic() >= deadline:
                break
            kind = next(order)
            fault = await injector.inject(kind)
            if fault is None:
                progress(f"{kind}: not injected (nothing to act on)")
                continue
            faults.append(fault)
            fault.converged_at = await recorder.wait_ready(CONVERGE_TIMEOUT_S)
            took = fault.converge_s
            failed = sum(1 for r in load.done[:] if not r.ok and r.started >= fault.at - 0.2)
            progress(
                f"fault {len(faults)} at +{fault.at - started:.0f}s {kind}: {fault.note}; "
                + (f"all Ready {took:.1f}s later" if took is not None
                   else f"NOT Ready after {CONVERGE_TIMEOUT_S:g}s: {recorder.why_not}")
                + (f" (last: {recorder.why_not})" if took is not None and took > 5 else "")
                + f"; {failed} requests failed"
            )  # fmt: skip
        last_converged = faults[-1].converged_at is not None if faults else True
        if not last_converged:
            progress("waiting once more for everything to be Ready")
            last_converged = await recorder.wait_ready(CONVERGE_TIMEOUT_S) is not None
        writer_stop.set()
        await writer
        await asyncio.gather(*injector.releases, return_exceptions=True)
        await asyncio.sleep(SETTLE_S)
        idle = await idle_writes(store, idle_s)
        lost = await lost_writes(store, writes)
        load.stop.set()
        await asyncio.to_thread(load.thread.join, REQUEST_TIMEOUT_S + 5)
        stop.set()
        await asyncio.gather(*tasks)
        tasks.clear()
        progress("SIGTERM to up; waiting for it to stop its children")
        code = world.stop_engine()
        await asyncio.sleep(2.0)
        orphans = [p.describe() for p in world.ours(all_processes())]
        result.update(
            report(faults, writes, lost, recorder, load.done, orphans, idle, last_converged)
        )
        result["down_exit_code"] = code
        result["engine_log_problems"] = world.engine_log_problems()
        result["second_engine"] = injector.second_outcomes
        if world.mounted is None:
            result["readonly_store"] = "; ".join(sorted(world.readonly_done)) or "not injected"
        return result
    finally:
        stop.set()
        load.stop.set()
        for task in [*tasks, *injector.releases]:
            task.cancel()
        await asyncio.gather(*tasks, *injector.releases, return_exceptions=True)
        with contextlib.suppress(Exception):
            await store.close()


async def idle_writes(store: Store, seconds: float) -> dict[str, Any]:
    """Revisions per second over `seconds` of quiet, and which objects were written."""
    first = await store.revision()
    await asyncio.sleep(seconds)
    last = await store.revision()
    writers: dict[str, int] = {}
    with contextlib.suppress(TimeoutError, Error):
        async with asyncio.timeout(10):
            async for event in store.watch(None, None, since=first):
                name = ref(event.object)
                writers[name] = writers.get(name, 0) + 1
                if event.revision >= last:
                    break
    top = sorted(writers.items(), key=lambda kv: -kv[1])[:8]
    return {"per_s": round((last - first) / seconds, 2), "writers": dict(top), "revision": last}


def report(
    faults: list[Fault],
    writes: Writes,
    lost: list[str],
    recorder: Recorder,
    requests: list[Request],
    orphans: list[str],
    idle: dict[str, Any],
    last_converged: bool,
) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for f in faults:
        counts[f.kind] = counts.get(f.kind, 0) + 1
    times = [f.converge_s if f.converge_s is not None else CONVERGE_TIMEOUT_S for f in faults]
    by_kind: dict[str, list[float]] = {}
    for f, t in zip(faults, times, strict=True):
        by_kind.setdefault(f.kind, []).append(round(t, 1))
    windows = [
        (f.at - 0.2, (f.converged_at or f.lifted + CONVERGE_TIMEOUT_S) + FAULT_GRACE_S)
        for f in faults
    ]

    def in_fault(t: float) -> bool:
        return any(a <= t <= b for a, b in windows)

    failed = [r for r in requests if not r.ok]
    outside = [r for r in failed if not in_fault(r.started) and not in_fault(r.ended)]
    failed_by_kind: dict[str, int] = {}
    reasons_by_kind: dict[str, dict[str, int]] = {}
    for f, (a, b) in zip(faults, windows, strict=True):
        hits = [r for r in failed if a <= r.started <= b]
        failed_by_kind[f.kind] = failed_by_kind.get(f.kind, 0) + len(hits)
        reasons = reasons_by_kind.setdefault(f.kind, {})
        for r in hits:
            reasons[r.reason] = reasons.get(r.reason, 0) + 1
    real = [d for d in recorder.duplicates if d.last - d.first >= DUPLICATE_MIN_S]
    transient = [d for d in recorder.duplicates if d.last - d.first < DUPLICATE_MIN_S]

    def show(d: Duplicate) -> dict[str, Any]:
        uid = d.marker.rsplit(":", 1)[-1]
        return {
            "object": recorder.names.get(uid, d.marker),
            "seconds": round(d.last - d.first, 1),
            "roots": [f"{pid} {cmd}" for pid, cmd in d.roots.items()],
        }

    p95 = round(pct(times, 95), 1) if times else None
    result: dict[str, Any] = {
        "faults": {"count": len(faults), **counts},
        "lost_writes": len(lost),
        "duplicate_processes": len(real),
        "orphans": len(orphans),
        "converge_p95_s": p95,
        "failed_requests_outside_faults": len(outside),
        "idle_writes_per_s": idle["per_s"],
        "converge_median_s": round(statistics.median(times), 1) if times else None,
        "converge_s_by_kind": by_kind,
        "not_converged": [f"{f.kind}: {f.note}" for f in faults if f.converged_at is None],
        "converged_after_last_fault": last_converged,
        "writes_acked": len(writes.created) + writes.counter_acks + len(writes.cli_acked),
        "writes_failed": writes.failed,
        "cli_writes_failed": writes.cli_failed[:5],
        "lost": lost[:20],
        "requests": len(requests),
        "failed_requests_during_faults": len(failed) - len(outside),
        "failed_requests_by_fault_kind": failed_by_kind,
        "failed_reasons_by_fault_kind": {
            k: dict(sorted(v.items(), key=lambda kv: -kv[1])[:3])
            for k, v in reasons_by_kind.items()
            if v
        },
        "failed_outside_reasons": sorted({r.reason for r in outside})[:8],
        "duplicates": [show(d) for d in real],
        "duplicates_transient": [show(d) for d in transient],
        "orphan_processes": orphans[:20],
        "engine_exits": [
            {"code": e["code"], "tail": e["tail"][-4:]} for e in recorder.engine_exits
        ],
        "idle_writers": idle["writers"],
        "store_revision_at_idle_end": idle["revision"],
    }
    missed = [k for k in ("lost_writes", "duplicate_processes", "orphans") if result[k]]
    if p95 is None or p95 > TARGETS["converge_p95_s"]:
        missed.append("converge_p95_s")
    if idle["per_s"] > TARGETS["idle_writes_per_s"]:
        missed.append("idle_writes_per_s")
    if not last_converged:
        missed.append("converged_after_last_fault")
    result["missed"] = missed
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="how long faults are injected")
    parser.add_argument("--seconds", type=float, help="the same in seconds (for short runs)")
    parser.add_argument("--seed", type=int, default=1, help="seeds the faults' order and timing")
    parser.add_argument("--idle-seconds", type=float, default=30.0, help="the quiet window")
    parser.add_argument("--keep-logs", type=Path, help="copy up's output and the logs here")
    parser.add_argument(
        "--faults",
        default=",".join(FAULT_KINDS),
        help="the fault kinds to inject (comma-separated)",
    )
    args = parser.parse_args()
    seconds = args.seconds if args.seconds is not None else args.minutes * 60
    kinds = [k for k in args.faults.split(",") if k]
    if unknown := sorted(set(kinds) - set(FAULT_KINDS)):
        parser.error(f"--faults: no fault kind {', '.join(unknown)}; say some of {FAULT_KINDS}")
    # Ctrl-C and SIGTERM both clean up (a shell starting the bench in the background may
    # have left SIGINT ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    result: dict[str, Any] = {"loadavg_1m_before": round(os.getloadavg()[0], 2)}
    world = World(Path(tempfile.mkdtemp(prefix="setpoint-bench-chaos-")))
    try:
        result.update(asyncio.run(chaos(world, seconds, args.seed, args.idle_seconds, kinds)))
    except (Exception, KeyboardInterrupt) as error:
        result["error"] = f"{type(error).__name__}: {error}"
        result["engine_log_tail"] = world.engine_log_tail()
        progress(f"stopped early: {result['error']}")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the clean-up runs to its end
        if args.keep_logs is not None:
            world.keep_logs(args.keep_logs)
        world.teardown()
    result["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
