"""What `setpoint up`'s live view shows, decided purely: one row per object, each object's
`Health` (`setpoint.insight.health`: the one place that tells progressing from failed,
shared with the dashboard), a detail line under each object
that is not Ready (the root blocker along its `dependsOn` chain, and a command to run), and
the layout of it all in a given number of terminal columns.

Names (KIND/NAME) are never cut. When the width is short the REASON/MESSAGE column gives
way first (cut to `REASON_MIN` columns, with an ellipsis), then the least important
columns are left out, in `DROP_ORDER`. An object's own failure or progress wraps to the
width (at most `DETAIL_LINES` lines, the last one cut with an ellipsis); a root blocker's
words under the objects it blocks take one line, cut; each ends with its command.

Pure: no I/O, no clock (the time a table is drawn at is an argument), no colours: each
piece of text says what it is (`Role`) and the health it belongs to; `cli.live` picks
the colours. Every cell is escaped (`render.escape`), so what is measured is what is shown.
"""

from __future__ import annotations

import enum
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from setpoint.cli.render import ELLIPSIS, cut, escape, text_width, timestamp_age
from setpoint.insight.blockers import root_blockers
from setpoint.insight.health import Health, condition_text, headline, health
from setpoint.model import READY, Kind, Object, get_condition
from setpoint.workloads.dependencies import Dependency, unmet

Key = tuple[str, str, str]
"""(kind, namespace, name) of a shown object; the namespace is never empty (`default`)."""


def key_of(obj: Object) -> Key:
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    return (str(obj.get("kind", "?")), namespace, str(meta.get("name", "?")))


def ref_of(key: Key) -> str:
    """`Kind/name` (`Kind/namespace/name` outside `default`)."""
    kind, namespace, name = key
    return f"{kind}/{name}" if namespace == "default" else f"{kind}/{namespace}/{name}"


def command(verb: str, key: Key) -> str:
    """`setpoint describe job/db-init` (with `-n NAMESPACE` outside `default`)."""
    kind, namespace, name = key
    where = "" if namespace == "default" else f" -n {namespace}"
    return f"setpoint {verb}{where} {kind.lower()}/{name}"


# -- rows ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StatusRow:
    """What is shown of one object. `ref` is `Kind/name` (`Kind/namespace/name` outside
    `default`); `reason` is the Ready condition's `reason: message` (`-` without one)."""

    ref: str
    ready: str
    phase: str
    reason: str
    restarts: str
    pid: str
    created: str | None
    health: Health

    def state(self) -> tuple[str, ...]:
        """Everything but the age: a change here is news."""
        return (self.ref, self.ready, self.phase, self.reason, self.restarts, self.pid)


def status_row(obj: Object) -> StatusRow:
    """The row of `obj` (a Process, a Job or any kind with a `Ready` condition)."""
    status = obj.get("status") or {}
    ready = get_condition(status, READY)
    return StatusRow(
        ref=escape(ref_of(key_of(obj))),
        ready=str(ready["status"]) if ready else "-",
        phase=escape(str(status.get("phase") or _replicas(obj) or "-")),
        reason=(escape(condition_text(ready)) if ready else "") or "-",
        restarts=str(status.get("restarts", 0)),
        pid=str(status.get("pid") or "-"),
        created=(obj.get("metadata") or {}).get("creationTimestamp"),
        health=health(obj),
    )


def _replicas(obj: Object) -> str | None:
    """`2/3 available` for an object with replicas (a Deployment)."""
    status = obj.get("status") or {}
    if "availableReplicas" not in status:
        return None
    return f"{status['availableReplicas']}/{(obj.get('spec') or {}).get('replicas', 0)} available"


def plain_line(row: StatusRow) -> str:
    """`Process/a ready=True phase=Running restarts=0 pid=123 ReadinessProbeSucceeded: ...`"""
    return (
        f"{row.ref} ready={row.ready} phase={row.phase} restarts={row.restarts} "
        f"pid={row.pid} {row.reason}"
    )


# -- what holds an object back ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Detail:
    """The line under an object that is not Ready: `text` says what holds it back (its own
    failure or progress, or its root blocker's), `hint` the command that tells more, and
    `health` is that of the object `text` is about."""

    text: str
    hint: str
    health: Health
    blocked: bool = False
    """Whether `text` is about another object (a root blocker, which has its own detail)."""


def kind_aliases(kinds: Iterable[Kind]) -> dict[str, str]:
    """What a `dependsOn` entry may call each kind (`Job`, `job`, `jobs`, a short name),
    lower-cased, -> the kind's name."""
    return {
        alias: kind.kind
        for kind in kinds
        for alias in (kind.singular, kind.plural, *kind.short_names)
    }


