"""The processes of the PostgreSQL hammer (tests/store/test_postgresql_hammer.py and
bench/distributed.py): writers that write as fast as they can, and watchers that check
what they see. Run by the parent as child processes; plain asyncio, no pytest.

    python postgresql_hammer.py writer URL PROCESS SECONDS WRITERS CONNECTIONS OBJECTS OUT
        WRITERS writers sharing CONNECTIONS stores (each a writing connection of its own),
        each writing rounds of its OBJECTS objects (create all, update all, delete all)
        until SECONDS have passed; every acknowledged write is one line "revision op name"
        in OUT.
    python postgresql_hammer.py watcher URL STOP OUT
        watches every kind from revision 0 and checks, as the events come, that each
        revision is the one after the last (exactly once, in order); lists now and then and
        checks that the list at revision R holds, for every object, the last write at or
        below R and nothing else. Ends once the file STOP holds the final revision and the
        watch has reached it; OUT gets a JSON summary line, then one "revision type name"
        line per event.

Prints "ready" once its store is open (and, for a watcher, its watch is running).

`hammer(url, seconds, workdir)` is the parent: it runs the processes and checks everything
they report against each other (`Outcome.problems()`).
"""

from __future__ import annotations

import asyncio
import bisect
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))
from conformance_kit import API, make_registry, widget

from setpoint.store import open_store

LIST_EVERY = 0.2
"""Seconds between a watcher's lists."""
MAX_ERRORS = 20


async def one_writer(store: Any, name: str, deadline: float, objects: int) -> list[str]:
    """Rounds of `objects` objects (create all, update all, delete all) until `deadline`
    (mid-round: a round takes long on a loaded machine)."""
    acks: list[str] = []
    while time.monotonic() < deadline:
        live = []
        for i in range(objects):
            if time.monotonic() >= deadline:
                return acks
            obj = await store.create(widget(f"{name}-{i}", i))
            acks.append(f"{obj['metadata']['resourceVersion']} create {name}-{i}")
            live.append(obj)
        for obj in live:
            obj["spec"]["size"] += 1
            obj = await store.update(obj)
            acks.append(f"{obj['metadata']['resourceVersion']} update {obj['metadata']['name']}")
        for obj in live:
            gone = await store.delete(API, "Widget", obj["metadata"]["name"])
            acks.append(f"{gone['metadata']['resourceVersion']} delete {obj['metadata']['name']}")
    return acks


async def writer(
    url: str, process: str, seconds: float, writers: int, connections: int, objects: int
) -> list[str]:
    stores = [await open_store(url, make_registry()) for _ in range(connections)]
    print("ready", flush=True)
    deadline = time.monotonic() + seconds
    try:
        results = await asyncio.gather(
            *(
                one_writer(stores[w % connections], f"p{process}w{w}", deadline, objects)
                for w in range(writers)
            )
        )
    finally:
        for store in stores:
            await store.close()
    return [line for acks in results for line in acks]


