"""examples/custom-controller: the ManagedFile controller keeps files in tmp_path as their
objects say.

In-process tests run the example's `setup()` on a `setpoint.testing.Harness`
(memory store, real files) with a resync far longer than any test, so a repair
seen within the timeout was made by the file watcher. The last test runs
`setpoint run managedfile.py` and the CLI as subprocesses on one SQLite file, and stops
the controller with SIGINT. Waits are on conditions (file contents, store objects, output lines),
bounded by timeouts; nothing sleeps a fixed time.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import os
import queue
import signal
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import IO, Any

import pytest
import yaml

from setpoint import Invalid, NotFound
from setpoint.model import READY, STALLED, Object, Registry, get_condition
from setpoint.runtime import Cache
from setpoint.store import Store
from setpoint.testing import Harness, capture_events, reconcile_until_stable

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom-controller"
TIMEOUT = 10.0
"""Seconds any awaited condition may take before the test fails (never waited out)."""


def _load_example() -> ModuleType:
    """examples/custom-controller/managedfile.py, imported once as `managedfile`."""
    if "managedfile" not in sys.modules:
        spec = importlib.util.spec_from_file_location("managedfile", EXAMPLE / "managedfile.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["managedfile"] = module
        spec.loader.exec_module(module)
    return sys.modules["managedfile"]


mf = _load_example()
API, KIND = "files.example.com/v1", "ManagedFile"


def managed_file(name: str, path: Path, content: str = "hello\n", mode: str = "0644") -> Object:
    return {
        "apiVersion": API,
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {"path": str(path), "content": content, "mode": mode},
    }


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def get(store: Store, name: str) -> Object:
    return await store.get(API, KIND, name, None)


async def eventually(check: Callable[[], bool | Awaitable[bool]], what: str) -> None:
    """Return once `check()` holds, re-checking every few milliseconds; fail after TIMEOUT."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        result = check()
        if await result if isinstance(result, Awaitable) else result:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"not within {TIMEOUT}s: {what}")
        await asyncio.sleep(0.005)


def _kinds() -> Registry:
    """A registry with the ManagedFile kind, as `--kinds managedfile.py` makes one."""
    registry = Registry()
    mf.register(registry)
    return registry


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    """A running manager with the ManagedFile controller: watcher every 20 ms, resync hourly."""
    async with Harness(registry=_kinds()) as h:
        mf.setup(h.manager, mf.Settings(resync_every=3600.0, poll_every=0.02))
        await h.start()
        yield h


@pytest.fixture
def unwritable(tmp_path: Path) -> Iterator[Path]:
    """A directory in which this process cannot create files. Root ignores permission
    bits, so for root it is /sys, where not even root may create a file."""
    if os.geteuid() == 0:
        yield Path("/sys")
        return
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    yield locked
    locked.chmod(0o755)


# -- plan: pure ------------------------------------------------------------------------

HELLO = hashlib.sha256(b"hello\n").hexdigest()


@pytest.mark.parametrize(
    ("desired", "observed", "action", "why"),
    [
        (mf.Desired("hello\n", 0o644), mf.Observed(False), "write", "missing"),
        (mf.Desired("hello\n", 0o644), mf.Observed(True), "write", "not a regular file"),
        (mf.Desired("bye\n", 0o644), mf.Observed(True, HELLO, 0o644), "write", "content differs"),
        (
            mf.Desired("hello\n", 0o644),
            mf.Observed(True, HELLO, 0o600),
            "chmod",
            "mode is 0600, want 0644",
        ),
        (mf.Desired("hello\n", 0o644), mf.Observed(True, HELLO, 0o644), "nothing", "in sync"),
        (mf.ABSENT, mf.Observed(True, HELLO, 0o644), "remove", "no file is wanted"),
        (mf.ABSENT, mf.Observed(False), "nothing", "no file, as wanted"),
        (mf.ABSENT, mf.Observed(True), "nothing", "no file, as wanted"),  # a directory: not ours
    ],
)
def test_plan_is_a_function_of_desired_and_observed(
    desired: Any, observed: Any, action: str, why: str
) -> None:
    assert mf.step_for(desired, observed) == mf.Step(mf.Action(action), why)


# -- the file watcher, on its own: no clock, no manager ----------------------------------