class Blockers:
    """Follows `dependsOn` among the objects shown; `aliases` as `kind_aliases` (a kind not
    in it is matched by its name, case-insensitively)."""

    def __init__(self, objects: Mapping[Key, Object], aliases: Mapping[str, str]) -> None:
        self.objects = objects
        self.kinds = {**{k.lower(): k for k, _, _ in objects}, **aliases}

    def find(self, kind: str, name: str, namespace: str) -> Object | None:
        """The object `kind/name` in `namespace` (a `dependencies.Lookup`)."""
        return self.objects.get((self.kinds.get(kind.lower(), kind), namespace, name))

    def first_unmet(self, obj: Object) -> tuple[Dependency, str] | None:
        """`obj`'s first dependency that does not hold and `unmet`'s message about it."""
        _, namespace, _ = key_of(obj)
        for entry in (obj.get("spec") or {}).get("dependsOn") or ():
            try:
                dep = Dependency.model_validate(entry)
            except ValidationError:
                continue  # admission refuses these; nothing to follow
            message = unmet([dep], self.find, namespace=namespace)
            if message is not None:
                return dep, message
        return None

    def root(self, obj: Object) -> tuple[list[Key], str, Object | None] | None:
        """The end of `obj`'s chain of unmet dependencies (`insight.blockers.root_blockers`,
        following each object's first unmet dependency): the first object on it that waits
        for nothing else (or failed, or does not exist, or closes a cycle), as the chain of
        keys from `obj`'s to it, `unmet`'s message about it and the object (None if
        missing); None when every dependency of `obj` holds. The walk stops before a kind
        that is not shown (its objects are not known here, so not to be called missing)."""
        start = key_of(obj)
        hops: dict[Key, tuple[str, Object | None]] = {}

        def held_back_by(key: Key) -> list[Key]:
            current = obj if key == start else self.objects.get(key)
            hop = self.first_unmet(current) if current is not None else None
            if hop is None:
                return []
            dep, message = hop
            if dep.kind.lower() not in self.kinds:
                return []  # a kind not shown: what it is up to is not known here
            namespace = dep.namespace or key[1]
            target = self.find(dep.kind, dep.name, namespace)
            found = key_of(target) if target is not None else (dep.kind, namespace, dep.name)
            hops[found] = (message, target)  # the last hop into it, as it closes a cycle
            return [found]

        def is_end(key: Key) -> bool:
            target = hops[key][1]
            return target is None or health(target) is Health.FAILED

        chains = root_blockers(start, held_back_by, is_end)
        if not chains:
            return None
        message, target = hops[chains[0][-1]]
        return chains[0], message, target

    def detail(self, obj: Object) -> Detail | None:
        """What to say under `obj`: None when it is Ready (or has no Ready condition); its
        own failure and `setpoint explain` when it failed; else its root blocker's
        `headline` (`unmet`'s message when it has none or does not exist) and `setpoint
        describe` of that; else its own reason and `setpoint describe`."""
        own = health(obj)
        if own in (Health.READY, Health.UNKNOWN):
            return None
        if own is Health.FAILED:
            return Detail(headline(obj), command("explain", key_of(obj)), own)
        root = self.root(obj)
        if root is not None:
            chain, message, target = root
            key = chain[-1]
            if target is None:
                return Detail(message, command("describe", key), Health.PROGRESSING, blocked=True)
            said = headline(target)
            text = f"{ref_of(key)}: {said}" if said else message
            return Detail(text, command("describe", key), health(target), blocked=True)
        return Detail(headline(obj) or "not Ready", command("describe", key_of(obj)), own)


# -- layout -------------------------------------------------------------------------------

HEADER = ("KIND/NAME", "READY", "PHASE", "REASON/MESSAGE", "RESTARTS", "PID", "AGE")
NAME, REASON = 0, 3
"""Indices of the column never cut and of the one cut first."""
DROP_ORDER = (5, 6, 4, 2, 3, 1)
"""Columns left out when the width is short, first the first: PID, AGE, RESTARTS, PHASE,
REASON/MESSAGE, READY. KIND/NAME always stays."""
REASON_MIN = 24
"""Columns REASON/MESSAGE keeps before others are left out."""
GAP = "  "
DETAIL_LINES = 4
"""Lines of a detail's text at most (an object's own failure or progress); the command
follows on the last one if it fits."""
DETAIL_FIRST = "  ↳ "
DETAIL_NEXT = "    "


