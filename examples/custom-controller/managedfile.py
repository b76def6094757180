"""The `ManagedFile` kind (files.example.com/v1, cluster-scoped) and its controller: a file on
this host that holds what the spec says.

`spec`: `path` (absolute), `content` (text), `mode` (octal, as a string: "0644").
The controller writes the file (atomically: a temporary file renamed over it),
puts it back when someone edits, chmods or deletes it, and removes it through
the finalizer `files.example.com/cleanup` when the object is deleted. Drift is
found by a resync of every object (`resync_every`) and, within about
`poll_every` seconds, by `FileWatcher`, which stats the managed paths.
`status`: `Ready` (True/InSync), and when the path cannot be written
`Ready=False` plus `Stalled` with reason `PermissionDenied` (or `NotAFile`);
`observedGeneration`, and `path`, `sha256`, `lastWritten` of the file last put.
Events: `Written`, `DriftCorrected`, `Removed`, Warning `WriteFailed`.

The controller runs on the reconciler kit (`setpoint.runtime.KitReconciler`), as the
built-in ones do: the kit reads the object and keeps its finalizer; `observe` stats and
hashes the paths (file I/O in a thread); `plan(desired, observed, now)` is pure and says,
for each path, what to do (`step_for`), with the status to record; `act` carries the steps
out; the kit writes the status if it changed, and `Stalled` when the plan (or a write that
failed for good) says so. `register(registry)` adds the kind to a registry (the CLI calls
it when given `--kinds` this file); `setup(manager)` wires the controller and the file
watcher. `setpoint run managedfile.py` calls both and runs them until Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import hashlib
import logging
import os
import re
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator

from setpoint import SYSTEM_CLOCK, Clock, Kind, Object, Registry, Schema
from setpoint.model import READY, STALLED, is_true, set_condition
from setpoint.runtime import (
    Acted,
    Cache,
    Controller,
    EventRecorder,
    KindRules,
    KitReconciler,
    Manager,
    Plan,
    PlannedEvent,
    Request,
    generation_changed,
    is_deleting,
)
from setpoint.runtime.plan import timestamp
from setpoint.store import Store

log = logging.getLogger("managedfile")

FINALIZER = "files.example.com/cleanup"


class ManagedFileSpec(Schema):
    """What the user wants: `content` in the file at `path`, with permission bits `mode`."""

    path: str
    content: str = ""
    mode: str = "0644"

    @field_validator("path")
    @classmethod
    def _absolute(cls, path: str) -> str:
        if not os.path.isabs(path) or os.path.normpath(path) != path:
            raise ValueError(f"{path!r}: want an absolute, normalised path such as /tmp/x.conf")
        return path

    @field_validator("mode", mode="before")
    @classmethod
    def _octal(cls, mode: Any) -> Any:
        if isinstance(mode, int):  # YAML reads an unquoted 0644 as the number 420
            raise ValueError(f'{mode}: write the mode as a quoted octal string, e.g. "0644"')
        if not isinstance(mode, str) or not re.fullmatch(r"[0-7]{3,4}", mode):
            raise ValueError(f'{mode!r}: want an octal mode as a string, e.g. "0644"')
        return mode


class ManagedFileStatus(Schema):
    """What the controller observed, and where and when it last put the file."""

    observed_generation: int | None = None
    conditions: list[dict[str, Any]] = Field(default_factory=list)
    path: str | None = None
    sha256: str | None = None
    last_written: str | None = None


MANAGED_FILE = Kind(
    "files.example.com/v1",
    "ManagedFile",
    spec=ManagedFileSpec,
    status=ManagedFileStatus,
    namespaced=False,  # a path names one file on the whole host
    short_names=("mf",),
)


# -- observe and plan ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Observed:
    """What is at a path: nothing, or something (a regular file has a `sha256` and `mode`)."""

    exists: bool
    sha256: str | None = None
    mode: int | None = None


@dataclass(frozen=True, slots=True)
class Desired:
    """What should be at a path: `content` with `mode`, or (content None) nothing."""

    content: str | None
    mode: int = 0o644


ABSENT = Desired(None)


class Action(StrEnum):
    NOTHING = "nothing"
    WRITE = "write"
    CHMOD = "chmod"
    REMOVE = "remove"


@dataclass(frozen=True, slots=True)
class Step:
    """What to do to one path, and why."""

    action: Action
    why: str


def digest(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


def step_for(desired: Desired, observed: Observed) -> Step:
    """What to do to one path so it holds what is desired. Pure: no I/O, no clock."""
    if desired.content is None:
        if observed.sha256 is None:  # nothing there, or not a regular file: not ours
            return Step(Action.NOTHING, "no file, as wanted")
        return Step(Action.REMOVE, "no file is wanted")
    if not observed.exists:
        return Step(Action.WRITE, "missing")
    if observed.sha256 is None:
        return Step(Action.WRITE, "not a regular file")
    if observed.sha256 != digest(desired.content):
        return Step(Action.WRITE, "content differs")
    if observed.mode != desired.mode:
        return Step(Action.CHMOD, f"mode is {observed.mode:04o}, want {desired.mode:04o}")
    return Step(Action.NOTHING, "in sync")


def desired_of(spec: ManagedFileSpec) -> Desired:
    return Desired(spec.content, int(spec.mode, 8))


@dataclass(frozen=True, slots=True)
class FileDesired:
    """What one ManagedFile asks for: its `spec` at `generation`, or (`deleting`) no file."""

    spec: ManagedFileSpec
    generation: int
    deleting: bool


def file_desired_of(obj: Object) -> FileDesired:
    meta = obj["metadata"]
    spec = ManagedFileSpec.model_validate(obj["spec"])
    return FileDesired(spec, int(meta.get("generation", 1)), is_deleting(obj))


@dataclass(frozen=True, slots=True)
class FilesObserved:
    """What is at each path the object names (its spec's, and the one its status says it
    last put), and its status as stored."""

    at: Mapping[str, Observed]
    status: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class PathStep:
    """One path's step, the desired file, and the event to record once it is done."""

    path: str
    step: Step
    desired: Desired
    event: PlannedEvent


