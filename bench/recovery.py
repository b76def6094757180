"""Recovery benchmark: how fast a SIGKILLed server accepts connections again, under
setpoint's Process controller and under supervisord, in the same run.

Run with `./dev bench recovery` (or `uv run python bench/recovery.py`). Progress goes
to stderr; the last stdout line is one JSON object. Takes about two and a half minutes.

The server is a small Python script written to a temp dir: it listens on a
127.0.0.1 port (SO_REUSEADDR) and answers every connection with its own pid,
forever. Both supervisors run the same argv, `python -I server.py PORT`, each on
its own port:

* setpoint: a `Manager` in this process on `sqlite:///<tmp>/state.db` (default
  durability: fsync per commit) with the Process controller (`ProcessController`
  + `attach`, what `setup` does, kept so that `stop_all` can end the children), and
  a Process with `restartPolicy: Always`, `readinessProbe.tcpSocket` on the port
  with `periodSeconds: 1` (the Kubernetes minimum) and `backoff.resetAfterSeconds:
  1`: a run of 1 s counts as healthy, so a kill every two seconds or so is never
  taken for a crash loop (the same rule as supervisord's `startsecs=1`).
* supervisord (PyPI `supervisor`): `supervisord -n -c <tmp>/supervisord.conf` as a
  child, `[program:srv]` with `autorestart=true` and the default `startsecs=1`
  (a child that dies within 1 s of its start counts as a failed start and is
  retried with back-off, so each kill comes more than 1 s after the restart).

Both servers run side by side; KILLS rounds, each killing both servers once, in
an order that alternates from round to round. One kill: wait until the current
server is settled (for setpoint: its status shows `Ready=True` with the pid that
answers on the port), pause PAUSE_S seconds (part of the load pattern: every
restart follows a healthy run), SIGKILL the pid that answered on the port, then
connect every POLL_S seconds (in a thread, a blocking connect) until a server with
a different pid answers. Figures:

* `setpoint_median_ms`, `setpoint_p95_ms`, `supervisord_median_ms`,
  `supervisord_p95_ms`: kill to port accepting again (a new pid answering);
  p95 is nearest-rank over KILLS samples.
* `ratio_vs_supervisord`: setpoint median / supervisord median (target <= 0.25).
* `setpoint_ready_median_ms`, `setpoint_ready_p95_ms`: kill to the informer seeing
  `Ready=True` with the new pid; bounded below by the probe period (the first
  probe runs as the child starts, before it listens, the next one 1 s later).
* `server_start_median_ms`: the floor, from spawning the server directly
  (`subprocess.Popen`, no supervisor) to it answering, median of FLOOR_STARTS;
  mostly the interpreter's start-up. What a supervisor adds is its figure minus this.
* `setpoint_defaults_ms`: after the timed rounds, a second Process with the
  default `backoff` (10 s doubling, reset after 600 s) is killed DEFAULT_KILLS
  times with the same pause: the first restart after a healthy run is immediate,
  each later one within `resetAfterSeconds` waits 10 s, 20 s, ...
* `webapp_up_s`: `setpoint up examples/webapp/webapp.yaml` from nothing (no data
  directory, no store) until `up` reports the `web` Deployment Ready and the `web`
  Service answers 200; median of WEBAPP_RUNS runs, each in a fresh directory (a copy
  of the example with free ports). Includes initdb, PostgreSQL's start, the
  migrations and three web replicas passing their readiness probes.
* `rollout_failed_requests`: in each of those runs, `examples/webapp/load.py` sends
  requests through the Service one after another (a new connection each) while
  `APP_VERSION` is changed, applied with `setpoint apply` and followed with
  `setpoint rollout status` to the end of the 3-replica rolling update; the sum of
  failed requests over the runs (`rollout_requests`: how many were sent). Null,
  with the reason under `not_measured`, when PostgreSQL is not installed.

Clean-up: the manager stops, `ProcessController.stop_all` stops the children,
supervisord gets SIGTERM (it stops its child, and gets SIGKILL if it has not
exited after 15 s); then every process whose command line names the temp dir is
listed under `orphans` (and warned about on stderr) and killed. Prints figures
only; nothing here passes or fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from setpoint.engine import builtin_kinds
from setpoint.model import READY, is_true
from setpoint.runtime.informer import InformerEvent
from setpoint.runtime.manager import Manager
from setpoint.store import open_store
from setpoint.testing import free_port_range
from setpoint.workloads import process
from setpoint.workloads.process import PROCESS, ProcessController, ProcessSettings

KILLS = 20
DEFAULT_KILLS = 3
FLOOR_STARTS = 7
PAUSE_S = 1.5
POLL_S = 0.005
CONNECT_TIMEOUT_S = 0.2
WAIT_S = 60.0
TARGET_RATIO = 0.25
WEBAPP_RUNS = 3
WEBAPP = Path(__file__).resolve().parents[1] / "examples" / "webapp"
NAMESPACE = "default"

SERVER = """\
import os, socket, sys
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", int(sys.argv[1])))
listener.listen(64)
greeting = b"%d\\n" % os.getpid()
while True:
    conn, _ = listener.accept()
    try:
        conn.sendall(greeting)
    except OSError:
        pass
    conn.close()
