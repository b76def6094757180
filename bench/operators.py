"""Operator-testing benchmark: how fast `setpoint.testing.ApiServer` (the envtest for Python
operators) starts and stops, as a test that uses it sees it.

Run with `./dev bench operators` (or `uv run python bench/operators.py`). Progress goes to
stderr; the last stdout line is one JSON object. Takes a few seconds.

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

Targets are reported under `targets` / `missed`, never asserted.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time

STARTS = 20
TARGETS = {"envtest_start_ms": 300.0}


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


def main() -> None:
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
    print(json.dumps({**figures, "starts": STARTS, "targets": TARGETS, "missed": missed}))


if __name__ == "__main__":
    main()