@dataclass(frozen=True, slots=True, kw_only=True)
class FilePlan(Plan):
    """The steps to take, in order (the spec's path first, then the file it moved from),
    and (in `Plan`) the status once they are taken."""

    steps: tuple[PathStep, ...] = ()


def plan(desired: FileDesired, observed: FilesObserved, now: float) -> FilePlan:
    """What to do for one ManagedFile: each of its paths made to hold what is desired (no
    file, once it is being deleted); then `Ready` (InSync) and where the file is. Pure."""
    status = observed.status
    spec = desired.spec
    old = status.get("path")
    if desired.deleting:
        wanted = [(path, ABSENT) for path in dict.fromkeys([spec.path, old]) if path]
    else:
        wanted = [(spec.path, desired_of(spec))]
        if old and old != spec.path:  # the spec moved the file
            wanted.append((old, ABSENT))
    steps = []
    for path, want in wanted:
        step = step_for(want, observed.at.get(path, Observed(False)))
        if step.action is not Action.NOTHING:
            event = _event(status, desired, path, step)
            steps.append(PathStep(path, step, want, event))
    if desired.deleting:
        return FilePlan(steps=tuple(steps))
    new = dict(status)
    new["conditions"] = [dict(c) for c in status.get("conditions") or []]
    message = f"{spec.path} holds generation {desired.generation}"
    set_condition(new, READY, True, reason="InSync", message=message, now=now,
                  observed_generation=desired.generation)  # fmt: skip
    new["observedGeneration"] = desired.generation
    new["path"] = spec.path
    new["sha256"] = digest(spec.content)
    if steps and steps[0].path == spec.path:  # the spec's file is put now
        new["lastWritten"] = timestamp(now)
    return FilePlan(steps=tuple(steps), status=new)


