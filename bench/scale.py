"""Scale benchmark (issue 27): many kinds, many objects, writers and watchers at once through
`setpoint serve`, kubectl against it, and `setpoint up` of many Processes.

Run with `./dev bench scale` (the defaults are the issue's run: 500 kinds of 2,000 objects,
a 60 s steady phase, 1,000 Processes; `--objects N` sets the total instead; `--kinds 20
--objects-per-kind 200 --steady-s 5 --procs 20 --idle-s 5` is a small run). Progress goes to
stderr; the last stdout line is one JSON object. Nothing is asserted.

* Server: `setpoint serve --port 0 --max-connections 1024+STREAMS` (`python -m setpoint`,
  as a user runs it; over HTTP/1.1 each watch stream holds a connection, and the default
  1,024 turns the watchers of every kind away with 503) on a fresh
  SQLite store (the default durability: an fsync per commit) in a temp dir; the bench reads
  its URL and admin token from the kubeconfig it writes. The server runs under this
  script's `--profiled` wrapper, which only adds two signal handlers (SIGUSR1 starts a
  cProfile of the event loop's thread, SIGUSR2 writes the top functions by cumulative time
  to a file) and then calls `setpoint.cli.main.main` as `python -m setpoint` does.
* Load: `kubectl apply -f` of KINDS CRDs (ten kinds per API group, each with an
  openAPIV3Schema), then OBJECTS_PER_KIND objects of about 1 KiB in each kind, created
  through the API (POST) by LOAD_CONNECTIONS kept-alive connections over two child
  processes (this script with `--load`): `load_path` says so. `load_objects_per_s`.
* Steady phase: STEADY_RATE creates per second through the API, spread over the kinds in
  turn, paced (each of the writer's connections sends at its slot, or at once when late),
  for STEADY_S seconds, while 100 watchers (one per kind on the first 100 kinds) and 5
  watchers on every kind (one stream per kind each) watch from the revision before the
  writes (`--kinds 0`: no server phases; `--procs 0`: no engine phase).
  `steady_writes_per_s` is the rate reached (over the writer's wall time, its start
  included): below STEADY_RATE when the server cannot keep up, the writer falling behind
  its slots (it sends nothing after STEADY_S). `mutating_p99_ms`: request sent to answer
  read. `watch_p99_ms`: from the answer read (the write acknowledged) to the watcher's
  process reading the event, wall clock. `watch_lost`: (watcher, acknowledged write it
  covers) pairs never delivered, after the watchers had WATCH_TIMEOUT seconds to catch up.
  A stream the server ends or drops is resumed from the last revision seen
  (`watch_resumed`). Then PROFILE_S more seconds of the same writes run with the server's
  cProfile on (not part of the figures above): `server_profile` is its path.
* `server_rss_mb`: the server's RSS once the steady phase is over (watchers connected);
  `server_rss_after_watchers_mb` once every watcher process has exited.
* kubectl: `kubectl_api_resources_cold_s` (`kubectl api-resources` with a fresh
  --cache-dir), `kubectl_get_kind_s` (`kubectl get PLURAL -o name` of the first kind, the
  discovery cache then warm), `kubectl_get_kind_cold_s` (the same with a fresh cache).
* Store: after the server stopped, `db_mb` and `db_gb` (the SQLite file and its WAL) against
  `live_mb` (the current objects' stored JSON) and `history_mb` (the JSON of the log rows
  the store keeps after its automatic compaction); `db_over_live`.
* Engine: `setpoint up MANIFEST` of PROCS Processes (`sleep infinity` each) on another
  fresh store. `procs_up_all_ready_s`: from starting `up` until the store shows every
  Process Ready (read through the store API). `engine_idle_cpu_pct`: the engine's CPU over
  IDLE_S seconds after that; `engine_rss_mb`; `per_child_overhead_pss_mb`: the PSS
  (/proc/PID/smaps_rollup) of every descendant of the engine that is not a child itself
  (the log holders and the fork server that forked them), summed and divided by PROCS;
  `holder_private_mb`: the mean private memory of one holder (what no other process
  shares), `holder_fork_servers`: how many fork servers are among them. `procs_down_s`:
  SIGTERM to `up` until it exited (every child stopped, dependents first).

`targets` and `missed` compare with issue 27's targets; `held_back_by` names, for each
missed target, the phase that holds it back.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import cProfile
import json
import os
import pstats
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

SCRIPT = os.path.abspath(__file__)
KINDS_PER_GROUP = 10
LOAD_PROCESSES = 2
LOAD_CONNECTIONS = 32
STEADY_CONNECTIONS = 32
PER_KIND_WATCHERS = 100
ALL_KIND_WATCHERS = 5
WATCH_PROCESSES = 2
WATCH_TIMEOUT = 60.0
START_TIMEOUT = 120.0
PAYLOAD = "x" * 760
"""Makes each object's stored JSON about 1 KiB."""
TARGETS: dict[str, tuple[str, float]] = {
    "mutating_p99_ms": ("<=", 20.0),
    "watch_p99_ms": ("<=", 10.0),
    "watch_lost": ("==", 0),
    "kubectl_api_resources_cold_s": ("<=", 1.0),
    "kubectl_get_kind_s": ("<=", 1.0),
    "server_rss_mb": ("<=", 500.0),
    "db_over_live": ("<=", 2.0),
    "procs_up_all_ready_s": ("<=", 30.0),
    "engine_idle_cpu_pct": ("<=", 2.0),
    "engine_rss_mb": ("<=", 400.0),
    "per_child_overhead_pss_mb": ("<=", 0.5),
}
PHASE_OF = {
    "mutating_p99_ms": "steady",
    "watch_p99_ms": "steady",
    "watch_lost": "steady",
    "kubectl_api_resources_cold_s": "kubectl",
    "kubectl_get_kind_s": "kubectl",
    "server_rss_mb": "steady",
    "db_over_live": "store",
    "procs_up_all_ready_s": "engine",
    "engine_idle_cpu_pct": "engine",
    "engine_rss_mb": "engine",
    "per_child_overhead_pss_mb": "engine",
}