class Checker:
    """What one watcher has seen, and the checks on it."""

    def __init__(self) -> None:
        self.last = 0
        self.events: list[str] = []
        self.history: dict[str, tuple[list[int], list[bool]]] = {}  # name -> revisions, exists
        self.errors: list[str] = []
        self.lists_checked = 0

    def error(self, message: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(message)

    def see(self, event: Any) -> None:
        name = event.object["metadata"]["name"]
        if event.revision != self.last + 1:
            self.error(f"revision {event.revision} came after {self.last}")
        if str(event.revision) != event.object["metadata"]["resourceVersion"]:
            self.error(f"event {event.revision} carries {event.object['metadata']}")
        self.last = event.revision
        self.events.append(f"{event.revision} {event.type} {name}")
        revisions, exists = self.history.setdefault(name, ([], []))
        revisions.append(event.revision)
        exists.append(event.type != "DELETED")

    def check_list(self, items: list[dict[str, Any]], at: int) -> None:
        """The list at revision `at` (the watch has reached it) against the events."""
        listed = {o["metadata"]["name"]: int(o["metadata"]["resourceVersion"]) for o in items}
        for name, (revisions, exists) in self.history.items():
            i = bisect.bisect_right(revisions, at) - 1
            expected = revisions[i] if i >= 0 and exists[i] else None
            if listed.get(name) != expected:
                self.error(f"list at {at}: {name} is at {listed.get(name)}, not {expected}")
        for name, revision in listed.items():
            if name not in self.history or revision > at:
                self.error(f"list at {at}: {name} at {revision} was never watched")
        self.lists_checked += 1


def final_revision(stop: str) -> int | None:
    """The final revision, once the parent has written it to `stop`."""
    return int(Path(stop).read_text()) if os.path.exists(stop) else None


async def watcher(url: str, stop: str) -> list[str]:
    """The summary (a JSON line) and the events seen, one line each."""
    store = await open_store(url, make_registry())
    checker = Checker()
    lists: list[tuple[int, list[dict[str, Any]]]] = []
    final: int | None = None
    events = store.watch(None, None, since=0)

    async def list_now_and_then() -> None:
        while True:
            items, at = await store.list(API, "Widget")
            lists.append((at, items))
            await asyncio.sleep(LIST_EVERY)

    async def pump() -> None:  # (a timeout on `anext` itself would end the watch)
        async for event in events:
            received.put_nowait(event)

    received: asyncio.Queue[Any] = asyncio.Queue()
    helpers = [asyncio.create_task(list_now_and_then()), asyncio.create_task(pump())]
    print("ready", flush=True)
    try:
        while final is None or checker.last < final:
            try:
                checker.see(await asyncio.wait_for(received.get(), 0.5))
            except TimeoutError:
                if helpers[1].done():
                    helpers[1].result()  # the watch ended: say why
                    raise RuntimeError("the watch ended") from None
            while lists and lists[0][0] <= checker.last:
                at, items = lists.pop(0)
                checker.check_list(items, at)
            if final is None:
                final = final_revision(stop)
    finally:
        for helper in helpers:
            helper.cancel()
        await store.close()
    summary = {
        "events": len(checker.events),
        "last": checker.last,
        "lists_checked": checker.lists_checked,
        "errors": checker.errors,
    }
    return [json.dumps(summary), *checker.events]


@dataclass
class Outcome:
    """What the hammer's processes reported."""

    final: int
    acks: dict[int, str] = field(default_factory=dict)  # revision -> "op name"
    duplicate_acks: list[int] = field(default_factory=list)
    watchers: list[dict[str, Any]] = field(default_factory=list)  # summaries, with "events"
    seconds: float = 0.0

    def problems(self) -> list[str]:
        """Every way the run broke the contract (empty: none)."""
        found = [f"revision {r} acknowledged twice" for r in self.duplicate_acks[:MAX_ERRORS]]
        if sorted(self.acks) != list(range(1, self.final + 1)):
            found.append(f"acknowledged revisions are not exactly 1..{self.final}")
        kinds = {"create": "ADDED", "update": "MODIFIED", "delete": "DELETED"}
        for number, summary in enumerate(self.watchers):
            where = f"watcher {number}"
            found += [f"{where}: {e}" for e in summary["errors"]]
            if summary["lists_checked"] == 0:
                found.append(f"{where} checked no list")
            seen = summary.pop("events_seen")
            if [int(line.split()[0]) for line in seen] != list(range(1, self.final + 1)):
                found.append(f"{where} did not see each revision 1..{self.final} once, in order")
                continue
            for line in seen:
                revision, type_, name = line.split()
                op, acked_name = self.acks[int(revision)].split()
                if (kinds[op], acked_name) != (type_, name):
                    found.append(f"{where}: revision {revision} is {type_} {name}, acked {op}")
                    break
        return found


def hammer(
    url: str,
    seconds: float,
    workdir: Path,
    *,
    processes: int = 3,
    writers: int = 6,
    connections: int = 2,
    objects: int = 60,
    watchers: int = 2,
) -> Outcome:
    """Run `processes` writer processes of `writers` writers on `connections` stores each for
    `seconds`, watched by `watchers` other processes, on the store at `url` (which must
    exist), and collect what they report."""
    script = str(Path(__file__).resolve())
    stop = workdir / "stop"
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(
            [sys.executable, script, *args],
            stdout=subprocess.PIPE,
            stderr=(workdir / f"child-{len(started)}.stderr").open("wb"),
        )
        started.append(child)
        return child

    def ready(child: subprocess.Popen[bytes]) -> None:
        assert child.stdout is not None
        line = child.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError(f"a hammer process did not start: {child.args} ({line!r})")

    try:
        watching = [
            start("watcher", url, str(stop), str(workdir / f"watcher-{w}")) for w in range(watchers)
        ]
        for child in watching:
            ready(child)
        began = time.monotonic()
        writing = [
            start(
                "writer",
                url,
                str(p),
                str(seconds),
                str(writers),
                str(connections),
                str(objects),
                str(workdir / f"writer-{p}"),
            )
            for p in range(processes)
        ]
        for child in writing:
            ready(child)
        for child in writing:
            if child.wait(timeout=seconds + 300) != 0:
                raise RuntimeError(f"a writer failed: {child.args}")
        elapsed = time.monotonic() - began
        final = asyncio.run(_revision(url))
        (workdir / "stop.tmp").write_text(str(final))
        (workdir / "stop.tmp").rename(stop)
        for child in watching:
            if child.wait(timeout=300) != 0:
                raise RuntimeError(f"a watcher failed: {child.args}")
    finally:
        for child in started:
            if child.poll() is None:
                child.kill()
                child.wait()
    outcome = Outcome(final, seconds=elapsed)
    for p in range(processes):
        for line in (workdir / f"writer-{p}").read_text().splitlines():
            revision, rest = line.split(" ", 1)
            if int(revision) in outcome.acks:
                outcome.duplicate_acks.append(int(revision))
            outcome.acks[int(revision)] = rest
    for w in range(watchers):
        first, *events = (workdir / f"watcher-{w}").read_text().splitlines()
        summary = json.loads(first)
        summary["events_seen"] = events
        outcome.watchers.append(summary)
    return outcome


async def _revision(url: str) -> int:
    store = await open_store(url, make_registry())
    try:
        return await store.revision()
    finally:
        await store.close()


def main(argv: list[str]) -> None:
    match argv:
        case ["writer", url, process, seconds, writers, connections, objects, out]:
            lines = asyncio.run(
                writer(url, process, float(seconds), int(writers), int(connections), int(objects))
            )
            Path(out).write_text("".join(line + "\n" for line in lines))
        case ["watcher", url, stop, out]:
            lines = asyncio.run(watcher(url, stop))
            Path(out).write_text("".join(line + "\n" for line in lines))
        case _:
            sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
