"""The timeline entry format: object references, checking entries, reading a JSONL timeline, and
naming the object to explain (`deployment/web`) against a registry or a timeline's kinds.

One entry is one JSON object with a float `ts` (seconds since the epoch) and a `type`;
`change`, `condition`, `event`, `exit`, `log` and `probe` entries carry an `object`
({"kind", "name", "namespace"}), `edge` entries a `from`, a `to` and a `relation`
(`dependsOn` or `ownerReference`). Unknown types and fields are kept as they are: readers
ignore what they do not know. `read_timeline` is the only function here that does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from setpoint.errors import Invalid, UnknownKind

Entry = Mapping[str, Any]
"""One timeline entry, as decoded from JSON."""

OBJECT_TYPES = frozenset({"change", "condition", "event", "exit", "log", "probe"})
"""Entry types that are about one object (and must carry `object`)."""


@dataclass(frozen=True, order=True)
class ObjectRef:
    """Which object an entry is about. An entry that names no namespace means "default" (as
    kubectl does), so that hand-written timelines need not repeat it."""

    kind: str
    name: str
    namespace: str = "default"

    @classmethod
    def of(cls, raw: Any) -> ObjectRef | None:
        """The reference in an entry's `object` (or an edge's `from`/`to`); None if not one."""
        if not isinstance(raw, Mapping):
            return None
        kind, name = raw.get("kind"), raw.get("name")
        if not isinstance(kind, str) or not isinstance(name, str):
            return None
        namespace = raw.get("namespace")
        return cls(kind, name, namespace if isinstance(namespace, str) and namespace else "default")

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


def check_entry(entry: Any) -> str | None:
    """What is wrong with `entry` as a timeline entry, in a few words; None if nothing."""
    if not isinstance(entry, dict):
        return "want a JSON object"
    ts = entry.get("ts")
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        return "ts: want a number (seconds since the epoch)"
    kind = entry.get("type")
    if not isinstance(kind, str):
        return "type: want a string"
    if kind in OBJECT_TYPES and ObjectRef.of(entry.get("object")) is None:
        return 'object: want {"kind": ..., "name": ..., "namespace": ...}'
    if kind == "edge":
        for end in ("from", "to"):
            if ObjectRef.of(entry.get(end)) is None:
                return f'{end}: want {{"kind": ..., "name": ..., "namespace": ...}}'
    if kind == "change" and not isinstance(entry.get("diff"), dict):
        return 'diff: want {"<path>": [old, new], ...}'
    if kind == "condition" and not isinstance(entry.get("condition"), dict):
        return 'condition: want {"type": ..., "status": ...}'
    return None


def parse_timeline(lines: Iterable[str | bytes], source: str = "timeline") -> list[dict[str, Any]]:
    """Decode and check JSONL timeline lines (blank lines are skipped); return the entries
    ordered by `ts` (a stable sort: equal times keep the file's order). A bad line raises
    `Invalid` naming `source` and its line number."""
    entries: list[dict[str, Any]] = []
    ordered = True
    last = float("-inf")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise Invalid(f"{source} line {number}: not JSON ({exc.msg})") from None
        problem = check_entry(entry)
        if problem is not None:
            raise Invalid(f"{source} line {number}: {problem}")
        entry["ts"] = float(entry["ts"])
        ordered = ordered and entry["ts"] >= last
        last = entry["ts"]
        entries.append(entry)
    if not ordered:
        entries.sort(key=lambda e: e["ts"])
    return entries


def read_timeline(path: str | Path) -> list[dict[str, Any]]:
    """The entries of a JSONL timeline file, ordered by `ts` (see `parse_timeline`)."""
    with open(path, "rb") as f:
        return parse_timeline(f, source=str(path))


class KindNamed(Protocol):
    @property
    def kind(self) -> str: ...


class KindRegistry(Protocol):
    """What `resolve_kind` needs of `setpoint.model.Registry` (not imported: the ranking,
    which imports this module, must not reach the clock through the model)."""

    def resolve(self, name: str) -> KindNamed: ...


def split_object_arg(arg: str) -> tuple[str, str]:
    """`KIND/NAME` -> (KIND, NAME)."""
    kind, _, name = arg.partition("/")
    if not kind or not name or "/" in name:
        raise Invalid(f"{arg!r}: want KIND/NAME, e.g. deployment/web")
    return kind, name


def resolve_kind(typed: str, registry: KindRegistry | None, known_kinds: Iterable[str] = ()) -> str:
    """The kind a person means by `typed` (as kubectl: `deployment`, `Deployment`, `deploy`).

    A kind registered in `registry` resolves by its names and short names; otherwise (or if the
    registered kind never occurs in `known_kinds`, the kinds of a recorded timeline) `typed` is
    matched case-insensitively against `known_kinds`, also as a plural (`deployments`)."""
    known = {k.lower(): k for k in known_kinds}
    if registry is not None:
        try:
            kind = registry.resolve(typed).kind
        except UnknownKind:
            pass
        else:
            if not known or kind in known.values():
                return kind
    wanted = typed.lower()
    for candidate in (wanted, wanted.removesuffix("s"), wanted.removesuffix("es")):
        if candidate in known:
            return known[candidate]
    if known:
        kinds = ", ".join(sorted(known.values()))
        raise Invalid(f"no object of kind {typed!r} in the timeline (it has {kinds})")
    raise Invalid(f'the server doesn\'t have a resource type "{typed}"')


def pick_target(
    kind: str, name: str, namespace: str | None, objects: Iterable[ObjectRef]
) -> ObjectRef:
    """The object of `kind` and `name` among `objects` (those a timeline mentions).

    With `namespace` None (not given on the command line) the object in "default" is
    preferred, else the only one of that name. An object the timeline never mentions is
    still returned (its failure is then looked up and not found)."""
    same = sorted({o for o in objects if o.kind == kind and o.name == name})
    wanted = namespace or "default"
    for o in same:
        if o.namespace == wanted:
            return o
    if namespace is not None:
        return ObjectRef(kind, name, namespace)
    if len(same) == 1:
        return same[0]
    if len(same) > 1:
        spaces = ", ".join(o.namespace for o in same)
        raise Invalid(f"{kind}/{name} is in several namespaces ({spaces}): say one with -n")
    return ObjectRef(kind, name, "default")