class Enqueued:
    """Stands in for the controller: remembers what the watcher enqueued."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def enqueue(self, request: Any) -> None:
        self.requests.append(request)

    def take(self) -> list[str]:
        taken, self.requests = [r.name for r in self.requests], []
        return taken


def cached(path: Path, resource_version: int, **status: Any) -> Object:
    obj = managed_file("motd", path)
    obj["metadata"]["resourceVersion"] = str(resource_version)
    obj["status"] = status
    return obj


async def test_the_watcher_enqueues_on_drift_only_and_never_loses_a_change(
    tmp_path: Path,
) -> None:
    path = tmp_path / "motd"
    cache, controller = Cache(), Enqueued()
    watcher = mf.FileWatcher(cache, controller, every=1.0)  # type: ignore[arg-type]
    cache.put(cached(path, 1))
    await watcher.check()
    assert controller.take() == ["motd"]  # missing
    await watcher.check()
    assert controller.take() == []  # still missing, nothing new: once is enough

    # The reconciler writes the file and its status; the user deletes the file before the
    # watcher's next round. The stat is as it was, but the object is not: look again.
    path.write_text("hello\n")
    cache.put(cached(path, 2, lastWritten="2026-01-01T00:00:00.001Z"))
    path.unlink()
    await watcher.check()
    assert controller.take() == ["motd"]

    path.write_text("hello\n")
    path.chmod(0o644)
    await watcher.check()
    assert controller.take() == []  # in sync: the controller's own write wakes nothing
    path.write_text("edited\n")
    await watcher.check()
    assert controller.take() == ["motd"]

    stalled = {"conditions": [{"type": "Stalled", "status": "True", "reason": "X"}]}
    cache.put(cached(path, 3, **stalled))
    await watcher.check()
    assert controller.take() == []  # stalled: waits for its spec to change (or the resync)


# -- the schema ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"path": "relative/motd"}, "spec.path", "want an absolute, normalised path"),
        ({"path": "/tmp/../etc/motd"}, "spec.path", "want an absolute, normalised path"),
        ({"path": "/tmp/motd", "mode": "0944"}, "spec.mode", "want an octal mode as a string"),
        ({"path": "/tmp/motd", "mode": "rw-r--r--"}, "spec.mode", "want an octal mode"),
        ({"path": "/tmp/motd", "mode": 420}, "spec.mode", "write the mode as a quoted octal"),
    ],
)
async def test_a_bad_spec_is_refused_naming_the_field(
    spec: dict[str, Any], field: str, message: str
) -> None:
    async with Harness(registry=_kinds()) as h:
        obj = {"apiVersion": API, "kind": KIND, "metadata": {"name": "bad"}, "spec": spec}
        with pytest.raises(Invalid, match=message) as info:
            await h.store.create(obj)
        assert info.value.field == field


def test_yaml_reads_an_unquoted_mode_as_a_number_which_is_refused() -> None:
    spec = yaml.safe_load("path: /tmp/motd\nmode: 0644\n")
    assert spec["mode"] == 420  # why the schema insists on quotes
    with pytest.raises(ValueError, match='"0644"'):
        mf.ManagedFileSpec.model_validate(spec)


# -- the controller, in process ----------------------------------------------------------


async def test_creates_the_file_with_content_and_mode_and_reports_ready(
    harness: Harness, tmp_path: Path
) -> None:
    path = tmp_path / "etc" / "motd"  # its directory does not exist yet
    async with capture_events(harness.store) as events:
        await harness.store.create(managed_file("motd", path, "hello\n", "0640"))
        await reconcile_until_stable(harness)
    assert path.read_text() == "hello\n"
    assert mode_of(path) == 0o640
    obj = await get(harness.store, "motd")
    assert obj["metadata"]["finalizers"] == [mf.FINALIZER]
    ready = get_condition(obj["status"], READY)
    assert ready is not None
    assert (ready["status"], ready["reason"], ready["observedGeneration"]) == ("True", "InSync", 1)
    status = obj["status"]
    assert (status["observedGeneration"], status["path"], status["sha256"]) == (1, str(path), HELLO)
    assert status["lastWritten"]
    assert get_condition(status, STALLED) is None
    assert [(e.reason, e.type) for e in events.events] == [("Written", "Normal")]
    assert not [p.name for p in path.parent.iterdir() if p.name != "motd"]  # no temporary files


async def test_an_edit_on_disk_is_undone_by_the_watcher(harness: Harness, tmp_path: Path) -> None:
    path = tmp_path / "motd"
    await harness.store.create(managed_file("motd", path))
    await reconcile_until_stable(harness)
    async with capture_events(harness.store) as events:
        path.write_text("tampered\n")
        await eventually(lambda: path.read_text() == "hello\n", "content restored")
        await events.wait_event("DriftCorrected", involved_name="motd")

        path.chmod(0o666)
        await eventually(lambda: mode_of(path) == 0o644, "mode restored")
        await reconcile_until_stable(harness)  # the reconcile that restored it has recorded
    assert [e.message for e in events.events if e.reason == "DriftCorrected"] == [
        f"{path}: content differs; restored",
        f"{path}: mode is 0666, want 0644; restored",
    ]
    obj = await get(harness.store, "motd")
    assert get_condition(obj["status"], READY)["status"] == "True"  # type: ignore[index]


async def test_a_file_deleted_on_disk_is_recreated(harness: Harness, tmp_path: Path) -> None:
    path = tmp_path / "motd"
    await harness.store.create(managed_file("motd", path, mode="0600"))
    await reconcile_until_stable(harness)
    path.unlink()
    await eventually(lambda: path.is_file() and path.read_text() == "hello\n", "file recreated")
    assert mode_of(path) == 0o600


async def test_a_spec_change_rewrites_the_file_and_a_new_path_moves_it(
    harness: Harness, tmp_path: Path
) -> None:
    path, moved = tmp_path / "motd", tmp_path / "sub" / "motd"
    await harness.store.create(managed_file("motd", path))
    await reconcile_until_stable(harness)
    async with capture_events(harness.store) as events:
        await harness.store.patch(
            API, KIND, "motd", {"spec": {"content": "bye\n", "mode": "0600"}}, None
        )
        await reconcile_until_stable(harness)
        assert (path.read_text(), mode_of(path)) == ("bye\n", 0o600)
        obj = await get(harness.store, "motd")
        assert obj["status"]["observedGeneration"] == 2

        await harness.store.patch(API, KIND, "motd", {"spec": {"path": str(moved)}}, None)
        await reconcile_until_stable(harness)
    assert moved.read_text() == "bye\n"
    assert not path.exists()
    obj = await get(harness.store, "motd")
    assert (obj["status"]["observedGeneration"], obj["status"]["path"]) == (3, str(moved))
    assert [e.reason for e in events.events] == ["Written", "Written", "Removed"]


async def test_an_unwritable_path_stalls_with_permission_denied_until_the_spec_changes(
    harness: Harness, tmp_path: Path, unwritable: Path
) -> None:
    path = unwritable / f"setpoint-test-{uuid.uuid4().hex[:8]}.conf"
    async with capture_events(harness.store) as events:
        await harness.store.create(managed_file("locked", path))
        await reconcile_until_stable(harness)
        await events.wait_event("WriteFailed", involved_name="locked")
    assert not path.exists()
    status = (await get(harness.store, "locked"))["status"]
    stalled, ready = get_condition(status, STALLED), get_condition(status, READY)
    assert stalled is not None
    assert ready is not None
    message = f"cannot write {path}: Permission denied"
    assert (stalled["status"], stalled["reason"], stalled["message"]) == (
        "True",
        "PermissionDenied",
        message,
    )
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "PermissionDenied",
        message,
    )
    (warning,) = [e for e in events.events if e.reason == "WriteFailed"]
    assert (warning.type, warning.message) == ("Warning", message)

    # A change from outside (a writable path) un-stalls it.
    fixed = tmp_path / "fixed.conf"
    await harness.store.patch(API, KIND, "locked", {"spec": {"path": str(fixed)}}, None)
    await reconcile_until_stable(harness)
    assert fixed.read_text() == "hello\n"
    status = (await get(harness.store, "locked"))["status"]
    assert get_condition(status, STALLED) is None
    assert get_condition(status, READY)["reason"] == "InSync"  # type: ignore[index]


async def test_a_stalled_object_can_still_be_deleted(harness: Harness, unwritable: Path) -> None:
    path = unwritable / f"setpoint-test-{uuid.uuid4().hex[:8]}.conf"
    await harness.store.create(managed_file("locked", path))
    await reconcile_until_stable(harness)
    await harness.store.delete(API, KIND, "locked", None)
    await reconcile_until_stable(harness)
    with pytest.raises(NotFound):
        await get(harness.store, "locked")


async def test_delete_removes_the_file_then_the_object(harness: Harness, tmp_path: Path) -> None:
    path = tmp_path / "motd"
    await harness.store.create(managed_file("motd", path))
    await reconcile_until_stable(harness)
    assert path.is_file()
    async with capture_events(harness.store) as events:
        marked = await harness.store.delete(API, KIND, "motd", None)
        assert marked["metadata"]["deletionTimestamp"]  # held back by the finalizer
        await reconcile_until_stable(harness)
    assert not path.exists()
    with pytest.raises(NotFound):
        await get(harness.store, "motd")
    assert [(e.reason, e.message) for e in events.events] == [("Removed", f"removed {path}")]


# -- end to end: `setpoint run` and the CLI, two processes, one SQLite file ---------------------


class Lines:
    """A stream read line by line by a thread, so a test can wait for a line with a timeout."""

    def __init__(self, stream: IO[str]) -> None:
        self.seen: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def expect(self, text: str) -> str:
        """The next line containing `text` (skipping others); fail after TIMEOUT."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no line with {text!r} within {TIMEOUT}s: {self.seen}")
            if line is None:
                pytest.fail(f"output ended before a line with {text!r}: {self.seen}")
            self.seen.append(line)
            if text in line:
                return line

    def rest(self) -> list[str]:
        """Every line up to the end of the stream (call once the process has ended)."""
        while (line := self._lines.get(timeout=TIMEOUT)) is not None:
            self.seen.append(line)
        return self.seen


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {TIMEOUT}s: {what}")
        time.sleep(0.01)


