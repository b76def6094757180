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
  `unknown` (`actor_of`). An edit of an env file a Process's child read (its
  `status.envFiles` digest moved: the controller looks at the files) is a `change` of
  that Process too, an input change: `envFile[PATH].KEY` paths, values hidden
  (`envFile[PATH]` with the digests when the keys are not known), actor `unknown`,
  `input: envFile`;
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
`LogSampler`)
are pure functions of their arguments; `Recorder` and `LogTailer` do the I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
import re
import threading
from collections import deque
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Gone, Invalid, StoreClosed, UnknownKind
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
from setpoint.model.wellknown import CHANGED_AT, CHANGED_BY, child_name
from setpoint.runtime.manager import Manager
from setpoint.store.base import Actor, Store, Verb, WatchEvent

log = logging.getLogger("setpoint.insight.recorder")

STAMPS = (CHANGED_BY, CHANGED_AT)

IGNORED_KINDS = frozenset({"Lease"})
"""Kinds whose writes are not recorded: a Lease is renewed every few seconds."""

EVENT_KIND = "Event"

_ERROR_WORDS = re.compile(r"\b(error|fatal|panic|critical|traceback|exception)\b", re.IGNORECASE)
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_PATH_PART = re.compile(r'\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')

RECORDING_WORD = 30.0
"""Seconds for which a live recorder's word that it keeps the timeline holds
(`Timeline.mark_recording`); it says so again every third of that."""

HISTORY_WAIT = 5.0
"""Seconds a resync may spend reading the store's history for the writes it did not watch
(`Recorder._missed_writes`)."""

_MAX_LINE = 64 * 1024
"""Bytes of a log line without a newline after which it is taken as one line anyway."""

Snapshot = dict[str, Any]
"""What the recorder keeps of an object between two sightings (JSON, see `project`)."""


# -- pure: diffs ------------------------------------------------------------------


def diff_paths(old: Any, new: Any, path: str = "") -> dict[str, list[Any]]:
    """Where `old` and `new` differ: dotted path -> [old value, new value], down to leaves.

    `spec.args[2]` is an index into a list; a key that is not an identifier is quoted
    (`metadata.labels["app.kubernetes.io/name"]`). A key or index only one side has
    is compared with None. Pure.
    """
    if old == new:
        return {}
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out: dict[str, list[Any]] = {}
        for key in sorted({*old, *new}, key=str):
            out.update(diff_paths(old.get(key), new.get(key), join_path(path, str(key))))
        return out
    if isinstance(old, list) and isinstance(new, list):
        out = {}
        for i in range(max(len(old), len(new))):
            a = old[i] if i < len(old) else None
            b = new[i] if i < len(new) else None
            out.update(diff_paths(a, b, f"{path}[{i}]"))
        return out
    return {path: [old, new]}


def join_path(path: str, key: str) -> str:
    """`path` + `.key`, or `["key"]` when `key` is not a plain identifier."""
    if _PLAIN_KEY.match(key):
        return f"{path}.{key}" if path else key
    quoted = '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{path}[{quoted}]"


def path_parts(path: str) -> list[str | int]:
    """The keys and indexes of a path made by `diff_paths` (inverse of `join_path`)."""
    parts: list[str | int] = []
    text = "." + path if path and path[0] != "[" else path
    pos = 0
    while pos < len(text):
        match = _PATH_PART.match(text, pos)
        if match is None:
            raise ValueError(f"{path!r}: not a path at {pos}")
        plain, index, quoted = match.groups()
        if plain is not None:
            parts.append(plain)
        elif index is not None:
            parts.append(int(index))
        else:
            parts.append(quoted[1:-1].replace('\\"', '"').replace("\\\\", "\\"))
        pos = match.end()
    return parts


# -- pure: what an object's change means ----------------------------------------------


def object_ref(kind: str, name: str, namespace: str | None) -> dict[str, Any]:
    """The `object` of an entry."""
    return {"kind": kind, "name": name, "namespace": namespace or None}