def log(message: str) -> None:
    print(f"[bench scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def group(kind: int) -> str:
    return f"g{kind // KINDS_PER_GROUP}.scale.example.com"


def plural(kind: int) -> str:
    return f"scale{kind}s"


def collection(kind: int) -> str:
    return f"/apis/{group(kind)}/v1/namespaces/default/{plural(kind)}"


def crd(kind: int) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural(kind)}.{group(kind)}"},
        "spec": {
            "group": group(kind),
            "scope": "Namespaced",
            "names": {"plural": plural(kind), "singular": f"scale{kind}", "kind": f"Scale{kind}"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["count"],
                                    "properties": {
                                        "count": {"type": "integer", "minimum": 0},
                                        "payload": {"type": "string"},
                                    },
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


def body(kind: int, name: str, n: int) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": f"{group(kind)}/v1",
            "kind": f"Scale{kind}",
            "metadata": {"name": name, "namespace": "default", "labels": {"bench": "scale"}},
            "spec": {"count": n, "payload": PAYLOAD},
        }
    )


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmRSS for {pid}")


def pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass  # it ended meanwhile
    return 0


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as name:
            return name.read().strip()
    except OSError:
        return ""  # it ended meanwhile


def private_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            return sum(
                int(line.split()[1])
                for line in rollup
                if line.startswith(("Private_Clean:", "Private_Dirty:"))
            )
    except OSError:
        return 0  # it ended meanwhile


