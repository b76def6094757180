"""Durability, for backends that keep state across restarts: a write acknowledged to the
caller survives the writer being killed with SIGKILL, and the revision sequence stays whole.

The writer is a real child process (this interpreter, running a script the test writes);
the test reads its acknowledgements from stdout and kills it mid-stream.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path

import pytest
from conformance_kit import (
    API,
    TIMEOUT,
    by_key,
    close_watch,
    first_event,
    replay,
    rv,
    take_until,
    widget,
)

from setpoint.errors import Gone

KIT_DIR = Path(__file__).parent
ACKS_BEFORE_KILL = 200

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, sys.argv[2])
    from conformance_kit import API, make_registry, widget
    from setpoint.store import open_store

    def ack(op, obj, size):
        meta = obj["metadata"]
        print(op, meta["name"], meta["resourceVersion"], size, flush=True)

    async def writer(store, task):
        counter = await store.create(widget(f"counter-{task}", 0))
        ack("create", counter, 0)
        for i in range(1, 100_000):
            ack("create", await store.create(widget(f"t{task}-{i}", i)), i)
            counter["spec"]["size"] = i
            counter = await store.update(counter)
            ack("update", counter, i)

    async def main():
        store = await open_store(sys.argv[1], registry=make_registry())
        print("open", "-", "0", "0", flush=True)
        await asyncio.gather(*(writer(store, t) for t in range(4)))

    asyncio.run(main())
    """
)


async def test_acknowledged_writes_survive_kill_9(durable_stores, tmp_path: Path) -> None:
    url = durable_stores.new_url()
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    stderr = (tmp_path / "writer.stderr").open("wb")
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        url,
        str(KIT_DIR),
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
    )
    acks: list[tuple[str, str, int, int]] = []
    killed = False

    def record(line: bytes) -> None:
        op, name, version, size = line.decode().split()
        if op != "open":
            acks.append((op, name, int(version), int(size)))

    try:
        assert child.stdout is not None
        while len(acks) < ACKS_BEFORE_KILL:
            line = await asyncio.wait_for(child.stdout.readline(), TIMEOUT * 3)
            assert line, f"writer exited early: {(tmp_path / 'writer.stderr').read_text()}"
            record(line)
        assert child.returncode is None, "the writer must still be writing when killed"
        child.kill()
        killed = True
        # Acknowledgements already in the pipe count too; a torn last line does not.
        rest = await asyncio.wait_for(child.stdout.read(), TIMEOUT)
        for line in rest.splitlines(keepends=True):
            if line.endswith(b"\n"):
                record(line)
    finally:
        if not killed:  # (a second kill() could reap the child behind asyncio's back)
            child.kill()
        await child.wait()
        stderr.close()
    assert child.returncode == -9

    store = await durable_stores.open(url)
    revision = await store.revision()
    assert revision >= max(version for _, _, version, _ in acks)
    for op, name, version, size in acks:
        obj = await store.get(API, "Widget", name)
        assert rv(obj) >= version, (op, name, version)
        if op == "create" and not name.startswith("counter-"):
            assert rv(obj) == version
            assert obj["spec"]["size"] == size
        else:
            assert obj["spec"]["size"] >= size
    acked_versions = [version for _, _, version, _ in acks]
    assert len(set(acked_versions)) == len(acked_versions), "two writes acknowledged one revision"

    # The history is whole: every revision up to the current one, once, in order,
    # and replaying it gives exactly what a list says.
    items, listed_at = await store.list(API, "Widget")
    assert listed_at == revision
    events = store.watch(API, "Widget", since=0)
    try:
        history = await take_until(events, revision)
    finally:
        await close_watch(events)
    assert [e.revision for e in history] == list(range(history[0].revision, revision + 1))
    assert set(acked_versions) <= {e.revision for e in history}
    assert replay(history) == by_key(items)

    # Writing goes on from where the log ends: no revision is handed out twice.
    after = await store.create(widget("after-restart"))
    assert rv(after) == revision + 1


async def test_everything_survives_a_clean_restart(durable_stores) -> None:
    url = durable_stores.new_url()
    store = await durable_stores.open(url)
    start = await store.revision()
    kept = await store.create(widget("kept", 1, labels={"app": "web"}, finalizers=["x.io/f"]))
    kept = await store.update_status(dict(kept, status={"phase": "Running"}))
    await store.create(widget("gone", 2))
    await store.delete(API, "Widget", "gone")
    terminating = await store.delete(API, "Widget", "kept")
    revision = await store.revision()
    await store.close()

    store = await durable_stores.open(url)
    assert await store.revision() == revision
    assert await store.get(API, "Widget", "kept") == terminating
    events = store.watch(API, "Widget", since=start)
    try:
        history = await take_until(events, revision)
        assert [e.type for e in history] == ["ADDED", "MODIFIED", "ADDED", "DELETED", "MODIFIED"]
        # And the restarted store streams new writes to its watchers.
        terminating["metadata"]["finalizers"] = []
        await store.update(terminating)
        (last,) = await take_until(events, revision + 1)
        assert last.type == "DELETED"
    finally:
        await close_watch(events)
    await store.close()

    store = await durable_stores.open(url)
    assert (await store.list(API, "Widget"))[0] == []
    assert await store.revision() == revision + 1


async def test_compaction_mark_survives_a_restart(durable_stores) -> None:
    url = durable_stores.new_url()
    store = await durable_stores.open(url)
    start = await store.revision()
    for i in range(10):
        await store.create(widget(f"w{i}"))
    await store.compact(start + 5)
    await store.close()

    store = await durable_stores.open(url)
    with pytest.raises(Gone):
        await first_event(store, API, "Widget", since=start + 1)
    events = store.watch(API, "Widget", since=start + 5)
    try:
        got = await take_until(events, start + 10)
        assert [e.revision for e in got] == list(range(start + 6, start + 11))
    finally:
        await close_watch(events)


async def test_sync_settings_are_accepted(durable_stores) -> None:
    for sync in ("full", "normal", "off"):
        url = durable_stores.new_url(sync=sync)
        store = await durable_stores.open(url)
        obj = await store.create(widget("w1"))
        await store.close()
        store = await durable_stores.open(url)
        assert await store.get(API, "Widget", "w1") == obj
