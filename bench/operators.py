"""Operator benchmark: how fast `setpoint.testing.ApiServer` (the envtest for Python
operators) starts and stops, as a test that uses it sees it; and the same no-op operator
written with kopf and as a setpoint controller, each run against setpoint's API.

Run with `./dev bench operators [COUNT...]` (or `uv run python bench/operators.py`; COUNTs
default to 1000 and 10000). Progress goes to stderr; the last stdout line is one JSON
object. Takes a few minutes (kopf at 10,000 objects is the slow part).

Each start is `with ApiServer() as api:` (a server in a thread of its own, as the pytest
fixture `setpoint_api` starts it) on a new temporary store, timed from the call to the
moment the block begins (the kubeconfig written, the server accepting connections); each
stop from the block's end to the moment the thread, the store and the directory are gone.
The first start in the process also pays for importing the API server; it is reported on
its own and left out of the rest. The machine may be shared and noisy: figures are medians.

* `envtest_start_ms`: p50 of STARTS starts (target <= 300, issue 23);
* `envtest_async_start_ms`: p50 of STARTS `async with ApiServer()` starts (the caller's loop);
* `envtest_stop_ms`: p50 of the STARTS sync stops;
* `envtest_first_start_ms`: the first start of the process, imports included.

The race: a store is filled with COUNT objects of a CRD's kind (`Widget`, example.com/v1,
in namespace `default`) and served by an `ApiServer`; then each operator runs in a process
of its own, started as its users start it (`kopf run --standalone -A FILE`, `setpoint run
FILE`, with `KUBECONFIG` naming the server), and handles every object once with a handler
that does nothing but count (kopf: `@kopf.on.event`, which writes nothing back; setpoint:
a reconciler of `Request`s). An operator prints when it has seen all COUNT, with the time
since it saw the first; its resident memory (`VmRSS`) is read from /proc then. Reported per
COUNT: `kopf_per_s`, `setpoint_per_s` (COUNT over the time from the first object handled
to the last), `ratio_per_s` (setpoint over kopf), `kopf_rss_mb`, `setpoint_rss_mb`,
`ratio_rss` (setpoint over kopf), and the wall time from the start of each process.

Targets are reported under `targets` / `missed`, never asserted: `envtest_start_ms` <= 300,
`ratio_per_s` >= 100 and `ratio_rss` <= 0.5 at each COUNT (issue 23).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

STARTS = 20
TARGETS = {"envtest_start_ms": 300.0}
COUNTS = (1000, 10000)
DEADLINE = 900.0
"""Seconds an operator may take to handle every object before the run counts as failed."""
WIDGETS = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}
KOPF_OPERATOR = """
import os, time
import kopf

COUNT = int(os.environ["BENCH_COUNT"])
seen = set()
first = []

@kopf.on.startup()
def quiet(settings, **_):
    settings.posting.enabled = False  # no Events: the handler does nothing but count

@kopf.on.event("example.com", "v1", "widgets")
def noop(name, namespace, **_):
    first or first.append(time.monotonic())
    seen.add((namespace, name))
    if len(seen) == COUNT:
        print(f"DONE {time.monotonic() - first[0]:.6f}", flush=True)
"""
SETPOINT_OPERATOR = """
import os, time
from setpoint import Kind, Manager, Registry, Request

COUNT = int(os.environ["BENCH_COUNT"])
WIDGET = Kind("example.com/v1", "Widget", plural="widgets")
seen = set()
first = []

async def noop(request: Request) -> None:
    first or first.append(time.monotonic())
    seen.add((request.namespace, request.name))
    if len(seen) == COUNT:
        print(f"DONE {time.monotonic() - first[0]:.6f}", flush=True)

def register(registry: Registry) -> None:
    registry.register(WIDGET)

def setup(manager: Manager) -> None:
    manager.controller("widgets").for_(WIDGET).complete(noop)