class Role(enum.Enum):
    """What a piece of text is; `cli.live` styles each."""

    HEADER = "header"
    ROW = "row"
    DETAIL = "detail"
    HINT = "hint"


@dataclass(frozen=True, slots=True)
class Piece:
    text: str
    role: Role
    health: Health = Health.UNKNOWN


Line = tuple[Piece, ...]
"""One line of the view: pieces of text one after another."""


def line_text(line: Line) -> str:
    return "".join(piece.text for piece in line)


def fit_columns(rows: Sequence[Sequence[str]], width: int) -> tuple[list[int], list[int]]:
    """The columns shown (indices into `HEADER`) and the width of each, for `rows` (the
    header first) in `width` columns: see the module docstring. KIND/NAME keeps its full
    width even when that alone is wider than `width`."""
    natural = [max(text_width(row[i]) for row in rows) for i in range(len(HEADER))]
    shown = list(range(len(HEADER)))
    drops = iter(DROP_ORDER)
    while True:
        others = sum(natural[i] for i in shown if i != REASON) + len(GAP) * (len(shown) - 1)
        if REASON not in shown:
            if others <= width:
                break
        else:
            room = width - others
            if room >= min(natural[REASON], REASON_MIN):
                break
        drop = next(drops, None)
        if drop is None:
            break
        shown.remove(drop)
    widths = [natural[i] for i in shown]
    if REASON in shown:
        least = min(natural[REASON], REASON_MIN)
        widths[shown.index(REASON)] = max(least, min(natural[REASON], width - others))
    return shown, widths


def table_cells(row: StatusRow, now: float) -> tuple[str, ...]:
    """`row`'s cells in `HEADER`'s order, at time `now`."""
    return (
        row.ref,
        row.ready,
        row.phase,
        row.reason,
        row.restarts,
        row.pid,
        timestamp_age(row.created, now),
    )


def detail_lines(detail: Detail, width: int) -> list[Line]:
    """`detail` in `width` columns: its text (wrapped to at most `DETAIL_LINES` lines; one
    line, cut, for a root blocker's, whose own detail says all of it), then `→ COMMAND`,
    on the last line when it fits. The command is never cut."""
    room = max(width - text_width(DETAIL_NEXT), 8)
    text = escape(detail.text)
    if detail.blocked:  # one line, cut where the width ends (not at a word)
        wrapped = [cut(text, room)]
    else:
        wrapped = textwrap.wrap(
            text,
            room,
            max_lines=DETAIL_LINES,
            placeholder=" " + ELLIPSIS,
            break_on_hyphens=False,
        ) or [""]
    lines: list[Line] = [
        (Piece((DETAIL_NEXT if i else DETAIL_FIRST) + cut(part, room), Role.DETAIL, detail.health),)
        for i, part in enumerate(wrapped)
    ]
    hint = f"→ {escape(detail.hint)}"
    if text_width(wrapped[-1]) + len(GAP) + text_width(hint) <= room:
        lines[-1] = (*lines[-1], Piece(GAP, Role.DETAIL), Piece(hint, Role.HINT, detail.health))
    else:
        lines.append((Piece(DETAIL_NEXT, Role.DETAIL), Piece(hint, Role.HINT, detail.health)))
    return lines


def view_lines(
    objects: Mapping[Key, Object],
    width: int,
    now: float,
    *,
    aliases: Mapping[str, str] | None = None,
) -> list[Line]:
    """The whole view of `objects` (in key order) in `width` columns at time `now`: the
    header, then each object's row and, when it is not Ready, its detail lines."""
    keys = sorted(objects)
    rows = [status_row(objects[k]) for k in keys]
    cells = [HEADER, *(table_cells(r, now) for r in rows)]
    shown, widths = fit_columns(cells, width)
    blockers = Blockers(objects, aliases or {})

    def format_cells(values: Sequence[str]) -> str:
        pairs = zip(shown, widths, strict=True)
        parts = [cut(values[i], w) if i == REASON else values[i] for i, w in pairs]
        padded = [p + " " * (w - text_width(p)) for p, w in zip(parts, widths, strict=True)]
        return GAP.join(padded).rstrip()

    lines: list[Line] = [(Piece(format_cells(HEADER), Role.HEADER),)]
    for key, row, values in zip(keys, rows, cells[1:], strict=True):
        lines.append((Piece(format_cells(values), Role.ROW, row.health),))
        detail = blockers.detail(objects[key])
        if detail is not None:
            lines += detail_lines(detail, width)
    return lines
