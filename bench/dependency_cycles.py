"""Dependency-cycle admission benchmark: what the store's refusal of a `dependsOn` cycle
(`setpoint.store.dependency_index`) costs per write, and that the cost does not grow with
the number of objects stored.

Run with `./dev bench dependency_cycles` (a few seconds). Progress goes to stderr; the last
stdout line is one JSON object. Nothing is asserted.

Each mode writes Processes whose `spec.dependsOn` names up to three earlier ones (a random
acyclic graph, the same in every mode) into a fresh store, `STORED` of them before the
timed part, then `TIMED` more, timed one `create` after another:

* `checked`: the registry's Process declares its edges (`depends_on="spec.dependsOn"`,
  as shipped), so every create passes the cycle check;
* `unchecked`: the same kind without the declaration, so no check runs (the cost of the
  rest of a write).

Reported per backend (`memory://`, and SQLite with `?sync=off` so that no fsync hides the
CPU cost) and per number stored: `us_per_write` for each mode, `check_us` (checked minus
unchecked, medians of ROUNDS rounds) and `lists` (how many lists the checked store served:
one per kind that declares edges, whatever the number of writes).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from setpoint.model import Registry
from setpoint.store import open_store
from setpoint.workloads import kinds

STORED = (1_000, 10_000)
TIMED = 1_000
ROUNDS = 3


def registry(checked: bool) -> Registry:
    r = Registry()
    for kind in kinds.KINDS:
        r.register(
            kind
            if checked or kind.depends_on is None
            else dataclasses.replace(kind, depends_on=None)
        )
    return r


def manifest(i: int, rng: random.Random) -> dict[str, Any]:
    on = sorted({rng.randrange(i) for _ in range(min(i, 3))}) if i else []
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": f"p{i}"},
        "spec": {"args": ["true"], "dependsOn": [{"kind": "Process", "name": f"p{n}"} for n in on]},
    }


async def run(url: str, checked: bool, stored: int) -> tuple[float, int]:
    """Microseconds per timed create, and the lists the store served."""
    rng = random.Random(7)
    store = await open_store(url, registry(checked))
    lists = 0
    pages = store.list_pages

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal lists
        lists += 1
        return pages(*args, **kwargs)

    store.list_pages = counted  # type: ignore[method-assign]
    try:
        for i in range(stored):
            await store.create(manifest(i, rng))
        start = time.perf_counter()
        for i in range(stored, stored + TIMED):
            await store.create(manifest(i, rng))
        elapsed = time.perf_counter() - start
    finally:
        await store.close()
    return elapsed / TIMED * 1e6, lists


async def main() -> None:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("memory", "sqlite"):
            for stored in STORED:
                samples: dict[bool, list[float]] = {True: [], False: []}
                lists = 0
                for round_ in range(ROUNDS):
                    for checked in (round_ % 2 == 0, round_ % 2 == 1):
                        if backend == "memory":
                            url = "memory://"
                        else:
                            db = Path(tmp) / f"{stored}-{round_}-{checked}.db"
                            url = f"sqlite:///{db}?sync=off"
                        us, served = await run(url, checked, stored)
                        samples[checked].append(us)
                        if checked:
                            lists = served
                        print(
                            f"{backend} stored={stored} checked={checked}: {us:.1f} us",
                            file=sys.stderr,
                        )
                on, off = statistics.median(samples[True]), statistics.median(samples[False])
                results[f"{backend}_{stored}"] = {
                    "us_per_write_checked": round(on, 1),
                    "us_per_write_unchecked": round(off, 1),
                    "check_us": round(on - off, 1),
                    "lists": lists,
                }
    print(json.dumps(results))


if __name__ == "__main__":
    asyncio.run(main())
