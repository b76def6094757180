"""The hello demo (`./dev demo`): a Greeting's life in the store, told by its watch events.

Opens a fresh SQLite store at .setpoint/demo.db, watches Greetings, applies
greeting.yaml through `apply_object` (what `setpoint apply` runs), changes a
spec, writes a Ready status as a controller would, deletes one greeting, and
ends with the table `setpoint get greetings -o wide` prints. Ends by itself.
"""

from __future__ import annotations

import asyncio
import copy
import sys
import time
from pathlib import Path

from setpoint.cli.apply import apply_object
from setpoint.cli.load import load_kinds, read_manifests
from setpoint.cli.render import Table, format_table, object_ref, resource_name
from setpoint.model import READY, Object, Registry, get_condition, set_condition
from setpoint.store import Store, WatchEvent, open_store

HERE = Path(__file__).parent
DB = Path(".setpoint/demo.db")
TIMEOUT = 5.0
"""Seconds to wait for the watch to report a write before giving up (it takes milliseconds)."""


def summary(obj: Object) -> str:
    spec = obj.get("spec") or {}
    ready = get_condition(obj.get("status"), READY)
    shown = (obj.get("status") or {}).get("shown")
    text = f'"{spec.get("message")}" x{spec.get("repeat")}'
    if ready:
        text += f"  Ready={ready['status']} ({ready['reason']})"
    if shown is not None:
        text += f"  shown={shown}"
    return text


class Watcher:
    """Prints every Greeting event as it arrives and lets the demo wait until it has caught up."""

    def __init__(self, store: Store, since: int):
        self.events = store.watch("example.com/v1", "Greeting", since=since)
        self.seen = since
        self.changed = asyncio.Condition()

    async def run(self) -> None:
        async for event in self.events:
            self.show(event)
            async with self.changed:
                self.seen = event.revision
                self.changed.notify_all()

    @staticmethod
    def show(event: WatchEvent) -> None:
        meta = event.object["metadata"]
        print(
            f"   watch: {event.type:<8}  {meta['name']:<8}  rv={meta.get('resourceVersion')}"
            f"  generation={meta.get('generation')}  {summary(event.object)}",
            flush=True,
        )

    async def caught_up(self, store: Store) -> None:
        """Return once every write so far has been printed."""
        revision = await store.revision()
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: self.seen >= revision), TIMEOUT)


def step(text: str) -> None:
    print(f"\n{text}", flush=True)


async def apply_all(store: Store, objects: list[Object]) -> None:
    for obj in objects:
        result = await apply_object(store, obj)
        kind = store.registry.for_object(obj)
        print(f"   apply: {object_ref(kind, obj['metadata']['name'])} {result}", flush=True)


async def demo() -> None:
    registry = Registry()
    load_kinds([str(HERE / "kinds.py")], registry)  # exactly what `setpoint --kinds ...` does
    greeting = registry.get("example.com/v1", "Greeting")
    manifests = [m.obj for m in read_manifests([str(HERE / "greeting.yaml")])]

    for path in (DB, DB.with_name(DB.name + "-wal"), DB.with_name(DB.name + "-shm")):
        path.unlink(missing_ok=True)
    store = await open_store(f"sqlite:///{DB}", registry)
    print(f"setpoint demo: a Greeting's life in a fresh SQLite store, {DB}")
    try:
        watcher = Watcher(store, since=await store.revision())
        watching = asyncio.create_task(watcher.run())
        print("watching greetings.example.com; each event is printed as it arrives", flush=True)

        step("1. apply greeting.yaml: both greetings are created")
        await apply_all(store, manifests)
        await watcher.caught_up(store)

        step("2. apply greeting.yaml again: nothing changed, so nothing is written, no event")
        await apply_all(store, manifests)
        await watcher.caught_up(store)

        step("3. apply hello with repeat: 3: the spec changed, so its generation goes up")
        changed = copy.deepcopy(manifests[0])
        changed["spec"]["repeat"] = 3
        await apply_all(store, [changed])
        await watcher.caught_up(store)

        step("4. a controller reports status: Ready=True, shown=3 (generation stays)")
        hello = await store.get("example.com/v1", "Greeting", "hello")
        status = dict(hello.get("status") or {})
        generation = hello["metadata"]["generation"]
        set_condition(
            status,
            READY,
            True,
            reason="Shown",
            message="shown 3 times",
            now=time.time(),
            observed_generation=generation,
        )
        status.update(shown=3, observedGeneration=generation)
        hello["status"] = status
        await store.update_status(hello)
        print("   update_status: greeting.example.com/hello", flush=True)
        await watcher.caught_up(store)

        step("5. delete bonjour")
        await store.delete("example.com/v1", "Greeting", "bonjour")
        print(f'   delete: {resource_name(greeting)} "bonjour" deleted', flush=True)
        await watcher.caught_up(store)

        watching.cancel()
        step("6. what `setpoint get greetings -o wide` shows now:")
        items, _ = await store.list("example.com/v1", "Greeting")
        table = Table(wide=True)
        rows = [table.header()] + [table.row(obj, time.time()) for obj in items]
        for line in format_table(rows):
            print(f"   {line}")
    finally:
        await store.close()
    print("\ndone. Try the same with the CLI: see examples/hello/README.md")


def main() -> int:
    try:
        asyncio.run(demo())
    except TimeoutError:
        print("demo: the watch did not report a write in time", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
