"""Inputs of an object that its own spec does not hold, on the timeline: edits of a running
child's env files, a Process's or a Job's attempt's (noticed, written to the object's status
with a digest keyed by the engine's private key, said in an event, recorded as an input
change with the values hidden, while the child runs on as it is: it reads the files at its
next start), and the Autoscaler that scales an object.

A real SQLite store, a real child, the real recorder. Waits are on conditions under
timeouts, never on the clock.
"""

from __future__ import annotations

import asyncio
import hashlib
import stat
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
from setpoint.workloads.child_plan import record_env_files
from setpoint.workloads.env_file_watch import (
    KEY_FILE,
    MISSING,
    DigestKey,
    EnvFileWatch,
    recorded_env_files,
)
from setpoint.workloads.job import JOB, JobController, JobSettings
from setpoint.workloads.job import setup as job_setup
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


async def test_a_job_attempts_env_file_edit_is_recorded_as_a_process_one_is(
    tmp_path: Path,
) -> None:
    env = tmp_path / "migrate.env"
    env.write_text("PIN=4821\nTARGET=v3\n")
    url = f"sqlite:///{tmp_path / 'state.db'}"
    store = await open_store(url, builtin_kinds())
    manager = Manager(store, options=ManagerOptions(grace_period=1.0))
    jobs = job_setup(manager, JobSettings(tmp_path / "run" / "jobs", tmp_path / "logs")).reconciler
    assert isinstance(jobs, JobController)
    setup(manager, store_url=url, log_dir=tmp_path / "logs")
    running = asyncio.create_task(manager.run())
    job = {**process("migrate", [sys.executable, "-c", SLEEP], envFile=[str(env)])}
    job["kind"] = JOB.kind
    try:
        await manager.wait_started()
        await store.create(job)
        first = await wait_for(store, JOB, "migrate", lambda o: bool(env_files(o)))
        assert first is not None
        [seen] = env_files(first)
        assert seen["path"] == str(env)
        assert "changedAt" not in seen

        env.write_text("PIN=4822\nTARGET=v3\n")
        edited = await wait_for(
            store, JOB, "migrate", lambda o: bool(env_files(o)) and env_files(o)[0] != seen
        )
        assert edited is not None
        assert env_files(edited)[0]["changedKeys"] == ["PIN"]
        assert env_files(edited)[0]["changedAt"]
        assert edited["status"]["pid"] == first["status"]["pid"]  # the attempt runs on
        ref = {"kind": "Job", "name": "migrate", "namespace": "default"}
        with Timeline.open(tmp_path / "state.db") as timeline:
            entries = await wait_for_entries(
                timeline,
                lambda es: (
                    any(e.get("input") == "envFile" for e in of_type(es, "change"))
                    and any(e.get("reason") == "EnvFileChanged" for e in of_type(es, "event"))
                ),
                object=ref,
            )
    finally:
        manager.stop()
        await running
        await jobs.stop_all(grace=0)
        await store.close()
    [change] = [e for e in of_type(entries, "change") if e.get("input") == "envFile"]
    assert change["diff"] == {f"envFile[{env}].PIN": ["(hidden)", "(changed)"]}
    [event] = [e for e in of_type(entries, "event") if e.get("reason") == "EnvFileChanged"]
    assert "(PIN)" in str(event)
    assert "4822" not in str(entries)


