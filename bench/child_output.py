"""Child output benchmark: what a per-child log holder costs, against a child writing
straight into its log file (rotated by copy-and-truncate), the two ways to keep a child
from blocking on its output while the engine is down.

Run with `uv run python bench/child_output.py` (about a minute). Progress goes to stderr;
the last stdout line is one JSON object.

* `holder` (what `setpoint.workloads.supervisor` does): the child writes into a FIFO
  that a small process of its own (`log_holder.py`) copies into the log file and
  rotates. Measured: lines per second of a chatty child (LINES numbered 100-byte lines,
  as fast as it can, the log rotating at ROTATE_BYTES), the lines missing afterwards;
  the memory of one holder (RSS, PSS, private, from /proc/PID/smaps_rollup), of the fork
  server that forked them (`fork_server_pss_kib`) and both per child over CHILDREN
  children (`per_child_pss_kib`: the holders' PSS and the server's, over CHILDREN); `start`
  and `stop` latency; and an engine SIGKILLed before the child writes LINES lines: how
  long the child takes with no engine, and the lines missing once a new engine has
  adopted it.
* `direct`: the child's stdout is the log file itself (O_APPEND); this process plays
  the engine and rotates it as logrotate's `copytruncate` does (copy, then truncate)
  whenever it is past ROTATE_BYTES (and, to count losses over many rotations, 64 KiB).
  Measured: the same chatty child's lines per second and the lines missing (written
  between the copy and the truncate).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from setpoint.workloads import supervisor

LINES = 200_000
ROTATE_BYTES = 4 * 1024 * 1024
CHILDREN = 10
CHATTY = (
    "import os\nfor i in range({lines}):\n    os.write(1, b'line %07d %s\\n' % (i, b'x' * 86))\n"
)
# Waits for SIGUSR1 (sent once its engine is dead), then writes as CHATTY does.
CHATTY_LATER = (
    "import os, signal, time\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGUSR1}})\n"
    "open({done!r} + '.ready', 'w').close()\n"
    "signal.sigwait({{signal.SIGUSR1}})\n"
    "t = time.monotonic()\n"
    "for i in range({lines}):\n"
    "    os.write(1, b'line %07d %s\\n' % (i, b'x' * 86))\n"
    "open({done!r}, 'w').write(str(time.monotonic() - t))\n"
    "time.sleep(3600)\n"
)
ENGINE = """
import asyncio, sys
from pathlib import Path
from setpoint.workloads import supervisor

