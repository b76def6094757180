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

Each reconcile gets the object typed (`Typed[ManagedFileSpec, ManagedFileStatus]`: the
runtime reads it, and writes what the reconcile set in its status, if anything changed),
and is observe (file I/O in a thread) -> `plan` (pure: desired and observed in, a `Plan`
out) -> apply. `register(registry)` adds the kind to a registry (the CLI calls it when
given `--kinds` this file); `setup(manager)` wires the controller and the file watcher.
`setpoint run managedfile.py` calls both and runs them until Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import logging
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator

from setpoint import SYSTEM_CLOCK, Clock, Kind, Registry, Schema, TerminalError, Typed
from setpoint.model import READY, STALLED, is_true, set_condition
from setpoint.runtime import (
    Cache,
    Controller,
    EventRecorder,
    Manager,
    Request,
    add_finalizer,
    generation_changed,
    has_finalizer,
    is_deleting,
    remove_finalizer,
)
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
class Plan:
    action: Action
    why: str


def digest(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


def plan(desired: Desired, observed: Observed) -> Plan:
    """What to do to one path so it holds what is desired. Pure: no I/O, no clock."""
    if desired.content is None:
        if observed.sha256 is None:  # nothing there, or not a regular file: not ours
            return Plan(Action.NOTHING, "no file, as wanted")
        return Plan(Action.REMOVE, "no file is wanted")
    if not observed.exists:
        return Plan(Action.WRITE, "missing")
    if observed.sha256 is None:
        return Plan(Action.WRITE, "not a regular file")
    if observed.sha256 != digest(desired.content):
        return Plan(Action.WRITE, "content differs")
    if observed.mode != desired.mode:
        return Plan(Action.CHMOD, f"mode is {observed.mode:04o}, want {desired.mode:04o}")
    return Plan(Action.NOTHING, "in sync")


def desired_of(spec: ManagedFileSpec) -> Desired:
    return Desired(spec.content, int(spec.mode, 8))


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


ManagedFile = Typed[ManagedFileSpec, ManagedFileStatus]
"""One ManagedFile as the reconciler gets it: `spec` and `status` as the models above."""


class ManagedFileReconciler:
    """Makes the file of one ManagedFile match its spec (or go away once it is deleted).

    It takes typed objects (its parameter is `Typed[...]`): the runtime reads the object,
    and writes what `reconcile` changed in `obj.status` once it returns or raises, only if
    anything changed."""

    def __init__(self, store: Store, events: EventRecorder, clock: Clock = SYSTEM_CLOCK) -> None:
        self.store = store
        self.events = events
        self.clock = clock

    async def reconcile(self, obj: ManagedFile) -> None:
        if is_deleting(obj.raw):
            if has_finalizer(obj.raw, FINALIZER):
                for path in dict.fromkeys([obj.spec.path, obj.status.path]):
                    if path:
                        await self._converge(obj, path, ABSENT)
                remove_finalizer(obj.raw, FINALIZER)
                await self.store.update(obj.raw)  # the last finalizer: the object goes
            return
        if add_finalizer(obj.raw, FINALIZER):
            obj.raw = await self.store.update(obj.raw)
        path, desired = obj.spec.path, desired_of(obj.spec)
        done = await self._converge(obj, path, desired)
        if obj.status.path and obj.status.path != path:  # the spec moved the file
            await self._converge(obj, obj.status.path, ABSENT)
        generation = obj.metadata["generation"]
        written = done.action is not Action.NOTHING
        self._set_ready(obj, True, "InSync", f"{path} holds generation {generation}", written)

    async def _converge(self, obj: ManagedFile, path: str, desired: Desired) -> Plan:
        """Observe `path`, plan, apply; record what was done (or why it could not be)."""
        try:
            step = plan(desired, await asyncio.to_thread(observe, path))
            if step.action is not Action.NOTHING:
                await asyncio.to_thread(carry_out, step.action, path, desired)
        except OSError as exc:
            verb = "write" if desired.content is not None else "remove"
            detail = exc.strerror or str(exc)
            if exc.filename and path.startswith(f"{exc.filename}/"):  # a directory on the way
                detail = f"{exc.filename}: {detail}"
            message = f"cannot {verb} {path}: {detail}"
            reason = STALLING.get(exc.errno or 0)
            await self.events.warning(obj.raw, "WriteFailed", message)
            self._set_ready(obj, False, reason or "WriteFailed", message)
            if reason:
                raise TerminalError(message, reason=reason) from exc
            raise
        if step.action is not Action.NOTHING:
            log.info("%s: %s %s (%s)", obj.name, step.action, path, step.why)
            await self.events.normal(obj.raw, *self._event(obj, path, step))
        return step

    @staticmethod
    def _event(obj: ManagedFile, path: str, step: Plan) -> tuple[str, str]:
        if step.action is Action.REMOVE:
            return "Removed", f"removed {path}"
        was_in_sync = (
            is_true({"conditions": obj.status.conditions}, READY)
            and obj.status.observed_generation == obj.metadata["generation"]
            and obj.status.path == path
        )
        if was_in_sync:
            return "DriftCorrected", f"{path}: {step.why}; restored"
        return "Written", f"{path}: {step.action} ({step.why}), mode {obj.spec.mode}"

    def _set_ready(
        self, obj: ManagedFile, ready: bool, reason: str, message: str, written: bool = False
    ) -> None:
        """Set `Ready` and what goes with it in `obj.status` (the runtime writes it)."""
        generation = obj.metadata["generation"]
        now = self.clock.now()
        set_condition(  # changes the list in place; the status keeps it
            {"conditions": obj.status.conditions},
            READY,
            ready,
            reason=reason,
            message=message,
            now=now,
            observed_generation=generation,
        )
        obj.status.observed_generation = generation
        if ready:
            obj.status.path = obj.spec.path
            obj.status.sha256 = digest(obj.spec.content)
        if written:
            when = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
            obj.status.last_written = when.replace("+00:00", "Z")


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
                step = plan(desired, await asyncio.to_thread(observe, path))
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


def setup(manager: Manager, *, resync_every: float = 30.0, poll_every: float = 0.5) -> Controller:
    """Add the ManagedFile controller and its file watcher to `manager`; return the controller."""
    events = EventRecorder(manager.store, "managedfile-controller", clock=manager.clock)
    controller = (
        manager.controller("managedfile")
        .for_(MANAGED_FILE, predicates=[generation_changed])
        .resync_every(resync_every)
        .complete(ManagedFileReconciler(manager.store, events, manager.clock))
    )
    watcher = FileWatcher(
        manager.cache(MANAGED_FILE), controller, every=poll_every, clock=manager.clock
    )
    manager.add_runnable(watcher.run)
    return controller
