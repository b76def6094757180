"""The recorder against a real SQLite store (the timeline in the same file), real log files
and a real supervised child: what it records, and what a restarted recorder catches up on."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from timeline_support import of_type, wait_for_entries

from setpoint.cli.apply import apply_object
from setpoint.engine import builtin_kinds
from setpoint.insight.recorder import LogTailer, Recorder, setup
from setpoint.insight.timeline import Timeline
from setpoint.model import Object
from setpoint.runtime import EventRecorder
from setpoint.runtime.manager import Manager, ManagerOptions
from setpoint.store import Store, open_store
from setpoint.store.base import Actor, WriteOptions
from setpoint.workloads.process import PROCESS, ProcessController, ProcessSettings
from setpoint.workloads.process import setup as setup_processes

REF = {"kind": "Process", "name": "db", "namespace": "default"}
ALICE = Actor("alice@h", "setpoint", "setpoint")
BOB = Actor("bob@h", "setpoint", "setpoint")
CAROL = Actor(None, "kubectl", "kubectl/v1.31.0")


def process(name: str, args: list[str], **spec: Any) -> Object:
    return {
        "apiVersion": PROCESS.api_version,
        "kind": PROCESS.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"args": args, **spec},
    }


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_store(f"sqlite:///{tmp_path / 'state.db'}", builtin_kinds())
    try:
        yield opened
    finally:
        await opened.close()


@contextlib.asynccontextmanager
async def recording(store: Store, timeline: Timeline, **kwargs: Any) -> AsyncIterator[Recorder]:
    recorder = Recorder(store, timeline, **kwargs)
    task = asyncio.create_task(recorder.run())
    try:
        async with asyncio.timeout(10):
            await recorder.wait_watching()
        yield recorder
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_records_changes_with_actors_conditions_events_and_deletion(
    store: Store, tmp_path: Path
) -> None:
    timeline = Timeline.open(tmp_path / "state.db")
    async with recording(store, timeline):
        await apply_object(store, process("db", ["db", "--max-conn=100"]), actor=ALICE)
        await apply_object(store, process("db", ["db", "--max-conn=5"]), actor=BOB)
        current = await store.get(PROCESS.api_version, PROCESS.kind, "db")
        status = {"conditions": [{"type": "Ready", "status": "False", "reason": "ProbeFailed"}]}
        await store.update_status({**current, "status": status})
        await EventRecorder(store, "test").warning(current, "BackOff", "restarting db")
        current = await store.get(PROCESS.api_version, PROCESS.kind, "db")
        by_nobody = copy.deepcopy(current)
        by_nobody["spec"]["args"].append("--verbose")
        await store.update(by_nobody)
        await store.delete(
            PROCESS.api_version, PROCESS.kind, "db", options=WriteOptions(actor=CAROL)
        )
        entries = await wait_for_entries(
            timeline,
            lambda es: any(e.get("action") == "deleted" for e in es),
            object=REF,
        )
    changes = of_type(entries, "change")
    assert [(c["action"], c["actor"]) for c in changes] == [
        ("created", "alice@h"),
        ("updated", "bob@h"),
        ("updated", "unknown"),
        ("deleted", "kubectl"),  # no user named: the field manager
    ]
    audit = [(w["verb"], w["user"], w["manager"]) for w in of_type(entries, "write")]
    assert audit == [
        ("create", "alice@h", "setpoint"),
        ("update", "bob@h", "setpoint"),
        ("update_status", None, None),
        ("update", None, None),
        ("delete", None, "kubectl"),
    ]
    revisions = [w["revision"] for w in of_type(entries, "write")]
    assert revisions == sorted(revisions)
    assert changes[1]["diff"] == {"spec.args[1]": ["--max-conn=100", "--max-conn=5"]}
    assert changes[2]["diff"] == {"spec.args[2]": [None, "--verbose"]}
    [condition] = of_type(entries, "condition")
    assert condition["condition"]["reason"] == "ProbeFailed"
    [event] = of_type(entries, "event")
    assert (event["eventType"], event["reason"], event["object"]) == ("Warning", "BackOff", REF)
    assert [e["ts"] for e in entries] == sorted(e["ts"] for e in entries)


async def test_a_restarted_recorder_records_what_changed_while_it_was_stopped(
    store: Store, tmp_path: Path
) -> None:
    timeline = Timeline.open(tmp_path / "state.db")
    async with recording(store, timeline):
        await store.create(process("db", ["db", "-c", "1"]))
        await store.create(process("cache", ["cache"]))
        await wait_for_entries(timeline, lambda es: len(of_type(es, "change")) == 2)
    # while nobody records:
    db = await store.get(PROCESS.api_version, PROCESS.kind, "db")
    db["spec"]["args"][2] = "2"
    await store.update(db)
    await store.delete(PROCESS.api_version, PROCESS.kind, "cache")
    await store.create(process("web", ["web"], dependsOn=[{"kind": "Process", "name": "db"}]))

    async with recording(store, Timeline.open(tmp_path / "state.db")):
        entries = await wait_for_entries(timeline, lambda es: len(of_type(es, "change")) >= 5)
    changes = of_type(entries, "change")
    summary = sorted((e["object"]["name"], e["action"]) for e in changes)
    assert summary == [
        ("cache", "created"),
        ("cache", "deleted"),
        ("db", "created"),
        ("db", "updated"),
        ("web", "created"),
    ]
    [update] = [e for e in changes if e["action"] == "updated"]
    assert update["diff"] == {"spec.args[2]": ["1", "2"]}
    [gone] = [e for e in changes if e["action"] == "deleted"]
    assert gone["diff"]["spec"][0]["args"] == ["cache"]
    [web] = [e for e in changes if e["object"]["name"] == "web"]
    assert web["diff"] == {"spec": [None, await web_spec(store)]}
    [edge] = of_type(entries, "edge")
    assert (edge["from"]["name"], edge["to"], edge["relation"]) == ("web", REF, "dependsOn")


async def web_spec(store: Store) -> Any:
    return (await store.get(PROCESS.api_version, PROCESS.kind, "web"))["spec"]


def test_log_tailer_follows_appends_rotation_and_truncation(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    old = logs / "default_db.log"
    old.write_text("written before we looked\n")
    tailer = LogTailer(logs)
    assert tailer.poll() == []  # a file already there is followed from its end
    with open(old, "a") as f:
        f.write("one\ntw")
    assert tailer.poll() == [("default_db", "one")]
    with open(old, "a") as f:
        f.write("o\nlast before rotation\n")
    os.replace(old, logs / "default_db.log.1")  # as the supervisor rotates
    (logs / "default_db.log").write_text("after rotation\n")
    (logs / "default_web.log").write_text("a new file from its start\n")
    assert tailer.poll() == [
        ("default_db", "two"),
        ("default_db", "last before rotation"),
        ("default_db", "after rotation"),
        ("default_web", "a new file from its start"),
    ]
    (logs / "default_web.log").write_text("")  # truncated
    with open(logs / "default_web.log", "a") as f:
        f.write("again\n")
    assert tailer.poll() == [("default_web", "again")]
    assert tailer.recent("default_db", 2) == ["last before rotation", "after rotation"]
    tailer.close()


async def test_a_crashing_child_leaves_its_exit_last_lines_and_error_lines(
    store: Store, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    manager = Manager(store, options=ManagerOptions(grace_period=1.0))
    controller = setup_processes(manager, ProcessSettings(tmp_path / "run", tmp_path / "logs"))
    processes = controller.reconciler
    assert isinstance(processes, ProcessController)
    setup(manager, store_url=url, log_dir=tmp_path / "logs")
    code = (
        "import sys\nprint('starting db', flush=True)\n"
        "print('FATAL: too many connections')\nsys.exit(3)"
    )
    running = asyncio.create_task(manager.run())
    try:
        await manager.wait_started()
        await store.create(process("db", [sys.executable, "-c", code], restartPolicy="Never"))
        with Timeline.open(tmp_path / "state.db") as timeline:
            entries = await wait_for_entries(
                timeline,
                lambda es: (
                    bool(of_type(es, "exit"))
                    and any("FATAL" in e["line"] for e in of_type(es, "log"))
                ),
                object=REF,
            )
    finally:
        manager.stop()
        await running
        await processes.stop_all(grace=0)
    [exit_] = of_type(entries, "exit")
    assert (exit_["exitCode"], exit_["signal"]) == (3, None)
    assert exit_["lines"] == ["starting db", "FATAL: too many connections"]
    fatal = [e for e in of_type(entries, "log") if "FATAL" in e["line"]]
    assert fatal[0]["kept"] in ("new", "error")
    assert fatal[0]["template"] == "FATAL: too many connections"


async def test_secret_values_never_reach_the_timeline(store: Store, tmp_path: Path) -> None:
    """A Secret's change is recorded without its values, and a child that prints the value
    has it masked in its log lines and exit entry."""
    from setpoint.workloads.secret import SECRET

    password = "hunter2-correct-horse"
    logs = tmp_path / "logs"
    logs.mkdir()
    timeline = Timeline.open(tmp_path / "state.db")
    async with recording(store, timeline, log_dir=logs):
        secret = {"apiVersion": SECRET.api_version, "kind": SECRET.kind,
                  "metadata": {"name": "db", "namespace": "default"},
                  "stringData": {"password": password}}  # fmt: skip
        await apply_object(store, secret, actor=ALICE)
        secret["stringData"] = {"password": password + "-2"}
        await apply_object(store, secret, actor=ALICE)
        (logs / "default_db.log").write_text(f"ERROR: cannot log in with {password}\n")
        entries = await wait_for_entries(
            timeline, lambda es: len(of_type(es, "change")) == 2 and bool(of_type(es, "log"))
        )
    changes = of_type(entries, "change")
    assert changes[1]["diff"] == {"data.password": ["(hidden)", "(changed)"]}
    [line] = of_type(entries, "log")
    assert line["line"] == "ERROR: cannot log in with ***"
    assert password not in repr(entries)


async def test_writes_made_while_no_recorder_watched_are_audited_once(
    store: Store, tmp_path: Path
) -> None:
    """As `setpoint serve` alone, then `up`: the recorder reads the writes it did not watch
    from the store's history (each once, also across a restart), and names the writer of
    what its list finds."""
    timeline = Timeline.open(tmp_path / "state.db")
    made = await store.create(process("db", ["db"]), options=WriteOptions(actor=ALICE))
    await store.update({**made, "spec": {"args": ["db", "-v"]}}, options=WriteOptions(actor=BOB))
    await store.create(process("tmp", ["tmp"]), options=WriteOptions(actor=CAROL))
    await store.delete(PROCESS.api_version, PROCESS.kind, "tmp", options=WriteOptions(actor=CAROL))

    def audit(entries: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
        return [(w["object"]["name"], w["verb"], w["user"] or w["manager"])
                for w in of_type(entries, "write")]  # fmt: skip

    async with recording(store, timeline):
        await store.create(process("web", ["web"]), options=WriteOptions(actor=ALICE))
        entries = await wait_for_entries(timeline, lambda es: len(audit(es)) == 5)
    assert audit(entries) == [
        ("db", "create", "alice@h"),
        ("db", "update", "bob@h"),
        ("tmp", "create", "kubectl"),
        ("tmp", "delete", "kubectl"),
        ("web", "create", "alice@h"),
    ]
    db_change = [c for c in of_type(entries, "change") if c["object"]["name"] == "db"]
    assert [(c["action"], c["actor"]) for c in db_change] == [("created", "bob@h")]

    await store.delete(PROCESS.api_version, PROCESS.kind, "web", options=WriteOptions(actor=BOB))
    async with recording(store, timeline):  # restarted: from its checkpoint
        await store.create(process("api", ["api"]), options=WriteOptions(actor=ALICE))
        entries = await wait_for_entries(timeline, lambda es: len(audit(es)) == 7)
    assert audit(entries)[5:] == [("web", "delete", "bob@h"), ("api", "create", "alice@h")]
    assert audit(timeline.query()) == audit(entries)  # stopped: nothing more came


async def test_catch_up_records_what_no_recorder_saw_once_however_many_readers_ask(
    store: Store, tmp_path: Path
) -> None:
    db = process("db", ["sleep", "1"])
    await store.create(db, options=WriteOptions(actor=ALICE))
    changed = await store.get(PROCESS.api_version, PROCESS.kind, "db", "default")
    changed["spec"]["args"] = ["sleep", "2"]
    await store.update(changed, options=WriteOptions(actor=BOB))
    readers = [Timeline.open(tmp_path / "state.db") for _ in range(4)]
    try:
        # Four readers at once (explain, the dashboard...): one stretch, recorded once.
        counts = await asyncio.gather(*(Recorder(store, t).catch_up() for t in readers))
        assert sum(1 for c in counts if c) == 1
        entries = readers[0].query(object=REF)
        writes = of_type(entries, "write")
        assert [(w["verb"], w["user"]) for w in writes] == [
            ("create", "alice@h"),
            ("update", "bob@h"),
        ]
        assert [c["action"] for c in of_type(entries, "change")] == ["created"]
        assert await Recorder(store, readers[1]).catch_up() == 0  # nothing written since
        # A live recorder keeps the timeline: readers leave it to it.
        async with recording(store, readers[2]):
            await store.delete(PROCESS.api_version, PROCESS.kind, "db", "default")
            assert await Recorder(store, readers[3]).catch_up() == 0
    finally:
        for t in readers:
            t.close()