"""


def log(message: str) -> None:
    print(f"[bench operators {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def sync_start_and_stop() -> tuple[float, float]:
    from setpoint.testing import ApiServer

    began = time.perf_counter()
    with ApiServer():
        started = time.perf_counter()
    return started - began, time.perf_counter() - started


async def async_start() -> float:
    from setpoint.testing import ApiServer

    began = time.perf_counter()
    async with ApiServer():
        return time.perf_counter() - began


async def fill(url: str, count: int) -> None:
    """A store at `url` holding the Widget CRD and `count` Widgets."""
    from setpoint.engine import builtin_kinds
    from setpoint.store import open_store

    store = await open_store(url, builtin_kinds(), create=True)
    try:
        await store.create(WIDGETS)
        for i in range(count):
            widget = {"apiVersion": "example.com/v1", "kind": "Widget"}
            await store.create({**widget, "metadata": {"name": f"w{i}", "namespace": "default"}})
    finally:
        await store.close()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def run_operator(argv: list[str], kubeconfig: Path, count: int, work: Path) -> dict[str, Any]:
    """Run one operator until it has handled `count` objects: its rate, memory, wall time."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETPOINT_", "KUBE"))}
    env |= {"KUBECONFIG": str(kubeconfig), "BENCH_COUNT": str(count)}
    began = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # kopf and setpoint log to stderr; DONE comes on stdout
            if line.startswith("DONE "):
                took = float(line.split()[1])
                return {
                    "per_s": round(count / max(took, 1e-6), 1),
                    "rss_mb": rss_mb(proc.pid),
                    "wall_s": round(time.monotonic() - began, 2),
                }
            if time.monotonic() - began > DEADLINE:
                break
        return {"per_s": 0.0, "rss_mb": float("nan"), "wall_s": round(time.monotonic() - began, 2)}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def race(count: int) -> dict[str, Any]:
    """kopf and setpoint, one after the other, on one server holding `count` Widgets."""
    from setpoint.testing import ApiServer

    with tempfile.TemporaryDirectory(prefix="bench-operators-") as directory:
        work = Path(directory)
        url = f"sqlite:///{work}/store.db?sync=off"
        asyncio.run(fill(url, count))
        (work / "kopf_noop.py").write_text(KOPF_OPERATOR)
        (work / "setpoint_noop.py").write_text(SETPOINT_OPERATOR)
        with ApiServer(store_url=url) as api:
            kopf = run_operator(
                [sys.executable, "-m", "kopf", "run", "--quiet", "--standalone", "-A",
                 "kopf_noop.py"], api.kubeconfig, count, work,
            )  # fmt: skip
            log(f"{count}: kopf {kopf}")
            ours = run_operator(
                [sys.executable, "-m", "setpoint", "run", "setpoint_noop.py"],
                api.kubeconfig,
                count,
                work,
            )
            log(f"{count}: setpoint {ours}")
    return {
        "kopf_per_s": kopf["per_s"],
        "setpoint_per_s": ours["per_s"],
        "ratio_per_s": round(ours["per_s"] / kopf["per_s"], 1) if kopf["per_s"] else None,
        "kopf_rss_mb": kopf["rss_mb"],
        "setpoint_rss_mb": ours["rss_mb"],
        "ratio_rss": round(ours["rss_mb"] / kopf["rss_mb"], 2) if kopf["rss_mb"] else None,
        "kopf_wall_s": kopf["wall_s"],
        "setpoint_wall_s": ours["wall_s"],
    }


def main() -> None:
    counts = [int(arg) for arg in sys.argv[1:]] or list(COUNTS)
    first, _ = sync_start_and_stop()
    log(f"first start (imports included): {ms(first)} ms")
    starts, stops = zip(*(sync_start_and_stop() for _ in range(STARTS)), strict=True)
    log(f"{STARTS} sync starts: p50 {ms(statistics.median(starts))} ms")
    async_starts = [asyncio.run(async_start()) for _ in range(STARTS)]
    figures = {
        "envtest_start_ms": ms(statistics.median(starts)),
        "envtest_async_start_ms": ms(statistics.median(async_starts)),
        "envtest_stop_ms": ms(statistics.median(stops)),
        "envtest_first_start_ms": ms(first),
    }
    missed = [name for name, bound in TARGETS.items() if figures[name] > bound]
    races = {str(count): race(count) for count in counts}
    for count, result in races.items():
        if (result["ratio_per_s"] or 0) < 100:
            missed.append(f"ratio_per_s@{count}")
        if result["ratio_rss"] is None or result["ratio_rss"] > 0.5:
            missed.append(f"ratio_rss@{count}")
    targets = {**TARGETS, "ratio_per_s": ">= 100", "ratio_rss": "<= 0.5"}
    print(
        json.dumps(
            {**figures, "starts": STARTS, "races": races, "targets": targets, "missed": missed}
        )
    )


if __name__ == "__main__":
    main()