def test_a_file_first_seen_is_no_edit_and_an_edit_while_down_hides_its_digests(
    tmp_path: Path,
) -> None:
    env = tmp_path / "a.env"
    key = DigestKey.new()
    watch = EnvFileWatch([str(env)], {}, {}, key)
    assert watch.look(1.0)  # first seen: missing
    assert watch.items()[0].digest == MISSING
    assert watch.items()[0].changed_at is None
    env.write_text("A=1\n")
    assert watch.look(2.0)
    assert watch.items()[0].changed_keys == ()  # nothing read before it: keys unknown
    assert watch.items()[0].changed_at == 2.0
    assert not watch.look(3.0)  # unchanged: nothing new
    env.write_text("A=2\n")
    assert watch.look(4.0)
    assert watch.items()[0].changed_keys == ("A",)
    assert watch.items()[0].changed_at == 4.0

    stored = {"envFiles": [watch.items()[0].wire()]}
    env.write_text("A=3\n")  # edited while no engine ran
    restarted = EnvFileWatch([str(env)], {}, recorded_env_files(stored), key)
    assert restarted.look(5.0)  # noticed, keys unknown
    assert restarted.items()[0].changed_at == 5.0
    assert restarted.items()[0].changed_keys == ()
    obj = {**process("a", ["x"]), "metadata": {"name": "a", "uid": "u"}, "status": stored}
    old = project(obj, 1)
    new = project({**obj, "status": {"envFiles": [restarted.items()[0].wire()]}}, 2)
    [change] = entries_for(old, new, now=0.0)
    assert change["diff"] == {f"envFile[{env}]": ["(hidden)", "(changed)"]}
    assert "digest" not in str(new)  # the recorder keeps no digest of the file
    assert entries_for(None, new, now=0.0)[0]["action"] == "created"  # first seen: no edit
    assert len(entries_for(None, new, now=0.0)) == 1


def test_a_digest_it_cannot_compare_is_replaced_and_is_no_edit(tmp_path: Path) -> None:
    """A digest of the old form (a bare SHA-256), or another engine's key's, is replaced at
    the first look, quietly: no edit is made of it. A stopped child's status loses an
    old-form digest at its next plan."""
    env = tmp_path / "a.env"
    env.write_text("PIN=4821\n")
    old_form = hashlib.sha256(env.read_bytes()).hexdigest()[:16]
    others = DigestKey.new().digest(env.read_bytes())
    for recorded in (old_form, others):
        stored = {"envFiles": [{"path": str(env), "digest": recorded}]}
        watch = EnvFileWatch([str(env)], {}, recorded_env_files(stored), DigestKey.new())
        assert watch.look(1.0)  # the status is to change: its digest is replaced
        [seen] = watch.items()
        assert seen.changed_at is None
        assert seen.digest != recorded
        assert seen.digest.count(":") == 1
    status: dict[str, Any] = {"envFiles": [{"path": str(env), "digest": old_form}]}
    record_env_files(status, None)  # no child runs: what it says stays, the old digest goes
    assert status == {"envFiles": [{"path": str(env)}]}
    status = {"envFiles": [{"path": str(env), "digest": others}]}
    record_env_files(status, None)
    assert status == {"envFiles": [{"path": str(env), "digest": others}]}


def test_an_earlier_versions_env_file_digests_are_hidden_when_read(tmp_path: Path) -> None:
    """An entry recorded before digests were keyed held the file's bare SHA-256 digests: a
    timeline serves it with the values hidden, as it serves newer ones."""
    ref = {"kind": "Process", "name": "a", "namespace": "default"}
    old = {"ts": 1.0, "type": "change", "object": ref, "action": "updated", "actor": "unknown"}
    old |= {"input": "envFile", "diff": {"envFile[a.env]": ["0123456789abcdef", "fedcba98"]}}
    other = {**old, "ts": 2.0, "input": None, "diff": {"spec.args": [["a"], ["b"]]}}
    with Timeline.open(tmp_path / "state.db") as timeline:
        timeline.append_many([old, other])
        got = timeline.query(object=ref)
    assert got[0]["diff"] == {"envFile[a.env]": ["(hidden)", "(changed)"]}
    assert got[1]["diff"] == {"spec.args": [["a"], ["b"]]}


def test_the_digest_key_is_made_once_private_and_kept(tmp_path: Path) -> None:
    state = tmp_path / "run"
    key = DigestKey.load(state)
    path = state / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert DigestKey.load(state) == key  # read back, not made again
    assert key.secret.hex() not in repr(key)
    assert key.digest(b"PIN=4821\n") == DigestKey.load(state).digest(b"PIN=4821\n")
    assert key.digest(b"PIN=4821\n") != DigestKey.new().digest(b"PIN=4821\n")


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