"""

SUPERVISORD_CONF = """\
[unix_http_server]
file={tmp}/supervisor.sock

[supervisord]
nodaemon=true
logfile={tmp}/supervisord.log
pidfile={tmp}/supervisord.pid
childlogdir={tmp}

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://{tmp}/supervisor.sock

[program:srv]
command={command}
autorestart=true
startsecs=1
stopasgroup=true
killasgroup=true
stdout_logfile={tmp}/srv.log
redirect_stderr=true
"""


def tool(name: str) -> str:
    """`name` next to this interpreter (the project's venv), else as found on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


def progress(message: str) -> None:
    print(f"[bench recovery {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (0..100), nearest-rank on sorted values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- the port ------------------------------------------------------------------------


def answering_pid(port: int) -> int | None:
    """The pid the server on `port` answers with; None if nothing accepts (or it died)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S) as conn:
            data = conn.recv(32)
    except OSError:
        return None
    try:
        return int(data)
    except ValueError:
        return None


def wait_answer(port: int, other_than: int | None, timeout: float) -> tuple[int, float]:
    """Connect every POLL_S s until a server whose pid is not `other_than` answers;
    (its pid, perf_counter when it answered). Blocking: run it in a thread."""
    deadline = time.perf_counter() + timeout
    while True:
        pid = answering_pid(port)
        now = time.perf_counter()
        if pid is not None and pid != other_than:
            return pid, now
        if now > deadline:
            raise TimeoutError(f"nothing new answered on port {port} within {timeout:g}s")
        time.sleep(POLL_S)


async def kill_and_time(port: int, pid: int) -> tuple[int, float, float]:
    """SIGKILL `pid`, then wait for a new server on `port`: (new pid, kill time, answer time)."""
    killed_at = time.perf_counter()
    os.kill(pid, signal.SIGKILL)
    new_pid, answered_at = await asyncio.to_thread(wait_answer, port, pid, WAIT_S)
    return new_pid, killed_at, answered_at


# -- setpoint ------------------------------------------------------------------------


class ReadyLog:
    """When the informer first saw each (Process name, pid) with `Ready=True`."""

    def __init__(self) -> None:
        self.ready_at: dict[tuple[str, int], float] = {}
        self.status_pid: dict[str, int | None] = {}
        self.changed = asyncio.Event()

    def __call__(self, event: InformerEvent) -> None:
        now = time.perf_counter()
        if event.type == "DELETED":
            return
        name = event.object["metadata"]["name"]
        status = event.object.get("status") or {}
        pid = status.get("pid")
        self.status_pid[name] = pid
        if pid is not None and is_true(status, READY):
            self.ready_at.setdefault((name, int(pid)), now)
        self.changed.set()

    async def wait_ready(self, name: str, pid: int) -> float:
        """perf_counter when `name` was first seen Ready with `pid` (within WAIT_S)."""
        async with asyncio.timeout(WAIT_S):
            while (name, pid) not in self.ready_at:
                self.changed.clear()
                await self.changed.wait()
        return self.ready_at[(name, pid)]


def process_manifest(name: str, server: Path, port: int, backoff: dict[str, float]) -> Any:
    return {
        "apiVersion": PROCESS.api_version,
        "kind": PROCESS.kind,
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "args": [sys.executable, "-I", str(server), str(port)],
            "ports": [port],
            "restartPolicy": "Always",
            "backoff": backoff,
            "terminationGracePeriodSeconds": 5,
            "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1},
        },
    }


class SetpointSide:
    """A manager in this process running the Process controller on a SQLite store."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ready = ReadyLog()
        self.controller: ProcessController | None = None
        self.manager: Manager | None = None
        self.run: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.store = await open_store(f"sqlite:///{self.tmp}/state.db", builtin_kinds())
        self.manager = manager = Manager(self.store)
        settings = ProcessSettings(self.tmp / "state", self.tmp / "logs")
        controller = process.setup(manager, settings).reconciler
        assert isinstance(controller, ProcessController)
        self.controller = controller
        manager.informer(PROCESS).add_handler(self.ready)
        self.run = asyncio.create_task(manager.run())
        await manager.wait_started()

    async def create(self, name: str, port: int, backoff: dict[str, float]) -> int:
        """Create the Process; return its pid once it answers on `port` and is Ready."""
        await self.store.create(process_manifest(name, self.tmp / "server.py", port, backoff))
        pid, _ = await asyncio.to_thread(wait_answer, port, None, WAIT_S)
        await self.ready.wait_ready(name, pid)
        return pid

    async def kill(self, name: str, port: int, pid: int) -> tuple[int, float, float]:
        """Kill `pid`; (new pid, ms until the port answers, ms until Ready again)."""
        status_pid = self.ready.status_pid.get(name)
        if status_pid != pid:
            progress(f"warning: {name} status says pid {status_pid}, port answers {pid}")
        new_pid, killed_at, answered_at = await kill_and_time(port, pid)
        ready_at = await self.ready.wait_ready(name, new_pid)
        return new_pid, (answered_at - killed_at) * 1000, (ready_at - killed_at) * 1000

    async def close(self) -> None:
        if self.manager is not None and self.run is not None:
            self.manager.stop()
            with contextlib.suppress(Exception):
                await self.run
        if self.controller is not None:
            await self.controller.stop_all(grace=5.0)
        with contextlib.suppress(AttributeError):
            await self.store.close()


# -- supervisord ---------------------------------------------------------------------


class SupervisordSide:
    """`supervisord -n` as a child, running the server as `[program:srv]`."""

    def __init__(self, tmp: Path, port: int) -> None:
        self.tmp = tmp
        self.port = port
        self.conf = tmp / "supervisord.conf"
        self.proc: subprocess.Popen[bytes] | None = None

    def launch(self) -> None:
        """Write the config and start supervisord; its own output goes to a file."""
        command = f"{sys.executable} -I {self.tmp / 'server.py'} {self.port}"
        self.conf.write_text(SUPERVISORD_CONF.format(tmp=self.tmp, command=command))
        with open(self.tmp / "supervisord.out", "wb") as out:
            self.proc = subprocess.Popen(
                [tool("supervisord"), "-n", "-c", str(self.conf)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    async def start(self) -> int:
        """Launch supervisord; return the server's pid once it answers on the port."""
        self.launch()
        pid, _ = await asyncio.to_thread(wait_answer, self.port, None, WAIT_S)
        ctl = await asyncio.to_thread(
            subprocess.run,
            [tool("supervisorctl"), "-c", str(self.conf), "pid", "srv"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if ctl.stdout.strip() != str(pid):
            progress(f"warning: supervisorctl says pid {ctl.stdout.strip()!r}, port answers {pid}")
        return pid

    async def kill(self, pid: int) -> tuple[int, float]:
        new_pid, killed_at, answered_at = await kill_and_time(self.port, pid)
        return new_pid, (answered_at - killed_at) * 1000

    def close(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                progress("warning: supervisord did not exit on SIGTERM; killing it")
                self.proc.kill()
                self.proc.wait()


# -- the floor -----------------------------------------------------------------------


def start_to_answer_ms(server: Path, port: int) -> float:
    """Milliseconds from spawning the server directly to it answering on `port`."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-I", str(server), str(port)])
    try:
        _, answered_at = wait_answer(port, None, WAIT_S)
    finally:
        proc.kill()
        proc.wait()
    return (answered_at - started) * 1000


# -- orphans -------------------------------------------------------------------------


def processes_naming(text: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose command line contains `text`, or
    whose working directory is in `text` (the webapp's children use relative paths)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cwd = os.readlink(entry / "cwd")
        except (OSError, IndexError):
            continue
        if (text in cmdline or cwd.startswith(text)) and state != "Z":
            found.append((int(entry.name), cmdline))
    return found


def reap_orphans(tmp: Path) -> list[int]:
    """Warn about, then kill, processes left behind that name `tmp`; their pids."""
    time.sleep(0.2)  # let the last exits land
    left = processes_naming(str(tmp))
    for pid, cmdline in left:
        progress(f"warning: orphan process {pid} left behind: {cmdline}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return [pid for pid, _ in left]


# -- the benchmark -------------------------------------------------------------------


async def bench(tmp: Path) -> dict[str, Any]:
    (tmp / "server.py").write_text(SERVER)
    setpoint_port, supervisord_port, defaults_port = free_port(), free_port(), free_port()
    setpoint = SetpointSide(tmp)
    supervisord = SupervisordSide(tmp, supervisord_port)
    answer: list[float] = []
    ready: list[float] = []
    baseline: list[float] = []
    defaults: list[float] = []
    floor = [start_to_answer_ms(tmp / "server.py", defaults_port) for _ in range(FLOOR_STARTS)]
    progress(f"the server alone: {statistics.median(floor):.1f} ms from spawn to answering")
    try:
        await setpoint.start()
        sp_pid = await setpoint.create("srv", setpoint_port, {"resetAfterSeconds": 1})
        sv_pid = await supervisord.start()
        progress(f"setpoint server pid {sp_pid}, supervisord server pid {sv_pid}")
        for round_ in range(KILLS):
            order = ("setpoint", "supervisord") if round_ % 2 == 0 else ("supervisord", "setpoint")
            for side in order:
                await asyncio.sleep(PAUSE_S)
                if side == "setpoint":
                    sp_pid, ms, ready_ms = await setpoint.kill("srv", setpoint_port, sp_pid)
                    answer.append(ms)
                    ready.append(ready_ms)
                else:
                    sv_pid, ms = await supervisord.kill(sv_pid)
                    baseline.append(ms)
            progress(
                f"kill {round_ + 1}/{KILLS}: setpoint {answer[-1]:.1f} ms to accept"
                f" ({ready[-1]:.0f} ms to Ready), supervisord {baseline[-1]:.1f} ms"
            )
        progress(f"default back-off: {DEFAULT_KILLS} kills of a second Process")
        pid = await setpoint.create("srv-defaults", defaults_port, {})
        for n in range(DEFAULT_KILLS):
            await asyncio.sleep(PAUSE_S)
            pid, ms, _ = await setpoint.kill("srv-defaults", defaults_port, pid)
            defaults.append(ms)
            progress(f"default back-off, kill {n + 1}/{DEFAULT_KILLS}: {ms:.1f} ms to accept")
    finally:
        await setpoint.close()
        supervisord.close()
    median, baseline_median = statistics.median(answer), statistics.median(baseline)
    ratio = median / baseline_median
    return {
        "setpoint_median_ms": round(median, 1),
        "setpoint_p95_ms": round(pct(answer, 95), 1),
        "supervisord_median_ms": round(baseline_median, 1),
        "supervisord_p95_ms": round(pct(baseline, 95), 1),
        "ratio_vs_supervisord": round(ratio, 3),
        "setpoint_ready_median_ms": round(statistics.median(ready), 1),
        "setpoint_ready_p95_ms": round(pct(ready, 95), 1),
        "kills": KILLS,
        "server_start_median_ms": round(statistics.median(floor), 1),
        "pause_s": PAUSE_S,
        "setpoint_backoff": {"resetAfterSeconds": 1},
        "supervisord_startsecs": 1,
        "setpoint_defaults_ms": [round(x, 1) for x in defaults],
        "samples_ms": {
            "setpoint": [round(x, 1) for x in answer],
            "setpoint_ready": [round(x) for x in ready],
            "supervisord": [round(x, 1) for x in baseline],
        },
        "missed": [] if ratio <= TARGET_RATIO else ["ratio_vs_supervisord"],
    }


# -- the webapp ------------------------------------------------------------------------


def stage_webapp(base: Path) -> tuple[Path, int, list[dict[str, Any]]]:
    """A copy of examples/webapp under `base` with free ports, run by this interpreter;
    (manifest, service port, objects)."""
    target = base / "examples" / "webapp"
    shutil.copytree(WEBAPP, target, ignore=shutil.ignore_patterns("__pycache__"))
    db_port, service_port, first = free_port(), free_port(), free_port_range(19)
    text = (target / "webapp.yaml").read_text()
    text = text.replace("15433", str(db_port)).replace("python3", sys.executable)
    objects = list(yaml.safe_load_all(text))
    for obj in objects:
        if obj["kind"] == "Deployment":
            obj["spec"]["portRange"] = {"start": first, "end": first + 18}
        if obj["kind"] == "Service":
            obj["spec"]["port"] = service_port
    manifest = target / "webapp.yaml"
    manifest.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return manifest, service_port, objects


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def webapp_run(base: Path) -> tuple[float, dict[str, Any]]:
    """One run: seconds from `up` to all Ready, and the load loop's summary of a rollout."""
    manifest, port, objects = stage_webapp(base)
    url = f"http://127.0.0.1:{port}/"
    started = time.perf_counter()
    up = subprocess.Popen(
        [sys.executable, "-m", "setpoint", "up", str(manifest)],
        cwd=base, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert up.stdout is not None
        for line in up.stdout:
            if line.startswith("Deployment/web ready=True "):
                break
        else:
            raise RuntimeError("setpoint up ended before web was Ready")
        deadline = time.monotonic() + WAIT_S
        while not answers(url):
            if time.monotonic() > deadline:
                raise RuntimeError("the web Service does not answer")
            time.sleep(0.01)
        up_s = time.perf_counter() - started
        drain_output(up)
        stop = base / "stop-load"
        load = subprocess.Popen(
            [sys.executable, str(base / "examples/webapp/load.py"), "--url", url,
             "--until", str(stop), "--seconds", "300"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        for obj in objects:
            if obj["kind"] == "Deployment":
                obj["spec"]["template"]["spec"]["env"]["APP_VERSION"] = "2"
        manifest.write_text(yaml.safe_dump_all(objects, sort_keys=False))
        cli = [sys.executable, "-m", "setpoint"]
        subprocess.run([*cli, "apply", "-f", str(manifest)], cwd=base, check=True,
                       capture_output=True)  # fmt: skip
        subprocess.run([*cli, "rollout", "status", "deploy/web", "--timeout", "300s"],
                       cwd=base, check=True, capture_output=True)  # fmt: skip
        stop.touch()
        out, _ = load.communicate(timeout=60)
        return up_s, json.loads(out.splitlines()[-1])
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(timeout=60)
        except subprocess.TimeoutExpired:
            up.kill()


def drain_output(proc: subprocess.Popen[str]) -> None:
    """Keep reading `proc`'s stdout so that it never blocks on a full pipe."""
    assert proc.stdout is not None
    threading.Thread(target=proc.stdout.read, daemon=True).start()


def webapp_figures(tmp: Path) -> dict[str, Any]:
    found = subprocess.run(
        [sys.executable, str(WEBAPP / "pg.py"), "bin", "postgres"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if found.returncode != 0:
        reason = found.stderr.strip()
        progress(f"webapp: not measured: {reason}")
        return {"webapp_up_s": None, "rollout_failed_requests": None, "not_measured": [reason]}
    tmp.chmod(0o711)  # the postgres user reaches its data directory
    ups: list[float] = []
    failed = sent = 0
    for n in range(WEBAPP_RUNS):
        base = tmp / f"webapp-{n}"
        base.mkdir(mode=0o711)
        up_s, load = webapp_run(base)
        ups.append(up_s)
        failed += int(load["failures"])
        sent += int(load["requests"])
        progress(
            f"webapp run {n + 1}/{WEBAPP_RUNS}: all Ready in {up_s:.1f}s; rollout under "
            f"{load['requests']} requests, {load['failures']} failed {load['reasons']}"
        )
    return {
        "webapp_up_s": round(statistics.median(ups), 2),
        "webapp_up_s_runs": [round(x, 2) for x in ups],
        "rollout_failed_requests": failed,
        "rollout_requests": sent,
    }


async def main() -> None:
    started = time.perf_counter()
    result: dict[str, Any] = {"loadavg_1m_before": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory(prefix="setpoint-bench-recovery-") as name:
        tmp = Path(name)
        try:
            result.update(await bench(tmp))
            result.update(webapp_figures(tmp))
        finally:
            orphans = reap_orphans(tmp)
    missed = result.setdefault("missed", [])
    if result.get("webapp_up_s") is not None and result["webapp_up_s"] > 15:
        missed.append("webapp_up_s")
    if result.get("rollout_failed_requests"):
        missed.append("rollout_failed_requests")
    result.update(orphans=orphans, loadavg_1m_after=round(os.getloadavg()[0], 2))
    progress(f"done in {time.perf_counter() - started:.0f}s")
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