def project(obj: Object, revision: int, secret_fields: tuple[str, ...] = ()) -> Snapshot:
    """The parts of `obj` the recorder compares: identity, declared fields, conditions,
    last exit, references, and an Event's own fields. Of `secret_fields` only each key's
    fingerprint is kept (`fingerprint`), and their names under `hidden`. Pure."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    assert isinstance(status, dict)
    snap: Snapshot = {
        "kind": obj.get("kind"),
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
        "revision": revision,
    }
    if obj.get("kind") == EVENT_KIND:
        for key in ("involvedObject", "type", "reason", "message", "count", "lastTimestamp"):
            snap[key] = obj.get(key)
        return snap
    snap["declared"] = {
        "spec": obj.get("spec"),
        "metadata": {
            "labels": meta.get("labels") or {},
            "annotations": {
                k: v for k, v in (meta.get("annotations") or {}).items() if k not in STAMPS
            },
            "deletionTimestamp": meta.get("deletionTimestamp"),
        },
    }
    for name in secret_fields:
        held = obj.get(name)
        if isinstance(held, Mapping):
            uid = str(meta.get("uid") or "")
            snap["declared"][name] = {k: fingerprint(uid, str(k), v) for k, v in held.items()}
    if secret_fields:
        snap["hidden"] = list(secret_fields)
    snap["stamps"] = {k: v for k, v in (meta.get("annotations") or {}).items() if k in STAMPS}
    snap["owners"] = [
        {"kind": r.get("kind"), "name": r.get("name")}
        for r in meta.get("ownerReferences") or []
        if isinstance(r, dict)
    ]
    conditions = status.get("conditions")
    snap["conditions"] = [
        {k: c.get(k) for k in ("type", "status", "reason", "message")}
        for c in (conditions if isinstance(conditions, list) else [])
        if isinstance(c, dict) and c.get("type")
    ]
    last_exit = status.get("lastExit")
    snap["lastExit"] = last_exit if isinstance(last_exit, dict) else None
    env_files = status.get("envFiles")
    if isinstance(env_files, list) and env_files:
        snap["envFiles"] = {
            str(f["path"]): [f.get("digest"), list(f.get("changedKeys") or [])]
            for f in env_files
            if isinstance(f, dict) and f.get("path")
        }
    return snap


def fingerprint(salt: str, key: str, value: Any) -> str:
    """A value of a secret field as the recorder keeps it: enough to tell that it changed,
    nothing to show. Pure."""
    text = "\0".join((salt, key, value if isinstance(value, str) else repr(value)))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


HIDDEN = "(hidden)"
CHANGED = "(changed)"
"""What a change entry shows of a secret value: `(hidden)` before, `(changed)` after."""


def _hide(diff: dict[str, list[Any]], hidden: list[str]) -> dict[str, list[Any]]:
    """`diff` with the values of paths under the `hidden` fields replaced by markers."""
    out: dict[str, list[Any]] = {}
    for path, (old, new) in diff.items():
        if path_parts(path)[0] in hidden:
            old, new = _mask(old, HIDDEN), _mask(new, CHANGED if old is not None else HIDDEN)
        out[path] = [old, new]
    return out


def _mask(value: Any, marker: str) -> Any:
    if isinstance(value, Mapping):
        return {k: marker for k in value}
    return None if value is None else marker


def _declared_diff(snap: Snapshot, created: bool) -> dict[str, list[Any]]:
    """The diff of an object created (or, `created=False`, deleted): its spec, and the
    keys of its secret fields."""
    hidden = snap.get("hidden") or []
    spec = snap["declared"]["spec"]
    diff: dict[str, list[Any]] = {"spec": [None, spec]} if spec is not None or not hidden else {}
    for name in hidden:
        if name in snap["declared"]:
            diff[name] = [None, snap["declared"][name]]
    if not created:
        diff = {path: [new, old] for path, (old, new) in diff.items()}
    return _hide(diff, hidden)


def actor_of(old: Snapshot | None, new: Snapshot) -> str:
    """Who made the change from `old` to `new`: the `setpoint.dev/changed-by` stamp when this
    write set it (`setpoint apply`, or a controller naming itself); otherwise `controller`
    for an object that was stamped before or is owned by another (a controller wrote it),
    else `unknown` (a writer that does not stamp, e.g. a plain API client). Pure."""
    stamps = new.get("stamps") or {}
    before = (old or {}).get("stamps") or {}
    if stamps.get(CHANGED_BY) and stamps != before:
        return str(stamps[CHANGED_BY])
    if before or new.get("owners"):
        return "controller"
    return "unknown"


def entries_for(old: Snapshot | None, new: Snapshot | None, *, now: float) -> list[Entry]:
    """The timeline entries that the move from `old` to `new` (None: absent) means. Pure.

    An object whose uid changed was deleted and created again.
    """
    if old is not None and new is not None and old.get("uid") != new.get("uid"):
        return entries_for(old, None, now=now) + entries_for(None, new, now=now)
    about = new or old
    if about is None:
        return []
    if about.get("kind") == EVENT_KIND:
        return _event_entries(old, new, now=now)
    ref = object_ref(str(about["kind"]), str(about["name"]), about.get("namespace"))
    if new is None:
        assert old is not None
        # An owned object (a replica) goes when its owner's controller or the collector
        # removes it; a write that names its actor says otherwise (`Recorder._observe`).
        actor = "controller" if old.get("owners") else "unknown"
        return [_change(now, ref, _declared_diff(old, created=False), "deleted", actor)]
    out: list[Entry] = []
    if old is None:
        diff = _declared_diff(new, created=True)
        out.append(_change(now, ref, diff, "created", actor_of(None, new)))
    else:
        diff = _hide(diff_paths(old["declared"], new["declared"]), new.get("hidden") or [])
        if diff:
            out.append(_change(now, ref, diff, "updated", actor_of(old, new)))
        edits = _env_file_edits(old, new)
        if edits:  # not the status write's: whoever edited the file, which nobody names
            out.append({**_change(now, ref, edits, "updated", "unknown"), "input": "envFile"})
    out += _condition_entries(ref, old, new, now)
    # An object first seen with an exit (its child ended before the recorder looked) has
    # that exit recorded with its creation, as its conditions are.
    if new.get("lastExit") and new["lastExit"] != (old or {}).get("lastExit"):
        out.append(_exit_entry(ref, new["lastExit"], now))
    out += _edge_entries(ref, old, new, now)
    return out


def _env_file_edits(old: Snapshot, new: Snapshot) -> dict[str, list[Any]]:
    """An edit of an env file the object's child read (`status.envFiles`: its digest moved),
    as an input change: `envFile[PATH].KEY` for each key the edit changed (the values
    hidden, as a Secret's), else `envFile[PATH]` with the digests. A file first seen is no
    edit. Pure."""
    before, after = old.get("envFiles") or {}, new.get("envFiles") or {}
    diff: dict[str, list[Any]] = {}
    for path, (digest, keys) in after.items():
        if path not in before or before[path][0] == digest:
            continue
        if keys:
            diff.update({f"envFile[{path}].{key}": [HIDDEN, CHANGED] for key in keys})
        else:
            diff[f"envFile[{path}]"] = [before[path][0], digest]
    return diff


def write_entry(
    now: float, ref: dict[str, Any], revision: int, verb: Verb, actor: Actor | None
) -> Entry:
    """The audit entry of one write: who (`actor`, None: the write named nobody) did which
    `verb` to the object `ref`, making `revision`. Pure."""
    return {
        "ts": now,
        "type": "write",
        "object": ref,
        "verb": verb,
        "revision": revision,
        "user": actor.user if actor else None,
        "manager": actor.manager if actor else None,
        "agent": actor.agent if actor else None,
    }


def _change(
    now: float, ref: dict[str, Any], diff: dict[str, Any], action: str, actor: str
) -> Entry:
    return {
        "ts": now,
        "type": "change",
        "object": ref,
        "diff": diff,
        "action": action,
        "actor": actor,
    }


def _condition_entries(
    ref: dict[str, Any], old: Snapshot | None, new: Snapshot, now: float
) -> list[Entry]:
    before = {c["type"]: c for c in (old or {}).get("conditions") or []}
    out: list[Entry] = []
    for cond in new.get("conditions") or []:
        prev = before.get(cond["type"])
        if prev is None or (prev.get("status"), prev.get("reason")) != (
            cond.get("status"),
            cond.get("reason"),
        ):
            condition = {k: cond.get(k) for k in ("type", "status", "reason", "message")}
            out.append({"ts": now, "type": "condition", "object": ref, "condition": condition})
    return out


def _exit_entry(ref: dict[str, Any], last_exit: Mapping[str, Any], now: float) -> Entry:
    return {
        "ts": now,
        "type": "exit",
        "object": ref,
        "exitCode": last_exit.get("code"),
        "signal": last_exit.get("signal"),
        "reason": last_exit.get("reason"),
        "message": last_exit.get("message"),
        "finishedAt": last_exit.get("finishedAt"),
        "stoppedOnRequest": bool(last_exit.get("stoppedOnRequest")),
    }


def _edge_entries(
    ref: dict[str, Any], old: Snapshot | None, new: Snapshot, now: float
) -> list[Entry]:
    def edges(snap: Snapshot | None) -> list[tuple[str, dict[str, Any]]]:
        if snap is None:
            return []
        namespace = snap.get("namespace")
        found = [
            ("ownerReference", object_ref(str(o["kind"]), str(o["name"]), namespace))
            for o in snap.get("owners") or []
        ]
        spec = snap["declared"].get("spec")
        depends = spec.get("dependsOn") if isinstance(spec, dict) else None
        for dep in depends if isinstance(depends, list) else []:
            if isinstance(dep, dict) and dep.get("kind") and dep.get("name"):
                to = object_ref(
                    str(dep["kind"]), str(dep["name"]), dep.get("namespace") or namespace
                )
                found.append(("dependsOn", to))
        for name in secrets_used(spec):
            found.append(("uses", object_ref("Secret", name, namespace)))
        return found

    def scaled(snap: Snapshot | None) -> list[dict[str, Any]]:
        """What the object scales (`spec.scaleTargetRef`, as an Autoscaler's): that object
        `uses` it, an input that sets its replicas."""
        spec = (snap or {}).get("declared", {}).get("spec")
        target = spec.get("scaleTargetRef") if isinstance(spec, dict) else None
        if not (isinstance(target, dict) and target.get("kind") and target.get("name")):
            return []
        namespace = (snap or {}).get("namespace")
        return [object_ref(str(target["kind"]), str(target["name"]), namespace)]

    before = edges(old)
    out = [
        {"ts": now, "type": "edge", "from": ref, "to": to, "relation": relation}
        for relation, to in edges(new)
        if (relation, to) not in before
    ]
    out += [
        {"ts": now, "type": "edge", "from": target, "to": ref, "relation": "uses"}
        for target in scaled(new)
        if target not in scaled(old)
    ]
    return out


def secrets_used(spec: Any) -> list[str]:
    """The Secrets a spec (or its `template`'s) takes values from: `env` entries'
    `valueFrom.secretKeyRef.name` (as a mapping or a Kubernetes-style list) and `envFrom`'s
    `secretRef.name`; each once, in order. Pure."""
    if not isinstance(spec, Mapping):
        return []
    template = spec.get("template")
    inner = template.get("spec") if isinstance(template, Mapping) else None
    names: dict[str, None] = {n: None for n in secrets_used(inner)} if inner else {}
    env = spec.get("env")
    values = env.values() if isinstance(env, Mapping) else env if isinstance(env, list) else []
    for value in values:
        ref = value.get("valueFrom") if isinstance(value, Mapping) else None
        key_ref = ref.get("secretKeyRef") if isinstance(ref, Mapping) else None
        if isinstance(key_ref, Mapping) and key_ref.get("name"):
            names[str(key_ref["name"])] = None
    for source in spec.get("envFrom") or () if isinstance(spec.get("envFrom"), list) else ():
        secret = source.get("secretRef") if isinstance(source, Mapping) else None
        if isinstance(secret, Mapping) and secret.get("name"):
            names[str(secret["name"])] = None
    return list(names)


def _event_entries(old: Snapshot | None, new: Snapshot | None, *, now: float) -> list[Entry]:
    if new is None:
        return []  # an Event expiring is no news
    keys = ("count", "lastTimestamp", "message", "reason")
    if old is not None and all(old.get(k) == new.get(k) for k in keys):
        return []
    involved = new.get("involvedObject") or {}
    ref = object_ref(
        str(involved.get("kind") or ""), str(involved.get("name") or ""), involved.get("namespace")
    )
    entry: Entry = {
        "ts": now,
        "type": "event",
        "object": ref,
        "eventType": new.get("type"),
        "reason": new.get("reason"),
        "message": new.get("message"),
    }
    if new.get("count") is not None:
        entry["count"] = new.get("count")
    return [entry]


# -- pure: which log lines to keep -------------------------------------------------


def is_error_line(line: str) -> bool:
    """Whether a log line reads as an error (error, fatal, panic, Traceback ...)."""
    return _ERROR_WORDS.search(line) is not None


@dataclass
class LogSampler:
    """Which log lines go into the timeline: the first of each template, error lines up
    to `errors_per_minute` per source, and up to `samples_per_minute` per template per
    source. Pure: time is an argument."""

    samples_per_minute: int = 3
    errors_per_minute: int = 60
    _samples: dict[tuple[str, int], tuple[float, int]] = field(default_factory=dict)
    _errors: dict[str, tuple[float, int]] = field(default_factory=dict)

    def keep(
        self, source: str, template_id: int, first_seen: bool, error: bool, now: float
    ) -> str | None:
        """Why to keep the line (`new`, `error`, `sample`), or None to drop it."""
        if first_seen:
            self._count(self._samples, (source, template_id), now)
            return "new"
        if error and self._count(self._errors, source, now) <= self.errors_per_minute:
            return "error"
        if self._count(self._samples, (source, template_id), now) <= self.samples_per_minute:
            return "sample"
        return None

    @staticmethod
    def _count(counts: dict[Any, tuple[float, int]], key: Any, now: float) -> int:
        start, n = counts.get(key, (now, 0))
        if now - start >= 60.0:
            start, n = now, 0
        counts[key] = (start, n + 1)
        return n + 1


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
    followed from their end; files that appear later, from their start."""

    def __init__(self, log_dir: Path, *, max_read: int = 1 << 20) -> None:
        self.log_dir = Path(log_dir)
        self.max_read = max_read
        self._files: dict[str, _Followed] = {}
        self._skip: dict[str, tuple[int, int]] = {}
        self._lock = threading.Lock()
        for path in self._paths():
            with contextlib.suppress(OSError):
                st = path.stat()
                self._skip[path.stem] = (st.st_ino, st.st_size)

    def _paths(self) -> list[Path]:
        try:
            return sorted(p for p in self.log_dir.iterdir() if p.suffix == ".log")
        except OSError:
            return []

    def poll(self) -> list[tuple[str, str]]:
        """New complete lines of every file: (file stem, line), in file order."""
        out: list[tuple[str, str]] = []
        for path in self._paths():
            out += self.poll_one(path.stem)
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
