"""`setpoint events [KIND[/NAME] | KIND NAME | --for KIND/NAME] [-A] [-w]`: `Event`s as kubectl.

The events are printed oldest first (by lastTimestamp) as LAST SEEN, TYPE,
REASON, OBJECT, MESSAGE. Naming an object keeps the events whose
`involvedObject` has its kind (and group), name and namespace; naming only a
kind keeps those about any object of it. A named object that neither exists
nor has events is an error. With `-w` the list is followed by every new or
updated event from the list's revision on, until Ctrl-C or SIGTERM (exit 0).

`Involved` (which events are about an object) is shared with `describe`.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from setpoint.cli import render
from setpoint.cli.context import Context, add_kind_and_names, kind_and_names, until_signalled
from setpoint.errors import Invalid
from setpoint.model import Kind, Object
from setpoint.runtime import EVENT
from setpoint.store.base import Store


@dataclass(frozen=True)
class Involved:
    """The events to keep: those about objects of `kind`, and when given, with this name,
    namespace and uid (`None`: any)."""

    kind: Kind
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None

    @classmethod
    def of(cls, kind: Kind, obj: Object) -> Involved:
        """The events about `obj` itself (an earlier object of the same name has another uid)."""
        meta = obj.get("metadata") or {}
        return cls(kind, meta.get("name"), meta.get("namespace"), meta.get("uid"))

    def matches(self, event: Object) -> bool:
        ref = event.get("involvedObject") or {}
        api_version = str(ref.get("apiVersion") or "")
        group = api_version.rpartition("/")[0]
        if (ref.get("kind"), group) != (self.kind.kind, self.kind.group):
            return False
        if self.name is not None and ref.get("name") != self.name:
            return False
        if self.namespace is not None and (ref.get("namespace") or None) != self.namespace:
            return False
        return self.uid is None or not ref.get("uid") or ref.get("uid") == self.uid


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "events",
        parents=parents,
        description="Show events, oldest first: all of a namespace (or of every one, -A), or "
        "only those about one object (KIND/NAME, KIND NAME or --for KIND/NAME) or one kind.",
    )
    add_kind_and_names(p)
    p.add_argument(
        "--for", dest="for_object", metavar="KIND/NAME", help="only events about this object"
    )
    p.add_argument("-A", "--all-namespaces", action="store_true", help="events of every namespace")
    p.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="after the list, print every new or updated event until interrupted",
    )
    p.set_defaults(run=run)


def _involved(ctx: Context, args: argparse.Namespace) -> Involved | None:
    """What the arguments name: nothing (every event), a kind, or one object."""
    if args.for_object:
        if args.kind:
            raise Invalid("name the object once: KIND/NAME, KIND NAME or --for KIND/NAME")
        if "/" not in args.for_object:
            raise Invalid(f"--for {args.for_object!r}: want KIND/NAME")
        kind_arg, names = args.for_object, []
    elif args.kind:
        kind_arg, names = args.kind, args.names
    else:
        return None
    kind, found = kind_and_names(ctx.registry, kind_arg, names)
    if len(found) > 1:
        raise Invalid("give events of one object at a time")
    namespace = None if args.all_namespaces else ctx.namespace_of(kind)
    return Involved(kind, found[0] if found else None, namespace)


async def run(ctx: Context, args: argparse.Namespace) -> int:
    involved = _involved(ctx, args)
    if args.all_namespaces or (involved is not None and not involved.kind.namespaced):
        namespace = None  # a cluster-scoped object's events may be in any namespace
    else:
        namespace = ctx.namespace
    table = render.EventTable(namespaces=args.all_namespaces)
    async with ctx.open_store() as store:
        items, revision = await store.list(EVENT.api_version, EVENT.kind, namespace=namespace)
        items = sorted(_about(items, involved), key=render.event_sort_key)
        if not items and not args.all_namespaces and involved is not None and involved.name:
            kind = involved.kind  # no events: it is an error if the object is not there either
            await store.get(kind.api_version, kind.kind, involved.name, involved.namespace)
        if not items and not args.watch:
            where = "" if args.all_namespaces else f" in {ctx.namespace} namespace"
            print(f"No events found{where}.", file=sys.stderr)
            return 0
        rows = [table.header()] + [table.row(e, time.time()) for e in items]
        widths = render.column_widths(rows)
        for row in rows:
            _out(render.format_row(row, widths))
        if args.watch:
            return await until_signalled(
                _follow(store, namespace, revision, involved, table, widths)
            )
    return 0


def _about(events: Sequence[Object], involved: Involved | None) -> list[Object]:
    return [e for e in events if involved is None or involved.matches(e)]


async def _follow(
    store: Store,
    namespace: str | None,
    revision: int,
    involved: Involved | None,
    table: render.EventTable,
    widths: Sequence[int],
) -> int:
    """Print every event added or updated after `revision` (an expired one is not news)."""
    changes = store.watch(EVENT.api_version, EVENT.kind, namespace=namespace, since=revision)
    async for change in changes:
        if change.type != "DELETED" and _about([change.object], involved):
            _out(render.format_row(table.row(change.object, time.time()), widths))
    return 0


def _out(text: str) -> None:
    print(text, flush=True)
