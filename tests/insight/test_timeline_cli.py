"""`setpoint timeline` and the actor `setpoint apply` notes, through the real command line."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from timeline_support import of_type, wait_for_entries

from setpoint.engine import builtin_kinds
from setpoint.insight.entries import read_timeline
from setpoint.insight.recorder import Recorder
from setpoint.insight.timeline import Timeline
from setpoint.store import open_store
from setpoint.workloads.process import PROCESS

assert PROCESS.kind == "Process"  # registered, as `setpoint up` has it

TIMEOUT = 60.0


def setpoint(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    store = f"sqlite:///{directory / 'state.db'}"
    return subprocess.run(
        [sys.executable, "-m", "setpoint", "--store", store, *args],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def ref(name: str) -> dict[str, Any]:
    return {"kind": "Process", "name": name, "namespace": "default"}


def test_timeline_lists_filters_and_exports_what_explain_reads(tmp_path: Path) -> None:
    now = time.time()
    entries = [
        {"ts": now - 3600, "type": "log", "object": ref("db"), "line": "an hour ago"},
        {
            "ts": now - 30,
            "type": "change",
            "object": ref("db"),
            "diff": {"spec.args[1]": ["--max-conn=100", "--max-conn=5"]},
            "action": "updated",
            "actor": "alice@h",
        },
        {"ts": now - 20, "type": "log", "object": ref("web"), "line": "FATAL: too many"},
        {"ts": now - 10, "type": "exit", "object": ref("db"), "exitCode": 1, "signal": None},
    ]
    with Timeline.open(tmp_path / "state.db") as timeline:
        timeline.append_many(entries)

    table = setpoint(tmp_path, "timeline")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["TIME", "TYPE", "OBJECT", "DETAIL"]
    assert len(lines) == 5
    assert "updated by alice@h: spec.args[1]" in lines[2]
    assert "exited, code 1" in lines[4]

    recent_db = setpoint(tmp_path, "timeline", "process/db", "--since", "10m")
    assert [line.split()[1] for line in recent_db.stdout.splitlines()[1:]] == ["change", "exit"]

    logs = setpoint(tmp_path, "timeline", "--type", "log", "-o", "json")
    assert [e["line"] for e in json.loads(logs.stdout)] == ["an hour ago", "FATAL: too many"]

    exported = setpoint(tmp_path, "timeline", "-o", "jsonl")
    (tmp_path / "timeline.jsonl").write_text(exported.stdout)
    assert read_timeline(tmp_path / "timeline.jsonl") == entries


def test_timeline_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    bad = setpoint(tmp_path, "timeline", "--since", "soon")
    assert (bad.returncode, bad.stderr.strip()) == (
        1,
        "error: --since: 'soon': want a duration like 90s, 1m30s, 2h or 500ms",
    )
    memory = subprocess.run(
        [sys.executable, "-m", "setpoint", "--store", "memory://", "timeline"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert memory.returncode == 1
    assert "a memory store keeps it in the memory of the process that holds it" in memory.stderr
    no_store = setpoint(tmp_path, "timeline")
    assert no_store.returncode == 1
    assert f"no store at {tmp_path / 'state.db'}" in no_store.stderr
    (tmp_path / "state.db").touch()  # an empty store, with no timeline yet
    empty = setpoint(tmp_path, "timeline")
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, "", "No timeline entries found.\n")


async def test_apply_names_who_ran_it_on_the_change_the_recorder_sees(tmp_path: Path) -> None:
    manifest = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "db"},
        "spec": {"args": ["db", "--max-conn=100"]},
    }
    (tmp_path / "db.yaml").write_text(yaml.safe_dump(manifest))
    applied = await asyncio.to_thread(setpoint, tmp_path, "apply", "-f", "db.yaml")
    assert applied.returncode == 0, applied.stderr

    store = await open_store(f"sqlite:///{tmp_path / 'state.db'}", builtin_kinds())
    timeline = Timeline.open(tmp_path / "state.db")
    recorder = Recorder(store, timeline)
    task = asyncio.create_task(recorder.run())
    try:
        await wait_for_entries(timeline, lambda es: len(of_type(es, "change")) == 1)
        manifest["spec"]["args"][1] = "--max-conn=5"
        (tmp_path / "db.yaml").write_text(yaml.safe_dump(manifest))
        again = await asyncio.to_thread(setpoint, tmp_path, "apply", "-f", "db.yaml")
        assert again.stdout.strip() == "process.setpoint.dev/db configured"
        entries = await wait_for_entries(timeline, lambda es: len(of_type(es, "change")) == 2)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await store.close()
    me = f"{getpass.getuser()}@{socket.gethostname()}"
    assert [(e["action"], e["actor"]) for e in of_type(entries, "change")] == [
        ("created", me),
        ("updated", me),
    ]
    assert of_type(entries, "change")[1]["diff"] == {
        "spec.args[1]": ["--max-conn=100", "--max-conn=5"]
    }

    audit = setpoint(tmp_path, "timeline", "--audit")
    assert audit.returncode == 0, audit.stderr
    header, *rows = audit.stdout.splitlines()
    assert header.split() == ["TIME", "USER", "MANAGER", "VERB", "OBJECT", "REVISION"]
    assert [row.split()[1:] for row in rows] == [
        [me, "setpoint", "create", "Process/db", "1"],
        [me, "setpoint", "update", "Process/db", "2"],
    ]
    table = setpoint(tmp_path, "timeline")
    assert table.returncode == 0, table.stderr
    assert [line.split()[1] for line in table.stdout.splitlines()[1:]] == ["change", "change"]
    assert f"updated by {me}:" in table.stdout
    assert max(len(line) for line in audit.stdout.splitlines()) <= 100