def failed(
    desired: FileDesired, status: Mapping[str, Any], message: str, reason: str, now: float
) -> dict[str, Any]:
    """The status of a ManagedFile whose path could not be made right: `Ready=False`."""
    new = dict(status)
    new["conditions"] = [dict(c) for c in status.get("conditions") or []]
    set_condition(new, READY, False, reason=reason, message=message, now=now,
                  observed_generation=desired.generation)  # fmt: skip
    new["observedGeneration"] = desired.generation
    return new


def _event(status: Mapping[str, Any], desired: FileDesired, path: str, step: Step) -> PlannedEvent:
    if step.action is Action.REMOVE:
        return PlannedEvent("Removed", f"removed {path}")
    was_in_sync = (
        is_true(dict(status), READY)
        and status.get("observedGeneration") == desired.generation
        and status.get("path") == path
    )
    if was_in_sync:
        return PlannedEvent("DriftCorrected", f"{path}: {step.why}; restored")
    return PlannedEvent("Written", f"{path}: {step.action} ({step.why}), mode {desired.spec.mode}")


def observe(path: str) -> Observed:
    """Blocking: stat and hash what is at `path`."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return Observed(exists=False)
    if not stat.S_ISREG(st.st_mode):
        return Observed(exists=True)
    with open(path, "rb") as f:
        return Observed(True, hashlib.sha256(f.read()).hexdigest(), stat.S_IMODE(st.st_mode))


def carry_out(action: Action, path: str, desired: Desired) -> None:
    """Blocking: apply `action` to `path`. A write goes to a temporary file beside `path`,
    renamed over it, so nobody ever reads half a file."""
    if action is Action.REMOVE:
        os.remove(path)
    elif action is Action.CHMOD:
        os.chmod(path, desired.mode)
    elif action is Action.WRITE:
        assert desired.content is not None
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".setpoint-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(desired.content.encode())
            os.chmod(temporary, desired.mode)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(temporary)
            raise


STALLING = {
    errno.EACCES: "PermissionDenied",
    errno.EPERM: "PermissionDenied",
    errno.EROFS: "PermissionDenied",
    errno.EISDIR: "NotAFile",
    errno.ENOTDIR: "NotAFile",
    errno.EEXIST: "NotAFile",  # makedirs: a parent is a file
}
"""Errors no retry can get past (-> Stalled, with this reason); others are retried."""


# -- the reconciler -----------------------------------------------------------------


class ManagedFileReconciler(KitReconciler[FileDesired, FilesObserved, FilePlan]):
    """Makes the file of one ManagedFile match its spec (or go away once it is deleted), on
    the reconciler kit: it keeps the finalizer on until the files are gone."""

    def __init__(self, store: Store, events: EventRecorder, clock: Clock = SYSTEM_CLOCK) -> None:
        rules = KindRules(
            MANAGED_FILE, file_desired_of, self.observe, plan, self.act, finalizer=FINALIZER
        )
        super().__init__(store, rules, events, clock=clock)

    async def observe(self, obj: Object, desired: FileDesired) -> FilesObserved:
        """Stat and hash what is at each path (in a thread)."""
        status = obj.get("status") or {}
        paths = [p for p in dict.fromkeys([desired.spec.path, status.get("path")]) if p]
        at = {path: await asyncio.to_thread(observe, path) for path in paths}
        return FilesObserved(at, status)

    async def act(self, obj: Object, decided: FilePlan) -> Acted[FilePlan]:
        """Carry out each step, recording its event once done. A path that cannot be made
        right is `Ready=False` and a Warning `WriteFailed`; when no retry can get past it
        (`STALLING`), the plan stalls with that reason; otherwise the status is written
        and the error raised, to be retried with backoff."""
        assert self.events is not None
        for item in decided.steps:
            try:
                await asyncio.to_thread(carry_out, item.step.action, item.path, item.desired)
            except OSError as exc:
                return await self._failed(obj, decided, item, exc)
            log.info("%s: %s %s (%s)", obj["metadata"]["name"], item.step.action, item.path,
                     item.step.why)  # fmt: skip
            await self.events.normal(obj, item.event.reason, item.event.message)
        return Acted(obj, decided)

    async def _failed(
        self, obj: Object, decided: FilePlan, item: PathStep, exc: OSError
    ) -> Acted[FilePlan]:
        assert self.events is not None
        verb = "write" if item.desired.content is not None else "remove"
        detail = exc.strerror or str(exc)
        if exc.filename and item.path.startswith(f"{exc.filename}/"):  # a directory on the way
            detail = f"{exc.filename}: {detail}"
        message = f"cannot {verb} {item.path}: {detail}"
        reason = STALLING.get(exc.errno or 0)
        await self.events.warning(obj, "WriteFailed", message)
        desired = file_desired_of(obj)
        status = failed(desired, obj.get("status") or {}, message, reason or "WriteFailed",
                        self.clock.now())  # fmt: skip
        if reason is None:
            await self.write_status(obj, status)
            raise exc
        return Acted(obj, dataclasses.replace(decided, status=status, stall=(reason, message)))


# -- the file watcher ----------------------------------------------------------------


class FileWatcher:
    """A runnable that notices, within `every` seconds, when a managed file is edited,
    chmodded or deleted, and enqueues its ManagedFile.

    Each round it stats every managed path (stdlib only, no inotify). When a path's
    stat or its object's resourceVersion changed since the last round, it observes
    and plans, and enqueues only if there is something to do: the controller's own
    writes wake nothing, and each of them (a new `lastWritten`) makes the next round
    look again. Stalled objects wait for a change to their spec, or the resync,
    which also catches what a stat cannot see (same size and timestamps).
    """

    def __init__(
        self, cache: Cache, controller: Controller, *, every: float, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.cache = cache
        self.controller = controller
        self.every = every
        self.clock = clock
        self._seen: dict[str, tuple[object, ...]] = {}

    async def run(self) -> None:
        while True:
            await self.check()
            await self.clock.sleep(self.every)

    async def check(self) -> None:
        seen: dict[str, tuple[object, ...]] = {}
        for namespace, name in self.cache:
            obj = self.cache.get(name, namespace)
            if obj is None or is_deleting(obj) or is_true(obj.get("status"), STALLED):
                continue
            path = obj["spec"]["path"]
            seen[path] = (obj["metadata"]["resourceVersion"], *_signature(path))
            if self._seen.get(path) == seen[path]:
                continue
            try:
                desired = desired_of(ManagedFileSpec.model_validate(obj["spec"]))
                step = step_for(desired, await asyncio.to_thread(observe, path))
                drifted = step.action is not Action.NOTHING
            except OSError:  # unreadable: the reconciler will say why
                drifted = True
            if drifted:
                self.controller.enqueue(Request(name, namespace))
        self._seen = seen


def _signature(path: str) -> tuple[int, ...]:
    try:
        st = os.stat(path)
    except OSError as exc:
        return (exc.errno or -1,)
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


# -- wiring -------------------------------------------------------------------------


def register(registry: Registry) -> None:
    """Add the ManagedFile kind to `registry` (what `--kinds` calls)."""
    registry.register(MANAGED_FILE)


@dataclass(frozen=True, slots=True)
class Settings:
    """How often every object is looked at again (`resync_every`) and the managed paths
    are statted (`poll_every`), in seconds."""

    resync_every: float = 30.0
    poll_every: float = 0.5


def setup(manager: Manager, settings: Settings | None = None) -> Controller:
    """Add the ManagedFile controller and its file watcher to `manager`; return the controller."""
    settings = settings or Settings()
    events = EventRecorder(manager.store, "managedfile-controller", clock=manager.clock)
    controller = (
        manager.controller("managedfile")
        .for_(MANAGED_FILE, predicates=[generation_changed])
        .resync_every(settings.resync_every)
        .complete(ManagedFileReconciler(manager.store, events, manager.clock))
    )
    watcher = FileWatcher(
        manager.cache(MANAGED_FILE), controller, every=settings.poll_every, clock=manager.clock
    )
    manager.add_runnable(watcher.run)
    return controller
