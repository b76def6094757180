"""Inputs of an object that its own spec does not hold, on the timeline: edits of a running
child's env files (noticed, written to the Process's status, said in an event, recorded as an
input change of the Process with the values hidden, while the child runs on as it is: it
reads the files at its next start), and the Autoscaler that scales an object.

A real SQLite store, a real child, the real recorder. Waits are on conditions under
timeouts, never on the clock.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from timeline_support import of_type, wait_for_entries

from setpoint.engine import builtin_kinds
from setpoint.insight.recorder import setup
from setpoint.insight.recording import entries_for, project
from setpoint.insight.timeline import Timeline
from setpoint.model import Object
from setpoint.runtime.manager import Manager, ManagerOptions
from setpoint.store import open_store
from setpoint.testing import wait_for
from setpoint.workloads.env_file_watch import MISSING, EnvFileWatch
from setpoint.workloads.process import PROCESS, ProcessController, ProcessSettings
from setpoint.workloads.process import setup as process_setup

SLEEP = "import time\nwhile True: time.sleep(3600)"


def process(name: str, args: list[str], **spec: Any) -> Object:
    return {
        "apiVersion": PROCESS.api_version,
        "kind": PROCESS.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"args": args, **spec},
    }


def env_files(obj: Object | None) -> list[dict[str, Any]]:
    return list(((obj or {}).get("status") or {}).get("envFiles") or [])


async def test_an_env_file_edit_is_an_input_change_on_the_timeline(tmp_path: Path) -> None:
    env = tmp_path / "web.env"
    env.write_text("DB_PORT=5432\nNAME=web\n")
    url = f"sqlite:///{tmp_path / 'state.db'}"
    store = await open_store(url, builtin_kinds())
    manager = Manager(store, options=ManagerOptions(grace_period=1.0))
    processes = process_setup(
        manager, ProcessSettings(tmp_path / "run", tmp_path / "logs")
    ).reconciler
    assert isinstance(processes, ProcessController)
    setup(manager, store_url=url, log_dir=tmp_path / "logs")
    running = asyncio.create_task(manager.run())
    try:
        await manager.wait_started()
        await store.create(process("web", [sys.executable, "-c", SLEEP], envFile=[str(env)]))
        first = await wait_for(store, PROCESS, "web", lambda o: bool(env_files(o)))
        assert first is not None
        pid = first["status"]["pid"]
        [seen] = env_files(first)
        assert seen["path"] == str(env)
        assert not seen.get("changedKeys")

        env.write_text("DB_PORT=5433\nNAME=web\nDEBUG=1\n")
        edited = await wait_for(
            store, PROCESS, "web", lambda o: bool(env_files(o)) and env_files(o)[0] != seen
        )
        assert edited is not None
        assert env_files(edited)[0]["changedKeys"] == ["DB_PORT", "DEBUG"]
        assert edited["status"]["pid"] == pid  # not restarted: read at its next start
        ref = {"kind": "Process", "name": "web", "namespace": "default"}
        with Timeline.open(tmp_path / "state.db") as timeline:
            entries = await wait_for_entries(
                timeline,
                lambda es: any(e.get("input") == "envFile" for e in of_type(es, "change")),
                object=ref,
            )
            everything = await asyncio.to_thread(timeline.query)
    finally:
        manager.stop()
        await running
        await processes.stop_all(grace=0)
        await store.close()
    [change] = [e for e in of_type(entries, "change") if e.get("input") == "envFile"]
    assert change["action"] == "updated"
    assert change["actor"] == "unknown"
    assert change["diff"] == {
        f"envFile[{env}].DB_PORT": ["(hidden)", "(changed)"],
        f"envFile[{env}].DEBUG": ["(hidden)", "(changed)"],
    }
    events = [e for e in of_type(entries, "event") if e.get("reason") == "EnvFileChanged"]
    assert events
    assert "DB_PORT, DEBUG" in str(events[0])
    assert "5433" not in str(everything)  # the values never reach the timeline


def test_a_file_first_seen_is_no_edit_and_unknown_keys_show_digests(tmp_path: Path) -> None:
    env = tmp_path / "a.env"
    watch = EnvFileWatch([str(env)], {}, {})
    assert watch.look()  # first seen: missing
    assert watch.items()[0].digest == MISSING
    env.write_text("A=1\n")
    assert watch.look()
    assert watch.items()[0].changed_keys == ()  # nothing read before it: keys unknown
    assert not watch.look()  # unchanged: nothing new
    env.write_text("A=2\n")
    assert watch.look()
    assert watch.items()[0].changed_keys == ("A",)

    restarted = EnvFileWatch([str(env)], {}, {str(env): "0123456789abcdef"})
    assert restarted.look()  # edited while no engine ran: noticed, keys unknown
    status: dict[str, Any] = {"envFiles": [{"path": str(env), "digest": "0123456789abcdef"}]}
    obj = {**process("a", ["x"]), "metadata": {"name": "a", "uid": "u"}, "status": status}
    old = project(obj, 1)
    new = project({**obj, "status": {"envFiles": [restarted.items()[0].wire()]}}, 2)
    [change] = entries_for(old, new, now=0.0)
    assert change["diff"] == {f"envFile[{env}]": ["0123456789abcdef", restarted.items()[0].digest]}
    assert entries_for(None, new, now=0.0)[0]["action"] == "created"  # first seen: no edit
    assert len(entries_for(None, new, now=0.0)) == 1


def test_a_scale_target_is_recorded_as_an_input_of_what_it_scales() -> None:
    autoscaler = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Autoscaler",
        "metadata": {"name": "api", "namespace": "default", "uid": "u"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "api"}, "maxReplicas": 4},
    }
    edges = of_type(entries_for(None, project(autoscaler, 1), now=0.0), "edge")
    assert edges == [
        {
            "ts": 0.0,
            "type": "edge",
            "from": {"kind": "Deployment", "name": "api", "namespace": "default"},
            "to": {"kind": "Autoscaler", "name": "api", "namespace": "default"},
            "relation": "uses",
        }
    ]
    changed = {**autoscaler, "spec": {**autoscaler["spec"], "maxReplicas": 1}}
    assert of_type(entries_for(project(autoscaler, 1), project(changed, 2), now=1.0), "edge") == []
