"""The dashboard in a real headless Chromium against a real `setpoint serve`: how long the
overview takes to show 10,000 objects, and how long a write through the API takes to show
on the open page (its watch stream), over 50 writes.

Run with `./dev run python bench/dashboard.py [--objects 10000] [--writes 50]` (Chromium
installed: `apt-get install -y chromium`). Progress goes to stderr; the last stdout line is
one JSON object:

    overview_10k_ms      navigation -> the overview's list drawn with every object, its
                         counts shown and the filter answering (target <= 2000)
    live_update_p95_ms   API write -> the page shows the new reason, p95 (target <= 1000)

Prints figures only; nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "dashboard"))

from dashboard_kit import TOKENS, browser, condition, serve, status_patch


async def seed(store_url: str, count: int) -> None:
    """`count` Processes written straight into the store (faster than `apply` of a file)."""
    from setpoint.engine.kinds import builtin_kinds
    from setpoint.store import open_store

    store = await open_store(store_url, builtin_kinds())
    try:
        for first in range(0, count, 500):
            await asyncio.gather(
                *(
                    store.create(
                        {
                            "apiVersion": "setpoint.dev/v1alpha1",
                            "kind": "Process",
                            "metadata": {
                                "name": f"p{i:05d}",
                                "namespace": "default",
                                "labels": {"app": f"a{i % 50}"},
                            },
                            "spec": {"args": ["sleep", "1000"]},
                        }
                    )
                    for i in range(first, min(count, first + 500))
                )
            )
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--writes", type=int, default=50)
    args = parser.parse_args()
    from playwright.sync_api import expect

    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        directory = Path(tmp)
        print(f"writing {args.objects} objects", file=sys.stderr)
        (directory / "server").mkdir()
        asyncio.run(seed(f"sqlite:///{directory / 'server' / 'state.db'}", args.objects))
        served = serve(directory / "server", [])
        try:
            with browser(directory) as context, served.client() as api:
                page = context.new_page()
                token = TOKENS["admin"]
                page.add_init_script(f"sessionStorage.setItem('setpoint.token', '{token}')")
                page.goto("about:blank")
                started = time.perf_counter()
                page.goto(f"{served.url}/ui/")
                expect(page.locator("#main[data-ready=true]")).to_have_count(1)
                expect(page.locator("#objects .row").first).to_be_visible()
                page.fill("#filter-text", "p09999" if args.objects >= 10_000 else "p00000")
                expect(page.locator("#objects .row")).to_have_count(1)
                overview_ms = (time.perf_counter() - started) * 1000
                print(f"overview: {overview_ms:.0f} ms", file=sys.stderr)
                total = page.locator("#counts .total").inner_text()
                print(f"counts: {total}", file=sys.stderr)

                page.fill("#filter-text", "p00001")
                row = page.locator("#objects .row[data-name=p00001] .reason")
                expect(row).to_have_count(1)
                delays = []
                for n in range(args.writes):
                    reason = f"Bench{n}"
                    started = time.perf_counter()
                    status_patch(api, "processes", "p00001", [condition("Ready", "False", reason)])
                    expect(row).to_have_text(reason)
                    delays.append((time.perf_counter() - started) * 1000)
                p95 = statistics.quantiles(delays, n=20)[-1] if len(delays) > 1 else delays[0]
                print(f"live update: p50 {statistics.median(delays):.0f} ms", file=sys.stderr)
        finally:
            served.stop()
    result = {
        "objects": args.objects,
        "overview_10k_ms": round(overview_ms),
        "live_update_p50_ms": round(statistics.median(delays)),
        "live_update_p95_ms": round(p95),
        "writes": args.writes,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
