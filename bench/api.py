"""API benchmark: writes through the HTTP API against writes on the store, watch fan-out,
`kubectl get` of many objects, and the same app under two ASGI servers.

Run with `./dev bench api` (`--quick` for a small, fast run: the test uses it; `--phase
kubectl` runs that phase only, and so on). Progress goes to stderr; the last stdout line
is one JSON object.

The server is this script run as a child (`--serve STACK STORE_URL`): it opens the SQLite
store, builds `setpoint.api.app.create_app` (no tokens: loopback only) and serves it as
`setpoint serve` does (`ApiServer` on `run_api_loop`'s event loop), or under hypercorn
on that same loop, on a loopback port it prints. Every phase uses a fresh store file
with the default durability (`sync=full`: one fsync per commit), Process objects, and the
`HttpStore` client (`setpoint.store.http`) unless said otherwise.

* `api_writes_per_s`: WRITERS (64) concurrent HTTP clients, each creating an object then
  updating it (POST, then PUT of the object the POST returned, with its
  resourceVersion), again and again, for WRITE_SECONDS, through the API served by
  uvicorn. Each client is one kept-alive connection driven by an asyncio task
  (`HttpConnection`: requests built as bytes in one piece, responses read by their
  Content-Length, every status checked: any error fails the bench), spread over
  WRITE_PROCESSES (2) child processes (this script with `--write`). Lean on purpose:
  clients and server share the machine's two cores, and threads with `http.client`
  (the client before) spent more CPU than the server, so the figure was the client's.
  `store_writes_per_s`: the same writes made directly on a `SqliteStore` in this
  process by 64 tasks. After an untimed warm-up (one create and update per writer: the
  first validations build the schemas). Measured in ROUNDS rounds, each running the
  three (store, uvicorn, hypercorn) in a different order on fresh files; medians, and
  `ratio_api_vs_store` divides the medians of this run. `stack_writes_per_s` gives
  both servers' medians: the stack comparison (same clients, same loop).
* `watch_fanout_*`: WATCHERS (100) watch streams, spread over WATCH_PROCESSES child
  processes (this script with `--watch`), all watching Processes from one revision, while
  FANOUT_WRITES creates are made by FANOUT_WRITERS (4) threads of this process, each with
  a kept-alive `http.client` connection. Latency per (watcher, revision) is from the moment
  the write was acknowledged (its answer read: the object is stored) to the moment that
  watcher's process read the event, both by the machine's wall clock: the Kubernetes watch
  latency SLI ("from the moment when object is stored in database"), so the write's own
  time (HTTP, admission, group commit, fsync: `api_writes_per_s`'s business) is not
  counted. It is reported too: `watch_fanout_from_request_p99_ms` (request sent -> event
  read) and `watch_fanout_write_p99_ms` (request sent -> answer read). The watchers read
  their streams with a protocol on the socket and orjson (`read_watch`), the writers with
  `http.client`: the clients share the cores with the server and must not starve it
  (httpx, in both, spent twice the server's CPU). `watch_fanout_lost`
  counts the (watcher, revision) pairs never delivered (must be 0). A watcher the server
  drops (it reads too slowly) resumes from the last revision it saw, as client-go's
  reflector does; `watch_fanout_resumed` counts those drops.
* `kubectl_get_10k_s`: KUBECTL_OBJECTS Processes stored, the median wall time of
  KUBECTL_RUNS runs of `kubectl get processes -o name` (after one untimed run that fills
  kubectl's discovery cache). null when kubectl is not installed. kubectl pages with
  `limit=500` (20 requests for 10,000) and throttles itself to 5 requests/s after a burst
  of 10, so 20 pages take at least 2 s; and it spends about 1.5 s of CPU decoding 10,000
  objects. Beside it: `kubectl_get_10k_server_cpu_s` and `kubectl_get_10k_kubectl_cpu_s`
  (CPU seconds each side spent in one such `get`: what load on the machine does not
  change), `kubectl_get_table_10k_s` (kubectl's default output, a Table the server
  draws), `kubectl_get_json_10k_s` (`-o json`), `python_client_list_10k_s` (the
  `kubernetes` Python client's list, one request) and `http_store_list_10k_s`
  (`HttpStore.list`, pages of 500).

Targets (reported under `targets` / `missed`, never asserted): ratio_api_vs_store >= 0.5,
watch_fanout_lost == 0, watch_fanout_p99_ms <= 50, kubectl_get_10k_s <= 3.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import orjson
import uvloop

SCRIPT = os.path.abspath(__file__)
API = "setpoint.dev/v1alpha1"
WATCH_PATH = "/apis/setpoint.dev/v1alpha1/namespaces/default/processes"
STACKS = ("uvicorn", "hypercorn")
FULL = {
    "rounds": 3,
    "write_seconds": 3.0,
    "writers": 64,
    "watchers": 100,
    "watch_processes": 4,
    "fanout_writes": 10_000,
    "kubectl_objects": 10_000,
    "kubectl_runs": 3,
}
QUICK = {
    "rounds": 1,
    "write_seconds": 1.0,
    "writers": 64,
    "watchers": 10,
    "watch_processes": 2,
    "fanout_writes": 200,
    "kubectl_objects": 200,
    "kubectl_runs": 1,
}
FANOUT_WRITERS = 4
WRITE_PROCESSES = 2
WATCH_TIMEOUT = 120.0
"""Seconds a watcher waits for the last revision after the writes end (never spent when
nothing is lost)."""
START_TIMEOUT = 60.0
TARGETS: dict[str, tuple[str, float]] = {
    "ratio_api_vs_store": (">=", 0.5),
    "watch_fanout_lost": ("==", 0),
    "watch_fanout_p99_ms": ("<=", 50.0),
    "kubectl_get_10k_s": ("<=", 3.0),
}


def log(message: str) -> None:
    print(f"[bench api {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def process(name: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Process",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "bench"}},
        "spec": {"args": ["sleep", "infinity"]},
    }


# -- the server child ----------------------------------------------------------------------


def serve(stack: str, store_url: str) -> None:
    """Serve `store_url` under `stack` on a free loopback port; print `PORT n` once it
    accepts connections. uvicorn is served as `setpoint serve` serves (`ApiServer` and
    its protocol and limits, on `run_api_loop`'s event loop); hypercorn with its defaults,
    on that loop too. SIGTERM stops it."""
    from setpoint.api.app import create_app
    from setpoint.api.server import ApiServer, run_api_loop
    from setpoint.engine.kinds import builtin_kinds
    from setpoint.store import open_store

    async def main() -> None:
        store = await open_store(store_url, registry=builtin_kinds())
        app = create_app(store, auth=None)
        stopped = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopped.set)
        try:
            if stack == "uvicorn":
                async with ApiServer(app) as server:
                    print(f"PORT {server.port}", flush=True)
                    await stopped.wait()
            else:
                await serve_hypercorn(app, stopped)
        finally:
            await store.close()

    run_api_loop(main())


async def serve_hypercorn(app: Any, stopped: asyncio.Event) -> None:
    from hypercorn.asyncio import serve as hypercorn_serve
    from hypercorn.config import Config

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # Accepted connections inherit it: without, a response written in two parts waits for
    # the client's delayed ACK (about 40 ms per request on a kept-alive connection).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)  # connections wait in the backlog until hypercorn accepts them
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = Config()
    config.bind = [f"fd://{sock.fileno()}"]
    config.loglevel = "WARNING"
    config.accesslog = None
    await hypercorn_serve(app, config, shutdown_trigger=stopped.wait)  # type: ignore[arg-type]


class Server:
    """A server child for one store file, stopped (SIGTERM, then SIGKILL) on exit."""

    def __init__(self, stack: str, store_url: str) -> None:
        self.child = subprocess.Popen(
            [sys.executable, SCRIPT, "--serve", stack, store_url], stdout=subprocess.PIPE
        )
        assert self.child.stdout is not None
        line = self.child.stdout.readline().decode()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"the {stack} server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"

    def stop(self) -> None:
        self.child.terminate()
        try:
            self.child.wait(30)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- writes --------------------------------------------------------------------------------


async def warm_up(store: Any, writers: int) -> None:
    """One create and update per writer, untimed: the first validations build the schemas."""
    await write_for(store, 0.0, writers, "warm", at_least_once=True)


async def write_for(
    store: Any, seconds: float, writers: int, prefix: str, *, at_least_once: bool = False
) -> float:
    """Writes per second of `writers` tasks each creating then updating objects."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def writer(index: int) -> None:
        nonlocal done
        for n in itertools.count():
            if time.perf_counter() >= deadline and not (at_least_once and n == 0):
                return
            obj = await store.create(process(f"{prefix}-{index}-{n}"))
            obj["metadata"]["labels"]["updated"] = "yes"
            await store.update(obj)
            done += 2

    start = time.perf_counter()
    await asyncio.gather(*(writer(i) for i in range(writers)))
    return done / (time.perf_counter() - start)


class HttpConnection:
    """One kept-alive HTTP/1.1 connection for the writers: requests are bytes built in one
    piece, responses read by their Content-Length (anything else fails the bench), every
    status checked. Lean on purpose: the writers share two cores with the server, and
    what they spend is not the server's to measure."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, host: str, port: int) -> HttpConnection:
        reader, writer = await asyncio.open_connection(host, port)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    async def call(self, method: bytes, path: bytes, body: bytes, expect: int) -> Any:
        """Send a JSON body; return the answer's JSON, which must come with `expect`."""
        self.writer.write(
            b"%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (method, path, len(body), body)
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = None
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            raise RuntimeError(f"{method!r} {path!r}: no Content-Length in {head!r}")
        answer = orjson.loads(await self.reader.readexactly(length))
        status = int(head.split(b" ", 2)[1])
        if status != expect:
            message = answer.get("message") if isinstance(answer, dict) else answer
            raise RuntimeError(f"{method!r} {path!r}: {status}, not {expect}: {message}")
        return answer


def write_child(server: str, seconds: float, writers: int, prefix: str) -> None:
    """`writers` asyncio tasks, each with its own kept-alive connection (`HttpConnection`),
    creating then updating objects (the PUT sends the object the POST returned, with its
    resourceVersion): a warm-up (one of each), `ready`, then on a line from stdin, writes
    for `seconds`; prints `done WRITES SECONDS`."""
    host, port = server.removeprefix("http://").split(":")
    collection = f"/apis/{API}/namespaces/default/processes".encode()

    async def create_and_update(conn: HttpConnection, index: int, n: int) -> None:
        body = orjson.dumps(process(f"{prefix}-{index}-{n}"))
        obj = await conn.call(b"POST", collection, body, 201)
        obj["metadata"]["labels"]["updated"] = "yes"
        path = b"%s/%s" % (collection, obj["metadata"]["name"].encode())
        await conn.call(b"PUT", path, orjson.dumps(obj), 200)

    async def main() -> None:
        connections = [await HttpConnection.open(host, int(port)) for _ in range(writers)]
        for index, conn in enumerate(connections):
            await create_and_update(conn, index, 0)
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        began = time.perf_counter()
        deadline = began + seconds
        counts = [0] * writers

        async def writer(index: int) -> None:
            for n in itertools.count(1):
                if time.perf_counter() >= deadline:
                    return
                await create_and_update(connections[index], index, n)
                counts[index] += 2

        await asyncio.gather(*(writer(i) for i in range(writers)))
        print(f"done {sum(counts)} {time.perf_counter() - began}", flush=True)

    uvloop.run(main())


def write_over_http(server: str, seconds: float, writers: int, prefix: str) -> float:
    """Writes per second of `writers` HTTP clients over WRITE_PROCESSES children."""
    shares = [
        writers // WRITE_PROCESSES + (i < writers % WRITE_PROCESSES) for i in range(WRITE_PROCESSES)
    ]
    children = [
        subprocess.Popen(
            [sys.executable, SCRIPT, "--write", server, str(seconds), str(n), f"{prefix}{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i, n in enumerate(shares)
        if n
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError("a writer child did not start")
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        done = [child.stdout.readline().split() for child in children if child.stdout]
        if any(len(d) != 3 for d in done):
            raise RuntimeError(f"a writer child failed: {done}")
        return sum(int(d[1]) for d in done) / max(float(d[2]) for d in done)
    finally:
        for child in children:
            child.kill()
            child.wait()


async def measure_writes(directory: str, settings: dict[str, Any]) -> dict[str, Any]:
    from setpoint.engine.kinds import builtin_kinds
    from setpoint.store import open_store

    rates: dict[str, list[float]] = {"store": [], **{s: [] for s in STACKS}}
    modes = ["store", *STACKS]
    files = itertools.count()
    for round_ in range(settings["rounds"]):
        order = modes[round_ % 3 :] + modes[: round_ % 3]
        for mode in order:
            url = f"sqlite:///{directory}/writes-{next(files)}.db"
            if mode == "store":
                store = await open_store(url, registry=builtin_kinds())
                try:
                    await warm_up(store, settings["writers"])
                    rate = await write_for(
                        store, settings["write_seconds"], settings["writers"], "w"
                    )
                finally:
                    await store.close()
            else:
                # The server creates the file; a client never does.
                with Server(mode, url) as server:
                    rate = await asyncio.to_thread(
                        write_over_http,
                        server.url,
                        settings["write_seconds"],
                        settings["writers"],
                        "w",
                    )
            rates[mode].append(rate)
            log(f"round {round_ + 1}: {mode} {rate:.0f} writes/s")
    medians = {mode: statistics.median(values) for mode, values in rates.items()}
    return {
        "api_writes_per_s": round(medians["uvicorn"], 1),
        "store_writes_per_s": round(medians["store"], 1),
        "ratio_api_vs_store": round(medians["uvicorn"] / medians["store"], 3),
        "stack_writes_per_s": {s: round(medians[s], 1) for s in STACKS},
        "write_rounds": {mode: [round(r, 1) for r in values] for mode, values in rates.items()},
    }


# -- watch fan-out -------------------------------------------------------------------------


class WatchReader(asyncio.Protocol):
    """One watch stream, read straight off its socket (HTTP/1.1, chunked) by the event
    loop's callbacks: records when each revision arrived (wall clock, one reading per
    `data_received`) until `last`. `done` holds the last revision seen when the server ends
    the stream (its timeout), or `ConnectionError` when it drops the watch."""

    def __init__(self, last: int, seen: dict[int, float], on_open: Callable[[], None]) -> None:
        self.last = last
        self.seen = seen
        self.on_open: Callable[[], None] | None = on_open
        self.revision = 0
        self.data = bytearray()  # received, not yet parsed
        self.lines = bytearray()  # chunk payloads, not yet a whole line
        self.done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        import orjson

        now = time.time()
        self.data += data
        if self.on_open is not None:
            end = self.data.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.data[:end])
            if not head.startswith(b"HTTP/1.1 200") or b"chunked" not in head.lower():
                self._finish(RuntimeError(f"not a chunked watch stream: {head[:300]!r}"))
                return
            del self.data[: end + 4]
            self.on_open()
            self.on_open = None
        while (eol := self.data.find(b"\r\n")) >= 0:
            size = int(self.data[:eol].split(b";")[0], 16)
            if len(self.data) < eol + 2 + size + 2:
                break
            if size == 0:
                self._finish(self.revision)  # the server ended it: resume
                return
            self.lines += self.data[eol + 2 : eol + 2 + size]
            del self.data[: eol + 2 + size + 2]
        *whole, rest = self.lines.split(b"\n")
        if whole:
            self.lines = rest
            for line in whole:
                event = orjson.loads(line)
                self.revision = int(event["object"]["metadata"]["resourceVersion"])
                self.seen[self.revision] = now
            if self.revision >= self.last:
                self._finish(self.revision)

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish(ConnectionError("the server dropped the watch"))

    def _finish(self, result: int | BaseException) -> None:
        if self.done.done():
            return
        if isinstance(result, BaseException):
            self.done.set_exception(result)
        else:
            self.done.set_result(result)


async def read_watch(
    address: tuple[str, int],
    since: int,
    last: int,
    seen: dict[int, float],
    on_open: Callable[[], None],
) -> int:
    """One watch stream from `since` (`WatchReader`): calls `on_open` once the server
    answered; returns the last revision seen once `last` is seen or the server ended the
    stream. Raises `ConnectionError` if the server drops the watch."""
    loop = asyncio.get_running_loop()
    transport, reader = await loop.create_connection(
        lambda: WatchReader(last, seen, on_open), *address
    )
    try:
        target = f"{WATCH_PATH}?watch=true&resourceVersion={since}"
        transport.write(f"GET {target} HTTP/1.1\r\nHost: {address[0]}\r\n\r\n".encode())
        return max(await reader.done, since)
    finally:
        transport.close()


def watch_child(server: str, since: int, last: int, watchers: int) -> None:
    """`watchers` streams from `since`; print `ready` once all are open, then, once stdin
    says the writes are done and each has seen `last` (or WATCH_TIMEOUT passed), JSON: the
    revisions each saw, with times, and how many streams were resumed. Streams are read by
    `read_watch` (a protocol on the socket, and orjson), not an HTTP client library: the
    children share the cores with the server, and what is measured is the server (reading
    with httpx cost these children more CPU than the server spent)."""
    host, port = server.removeprefix("http://").split(":")
    drops: list[int] = []

    async def one(on_ready: Callable[[], None]) -> dict[int, float]:
        """One watcher; a stream the server drops (a slow reader) is resumed from the last
        revision seen, as client-go's reflector does, and counted."""
        seen: dict[int, float] = {}
        revision = since
        on_open = on_ready
        while revision < last:
            try:
                revision = await read_watch((host, int(port)), revision, last, seen, on_open)
            except ConnectionError:
                drops.append(1)
                revision = max(seen, default=revision)
            on_open = _nothing
        return seen

    async def main() -> None:
        ready = asyncio.Event()
        opened = itertools.count(1)

        def on_ready() -> None:
            if next(opened) == watchers:
                ready.set()

        tasks = [asyncio.ensure_future(one(on_ready)) for _ in range(watchers)]
        await ready.wait()
        print("ready", flush=True)
        # The parent says when its writes are done; then the last events have
        # WATCH_TIMEOUT seconds to arrive.
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        await asyncio.wait(tasks, timeout=WATCH_TIMEOUT)
        seen = [t.result() if t.done() and not t.exception() else {} for t in tasks]
        print(json.dumps({"seen": seen, "drops": len(drops)}), flush=True)

    asyncio.run(main())


def _nothing() -> None:
    pass


def create_for_watchers(server: str, total: int) -> dict[int, tuple[float, float]]:
    """`total` creates by FANOUT_WRITERS threads, each with its own kept-alive connection;
    per revision, when its request was sent and when its answer came (wall clock)."""
    import http.client
    import threading

    host, port = server.removeprefix("http://").split(":")
    times: dict[int, tuple[float, float]] = {}
    names = iter(range(total))
    lock = threading.Lock()

    def writer() -> None:
        conn = http.client.HTTPConnection(host, int(port))
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            with lock:
                n = next(names, None)
            if n is None:
                return
            body = json.dumps(process(f"f-{n}"))
            sent = time.time()
            conn.request("POST", WATCH_PATH, body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            answer = response.read()
            acked = time.time()
            if response.status != 201:
                raise RuntimeError(f"create f-{n}: {response.status} {answer[:300]!r}")
            times[int(json.loads(answer)["metadata"]["resourceVersion"])] = (sent, acked)

    threads = [threading.Thread(target=writer) for _ in range(FANOUT_WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(times) != total:
        raise RuntimeError(f"{total - len(times)} of the creates failed")
    return times


async def measure_fanout(directory: str, settings: dict[str, Any]) -> dict[str, Any]:
    from setpoint.engine.kinds import builtin_kinds
    from setpoint.store import open_store

    url = f"sqlite:///{directory}/fanout.db"
    total, watchers = settings["fanout_writes"], settings["watchers"]
    with Server("uvicorn", url) as server:
        store = await open_store(server.url, registry=builtin_kinds())
        try:
            await store.create(process("warm"))  # the server builds its schemas untimed
            since = await store.revision()
        finally:
            await store.close()
        last = since + total
        children = []
        per_child = [
            len(range(i, watchers, settings["watch_processes"]))
            for i in range(settings["watch_processes"])
        ]
        for count in per_child:
            args = [SCRIPT, "--watch", server.url, str(since), str(last), str(count)]
            children.append(
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    *args,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    limit=1 << 30,  # its last line holds every receipt time
                )
            )
        for child in children:
            assert child.stdout is not None
            line = await asyncio.wait_for(child.stdout.readline(), START_TIMEOUT)
            assert line.strip() == b"ready", line
        log(f"{watchers} watchers ready; {total} writes")
        start = time.perf_counter()
        times = await asyncio.to_thread(create_for_watchers, server.url, total)
        log(f"writes done in {time.perf_counter() - start:.1f} s; waiting for watchers")
        seen_all: list[dict[str, float]] = []
        drops = 0
        for child in children:
            assert child.stdin is not None
            child.stdin.write(b"done\n")
            await child.stdin.drain()
        for child in children:
            assert child.stdout is not None
            out = json.loads(await asyncio.wait_for(child.stdout.readline(), WATCH_TIMEOUT))
            seen_all += out["seen"]
            drops += out["drops"]
            await child.wait()
    from_commit: list[float] = []
    from_request: list[float] = []
    lost = 0
    for seen in seen_all:
        for revision, (sent, acked) in times.items():
            got = seen.get(str(revision))
            if got is None:
                lost += 1
            else:
                from_commit.append((got - acked) * 1000)
                from_request.append((got - sent) * 1000)
    writes = sorted((acked - sent) * 1000 for sent, acked in times.values())
    from_commit.sort()
    from_request.sort()
    return {
        "watch_fanout_lost": lost,
        "watch_fanout_p50_ms": _pct_or_none(from_commit, 50),
        "watch_fanout_p99_ms": _pct_or_none(from_commit, 99),
        "watch_fanout_from_request_p99_ms": _pct_or_none(from_request, 99),
        "watch_fanout_write_p99_ms": _pct_or_none(writes, 99),
        "watch_fanout_events": len(from_commit),
        "watch_fanout_resumed": drops,
    }


def _pct_or_none(ordered: list[float], q: float) -> float | None:
    return round(_pct(ordered, q), 2) if ordered else None


def _pct(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


# -- kubectl -------------------------------------------------------------------------------


KUBECTL_FORMS = {"name": ["-o", "name"], "table": [], "json": ["-o", "json"]}
"""`kubectl get processes` in each output form timed: `-o name` (the target), the Table
(kubectl's default output, from the server's `as=Table` answer) and `-o json`."""


def listed_by_kubectl(form: str, out: bytes) -> int:
    """How many objects kubectl printed in `form`."""
    if form == "json":
        return len(json.loads(out)["items"])
    return out.count(b"\n") - (form == "table")  # the Table has a header line


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user and system) the process `pid` has used so far; None off Linux."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def time_kubectl(
    command: list[str], form: str, count: int, server_pid: int
) -> tuple[float, float | None, float]:
    """One `kubectl get`: its wall time, the server's CPU time meanwhile, kubectl's own."""
    before, server_before = os.times(), cpu_seconds(server_pid)
    start = time.perf_counter()
    child = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await child.communicate()
    elapsed = time.perf_counter() - start
    after, server_after = os.times(), cpu_seconds(server_pid)
    if child.returncode != 0:
        raise RuntimeError(f"kubectl failed: {err.decode()[-500:]}")
    listed = listed_by_kubectl(form, out)
    if listed != count:
        raise RuntimeError(f"kubectl -o {form} listed {listed} Processes, not {count}")
    server = None
    if server_before is not None and server_after is not None:
        server = server_after - server_before
    kubectl = (after.children_user + after.children_system) - (
        before.children_user + before.children_system
    )
    return elapsed, server, kubectl


def python_client_list(server: str, count: int) -> float:
    """Seconds the `kubernetes` Python client takes to list the Processes (one request, no
    limit: how it lists unless asked to page)."""
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = server
    api = client.CustomObjectsApi(client.ApiClient(configuration))
    start = time.perf_counter()
    listed = api.list_namespaced_custom_object("setpoint.dev", "v1alpha1", "default", "processes")
    elapsed = time.perf_counter() - start
    if len(listed["items"]) != count:
        raise RuntimeError(f"the Python client listed {len(listed['items'])}, not {count}")
    return elapsed


async def http_store_list(server: str, count: int) -> float:
    """Seconds `HttpStore.list` (setpoint's own client: pages of 500) takes."""
    from setpoint.engine.kinds import builtin_kinds
    from setpoint.store import open_store

    store = await open_store(server, registry=builtin_kinds())
    try:
        start = time.perf_counter()
        items, _ = await store.list(API, "Process", "default")
        elapsed = time.perf_counter() - start
    finally:
        await store.close()
    if len(items) != count:
        raise RuntimeError(f"HttpStore listed {len(items)} Processes, not {count}")
    return elapsed


async def measure_kubectl(directory: str, settings: dict[str, Any]) -> dict[str, Any]:
    from setpoint.engine.kinds import builtin_kinds
    from setpoint.store import open_store

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        log("kubectl is not installed: kubectl_get_10k_s is null")
        return {"kubectl_get_10k_s": None, "kubectl_objects": 0}
    url = f"sqlite:///{directory}/kubectl.db"
    count = settings["kubectl_objects"]
    store = await open_store(url + "?sync=off", registry=builtin_kinds())
    try:
        names = iter(range(count))

        async def filler() -> None:
            for n in names:
                await store.create(process(f"k-{n:05}"))

        await asyncio.gather(*(filler() for _ in range(64)))
    finally:
        await store.close()
    log(f"{count} Processes stored; kubectl get")
    cache = os.path.join(directory, "kube-cache")
    walls: dict[str, list[float]] = {form: [] for form in KUBECTL_FORMS}
    server_cpu: list[float] = []
    kubectl_cpu: list[float] = []
    with Server("uvicorn", url) as server:
        base = [
            kubectl,
            f"--server={server.url}",
            f"--cache-dir={cache}",
            "--kubeconfig=/dev/null",
            "get",
            "processes",
        ]
        # untimed: fills kubectl's discovery cache
        await time_kubectl([*base, "-o", "name"], "name", count, server.child.pid)
        for _ in range(settings["kubectl_runs"]):
            for form, flags in KUBECTL_FORMS.items():
                wall, server_s, kubectl_s = await time_kubectl(
                    [*base, *flags], form, count, server.child.pid
                )
                walls[form].append(wall)
                if form == "name":
                    kubectl_cpu.append(kubectl_s)
                    if server_s is not None:
                        server_cpu.append(server_s)
                log(f"kubectl get processes {' '.join(flags) or '(a Table)'}: {wall:.2f} s")
        python_s = [
            await asyncio.to_thread(python_client_list, server.url, count)
            for _ in range(settings["kubectl_runs"])
        ]
        log(f"kubernetes Python client list: {statistics.median(python_s):.2f} s")
        store_s = [
            await http_store_list(server.url, count) for _ in range(settings["kubectl_runs"])
        ]
        log(f"HttpStore list: {statistics.median(store_s):.2f} s")

    def median(values: list[float]) -> float | None:
        return round(statistics.median(values), 3) if values else None

    return {
        "kubectl_get_10k_s": median(walls["name"]),
        "kubectl_get_table_10k_s": median(walls["table"]),
        "kubectl_get_json_10k_s": median(walls["json"]),
        "kubectl_get_10k_server_cpu_s": median(server_cpu),
        "kubectl_get_10k_kubectl_cpu_s": median(kubectl_cpu),
        "python_client_list_10k_s": median(python_s),
        "http_store_list_10k_s": median(store_s),
        "kubectl_objects": count,
    }


# -- main ----------------------------------------------------------------------------------


PHASES = ("writes", "watch", "kubectl")


async def bench(settings: dict[str, Any], phases: tuple[str, ...] = PHASES) -> dict[str, Any]:
    directory = tempfile.mkdtemp(prefix="setpoint-bench-api-")
    try:
        result: dict[str, Any] = {}
        if "writes" in phases:
            log("writes: store, uvicorn, hypercorn")
            result.update(await measure_writes(directory, settings))
        if "watch" in phases:
            log("watch fan-out")
            result.update(await measure_fanout(directory, settings))
        if "kubectl" in phases:
            log("kubectl get")
            result.update(await measure_kubectl(directory, settings))
        return result
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small, fast run (for tests)")
    parser.add_argument(
        "--phase", choices=PHASES, action="append", help="run only this phase (repeatable)"
    )
    parser.add_argument("--serve", nargs=2, metavar=("STACK", "STORE_URL"), help=argparse.SUPPRESS)
    parser.add_argument("--watch", nargs=4, help=argparse.SUPPRESS)
    parser.add_argument("--write", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(*args.serve)
        return
    if args.write:
        server, seconds, writers, prefix = args.write
        write_child(server, float(seconds), int(writers), prefix)
        return
    if args.watch:
        server, since, last, watchers = args.watch
        watch_child(server, int(since), int(last), int(watchers))
        return
    settings = QUICK if args.quick else FULL
    result = asyncio.run(bench(settings, tuple(args.phase or PHASES)))
    missed = []
    for key, (op, target) in TARGETS.items():
        if key not in result:
            continue  # its phase did not run
        value = result.get(key)
        ok = value is not None and (
            value >= target if op == ">=" else value <= target if op == "<=" else value == target
        )
        if not ok:
            missed.append(key)
    result.update(
        quick=args.quick,
        settings=settings,
        targets={k: f"{op} {t}" for k, (op, t) in TARGETS.items()},
        missed=missed,
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