async def main():
    spec = supervisor.ProcessSpec(args=[sys.executable, "-c", sys.argv[3]],
                                  log_dir=Path(sys.argv[1]), marker=sys.argv[4])
    running = await supervisor.start("chatty", spec, Path(sys.argv[2]))
    print(running.pid, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def missing(log: Path, lines: int) -> int:
    """How many of the numbered lines 0..lines-1 are in none of `log`'s files."""
    seen: set[int] = set()
    for path in log.parent.glob(f"{log.name}*"):
        for line in path.read_bytes().splitlines():
            if line.startswith(b"line "):
                seen.add(int(line.split()[1]))
    return lines - len(seen & set(range(lines)))


def smaps(pid: int) -> dict[str, int]:
    """Rss, Pss and private memory of `pid`, in KiB."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, value = line.split(":", 1)
        fields[key] = int(value.split()[0])
    return {
        "rss_kib": fields["Rss"],
        "pss_kib": fields["Pss"],
        "private_kib": fields["Private_Clean"] + fields["Private_Dirty"],
    }


def parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def holder_pids(state_dir: Path) -> list[int]:
    states = sorted(state_dir.glob("*.json"))
    return [int(json.loads(state.read_text())["holder"]["pid"]) for state in states]


def exists(path: Path) -> bool:
    return path.exists()


def copytruncate(log: Path, rotated: Path) -> None:
    """As logrotate's `copytruncate`: copy `log` to `rotated`, then empty it."""
    with open(log, "rb") as src, open(rotated, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
        os.truncate(log, 0)


def spec(tmp: Path, code: str) -> supervisor.ProcessSpec:
    return supervisor.ProcessSpec(
        args=[sys.executable, "-c", code],
        log_dir=tmp / "logs",
        marker=f"bench-{uuid.uuid4().hex}",
        max_log_bytes=ROTATE_BYTES,
        log_backups=20,
    )


async def holder_throughput(tmp: Path) -> dict[str, float]:
    t = time.perf_counter()
    running = await supervisor.start("chatty", spec(tmp, CHATTY.format(lines=LINES)), tmp / "st")
    await running.wait()
    await running.wait_logs_closed()
    elapsed = time.perf_counter() - t
    await supervisor.stop(running, 0.0)
    return {
        "lines_per_s": round(LINES / elapsed),
        "lines_lost": missing(tmp / "logs" / "chatty.log", LINES),
    }


async def holder_cost(tmp: Path) -> dict[str, float]:
    starts, stops = [], []
    children = []
    for n in range(CHILDREN):
        t = time.perf_counter()
        children.append(
            await supervisor.start(f"idle-{n}", spec(tmp, "import time; time.sleep(3600)"), tmp)
        )
        starts.append(time.perf_counter() - t)
    await asyncio.sleep(1.0)  # let the holders finish starting before reading their memory
    pids = holder_pids(tmp)
    memory = [smaps(pid) for pid in pids]
    servers = {parent(pid) for pid in pids} - {os.getpid()}  # none: each started on its own
    server_pss = sum(smaps(pid)["pss_kib"] for pid in servers)
    for child in children:
        t = time.perf_counter()
        await supervisor.stop(child, 5.0)
        stops.append(time.perf_counter() - t)
    return {
        "processes_per_child": 2,
        **{key: round(statistics.mean(m[key] for m in memory)) for key in memory[0]},
        "fork_servers": len(servers),
        "fork_server_pss_kib": server_pss,
        "per_child_pss_kib": round((sum(m["pss_kib"] for m in memory) + server_pss) / CHILDREN),
        "start_ms": round(1000 * statistics.median(starts), 1),
        "stop_ms": round(1000 * statistics.median(stops), 1),
    }


async def holder_engine_sigkill(tmp: Path) -> dict[str, float]:
    done = tmp / "done"
    code = CHATTY_LATER.format(lines=LINES, done=str(done))
    engine = await asyncio.create_subprocess_exec(
        sys.executable, "-c", ENGINE, str(tmp / "logs"), str(tmp / "st"), code,
        f"bench-{uuid.uuid4().hex}", stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert engine.stdout is not None
    child = int(await engine.stdout.readline())
    while not exists(Path(f"{done}.ready")):  # noqa: ASYNC110 - a file sends no event
        await asyncio.sleep(0.01)
    engine.kill()
    await engine.wait()
    os.kill(child, signal.SIGUSR1)
    t = time.perf_counter()
    while not exists(done) and time.perf_counter() - t < 60:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    finished = exists(done)
    adopted = supervisor.find_adoptable("chatty", tmp / "st")
    assert adopted is not None
    await supervisor.stop(adopted, 5.0)
    await adopted.wait_logs_closed()
    return {
        "child_finished_without_engine": finished,
        "child_s_without_engine": round(float(done.read_text()), 3) if finished else -1,
        "lines_lost": missing(tmp / "logs" / "chatty.log", LINES),
    }


async def direct(tmp: Path, rotate_bytes: int = ROTATE_BYTES) -> dict[str, float]:
    log = tmp / "direct.log"
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    t = time.perf_counter()
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHATTY.format(lines=LINES), stdout=out, stderr=out
    )
    os.close(out)
    rotations = 0
    waiting = asyncio.ensure_future(child.wait())
    while not waiting.done():
        if os.stat(log).st_size > rotate_bytes:
            rotations += 1
            copytruncate(log, log.with_name(f"{log.name}.{rotations}"))
        await asyncio.sleep(0.001)
    elapsed = time.perf_counter() - t
    return {
        "lines_per_s": round(LINES / elapsed),
        "rotations": rotations,
        "lines_lost": missing(log, LINES),
    }


async def main() -> None:
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, measure in [
            ("holder_throughput", holder_throughput),
            ("holder_cost", holder_cost),
            ("holder_engine_sigkill", holder_engine_sigkill),
            ("direct", direct),
            ("direct_rotating_at_64kib", lambda tmp: direct(tmp, 64 * 1024)),
        ]:
            progress(f"{name}...")
            here = Path(tmp) / name
            here.mkdir()
            figures[name] = await measure(here)
            progress(f"{name}: {figures[name]}")
    print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main())
