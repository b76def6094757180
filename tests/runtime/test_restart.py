"""Kill and restart: a manager resumes from the store with nothing lost, and no key is ever
processed by two workers at once.

Real processes on a real SQLite file. A worker process runs a manager whose
controller (4 workers) copies each Item's `spec.value` to `status.processed`,
journalling "start KEY" / "end KEY" around every reconcile (fsynced). The
first worker is told to hold every reconcile it starts after its 100th write
(journalling "hold KEY"); once all four workers hold one, the test SIGKILLs
it, so exactly four reconciles are in flight and most Items are still
unprocessed: no timing decides that. Specs then change
while no worker runs, and a fresh worker must bring every Item's status to its
latest spec.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from runtime_support import eventually

from setpoint.model import Kind, Registry, Schema
from setpoint.store import Store, open_store

API = "test.setpoint.dev/v1"
ITEMS = 300
STALL_AFTER = 100  # the first worker holds every reconcile it starts after this many writes
WORKERS = 4
WITHIN = 60.0  # seconds any one wait may take before the test fails

WORKER = '''
"""A worker for test_restart: a manager on a SQLite store whose controller copies
spec.value to status.processed, journalling each reconcile's start and end."""

import asyncio
import os
import sys

from setpoint.model import Kind, Registry, Schema
from setpoint.runtime.manager import Manager, ManagerOptions
from setpoint.runtime.predicates import generation_changed
from setpoint.runtime.reconciler import Request
from setpoint.store import open_store

API = "test.setpoint.dev/v1"


class ItemSpec(Schema):
    value: int


class ItemStatus(Schema):
    processed: int | None = None


async def main(db: str, journal: str, stall_after: int) -> None:
    registry = Registry()
    registry.register(Kind(API, "Item", "items", spec=ItemSpec, status=ItemStatus))
    store = await open_store(f"sqlite:///{db}", registry)
    fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def note(line: str) -> None:
        os.write(fd, (line + "\\n").encode())
        os.fsync(fd)

    written = 0

    async def reconcile(request: Request) -> None:
        nonlocal written
        note(f"start {request.name}")
        if 0 <= stall_after <= written:
            note(f"hold {request.name}")
            await asyncio.Event().wait()  # in flight until the process is killed
        await asyncio.sleep(0.002)
        obj = await store.get(API, "Item", request.name, request.namespace)
        if (obj.get("status") or {}).get("processed") != obj["spec"]["value"]:
            obj["status"] = {"processed": obj["spec"]["value"]}
            await store.update_status(obj)
            written += 1
        note(f"end {request.name}")

    manager = Manager(store, options=ManagerOptions(handle_signals=True, grace_period=5.0))
    manager.controller("items").for_("items", predicates=[generation_changed]).max_concurrent(
        4
    ).complete(reconcile)
    await manager.run()
    await store.close()
    note("exit")
    os.close(fd)


asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
'''


class ItemSpec(Schema):
    value: int


class ItemStatus(Schema):
    processed: int | None = None


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    registry = Registry()
    registry.register(Kind(API, "Item", "items", spec=ItemSpec, status=ItemStatus))
    s = await open_store(f"sqlite:///{tmp_path / 'state.db'}", registry)
    yield s
    await s.close()


class Worker:
    """One worker process, in its own session and process group."""

    def __init__(self, tmp_path: Path, name: str, stall_after: int) -> None:
        script = tmp_path / "worker.py"
        script.write_text(WORKER)
        self.journal = tmp_path / f"{name}.journal"
        self.stderr_path = tmp_path / f"{name}.stderr"
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, str(script), str(tmp_path / "state.db"), str(self.journal),
                 str(stall_after)],
                stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, start_new_session=True,
            )  # fmt: skip
        self.pid = self.process.pid

    def lines(self) -> list[str]:
        return self.journal.read_text().splitlines() if self.journal.exists() else []

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            pytest.fail(
                f"worker {self.pid} exited with {self.process.returncode}:\n"
                + self.stderr_path.read_text()
            )

    async def wait_exit(self) -> int:
        return await asyncio.to_thread(self.process.wait, WITHIN)


def open_spans(lines: list[str]) -> set[str]:
    """Keys started and not ended; fails if a key starts again while it is open."""
    open_: set[str] = set()
    for number, line in enumerate(lines, 1):
        verb, _, key = line.partition(" ")
        if verb == "start":
            assert key not in open_, f"line {number}: {key} started while already processing"
            open_.add(key)
        elif verb == "end":
            assert key in open_, f"line {number}: {key} ended without a start"
            open_.remove(key)
    return open_


def most_at_once(lines: list[str]) -> int:
    """The most reconciles (of any keys) in flight at once."""
    current = peak = 0
    for line in lines:
        if line.startswith("start "):
            current += 1
            peak = max(peak, current)
        elif line.startswith("end "):
            current -= 1
    return peak


def processes_in_group(pgid: int) -> list[int]:
    """Pids of live processes whose process group or session is `pgid` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # exited while we looked
            continue
        state, _ppid, pgrp, session = stat.rsplit(")", 1)[1].split()[:4]
        if state != "Z" and pgid in (int(pgrp), int(session)):
            found.append(int(entry))
    return found


def assert_gone(pid: int) -> None:
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert processes_in_group(pid) == []


def processed(items: list[dict[str, Any]]) -> dict[str, int | None]:
    return {o["metadata"]["name"]: (o.get("status") or {}).get("processed") for o in items}


@pytest.mark.slow
async def test_killed_manager_resumes_from_the_store(store: Store, tmp_path: Path) -> None:
    names = [f"item-{i:03d}" for i in range(ITEMS)]
    for start in range(0, ITEMS, 50):  # concurrent creates share commits
        await asyncio.gather(*(
            store.create({"apiVersion": API, "kind": "Item", "metadata": {"name": name},
                          "spec": {"value": i}})
            for i, name in enumerate(names[start : start + 50], start)
        ))  # fmt: skip

    first = Worker(tmp_path, "first", STALL_AFTER)
    try:

        async def all_workers_held() -> bool:
            first.check_alive()
            return sum(line.startswith("hold ") for line in first.lines()) == WORKERS

        await eventually(all_workers_held, within=WITHIN)
        in_flight = open_spans(first.lines())
        assert len(in_flight) == WORKERS
        done_before = processed((await store.list(API, "Item"))[0])
        written = [name for name, value in done_before.items() if value is not None]
        assert STALL_AFTER <= len(written) <= STALL_AFTER + WORKERS - 1
    finally:
        first.process.send_signal(signal.SIGKILL)
    assert await first.wait_exit() == -signal.SIGKILL
    assert_gone(first.pid)

    # While no worker runs: change processed items, in-flight items and untouched items.
    untouched = [name for name in names if name not in written and name not in in_flight]
    changed = [*written[:20], *sorted(in_flight), *untouched[:20]]
    for name in changed:
        obj = await store.get(API, "Item", name)
        obj["spec"]["value"] += 1000
        await store.update(obj)

    second = Worker(tmp_path, "second", -1)
    try:

        async def all_processed() -> bool:
            second.check_alive()
            items, _ = await store.list(API, "Item")
            return all(processed(items)[o["metadata"]["name"]] == o["spec"]["value"] for o in items)

        await eventually(all_processed, within=WITHIN)
    finally:
        second.process.send_signal(signal.SIGTERM)  # a graceful stop this time
    assert await second.wait_exit() == 0
    assert_gone(second.pid)

    # Nothing lost: every item carries its latest spec value, changed or not.
    items, _ = await store.list(API, "Item")
    assert len(items) == ITEMS
    expected = {name: i + (1000 if name in changed else 0) for i, name in enumerate(names)}
    assert processed(items) == expected

    # No key processed by two workers at once, in either process.
    first_lines, second_lines = first.lines(), second.lines()
    assert open_spans(first_lines) == in_flight  # killed mid-reconcile
    assert open_spans(second_lines) == set()
    assert second_lines[-1] == "exit"
    assert most_at_once(first_lines) == WORKERS
    assert most_at_once(second_lines) > 1  # the workers really did run side by side
    # The second worker reconciled every item the first left unfinished or that changed.
    ended = {line.split(" ", 1)[1] for line in second_lines if line.startswith("end ")}
    assert ended >= {name for name in names if name not in written or name in changed}
