"""The recorder: turns what happens in the store and in managed processes' logs into
timeline entries (`setpoint.insight.timeline`).

What it records, per object of every registered kind (but `Lease`, whose renewals
are no news), each entry stamped with the time the recorder saw it:

* `write`: every write, the audit trail (from the watch, or, for writes made while the
  recorder was not watching, from the store's history while it keeps them): its
  `verb` (`create`, `update`, `update_status`, `patch`, `delete`), `revision`, and the
  `user`, `manager` and `agent` the write named (`setpoint.store.base.Actor`; null when
  it named none, as a controller writing to its store directly);
* `change`: spec, labels, annotations or deletion mark changed (`diff` of dotted
  paths, `[old, new]`), with `action` `created` / `updated` / `deleted` and the
  `actor`: the user (else the field manager) the write itself names, for a write seen
  by the watch; else the `setpoint.dev/changed-by` annotation when the write set it (a
  controller naming itself, e.g. `controller/deployment`), else `controller` or
  `unknown` (`actor_of`; an owned object removed by a write that names nobody:
  `controller`). An edit of an env file a Process's or Job's child read (its
  `status.envFiles` item's `changedAt` moved: the controller looks at the files) is a
  `change` of that object too, an input change: `envFile[PATH].KEY` paths (`envFile[PATH]`
  when the keys are not known), values hidden, actor `unknown`, `input: envFile`;
* `condition`: a condition's status or reason changed (probe results show here:
  `Ready` with reason `ReadinessProbeFailed` ...);
* `exit`: `status.lastExit` changed (code, signal, reason, message, `stoppedOnRequest`,
  and the last lines of the child's log);
* `edge`: a `spec.dependsOn` entry, an owner reference or a Secret the env reads (`uses`)
  appeared, or a `spec.scaleTargetRef` (an Autoscaler's: its target `uses` it);
* `event`: an `Event` was created or repeated, filed under its involved object;
* `log`: a line of a managed child's log (`<log_dir>/<namespace>_<name>.log`), when
  its template (`setpoint.insight.templates.TemplateMiner`) is new, when it reads as
  an error (ERROR, FATAL, panic, Traceback ...; rate-limited), and a few samples per
  template per minute.

Secrets: a kind's secret fields (`Kind.secret_fields`, a Secret's `data`) are never
recorded. The recorder keeps a fingerprint of each value (a hash salted with the object's
uid) to tell that it changed, and its entries say only which keys changed (`(hidden)` ->
`(changed)`). Every value of those fields it has seen is masked (`***`,
`setpoint.model.redaction`) in everything it writes: log lines, exit reasons and lines,
messages. Log lines are taken only once the first list has shown every Secret.

How: one watch of every kind from the store, after a list of each (and again after
`Gone`), whose changes carry their writers; the writes a list cannot show (made while the
recorder was not watching) are read from the store's history after the last revision
recorded, while it is kept: each is audited, and what the list finds changed is attributed
to the writer of its revision; the
last view of each object (a small projection, `project`) is kept in
memory and, with the last revision recorded, saved in the timeline as its
checkpoint, so a restarted recorder diffs what it finds against what it last saw
and misses no change it could observe (it sees the state a change left, not
every intermediate write it slept through). Entries are written in batches (every
`flush_interval` or `batch_size` entries, one transaction) from a worker thread, each with
the checkpoint it was read from: a recorder that finds it moved (another recorded meanwhile)
reads it again and relists. One recorder keeps a timeline at a time (`run` claims it and
says so every `RECORDING_WORD` / 3 seconds); when none does, readers call `catch_up`, the
same resync once, so what any client or controller wrote is on the timeline.

The decisions (`project`, `entries_for`, `diff_paths`, `actor_of`, `write_entry`,
`LogSampler`) are pure, in `setpoint.insight.recording`; this module does the I/O:
`Recorder` (the store's watch, the timeline's batches) and `LogTailer` (the logs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
from collections import deque
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Gone, Invalid, StoreClosed, UnknownKind
from setpoint.insight.dir_changes import DirectoryChanges
from setpoint.insight.recording import (
    LogSampler,
    Snapshot,
    entries_for,
    is_error_line,
    object_ref,
    project,
    write_entry,
)
from setpoint.insight.templates import TemplateMiner
from setpoint.insight.timeline import (
    Checkpoint,
    CheckpointMoved,
    Entry,
    Timeline,
    TimelineBackend,
)
from setpoint.model import Object
from setpoint.model.redaction import Redactor, secret_values
from setpoint.model.wellknown import child_name
from setpoint.runtime.manager import Manager
from setpoint.store.base import Actor, Store, Verb, WatchEvent

log = logging.getLogger("setpoint.insight.recorder")

IGNORED_KINDS = frozenset({"Lease"})
"""Kinds whose writes are not recorded: a Lease is renewed every few seconds."""

RECORDING_WORD = 30.0
"""Seconds for which a live recorder's word that it keeps the timeline holds
(`Timeline.mark_recording`); it says so again every third of that."""

HISTORY_WAIT = 5.0
"""Seconds a resync may spend reading the store's history for the writes it did not watch
(`Recorder._missed_writes`)."""

_MAX_LINE = 64 * 1024
"""Bytes of a log line without a newline after which it is taken as one line anyway."""


# -- I/O: following log files -----------------------------------------------------


@dataclass
class _Followed:
    inode: int
    offset: int
    handle: Any
    partial: bytes = b""
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=20))


class LogTailer:
    """Follows every `*.log` in a directory as `tail -F` does: through rotation (the old
    file is read to its end first) and truncation. Files present when it is made are
    followed from their end; files that appear later, from their start.

    A `poll()` reads only the files the kernel said changed since the last one
    (`setpoint.insight.dir_changes`), and every file when it cannot say, and on every
    `FULL_LOOK_POLLS`th poll: a thousand idle logs cost no `stat` each time."""

    FULL_LOOK_POLLS = 240
    """Every this many polls (a minute at the recorder's pace) one looks at every file."""

    def __init__(self, log_dir: Path, *, max_read: int = 1 << 20) -> None:
        self.log_dir = Path(log_dir)
        self.max_read = max_read
        self._files: dict[str, _Followed] = {}
        self._skip: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()
        self._changes = DirectoryChanges(self.log_dir)  # before the first look: no gap
        self._polls = 0
        for path in self._paths():
            with contextlib.suppress(OSError):
                st = path.stat()
                self._skip[path.stem] = (st.st_ino, st.st_size)

    def _paths(self) -> list[Path]:
        try:
            return sorted(p for p in self.log_dir.iterdir() if p.suffix == ".log")
        except OSError:
            return []

    def _changed_stems(self) -> list[str]:
        """The stems of the logs to look at now: those reported changed (a rotated backup,
        `NAME.log.1`, counts as `NAME`), or all of them."""
        with self._lock:
            names = self._changes.take()
        self._polls += 1
        if names is None or self._polls % self.FULL_LOOK_POLLS == 0:
            return [path.stem for path in self._paths()]
        stems = set()
        for name in names:
            head, _, backup = name.rpartition(".")
            if name.endswith(".log"):
                stems.add(name[:-4])
            elif backup.isdigit() and head.endswith(".log"):
                stems.add(head[:-4])
        stems.discard("")
        return sorted(stems)

    def poll(self) -> list[tuple[str, str]]:
        """New complete lines of every file: (file stem, line), in file order."""
        out: list[tuple[str, str]] = []
        for stem in self._changed_stems():
            out += self.poll_one(stem)
        return out

    def poll_one(self, stem: str) -> list[tuple[str, str]]:
        """New complete lines of `<stem>.log` (thread-safe: the recorder reads a file at
        once when its process exits, while its worker thread polls them all)."""
        with self._lock:
            return self._poll_one(stem)

    def _poll_one(self, stem: str) -> list[tuple[str, str]]:
        path = self.log_dir / f"{stem}.log"
        try:
            st = path.stat()
        except OSError:
            return []
        followed = self._files.get(stem)
        lines: list[tuple[str, str]] = []
        if followed is not None and followed.inode != st.st_ino:
            lines += self._read(stem, followed)  # rotated: finish the old file first
            followed.handle.close()
            recent = followed.recent
            followed = None
        else:
            recent = None
        if followed is None:
            try:
                handle = open(path, "rb")  # noqa: SIM115 - closed by close()
            except OSError:
                return lines
            start = 0
            skip = self._skip.pop(stem, None)
            if skip is not None and skip[0] == st.st_ino:
                start = min(skip[1], st.st_size)
            handle.seek(start)
            followed = _Followed(st.st_ino, start, handle)
            if recent is not None:
                followed.recent = recent
            self._files[stem] = followed
        elif st.st_size < followed.offset:  # truncated
            followed.handle.seek(0)
            followed.offset = 0
            followed.partial = b""
        lines += self._read(stem, followed)
        return lines

    def _read(self, stem: str, followed: _Followed) -> list[tuple[str, str]]:
        data = followed.handle.read(self.max_read)
        if not data:
            return []
        followed.offset += len(data)
        chunks = (followed.partial + data).split(b"\n")
        followed.partial = chunks.pop()
        if len(followed.partial) > _MAX_LINE:  # no end in sight: a line of its own
            chunks.append(followed.partial)
            followed.partial = b""
        lines = [c.decode("utf-8", "replace").rstrip("\r") for c in chunks]
        followed.recent.extend(lines)
        return [(stem, line) for line in lines]

    def recent(self, stem: str, count: int) -> list[str]:
        """The last `count` lines read from `stem`'s log."""
        with self._lock:
            followed = self._files.get(stem)
            return list(followed.recent)[-count:] if followed is not None else []

    def close(self) -> None:
        with self._lock:
            for followed in self._files.values():
                followed.handle.close()
            self._files.clear()
            self._changes.close()


# -- I/O: the recorder ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecorderSettings:
    """How often and how much the recorder writes, and what it keeps."""

    flush_interval: float = 0.1
    batch_size: int = 500
    log_poll_interval: float = 0.25
    max_age_s: float | None = 7 * 24 * 3600.0
    max_entries: int | None = 1_000_000
    prune_interval: float = 300.0
    samples_per_minute: int = 3
    errors_per_minute: int = 60
    exit_lines: int = 10
    """Lines of a child's log attached to its `exit` entry."""


_Key = tuple[str, str, str, str]
"""(apiVersion, kind, namespace, name)."""

_LOG_WRITERS = ("Process", "Job")
"""Kinds whose children write `<log_dir>/<namespace>_<name>.log`, first the likelier."""


class Recorder:
    """Watches the store (and the log directory) and appends to a timeline; see the module
    docstring. `run()` once per instance; cancelling it writes what is pending.

    One recorder keeps a timeline at a time (`Timeline.claim_recording`): `run()` stands by
    while another one's word holds, unless `take_over` (its caller knows it is the store's
    one engine, so the other is gone)."""

    def __init__(
        self,
        store: Store,
        timeline: TimelineBackend,
        *,
        log_dir: Path | None = None,
        clock: Clock = SYSTEM_CLOCK,
        settings: RecorderSettings = RecorderSettings(),
        close_timeline: bool = False,
        take_over: bool = False,
    ) -> None:
        self.store = store
        self.timeline = timeline
        self.clock = clock
        self.settings = settings
        self.tailer = LogTailer(log_dir) if log_dir is not None else None
        self._miners: dict[str, TemplateMiner] = {}  # one per log file
        self._close_timeline = close_timeline
        self._seen: dict[_Key, Snapshot] = {}
        self._workloads: dict[tuple[str, str], set[str]] = {}  # (namespace, name) -> kinds
        self._dirty: set[_Key] = set()
        self._pending: list[Entry] = []
        self._revision = 0
        self._saved = 0  # the checkpoint revision in the timeline, as this recorder left it
        self._id = random.getrandbits(52)  # names it in the timeline (exact as a float)
        self._claimed = False
        self._take_over = take_over
        self._moved = asyncio.Event()  # another recorder saved a checkpoint: start over
        self._listed_at: dict[tuple[str, str], int] = {}
        self._wake = asyncio.Event()
        self._watching = asyncio.Event()
        self._sampler = LogSampler(settings.samples_per_minute, settings.errors_per_minute)
        self._secret_values: set[str] = set()  # every secret value seen: masked in entries
        self._redactor = Redactor(())
        self.recorded = 0
        """Entries written so far."""

    async def run(self) -> None:
        try:
            while not await self._claim():  # another engine's recorder keeps this timeline
                await self.clock.sleep(RECORDING_WORD / 3)
            await self._load_checkpoint()
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._follow_store())
                tasks.create_task(self._flush_loop())
                tasks.create_task(self._say_recording())
                if self.tailer is not None:
                    tasks.create_task(self._follow_logs())
                if self.settings.max_age_s is not None or self.settings.max_entries is not None:
                    tasks.create_task(self._prune_loop())
        finally:
            try:
                self._flush_now()
                if self._claimed:  # no longer recording: readers catch up from here
                    self.timeline.claim_recording(self._id, self.clock.now())
            except Exception as exc:
                log.warning("timeline recorder: could not write on the way out (%s)", exc)
            finally:
                if self.tailer is not None:
                    self.tailer.close()
                if self._close_timeline:
                    self.timeline.close()

    async def _claim(self) -> bool:
        until = self.clock.now() + RECORDING_WORD
        try:
            self._claimed = await asyncio.to_thread(
                self.timeline.claim_recording, self._id, until, force=self._take_over
            )
        except Exception as exc:
            log.warning("timeline recorder: could not say it records (%s)", exc)
        return self._claimed

    async def catch_up(self) -> int:
        """Record, once, what the store shows that the timeline does not (every write it
        still keeps after the timeline's checkpoint, and the state its lists find), and
        return how many entries that took; 0 when a live recorder keeps the timeline, or
        another catch-up won the race to record the same stretch."""
        if await asyncio.to_thread(self.timeline.recording):
            return 0
        if await self.store.revision() <= await asyncio.to_thread(self.timeline.revision):
            return 0  # nothing written since (the common case: asked twice)
        await self._load_checkpoint()
        await self._resync()
        batch, checkpoint = self._take()
        try:
            return await asyncio.to_thread(
                self.timeline.append_many, batch, checkpoint, after=self._saved
            )
        except CheckpointMoved:
            return 0

    async def _load_checkpoint(self) -> None:
        """Start from the timeline's checkpoint: what it says was last seen of each object,
        and the revision recorded up to (nothing pending)."""
        checkpoint = await asyncio.to_thread(self.timeline.checkpoint)
        self._seen.clear()
        self._workloads.clear()
        self._pending, self._dirty = [], set()
        self._revision = self._saved = checkpoint.revision if checkpoint is not None else 0
        for text, snap in (checkpoint.seen if checkpoint is not None else {}).items():
            self._remember(_parse_key(text), snap, dirty=False)

    async def _say_recording(self) -> None:
        while True:
            await self.clock.sleep(RECORDING_WORD / 3)
            if not await self._claim():
                # Stalled past its word: another recorder took over. The checkpoint keeps the
                # two from recording one stretch twice (`_flush_loop` starts over).
                log.warning("timeline recorder: another recorder took the timeline over")

    async def wait_watching(self) -> None:
        """Return once the first list is recorded and every later change will be seen."""
        await self._watching.wait()

    # -- the store ----------------------------------------------------------------

    async def _follow_store(self) -> None:
        """List and watch the store; from the top when another recorder moved the
        checkpoint (`_flush_loop` has read it again by then)."""
        while True:
            self._moved.clear()
            follow = asyncio.ensure_future(self._list_and_watch())
            moved = asyncio.ensure_future(self._moved.wait())
            try:
                await asyncio.wait([follow, moved], return_when=asyncio.FIRST_COMPLETED)
            finally:
                moved.cancel()
                if not follow.done():
                    follow.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await follow
            if not self._moved.is_set():
                return follow.result()

    async def _list_and_watch(self) -> None:
        while True:
            try:
                since = await self._resync()
                self._watching.set()
                async for change in self.store.watch(None, None, since=since):
                    self._observe(
                        change.object,
                        change.revision,
                        deleted=change.type == "DELETED",
                        verb=change.verb,
                        actor=change.actor,
                    )
                return
            except Gone:
                log.info("timeline recorder: watch history expired; relisting")
            except StoreClosed:
                return
            except Exception:
                # A recording problem must not stop the engine: note it, relist, go on.
                log.exception("timeline recorder: list/watch failed; relisting in 1s")
                await self.clock.sleep(1.0)

    async def _resync(self) -> int:
        """List every kind; record the difference from what was seen; return the revision to
        watch from (the smallest of the lists)."""
        revisions: list[int] = []
        listed: set[tuple[str, str]] = set()
        present: set[_Key] = set()
        found: list[tuple[Object, _Key, int]] = []
        for kind in list(self.store.registry):
            if kind.kind in IGNORED_KINDS:
                continue
            items, revision = await self.store.list(kind.api_version, kind.kind)
            revisions.append(revision)
            listed.add((kind.api_version, kind.kind))
            self._listed_at[(kind.api_version, kind.kind)] = revision
            for item in items:
                key = _key_of(item)
                present.add(key)
                rv = int((item.get("metadata") or {}).get("resourceVersion") or 0)
                found.append((item, key, rv))
        unseen = {
            (key, rv)
            for _, key, rv in found
            if rv > int((self._seen.get(key) or {}).get("revision") or 0)
        }
        since = min([self._revision, *(rv - 1 for _, rv in unseen)])
        watch_from = min(revisions, default=0)
        writers, missed = await self._missed_writes(
            since, max(revisions, default=0), unseen, watch_from
        )
        self._add(missed)
        for item, key, rv in found:
            verb, actor = writers.get((key, rv), (None, None))
            self._observe(item, rv, deleted=False, listing=True, verb=verb, actor=actor)
        self._revision = max([self._revision, *revisions])
        for key in [k for k in self._seen if (k[0], k[1]) in listed and k not in present]:
            old = self._seen[key]
            self._remember(key, None)
            self._add(entries_for(old, None, now=self.clock.now()))
        self._wake.set()
        return min(revisions, default=await self.store.revision())

    async def _missed_writes(
        self, since: int, until: int, listed: set[tuple[_Key, int]], watch_from: int
    ) -> tuple[dict[tuple[_Key, int], tuple[Verb | None, Actor | None]], list[Entry]]:
        """The writes after `since` up to `until`, read from the store's history: the audit
        entry of each that no watch of this recorder sees (it was not running, or relisted;
        the watch from `watch_from` audits what `_observe` takes), and the verb and actor of
        those that left `listed` objects (key, revision) as the list found them. Nothing for
        history that is gone (compacted) or that cannot be read within `HISTORY_WAIT`
        seconds."""
        writers: dict[tuple[_Key, int], tuple[Verb | None, Actor | None]] = {}
        audit: list[Entry] = []
        if since >= until:
            return writers, audit
        events = cast(AsyncGenerator[WatchEvent, None], self.store.watch(None, None, since=since))
        now = self.clock.now()
        try:
            async with asyncio.timeout(HISTORY_WAIT), contextlib.aclosing(events):
                async for event in events:
                    key = _key_of(event.object)
                    if (key, event.revision) in listed:
                        writers[(key, event.revision)] = (event.verb, event.actor)
                    watched = event.revision > max(
                        watch_from, self._listed_at.get((key[0], key[1]), 0)
                    )
                    if event.verb is not None and key[1] not in IGNORED_KINDS and not watched:
                        ref = object_ref(key[1], key[3], key[2] or None)
                        audit.append(write_entry(now, ref, event.revision, event.verb, event.actor))
                    if event.revision >= until:
                        break
        except (Gone, TimeoutError):
            pass
        return writers, audit

    def _observe(
        self,
        obj: Object,
        revision: int,
        *,
        deleted: bool,
        listing: bool = False,
        verb: Verb | None = None,
        actor: Actor | None = None,
    ) -> None:
        """Record what `obj` (at `revision`) changed since it was last seen; a change the
        watch shows comes with the `verb` and `actor` of its write (None: not known)."""
        api_version, kind = str(obj.get("apiVersion")), str(obj.get("kind"))
        if kind in IGNORED_KINDS:
            return
        if not listing and revision <= self._listed_at.get((api_version, kind), 0):
            return  # the list already showed this
        key = _key_of(obj)
        old = self._seen.get(key)
        if old is not None and revision <= int(old.get("revision") or 0) and not listing:
            return
        secret_fields = self._secret_fields(api_version, kind)
        if secret_fields and not deleted:
            self._learn_secrets(secret_values(obj, secret_fields))
        new = None if deleted else project(obj, revision, secret_fields)
        if old is not None and new is not None and revision <= int(old.get("revision") or 0):
            return  # listing an object already seen at this revision
        exited = new is not None and new.get("lastExit") not in (None, (old or {}).get("lastExit"))
        if exited:
            self._read_log_of(key)  # its last lines go first, and onto the exit entry
        now = self.clock.now()
        entries = entries_for(old, new, now=now)
        for entry in entries:
            if entry["type"] == "exit":
                entry["lines"] = self._recent_lines(key)
            elif entry["type"] == "change" and actor is not None and "input" not in entry:
                entry["actor"] = actor.name()
        if verb is not None and not listing:  # a listing's writes: `_missed_writes`
            ref = object_ref(kind, key[3], key[2] or None)
            entries.insert(0, write_entry(now, ref, revision, verb, actor))
        self._remember(key, new)
        self._revision = max(self._revision, revision)
        self._add(entries)

    def _secret_fields(self, api_version: str, kind: str) -> tuple[str, ...]:
        try:
            return self.store.registry.get(api_version, kind).secret_fields
        except UnknownKind:
            return ()

    def _learn_secrets(self, values: set[str]) -> None:
        """Mask `values` too from now on (values once seen stay masked: a child may still
        hold a Secret's old value)."""
        if not values <= self._secret_values:
            self._secret_values |= values
            self._redactor = Redactor(self._secret_values)

    def _read_log_of(self, key: _Key) -> None:
        if self.tailer is not None:
            for source, line in self.tailer.poll_one(_log_stem(key)):
                self._log_line(source, line)

    def _recent_lines(self, key: _Key) -> list[str]:
        if self.tailer is None:
            return []
        return self.tailer.recent(_log_stem(key), self.settings.exit_lines)

    # -- logs -----------------------------------------------------------------------

    async def _follow_logs(self) -> None:
        assert self.tailer is not None
        await self._watching.wait()  # every Secret known first, so its values are masked
        while True:
            try:
                for source, line in await asyncio.to_thread(self.tailer.poll):
                    self._log_line(source, line)
            except Exception:
                log.exception("timeline recorder: could not read the logs")
            await self.clock.sleep(self.settings.log_poll_interval)

    def _log_line(self, source: str, line: str) -> None:
        if not line.strip():
            return
        miner = self._miners.get(source)
        if miner is None:
            miner = self._miners[source] = TemplateMiner()
        mined = miner.add(line)
        now = self.clock.now()
        why = self._sampler.keep(
            source, mined.template_id, mined.first_seen, is_error_line(line), now
        )
        if why is None:
            return
        self._add(
            [
                {
                    "ts": now,
                    "type": "log",
                    "object": self._log_owner(source),
                    "line": line,
                    "template": mined.template,
                    "kept": why,
                }
            ]
        )

    def _remember(self, key: _Key, snap: Snapshot | None, *, dirty: bool = True) -> None:
        """Keep `snap` as the last view of `key` (None: gone), to save with the next batch."""
        kinds = self._workloads.setdefault((key[2], key[3]), set())
        if snap is None:
            self._seen.pop(key, None)
            kinds.discard(key[1])
        else:
            self._seen[key] = snap
            if key[1] in _LOG_WRITERS:
                kinds.add(key[1])
        if not kinds:
            del self._workloads[(key[2], key[3])]
        if dirty:
            self._dirty.add(key)

    def _log_owner(self, source: str) -> dict[str, Any]:
        """The object whose child writes `<namespace>_<name>.log` (a Process, else a Job)."""
        namespace, _, name = source.partition("_")
        if not name:
            namespace, name = "default", source
        kinds = self._workloads.get((namespace, name), set())
        kind = next((k for k in _LOG_WRITERS if k in kinds), _LOG_WRITERS[0])
        return object_ref(kind, name, namespace)

    # -- writing ----------------------------------------------------------------------

    def _add(self, entries: list[Entry]) -> None:
        if entries:
            self._pending += [self._redactor.value(e) for e in entries]
            if len(self._pending) >= self.settings.batch_size:
                self._wake.set()

    def _take(self) -> tuple[list[Entry], Checkpoint]:
        batch, self._pending = self._pending, []
        dirty, self._dirty = self._dirty, set()
        seen = {_format_key(k): self._seen.get(k) for k in dirty}
        return batch, Checkpoint(self._revision, seen)

    async def _flush_loop(self) -> None:
        while True:
            await self._wait_flush()
            if not self._pending and not self._dirty:
                continue
            batch, checkpoint = self._take()
            try:
                self.recorded += await asyncio.to_thread(
                    self.timeline.append_many, batch, checkpoint, after=self._saved
                )
                self._saved = checkpoint.revision
            except CheckpointMoved as exc:
                log.info("timeline recorder: %s (another recorder); starting over", exc)
                await self._load_checkpoint()
                self._moved.set()
            except Exception as exc:
                log.warning("timeline recorder: could not write %d entries (%s)", len(batch), exc)
                self._pending[:0] = batch  # try again with the next batch
                self._dirty |= {_parse_key(k) for k in checkpoint.seen}

    async def _wait_flush(self) -> None:
        """Until `flush_interval` has passed (on the clock) or a full batch is waiting."""
        waits = [
            asyncio.ensure_future(self.clock.sleep(self.settings.flush_interval)),
            asyncio.ensure_future(self._wake.wait()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        self._wake.clear()

    def _flush_now(self) -> None:
        if self._pending or self._dirty:
            batch, checkpoint = self._take()
            try:
                self.recorded += self.timeline.append_many(batch, checkpoint, after=self._saved)
                self._saved = checkpoint.revision
            except Exception as exc:
                log.warning(
                    "timeline recorder: lost %d entries on the way out (%s)", len(batch), exc
                )

    async def _prune_loop(self) -> None:
        while True:
            await self.clock.sleep(self.settings.prune_interval)
            try:
                await asyncio.to_thread(
                    self.timeline.prune, self.settings.max_age_s, self.settings.max_entries
                )
            except Exception as exc:
                log.warning("timeline recorder: could not prune (%s)", exc)


def _key_of(obj: Object) -> _Key:
    meta = obj.get("metadata") or {}
    return (
        str(obj.get("apiVersion")),
        str(obj.get("kind")),
        str(meta.get("namespace") or ""),
        str(meta.get("name")),
    )


def _log_stem(key: _Key) -> str:
    """The log file's stem of a Process's or Job's child."""
    return child_name(key[2], key[3])


def _format_key(key: _Key) -> str:
    return " ".join(key)


def _parse_key(text: str) -> _Key:
    api_version, kind, namespace, name = text.split(" ")
    return (api_version, kind, namespace, name)


def setup(
    manager: Manager,
    *,
    store_url: str,
    log_dir: Path | None,
    settings: RecorderSettings = RecorderSettings(),
    take_over: bool = False,
) -> Recorder:
    """Record the timeline of `manager`'s store while it runs: the timeline kept with the
    store at `store_url` (`Timeline.of_store`; in memory for a store that keeps none),
    children's logs from `log_dir`. `take_over`: see `Recorder`."""
    try:
        timeline = Timeline.of_store(store_url, clock=manager.clock)
    except Invalid:
        timeline = Timeline.memory(clock=manager.clock)
    recorder = Recorder(
        manager.store,
        timeline,
        log_dir=log_dir,
        clock=manager.clock,
        settings=settings,
        close_timeline=True,
        take_over=take_over,
    )
    manager.add_runnable(recorder.run)
    return recorder