def descendants(pid: int) -> list[int]:
    """Every process under `pid`, read from /proc (each one's parent)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [part.decode(errors="replace") for part in f.read().split(b"\0") if part]
    except OSError:
        return []


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))], 2)


# -- the profiled server -------------------------------------------------------------------


def profiled(out: str, argv: list[str]) -> int:
    """`python -m setpoint ARGV`, with SIGUSR1 starting a cProfile of this (the event
    loop's) thread and SIGUSR2 writing its top functions by cumulative time to `out`."""
    from setpoint.cli.main import main

    profile = cProfile.Profile()

    def start(signum: int, frame: object) -> None:
        profile.enable()

    def stop(signum: int, frame: object) -> None:
        profile.disable()
        with open(out, "w") as f:
            pstats.Stats(profile, stream=f).sort_stats("cumulative").print_stats(60)
        with open(out + ".done", "w"):
            pass

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    return main(argv)


class Server:
    """`setpoint serve --port 0` on `store`; its URL and admin token from its kubeconfig."""

    def __init__(self, directory: Path, profile: Path, max_connections: int) -> None:
        self.directory = directory
        self.kubeconfig = directory / "kubeconfig"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
        argv = ["--store", f"sqlite:///{directory / 'state.db'}", "serve", "--port", "0"]
        argv += ["--max-connections", str(max_connections)]
        argv += ["--kubeconfig", str(self.kubeconfig)]
        self.proc = subprocess.Popen(
            [sys.executable, SCRIPT, "--profiled", str(profile), *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=directory,
            env=env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "serving the API on" not in line:
            self.stop()
            raise RuntimeError(f"setpoint serve did not start: {line!r}")
        self.url = line.split("serving the API on ", 1)[1].split()[0]
        self.pid = self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# -- HTTP clients (lean: they share the two cores with the server) --------------------------


class Api:
    """Where the server is and how to talk to it, from the kubeconfig it wrote."""

    def __init__(self, kubeconfig: str) -> None:
        config = yaml.safe_load(Path(kubeconfig).read_text())
        cluster = config["clusters"][0]["cluster"]
        scheme, _, address = cluster["server"].partition("://")
        self.host, port = address.rsplit(":", 1)
        self.port = int(port)
        self.token: str = config["users"][0]["user"]["token"]
        self.tls: ssl.SSLContext | None = None
        if scheme == "https":
            ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
            self.tls = ssl.create_default_context(cadata=ca)


class Connection:
    """One kept-alive HTTP/1.1 connection: requests built in one piece, responses read by
    their Content-Length, every status checked."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, auth: bytes):
        self.reader = reader
        self.writer = writer
        self.auth = auth

    @classmethod
    async def open(cls, api: Api) -> Connection:
        reader, writer = await asyncio.open_connection(api.host, api.port, ssl=api.tls)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer, f"Bearer {api.token}".encode())

    async def post(self, path: str, payload: bytes) -> Any:
        self.writer.write(
            b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: %s\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (path.encode(), self.auth, len(payload), payload)
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = None
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            raise RuntimeError(f"POST {path}: no Content-Length in {head[:300]!r}")
        answer = orjson.loads(await self.reader.readexactly(length))
        status = int(head.split(b" ", 2)[1])
        if status != 201:
            raise RuntimeError(f"POST {path}: {status}: {answer.get('message', answer)}")
        return answer


def load_child(api: Api, kinds: int, per_kind: int, share: int, shares: int) -> None:
    """Create objects `share::shares` of every kind's `per_kind` over LOAD_CONNECTIONS
    connections; print `done N`."""
    work = iter(
        (k, n) for n in range(share, per_kind, shares) for k in range(kinds)
    )  # every kind fills at once: no kind waits for the others

    async def main() -> None:
        conns = [await Connection.open(api) for _ in range(LOAD_CONNECTIONS)]
        done = 0

        async def run(conn: Connection) -> None:
            nonlocal done
            for k, n in work:
                await conn.post(collection(k), body(k, f"o-{n:06}", n))
                done += 1

        await asyncio.gather(*(run(c) for c in conns))
        print(f"done {done}", flush=True)

    asyncio.run(main())


def steady_child(api: Api, kinds: int, rate: float, seconds: float, tag: str) -> None:
    """Creates at `rate` per second for `seconds`, over the kinds in turn, each of
    STEADY_CONNECTIONS connections sending at its slots (at once when late, none after
    `seconds`); prints JSON:
    [revision, kind, sent, acked] per write (wall clock)."""

    async def main() -> None:
        conns = [await Connection.open(api) for _ in range(STEADY_CONNECTIONS)]
        total = int(rate * seconds)
        records: list[list[float]] = []
        start = time.time() + 0.05

        async def run(index: int, conn: Connection) -> None:
            for i in range(index, total, len(conns)):
                if time.time() > start + seconds:
                    return  # behind its slots: the window is over all the same
                delay = start + i / rate - time.time()
                if delay > 0:
                    await asyncio.sleep(delay)  # the pace of an open-loop load
                kind = i % kinds
                sent = time.time()
                answer = await conn.post(collection(kind), body(kind, f"{tag}-{i:07}", i))
                acked = time.time()
                records.append([int(answer["metadata"]["resourceVersion"]), kind, sent, acked])

        await asyncio.gather(*(run(i, c) for i, c in enumerate(conns)))
        print(json.dumps(records), flush=True)

    asyncio.run(main())


class WatchStream(asyncio.Protocol):
    """One watch stream read off its socket (chunked JSON lines): the time each revision
    arrived goes into `seen`; `done` resolves when the server ends or drops the stream."""

    def __init__(self, seen: dict[int, float], opened: asyncio.Future[None]) -> None:
        self.seen = seen
        self.opened = opened
        self.head = True
        self.revision = 0
        self.data = bytearray()
        self.lines = bytearray()
        self.done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        now = time.time()
        self.data += data
        if self.head:
            end = self.data.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.data[:end])
            if not head.startswith(b"HTTP/1.1 200"):
                self._end(RuntimeError(f"not a watch stream: {head[:300]!r}"))
                return
            del self.data[: end + 4]
            self.head = False
            if not self.opened.done():
                self.opened.set_result(None)
        while (eol := self.data.find(b"\r\n")) >= 0:
            size = int(self.data[:eol].split(b";")[0], 16)
            if len(self.data) < eol + 2 + size + 2:
                break
            if size == 0:
                self._end(True)
                return
            self.lines += self.data[eol + 2 : eol + 2 + size]
            del self.data[: eol + 2 + size + 2]
        *whole, rest = self.lines.split(b"\n")
        if whole:
            self.lines = rest
            for line in whole:
                event = orjson.loads(line)
                if event.get("type") == "ERROR":
                    self._end(RuntimeError(f"watch error: {event}"))
                    return
                self.revision = int(event["object"]["metadata"]["resourceVersion"])
                self.seen[self.revision] = now

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(False)

    def _end(self, result: bool | BaseException) -> None:
        if self.done.done():
            return
        if isinstance(result, BaseException):
            self.done.set_exception(result)
            if not self.opened.done():
                self.opened.set_exception(result)
        else:
            self.done.set_result(result)


def watch_child(api: Api, since: int, watchers_json: str) -> None:
    """Each watcher (a list of kinds) holds one stream per kind from `since`; prints
    `ready` once every stream is open; then, given on stdin the last revision written to
    each kind, waits (WATCH_TIMEOUT at most) until each stream has seen it and prints JSON:
    per watcher the revisions seen with times, and how many streams were resumed."""
    watchers: list[list[int]] = json.loads(watchers_json)
    resumed = 0
    stop = False

    async def stream(kind: int, seen: dict[int, float], opened: asyncio.Future[None]) -> None:
        nonlocal resumed
        loop = asyncio.get_running_loop()
        revision = since
        while not stop:
            ready: asyncio.Future[None] = loop.create_future() if opened.done() else opened
            transport, reader = await loop.create_connection(
                lambda ready=ready: WatchStream(seen, ready), api.host, api.port, ssl=api.tls
            )
            target = f"{collection(kind)}?watch=true&resourceVersion={revision}"
            transport.write(
                f"GET {target} HTTP/1.1\r\nHost: {api.host}\r\n"
                f"Authorization: Bearer {api.token}\r\n\r\n".encode()
            )
            try:
                await reader.done
            finally:
                transport.close()
            revision = max(revision, reader.revision)
            if not stop:
                resumed += 1

    async def main() -> None:
        nonlocal stop
        seens: list[dict[int, float]] = [{} for _ in watchers]
        streams: list[tuple[int, int, asyncio.Task[None]]] = []
        openings = []
        for w, kinds in enumerate(watchers):
            for kind in kinds:
                opened = asyncio.get_running_loop().create_future()
                openings.append(opened)
                task = asyncio.ensure_future(stream(kind, seens[w], opened))
                streams.append((w, kind, task))
        await asyncio.wait_for(asyncio.gather(*openings), START_TIMEOUT)
        print("ready", flush=True)
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        last = {int(k): v for k, v in json.loads(line).items()}
        deadline = time.monotonic() + WATCH_TIMEOUT
        while time.monotonic() < deadline:
            behind = [1 for w, kind, _ in streams if kind in last and last[kind] not in seens[w]]
            if not behind:
                break
            await asyncio.sleep(0.05)
        stop = True
        for _, _, task in streams:
            task.cancel()
        print(json.dumps({"seen": seens, "resumed": resumed}), flush=True)

    asyncio.run(main())


# -- phases --------------------------------------------------------------------------------


def kubectl(server: Server, cache: Path, *args: str) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={server.kubeconfig}", f"--cache-dir={cache}", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()[-500:]}")
    return elapsed, done.stdout


def child_argv(role: str, server: Server) -> list[str]:
    """This script as a client child of `server` (`--load`, `--steady`, `--watch`)."""
    return [sys.executable, SCRIPT, role, str(server.kubeconfig)]


def load(server: Server, directory: Path, kinds: int, per_kind: int) -> dict[str, Any]:
    crds = directory / "crds.yaml"
    crds.write_text(yaml.safe_dump_all([crd(k) for k in range(kinds)]))
    applied_s, _ = kubectl(server, directory / "kube-apply", "apply", "-f", str(crds))
    log(f"{kinds} CRDs applied with kubectl in {applied_s:.1f} s")
    start = time.perf_counter()
    children = [
        subprocess.Popen(
            [*child_argv("--load", server), str(kinds), str(per_kind), str(i), str(LOAD_PROCESSES)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(LOAD_PROCESSES)
    ]
    created = 0
    for child in children:
        out, _ = child.communicate()
        if child.returncode != 0 or not out.startswith("done "):
            raise RuntimeError("a load child failed")
        created += int(out.split()[1])
    elapsed = time.perf_counter() - start
    log(f"{created} objects created through the API in {elapsed:.1f} s")
    return {
        "crds_apply_s": round(applied_s, 2),
        "load_path": f"API creates (POST), {LOAD_PROCESSES}x{LOAD_CONNECTIONS} connections",
        "load_objects": created,
        "load_objects_per_s": round(created / elapsed, 1),
    }


def run_steady(server: Server, kinds: int, rate: float, seconds: float, tag: str) -> list[Any]:
    out = subprocess.run(
        [*child_argv("--steady", server), str(kinds), str(rate), str(seconds), tag],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"the steady writer failed: {out.stderr.strip()[-500:]}")
    records: list[Any] = json.loads(out.stdout.splitlines()[-1])
    return records


def steady(
    server: Server, profile: Path, kinds: int, rate: float, seconds: float, profile_s: float
) -> dict[str, Any]:
    per_kind = [[k] for k in range(min(PER_KIND_WATCHERS, kinds))]
    every = [list(range(kinds)) for _ in range(ALL_KIND_WATCHERS)]
    watchers = per_kind + every
    rev_before = revision(server)
    groups = [watchers[i::WATCH_PROCESSES] for i in range(WATCH_PROCESSES)]
    children = [
        subprocess.Popen(
            [*child_argv("--watch", server), str(rev_before), json.dumps(g)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for g in groups
    ]
    streams = sum(len(w) for w in watchers)
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError("a watcher child did not start")
        log(f"{len(watchers)} watchers ({streams} streams) ready; {rate:.0f} writes/s")
        cpu_before, began = cpu_seconds(server.pid), time.perf_counter()
        records = run_steady(server, kinds, rate, seconds, "s")
        server_cpu = cpu_seconds(server.pid) - cpu_before
        took = time.perf_counter() - began
        log(f"{len(records)} writes; profiling {profile_s:.0f} s more")
        os.kill(server.pid, signal.SIGUSR1)
        records_p = run_steady(server, kinds, rate, profile_s, "p")
        os.kill(server.pid, signal.SIGUSR2)
        last: dict[int, int] = {}
        for rev, kind, _, _ in records + records_p:
            last[kind] = max(last.get(kind, 0), rev)
        seen_all: list[dict[str, float]] = []
        resumed = 0
        for child in children:
            assert child.stdin is not None
            child.stdin.write(json.dumps(last) + "\n")
            child.stdin.flush()
        server_rss = rss_mb(server.pid)
        for child in children:
            assert child.stdout is not None
            out = json.loads(child.stdout.readline())
            seen_all += out["seen"]
            resumed += out["resumed"]
    finally:
        for child in children:
            child.kill()
            child.wait()
    rss_after = rss_mb(server.pid)
    covering = [set(w) for per in groups for w in per]
    mutating = [(acked - sent) * 1000 for _, _, sent, acked in records]
    latencies: list[float] = []
    lost = 0
    for cover, seen in zip(covering, seen_all, strict=True):
        for rev, kind, _, acked in records:
            if kind in cover:
                got = seen.get(str(rev))
                if got is None:
                    lost += 1
                else:
                    latencies.append((got - acked) * 1000)
    deadline = time.monotonic() + 30
    while not Path(str(profile) + ".done").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return {
        "steady_writes": len(records),
        "steady_s_taken": round(took, 1),
        "steady_writes_per_s": round(len(records) / took, 1),
        "mutating_p50_ms": pct(mutating, 50),
        "mutating_p99_ms": pct(mutating, 99),
        "watchers": len(watchers),
        "watch_streams": streams,
        "watch_events": len(latencies),
        "watch_p50_ms": pct(latencies, 50),
        "watch_p99_ms": pct(latencies, 99),
        "watch_lost": lost,
        "watch_resumed": resumed,
        "steady_server_cpu_pct": round(server_cpu / took * 100, 1),
        "server_profile": str(profile),
        "server_rss_mb": server_rss,
        "server_rss_after_watchers_mb": rss_after,
    }


def revision(server: Server) -> int:
    """The store's revision, from a list of the first kind (its resourceVersion)."""
    import urllib.request

    api = Api(str(server.kubeconfig))
    request = urllib.request.Request(
        f"{server.url}{collection(0)}?limit=1",
        headers={"Authorization": f"Bearer {api.token}"},
    )
    with urllib.request.urlopen(request, timeout=60, context=api.tls) as response:
        return int(json.load(response)["metadata"]["resourceVersion"])


def measure_kubectl(server: Server, directory: Path, per_kind: int) -> dict[str, Any]:
    cold = directory / "kube-cold"
    resources_s, out = kubectl(server, cold, "api-resources")
    log(f"kubectl api-resources (cold): {resources_s:.2f} s, {len(out.splitlines())} lines")
    get_s, out = kubectl(server, cold, "get", plural(0), "-o", "name")
    if len(out.splitlines()) < per_kind:
        raise RuntimeError(f"kubectl get {plural(0)} listed {len(out.splitlines())}")
    cold_get_s, _ = kubectl(server, directory / "kube-cold-2", "get", plural(0), "-o", "name")
    log(f"kubectl get {plural(0)}: {get_s:.2f} s warm, {cold_get_s:.2f} s cold")
    return {
        "kubectl_api_resources_cold_s": round(resources_s, 3),
        "kubectl_get_kind_s": round(get_s, 3),
        "kubectl_get_kind_cold_s": round(cold_get_s, 3),
        "kubectl_get_kind_objects": len(out.splitlines()),
    }


def measure_store(directory: Path) -> dict[str, Any]:
    import sqlite3

    db = directory / "state.db"
    size = sum(p.stat().st_size for p in directory.glob("state.db*"))
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        live = conn.execute("SELECT sum(length(data)) FROM objects").fetchone()[0] or 0
        history = conn.execute("SELECT sum(length(data)) FROM log").fetchone()[0] or 0
    finally:
        conn.close()
    mb = 1024 * 1024
    return {
        "db_mb": round(size / mb, 1),
        "db_gb": round(size / mb / 1024, 3),
        "live_mb": round(live / mb, 1),
        "history_mb": round(history / mb, 1),
        "db_over_live": round(size / live, 2) if live else None,
    }


async def all_ready(url: str, procs: int) -> int:
    from setpoint.engine.kinds import builtin_kinds
    from setpoint.store import open_store

    store = await open_store(url, registry=builtin_kinds())
    try:
        items, _ = await store.list("setpoint.dev/v1alpha1", "Process", "default")
    finally:
        await store.close()
    ready = 0
    for item in items:
        for condition in item.get("status", {}).get("conditions", []):
            if condition["type"] == "Ready" and condition["status"] == "True":
                ready += 1
    return ready


def engine(directory: Path, procs: int, idle_s: float, timeout: float) -> dict[str, Any]:
    directory.mkdir()
    manifest = directory / "procs.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            {
                "apiVersion": "setpoint.dev/v1alpha1",
                "kind": "Process",
                "metadata": {"name": f"sleeper-{i:04}"},
                "spec": {"args": ["sleep", "infinity"]},
            }
            for i in range(procs)
        )
    )
    store = f"sqlite:///{directory / 'state.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    start = time.perf_counter()
    with open(directory / "up.out", "w") as out:
        up = subprocess.Popen(
            [sys.executable, "-m", "setpoint", "--store", store, "up", str(manifest)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=directory,
            env=env,
        )
    try:
        deadline = time.monotonic() + timeout
        ready = 0
        while ready < procs:
            if up.poll() is not None:
                raise RuntimeError(f"setpoint up ended ({up.returncode}); see {directory}/up.out")
            if time.monotonic() > deadline:
                break
            if (directory / "state.db").exists():
                ready = asyncio.run(all_ready(store, procs))
            time.sleep(0.5)  # each look lists every Process: not too often
        up_s = time.perf_counter() - start if ready == procs else None
        log(f"{ready} of {procs} Processes Ready after {time.perf_counter() - start:.1f} s")
        cpu_before = cpu_seconds(up.pid)
        time.sleep(idle_s)  # the idle engine is what is measured
        idle_cpu = (cpu_seconds(up.pid) - cpu_before) / idle_s * 100
        kids = descendants(up.pid)
        holders = [p for p in kids if cmdline(p)[:1] != ["sleep"]]
        children = len(kids) - len(holders)
        overhead = sum(pss_kb(p) for p in holders) / 1024
        servers = [p for p in holders if comm(p) == "setpoint-forker"]  # the fork server
        private = [private_kb(p) for p in holders if p not in servers]
        result = {
            "procs": procs,
            "procs_ready": ready,
            "procs_up_all_ready_s": round(up_s, 2) if up_s is not None else None,
            "engine_idle_cpu_pct": round(idle_cpu, 2),
            "engine_idle_s": idle_s,
            "engine_rss_mb": rss_mb(up.pid),
            "engine_pss_mb": round(pss_kb(up.pid) / 1024, 1),
            "engine_children_seen": children,
            "per_child_processes": len(holders),
            "per_child_overhead_pss_mb": round(overhead / procs, 3),
            "holder_private_mb": round(sum(private) / max(len(private), 1) / 1024, 3),
            "holder_fork_servers": len(servers),
        }
        stopping = time.perf_counter()
        up.terminate()
        up.wait(600)
        result["procs_down_s"] = round(time.perf_counter() - stopping, 1)
        log(f"engine: {result}")
        return result
    finally:
        up.terminate()
        try:
            up.wait(180)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()


def serve_phases(args: argparse.Namespace, directory: Path, profile: Path) -> dict[str, Any]:
    """Load, steady, kubectl and store, on one `setpoint serve`."""
    result: dict[str, Any] = {}
    serve_dir = directory / "serve"
    serve_dir.mkdir()
    streams = min(PER_KIND_WATCHERS, args.kinds) + ALL_KIND_WATCHERS * args.kinds
    server = Server(serve_dir, profile, 1024 + streams)
    try:
        log(f"setpoint serve at {server.url}")
        result.update(load(server, directory, args.kinds, args.objects_per_kind))
        result.update(steady(server, profile, args.kinds, args.rate, args.steady_s, args.profile_s))
        result.update(measure_kubectl(server, directory, args.objects_per_kind))
        result["server_rss_end_mb"] = rss_mb(server.pid)
    finally:
        server.stop()
    result.update(measure_store(serve_dir))
    return result


def bench(args: argparse.Namespace) -> dict[str, Any]:
    directory = Path(tempfile.mkdtemp(prefix="setpoint-bench-scale-"))
    result: dict[str, Any] = {}
    try:
        profile = directory / "server-profile.txt"
        if args.kinds:
            result.update(serve_phases(args, directory, profile))
        if args.procs:
            result.update(engine(directory / "engine", args.procs, args.idle_s, args.up_timeout))
        # keep the profile: its path is in the JSON
        kept = Path(tempfile.gettempdir()) / f"setpoint-scale-profile-{os.getpid()}.txt"
        if profile.exists():
            shutil.copy(profile, kept)
            result["server_profile"] = str(kept)
        return result
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    if sys.argv[1:2] == ["--profiled"]:  # the server: everything after OUT is setpoint's
        raise SystemExit(profiled(sys.argv[2], sys.argv[3:]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", type=int, default=500)
    parser.add_argument("--objects-per-kind", type=int, default=2000)
    parser.add_argument(
        "--objects", type=int, help="objects in all (issue 27's --objects): this / --kinds a kind"
    )
    parser.add_argument("--steady-s", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=1000.0, help="steady writes per second")
    parser.add_argument("--profile-s", type=float, default=10.0)
    parser.add_argument("--procs", type=int, default=1000)
    parser.add_argument("--idle-s", type=float, default=60.0)
    parser.add_argument("--up-timeout", type=float, default=300.0)
    parser.add_argument("--load", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--steady", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--watch", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        config, kinds, per_kind, share, shares = args.load
        load_child(Api(config), int(kinds), int(per_kind), int(share), int(shares))
        return
    if args.steady:
        config, kinds, rate, seconds, tag = args.steady
        steady_child(Api(config), int(kinds), float(rate), float(seconds), tag)
        return
    if args.watch:
        config, since, watchers = args.watch
        watch_child(Api(config), int(since), watchers)
        return
    if args.objects is not None and args.kinds:
        args.objects_per_kind = -(-args.objects // args.kinds)
    result = bench(args)
    missed = []
    for key, (op, target) in TARGETS.items():
        value = result.get(key)
        ok = value is not None and (
            value >= target if op == ">=" else value <= target if op == "<=" else value == target
        )
        if key in result and not ok:
            missed.append(key)
    result.update(
        settings={
            "kinds": args.kinds,
            "objects_per_kind": args.objects_per_kind,
            "steady_s": args.steady_s,
            "rate": args.rate,
            "procs": args.procs,
            "idle_s": args.idle_s,
            "cpus": os.cpu_count(),
            "loadavg": os.getloadavg()[0],
        },
        targets={k: f"{op} {t}" for k, (op, t) in TARGETS.items()},
        missed=missed,
        held_back_by={k: PHASE_OF[k] for k in missed},
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
