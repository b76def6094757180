"""process-compose parity against real child processes: `dependsOn` conditions `Started` and
`Completed`, `readinessProbe.logLine`, and `envFile`.

Children are small `sys.executable -c` scripts; tests learn that a child reached a point
from a line it writes into a FIFO, and wait for stored state through the store's watch,
under timeouts, never on the wall clock. Back-off timing runs on a `ManualClock`.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from process_support import (
    SLEEP_FOREVER,
    TIMEOUT,
    condition,
    job_controller,
    open_gate,
    process,
    process_controller,
    python,
    wait_for,
)
from supervisor_support import Notifications, eventually, kill_group
from writes_support import writes_since

from setpoint import testing
from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Invalid
from setpoint.model import Object
from setpoint.store import Store
from setpoint.testing import Harness, ManualClock, reconcile_until_stable
from setpoint.workloads.child_plan import ENVIRONMENT_BACKOFF
from setpoint.workloads.job import JOB, JobController, JobSettings
from setpoint.workloads.probes import MAX_LINE_BYTES, SCAN_BYTES_PER_LOOK, LogLineScanner
from setpoint.workloads.process import PROCESS, ProcessController, ProcessSettings

QUIET_SECONDS = 10


def job(name: str, args: list[str], **spec: Any) -> Object:
    return {
        "apiVersion": JOB.api_version,
        "kind": JOB.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"args": args, **spec},
    }


async def wait_for_job(
    store: Store, name: str, predicate: Callable[[Object | None], bool]
) -> Object | None:
    return await testing.wait_for(store, JOB, name, predicate, within=TIMEOUT)


@dataclass
class World:
    harness: Harness
    processes: ProcessController
    jobs: JobController


async def _world(tmp_path: Path, clock: Clock) -> AsyncIterator[World]:
    async with Harness(clock=clock) as harness:
        logs = tmp_path / "logs"
        processes = process_controller(harness.manager, ProcessSettings(tmp_path / "state", logs))
        jobs = job_controller(harness.manager, JobSettings(tmp_path / "jobs", logs))
        await harness.start()
        try:
            yield World(harness, processes, jobs)
        finally:
            await harness.stop()
            await processes.stop_all(grace=0)
            await jobs.stop_all(grace=0)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async for w in _world(tmp_path, SYSTEM_CLOCK):
        yield w


def phase(obj: Object | None) -> str | None:
    return ((obj or {}).get("status") or {}).get("phase")


def running(obj: Object | None) -> bool:
    return phase(obj) == "Running" and (obj or {})["status"].get("pid") is not None


def ready(obj: Object | None) -> bool:
    return condition(obj, "Ready").get("status") == "True"


# -- dependsOn: Started and Completed ------------------------------------------------------


async def test_started_and_completed_wait_for_the_child_not_its_health(
    world: World, tmp_path: Path
) -> None:
    """`seed` is never Ready (its readiness probe cannot pass) and fails with code 3; a
    Process waiting for it to be Started starts once it runs, a Job waiting for it to be
    Completed once it has exited."""
    store = world.harness.store
    gate = Notifications(tmp_path / "gate")
    try:
        seed = python(f"open({str(gate.path)!r}).readline(); raise SystemExit(3)")
        never = {"exec": {"command": ["false"]}, "periodSeconds": 1}
        await store.create(process("seed", seed, restartPolicy="Never", readinessProbe=never))
        on_started = [{"kind": "Process", "name": "seed", "condition": "Started"}]
        on_completed = [{"kind": "Process", "name": "seed", "condition": "Completed"}]
        await store.create(process("client", python(SLEEP_FOREVER), dependsOn=on_started))
        await store.create(job("report", python("print('done')"), dependsOn=on_completed))

        client = await wait_for(store, "client", running)
        assert ready(client)
        seed_now = await wait_for(store, "seed", running)
        assert not ready(seed_now)
        report = await wait_for_job(store, "report", lambda o: phase(o) == "Waiting")
        assert condition(report, "Ready")["message"] == (
            "waiting for Process/seed to be Completed (phase Running)"
        )

        open_gate(gate.path)
        done = await wait_for_job(store, "report", lambda o: phase(o) == "Succeeded")
        assert condition(done, "Complete")["status"] == "True"
        seed_now = await wait_for(store, "seed", lambda o: phase(o) == "Failed")
        assert seed_now is not None
        assert seed_now["status"]["lastExit"]["code"] == 3
        # Started stays met after the child exited: the client is still Ready.
        assert ready(await wait_for(store, "client", running))
    finally:
        gate.close()


# -- envFile -------------------------------------------------------------------------------


def report_env(fifo: Path, *names: str) -> list[str]:
    """argv of a child that writes the values of `names` in its environment, as one JSON
    line, into `fifo`, then runs until stopped."""
    code = f"""
        import json, os, time
        with open({str(fifo)!r}, "w") as f:
            f.write(json.dumps([os.environ.get(n) for n in {list(names)!r}]) + "\\n")
        while True: time.sleep(3600)
    """
    return python(code)


async def test_env_files_are_read_at_each_start_in_order_under_env(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths are the engine's working directory's
    base, local = tmp_path / "base.env", tmp_path / "local.env"
    base.write_text("A=base\nB=base\nC='from base'\n")
    local.write_text('export B="local"\n')
    store = world.harness.store
    fifo = Notifications(tmp_path / "env")
    try:
        args = report_env(fifo.path, "A", "B", "C")
        spec = {"envFile": ["base.env", "local.env"], "env": {"C": "from env"}}
        await store.create(process("web", args, **spec))
        assert json.loads(await fifo.line()) == ["base", "local", "from env"]

        # Edited, then restarted (a spec change): the new values.
        base.write_text("A=edited\n")
        obj = await store.get(PROCESS.api_version, PROCESS.kind, "web", "default")
        obj["spec"]["envFile"] = "base.env"
        await store.update(obj)
        assert json.loads(await fifo.line()) == ["edited", None, "from env"]
    finally:
        fifo.close()


@pytest.fixture
async def manual(tmp_path: Path) -> AsyncIterator[tuple[World, ManualClock]]:
    clock = ManualClock()
    async for w in _world(tmp_path, clock):
        yield w, clock


async def test_a_missing_env_file_is_retried_quietly_then_starts(
    manual: tuple[World, ManualClock], tmp_path: Path
) -> None:
    world, clock = manual
    store = world.harness.store
    env_file = tmp_path / "app.env"
    await store.create(process("web", python(SLEEP_FOREVER), envFile=str(env_file)))
    obj = await wait_for(
        store, "web", lambda o: condition(o, "Ready").get("reason") == "StartFailed"
    )
    assert obj is not None
    assert obj["status"]["phase"] == "Pending"
    assert condition(obj, "Ready")["message"] == (f"envFile {env_file}: No such file or directory")
    assert condition(obj, "Stalled").get("status") != "True"

    # Still missing for ten seconds: a retry at 1, 2 and 4 s back-off, and at most one
    # write each (its nextStartAt).
    before = await store.revision()
    for _ in range(QUIET_SECONDS):
        clock.advance(1)
        await reconcile_until_stable(world.harness)
    writes = await writes_since(store, before)
    assert len(writes) <= 3, writes

    env_file.write_text("GREETING=hello\n")
    clock.advance(ENVIRONMENT_BACKOFF.max_seconds)
    obj = await wait_for(store, "web", running)
    assert obj is not None
    assert condition(obj, "Ready")["status"] == "True"


# -- readinessProbe.logLine ----------------------------------------------------------------


LOG_LINE_PROBE = {"logLine": {"pattern": r"listening on port \d+"}}


def print_after_gate(gate: Path, *, noise: bool = False) -> list[str]:
    """argv of a child that prints lines that do not match (with `noise`: a 1 MiB line of
    binary bytes, which ends with a match past the `MAX_LINE_BYTES` searched), waits for a
    line on `gate`, prints `listening on port 8080`, and runs until stopped."""
    code = f"""
        import sys, time
        print("starting up", flush=True)
        if {noise!r}:
            binary = bytes(b for b in range(256) if b != 10)  # no line feed: one long line
            sys.stdout.buffer.write(binary * 4096 + b" listening on port 1\\n")
            sys.stdout.flush()
        with open({str(gate)!r}) as f:
            f.readline()
        print("server listening on port 8080", flush=True)
        while True: time.sleep(3600)
    """
    return python(code)


def waiting_for_the_line(obj: Object | None) -> bool:
    ready_ = condition(obj, "Ready")
    return running(obj) and ready_.get("reason") == "ReadinessProbePending"


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        (
            {"readinessProbe": {"logLine": {"pattern": "(unclosed"}}},
            "spec.readinessProbe.logLine.pattern",
            "not an RE2 regular expression: missing ): (unclosed",
        ),
        (
            {"readinessProbe": {"logLine": {"pattern": r"(a)\1"}}},
            "spec.readinessProbe.logLine.pattern",
            # Go's syntax, as process-compose: no backreferences, no lookarounds
            "not an RE2 regular expression: invalid escape sequence: \\1",
        ),
        (
            {"livenessProbe": LOG_LINE_PROBE},
            "spec.livenessProbe.logLine",
            "is for a readinessProbe only",
        ),
        (
            {"startupProbe": LOG_LINE_PROBE},
            "spec.startupProbe.logLine",
            "is for a readinessProbe only",
        ),
        (
            {"readinessProbe": {**LOG_LINE_PROBE, "periodSeconds": 1, "timeoutSeconds": 2}},
            "spec.readinessProbe",
            "periodSeconds, timeoutSeconds: not for a logLine probe",
        ),
    ],
)
async def test_a_bad_log_line_probe_is_refused_naming_the_field(
    world: World, spec: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(Invalid) as caught:
        await world.harness.store.create(process("web", python(SLEEP_FOREVER), **spec))
    # The field as the schema words it (`spec: livenessProbe.logLine: ...` for a role's rule).
    assert f"{field.removeprefix('spec.')}: {words}" in str(caught.value)


async def test_ready_once_a_line_matches_until_the_next_start(world: World, tmp_path: Path) -> None:
    store = world.harness.store
    gate = Notifications(tmp_path / "gate")
    try:
        args = print_after_gate(gate.path, noise=True)
        await store.create(process("web", args, readinessProbe=LOG_LINE_PROBE))
        obj = await wait_for(store, "web", waiting_for_the_line)
        assert condition(obj, "Ready")["message"] == (
            r"waiting for a line of its output to match: listening on port \d+"
        )
        # A megabyte of binary output: still waiting, and the engine goes on.
        log = tmp_path / "logs" / "default_web.log"
        await eventually(lambda: log.stat().st_size > 1_000_000, within=TIMEOUT)
        assert not ready(await store.get(PROCESS.api_version, PROCESS.kind, "web", "default"))

        open_gate(gate.path)
        obj = await wait_for(store, "web", ready)
        assert condition(obj, "Ready")["reason"] == "ReadinessProbeSucceeded"
        assert condition(obj, "Ready")["message"] == "matched: server listening on port 8080"
        first = obj["status"]["pid"]

        # Its next run starts unready: the earlier run's line in the same log does not count.
        os.kill(first, signal.SIGKILL)
        obj = await wait_for(
            store, "web", lambda o: waiting_for_the_line(o) and o["status"]["pid"] != first
        )
        open_gate(gate.path)
        obj = await wait_for(store, "web", ready)
        assert obj is not None
        assert obj["status"]["restarts"] == 1
    finally:
        gate.close()


async def test_a_line_printed_while_no_engine_ran_makes_the_adopted_child_ready(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    settings = ProcessSettings(tmp_path / "state", tmp_path / "logs")
    gate = Notifications(tmp_path / "gate")
    pid = None
    try:
        async with Harness(url=url) as harness:
            first = process_controller(harness.manager, settings)
            await harness.start()
            args = print_after_gate(gate.path)
            await harness.store.create(process("web", args, readinessProbe=LOG_LINE_PROBE))
            obj = await wait_for(harness.store, "web", waiting_for_the_line)
            assert obj is not None
            pid = obj["status"]["pid"]
            await harness.stop()
        await first.detach()  # as if the engine had died: the child keeps running

        open_gate(gate.path)
        log = tmp_path / "logs" / "default_web.log"
        await eventually(lambda: b"listening on port 8080" in log.read_bytes(), within=TIMEOUT)

        async with Harness(url=url) as harness:
            second = process_controller(harness.manager, settings)
            await harness.start()
            try:
                obj = await wait_for(harness.store, "web", ready)
                assert obj is not None
                assert obj["status"]["pid"] == pid
                assert condition(obj, "Ready")["message"] == (
                    "matched: server listening on port 8080"
                )
            finally:
                await harness.stop()
                await second.stop_all(grace=0)
    finally:
        gate.close()
        if pid is not None:
            kill_group(pid)


# -- the scanner, on files written by the test --------------------------------------------


def start_of(path: Path) -> tuple[int, int]:
    """(inode, size) of `path`: where output written from now on begins."""
    st = path.stat()
    return st.st_ino, st.st_size


def test_the_scanner_reads_from_the_run_start_across_rotations(tmp_path: Path) -> None:
    log = tmp_path / "web.log"
    log.write_bytes(b"ready: from an earlier run\n")
    inode, offset = start_of(log)
    scanner = LogLineScanner("^ready", log, 2, inode, offset)
    assert scanner.look() is None  # the earlier run's line does not count
    with log.open("ab") as f:
        f.write(b"starting\nrea")  # half a line: not yet
    assert scanner.look() is None
    log.rename(tmp_path / "web.log.1")  # rotated: the line goes on in the new file
    (tmp_path / "web.log").write_bytes(b"dy: at last\n")
    assert scanner.look() == "ready: at last"


def test_the_scanner_skips_what_was_rotated_away_and_starts_at_the_oldest(tmp_path: Path) -> None:
    log = tmp_path / "web.log"
    (tmp_path / "web.log.1").write_bytes(b"ready: written since the run began\n")
    log.write_bytes(b"later\n")
    scanner = LogLineScanner("^ready", log, 1, inode=1, offset=10)  # an inode that is gone
    assert scanner.look() == "ready: written since the run began"


def test_the_scanner_without_a_start_reads_what_comes(tmp_path: Path) -> None:
    log = tmp_path / "web.log"
    log.write_bytes(b"ready: before it looked\n")
    scanner = LogLineScanner("ready", log, 1, None)
    assert scanner.look() is None
    with log.open("ab") as f:
        f.write(b"ready: after\n")
    assert scanner.look() == "ready: after"


def test_the_scanner_matches_in_linear_time_whatever_the_pattern(tmp_path: Path) -> None:
    # With backtracking (Python's re) this search takes about 2**64 steps: it never ends.
    log = tmp_path / "web.log"
    log.write_bytes(b"a" * 64 + b"b\n" + b"a" * 64 + b"\n")
    scanner = LogLineScanner("^(a+)+$", log, 1, log.stat().st_ino, 0)
    assert scanner.look() == "a" * 64


def test_the_scanner_reads_a_bounded_amount_and_long_lines_in_part(tmp_path: Path) -> None:
    log = tmp_path / "web.log"
    long_line = b"x" * MAX_LINE_BYTES + b" ready past the bound\n"
    binary = bytes(b for b in range(256) if b != 10) * 16 + b"\n"
    log.write_bytes(long_line + binary * (3 * SCAN_BYTES_PER_LOOK // len(binary)) + b"ready\n")
    scanner = LogLineScanner("ready", log, 1, log.stat().st_ino, 0)
    looks = 1
    while scanner.look() is None:
        looks += 1
        assert looks < 10
    assert looks == 4  # a megabyte a look