@pytest.mark.slow
def test_setpoint_run_and_the_cli_end_to_end(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'state.db'}"  # an absolute path: four slashes
    target = tmp_path / "demo" / "motd"
    manifest = tmp_path / "files.yaml"
    manifest.write_text(yaml.safe_dump(managed_file("motd", target, "managed\n", "0640")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "setpoint", "--store", store]
        argv += ["--kinds", str(EXAMPLE / "managedfile.py"), *args]
        return subprocess.run(
            argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=TIMEOUT
        )

    def ready() -> bool:
        got = cli("get", "managedfile", "motd", "-o", "json")
        condition = get_condition(json.loads(got.stdout).get("status"), READY)
        return condition is not None and condition["status"] == "True"

    controller = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "setpoint",
            "--store",
            store,
            "run",
            str(EXAMPLE / "managedfile.py"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    try:
        assert controller.stderr is not None
        log = Lines(controller.stderr)
        log.expect("manager started")

        applied = cli("apply", "-f", str(manifest))
        assert (applied.returncode, applied.stdout, applied.stderr) == (
            0,
            "managedfile.files.example.com/motd created\n",
            "",
        )
        log.expect("controller=managedfile key=motd result=success")
        wait_until(lambda: target.is_file() and target.read_text() == "managed\n", "written")
        assert mode_of(target) == 0o640
        wait_until(ready, "Ready=True in the store")
        table = cli("get", "managedfiles", "-o", "wide").stdout.splitlines()
        assert table[1].split()[:2] == ["motd", "True"]
        assert "InSync" in table[1].split()

        target.write_text("edited by hand\n")
        log.expect("motd: write")
        wait_until(lambda: target.read_text() == "managed\n", "restored")

        deleted = cli("delete", "managedfile", "motd")
        assert deleted.stdout == 'managedfile.files.example.com "motd" deleted\n'
        wait_until(lambda: not target.exists(), "file removed")
        wait_until(lambda: cli("get", "managedfile", "motd").returncode == 1, "object gone")

        controller.send_signal(signal.SIGINT)
        assert controller.wait(timeout=TIMEOUT) == 0
        assert any("manager stopped" in line for line in log.rest())
    finally:
        if controller.poll() is None:
            controller.kill()
            controller.wait()


def test_explain_answers_for_a_stalled_object_of_a_controller_run_on_its_own(
    tmp_path: Path, unwritable: Path
) -> None:
    """`setpoint run` records no timeline; explain catches the store's timeline up itself."""
    store = f"sqlite:///{tmp_path / 'state.db'}"
    manifest = tmp_path / "files.yaml"
    target = unwritable / "nested" / "motd"
    manifest.write_text(yaml.safe_dump(managed_file("nowhere", target, "x\n", "0644")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    base = [sys.executable, "-m", "setpoint", "--store", store]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [*base, "--kinds", str(EXAMPLE / "managedfile.py"), *args]
        return subprocess.run(
            argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=TIMEOUT
        )

    def stalled() -> bool:
        got = cli("get", "managedfile", "nowhere", "-o", "json")
        condition = get_condition(json.loads(got.stdout).get("status"), STALLED)
        return condition is not None and condition["status"] == "True"

    controller = subprocess.Popen(
        [*base, "run", str(EXAMPLE / "managedfile.py")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    try:
        assert controller.stderr is not None
        Lines(controller.stderr).expect("manager started")
        assert cli("apply", "-f", str(manifest)).returncode == 0
        wait_until(stalled, "Stalled=True in the store")
        explained = cli("explain", "managedfile/nowhere", "-o", "json")
        assert explained.returncode == 0, explained.stderr
        causes = json.loads(explained.stdout)
        assert causes, explained.stderr
        best = causes[0]["entry"]
        assert (best["object"]["kind"], best["object"]["name"]) == ("ManagedFile", "nowhere")
        assert "PermissionDenied" in json.dumps(best) or "not permitted" in json.dumps(best)
        # Asked again, nothing is recorded twice.
        audit = cli("timeline", "managedfile/nowhere", "--audit", "-o", "json")
        again = cli("timeline", "managedfile/nowhere", "--audit", "-o", "json")
        writes = json.loads(audit.stdout)
        assert writes == json.loads(again.stdout)
        assert [w["verb"] for w in writes][:1] == ["create"]
    finally:
        controller.send_signal(signal.SIGINT)
        try:
            controller.wait(timeout=TIMEOUT)
        finally:
            if controller.poll() is None:
                controller.kill()
                controller.wait()
