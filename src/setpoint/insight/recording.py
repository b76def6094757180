"""What the recorder records, decided purely from two versions of an object: which timeline
entries a change means (`entries_for`, from two projections, `project`), who made it
(`actor_of`), the audit entry of one write (`write_entry`), diffs as dotted paths
(`diff_paths`, `path_parts`), the Secrets a spec takes values from (`secrets_used`), and
which log lines are kept (`LogSampler`, `is_error_line`). `setpoint.insight.recorder` does
the I/O around it (the watch, the logs, the timeline's batches) and its module docstring
says what each entry type means.

Secret fields (`Kind.secret_fields`) are never kept: `project` keeps a fingerprint of each
value (a hash salted with the object's uid) to tell that it changed, and the entries say
only which keys changed (`(hidden)` -> `(changed)`).

Pure: no I/O, no clock (time is an argument), nothing of the store's; an import contract
keeps it so.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from setpoint.insight.timeline_base import Entry
from setpoint.model.meta import Object
from setpoint.model.wellknown import CHANGED_AT, CHANGED_BY

__all__ = [
    "CHANGED",
    "EVENT_KIND",
    "HIDDEN",
    "STAMPS",
    "LogSampler",
    "Snapshot",
    "Writer",
    "actor_of",
    "diff_paths",
    "entries_for",
    "fingerprint",
    "is_error_line",
    "join_path",
    "object_ref",
    "path_parts",
    "project",
    "secrets_used",
    "served",
    "write_entry",
]

STAMPS = (CHANGED_BY, CHANGED_AT)
"""The annotations that say who changed an object and when: kept apart from its declared
fields (`project`), they name the actor (`actor_of`)."""

EVENT_KIND = "Event"

_ERROR_WORDS = re.compile(r"\b(error|fatal|panic|critical|traceback|exception)\b", re.IGNORECASE)
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_PATH_PART = re.compile(r'\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')

Snapshot = dict[str, Any]
"""What the recorder keeps of an object between two sightings (JSON, see `project`)."""


class Writer(Protocol):
    """Who made a write, as `setpoint.store.base.Actor` says (any may be None)."""

    @property
    def user(self) -> str | None: ...
    @property
    def manager(self) -> str | None: ...
    @property
    def agent(self) -> str | None: ...


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
        snap["envFiles"] = {  # when each was last edited, and what: never its digest
            str(f["path"]): [f.get("changedAt"), list(f.get("changedKeys") or [])]
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
        # removes it; a write that names its actor says otherwise (the recorder's watch).
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
    """An edit of an env file the object's child read (`status.envFiles`: its `changedAt`
    moved), as an input change: `envFile[PATH].KEY` for each key the edit changed, else
    (keys not known: an edit made while no engine ran) `envFile[PATH]`; the values hidden,
    as a Secret's, and no digest of the file either. A file first seen is no edit."""
    before, after = old.get("envFiles") or {}, new.get("envFiles") or {}
    diff: dict[str, list[Any]] = {}
    for path, (changed_at, keys) in after.items():
        if path not in before or changed_at is None or before[path][0] == changed_at:
            continue
        if keys:
            diff.update({f"envFile[{path}].{key}": [HIDDEN, CHANGED] for key in keys})
        else:
            diff[f"envFile[{path}]"] = [HIDDEN, CHANGED]
    return diff


def served(entry: Entry) -> Entry:
    """`entry` as a timeline gives it to readers: an env file's input change recorded by an
    earlier version (`envFile[PATH]` with the file's two bare SHA-256 digests, which a reader
    could reverse by trying values) with its values hidden, as newer ones have them; any
    other entry as it is. Pure."""
    if entry.get("input") != "envFile" or not isinstance(entry.get("diff"), Mapping):
        return entry
    hidden = {path: [HIDDEN, CHANGED] for path in entry["diff"]}
    return entry if hidden == entry["diff"] else {**entry, "diff": hidden}


def write_entry(
    now: float, ref: dict[str, Any], revision: int, verb: str, actor: Writer | None
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
