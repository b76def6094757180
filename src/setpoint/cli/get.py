"""`setpoint get KIND [NAME...]`: print objects as a table, YAML, JSON or names; `-w` follows.
`get KIND,KIND...` prints one table per kind; `get all`, one for each workload kind.

Without `-w` the objects are read synchronously (`Context.reader`), so a plain `get`
imports no asyncio and starts fast. With `-w` the current list is printed first (as ADDED
events), then every change from the list's revision on, one row or document per event,
until Ctrl-C or SIGTERM, which end it cleanly (exit 0).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from setpoint.cli import render
from setpoint.cli.context import Context, add_kind_and_names, kind_and_names, until_signalled
from setpoint.errors import Invalid, NotFound, UnknownKind
from setpoint.model import Kind, Object, Selector, parse_selector

if TYPE_CHECKING:
    from setpoint.store.base import Reader

OUTPUTS = ("table", "wide", "yaml", "json", "name")
ALL = ("deployments", "processes", "jobs", "services", "thermostats", "autoscalers")
"""What `get all` lists (kubectl's `all` category: the workloads), those registered."""


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "get",
        parents=parents,
        description="Show objects of one kind: all of them, those matching -l, or those named.",
    )
    add_kind_and_names(
        p, kind_help="e.g. greetings, greeting, Greeting, greetings.example.com, or KIND/NAME"
    )
    p.add_argument(
        "-l",
        "--selector",
        metavar="SELECTOR",
        help="label selector, e.g. app=web,tier in (a,b),!canary",
    )
    p.add_argument(
        "-o",
        "--output",
        type=_output,
        choices=_Formats(OUTPUTS[1:]),
        default="table",
        metavar="FORMAT",
        help="wide, yaml, json, name, jsonpath=TEMPLATE (kubectl's, e.g. "
        "'{.items[*].metadata.name}') or custom-columns=HEADER:PATH,... (default: a table)",
    )
    p.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="after the list, print every change until interrupted",
    )
    p.add_argument(
        "-A", "--all-namespaces", action="store_true", help="list objects in every namespace"
    )
    p.set_defaults(run=run)


class _Formats(tuple[str, ...]):
    """`-o`'s choices: the plain formats (what shell completion offers), and any
    `jsonpath=...` or `custom-columns=...` (`_output` has checked them)."""

    __slots__ = ()

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and (
            super().__contains__(value) or value.startswith(("jsonpath=", "custom-columns="))
        )


def _output(text: str) -> str:
    """`-o`'s value, checked: a format of OUTPUTS, or `jsonpath=` / `custom-columns=` and
    what follows (parsed here, so a bad template is refused before anything is read)."""
    from setpoint.cli.jsonpath import Template, custom_columns

    kind, equals, rest = text.partition("=")
    try:
        if kind == "jsonpath" and equals:
            Template(rest)
            return text
        if kind == "custom-columns" and equals:
            custom_columns(rest)
            return text
    except Invalid as exc:
        raise argparse.ArgumentTypeError(f"{kind}: {exc}") from None
    if text in OUTPUTS:  # "table": the default, which argparse passes through here too
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r}: want one of {', '.join(OUTPUTS[1:])}, jsonpath=TEMPLATE or "
        "custom-columns=HEADER:PATH,..."
    )


def run(ctx: Context, args: argparse.Namespace) -> int | Coroutine[Any, Any, int]:
    """List or get synchronously (`Context.reader`: no event loop, no asyncio); with `-w`,
    the coroutine that follows the changes, which `main` runs on an event loop."""
    if not args.kind:
        raise Invalid("say which KIND to get, e.g. setpoint get greetings")
    if args.kind == "all":
        args.kind = ",".join(k for k in ALL if _known(ctx, k))
    if "," in args.kind:
        return _get_kinds(ctx, args)
    kind, names = kind_and_names(ctx.registry, args.kind, args.names)
    selector = parse_selector(args.selector)
    if names and selector.requirements:
        raise Invalid("give NAMEs or a selector (-l), not both")
    if names and args.all_namespaces:
        raise Invalid("an object cannot be retrieved by name across all namespaces (-A)")
    namespace = None if args.all_namespaces else ctx.namespace_of(kind)
    view = _View(kind, args.output, all_namespaces=args.all_namespaces)
    if args.watch:
        return _follow(ctx, kind, namespace, names, selector, view)
    with ctx.reader() as reader:
        if names:
            return _get_named(reader, kind, namespace, names, view)
        items, revision = reader.list(
            kind.api_version, kind.kind, namespace=namespace, label_selector=selector
        )
    items.sort(key=render.sort_key)
    if not items and view.output in ("table", "wide"):
        where = f" in {namespace} namespace" if namespace else ""
        print(f"No resources found{where}.", file=sys.stderr)
        return 0
    view.print_all(items, revision)
    return 0


def _known(ctx: Context, name: str) -> bool:
    try:
        ctx.registry.resolve(name)
    except UnknownKind:
        return False
    return True


def _get_kinds(ctx: Context, args: argparse.Namespace) -> int:
    """`get deploy,proc` (and `get all`): a table per kind that has objects, as kubectl."""
    if args.names or args.watch or args.output not in ("table", "wide"):
        raise Invalid("KIND,KIND... lists every object of each kind as tables: no NAME, -w or -o")
    kinds = dict.fromkeys(ctx.registry.resolve(part) for part in args.kind.split(",") if part)
    selector = parse_selector(args.selector)
    printed = False
    with ctx.reader() as reader:
        for kind in kinds:
            namespace = None if args.all_namespaces else ctx.namespace_of(kind)
            items, revision = reader.list(
                kind.api_version, kind.kind, namespace=namespace, label_selector=selector
            )
            if not items:
                continue
            if printed:
                print()
            items.sort(key=render.sort_key)
            _View(kind, args.output, all_namespaces=args.all_namespaces).print_all(items, revision)
            printed = True
    if not printed:
        where = "" if args.all_namespaces else f" in {ctx.namespace} namespace"
        print(f"No resources found{where}.", file=sys.stderr)
    return 0


def _get_named(
    reader: Reader, kind: Kind, namespace: str | None, names: Sequence[str], view: _View
) -> int:
    found: list[Object] = []
    missing: list[str] = []
    for name in names:
        try:
            found.append(reader.get(kind.api_version, kind.kind, name, namespace=namespace))
        except NotFound as exc:
            missing.append(str(exc))
    if found:
        if len(names) == 1 and view.output in ("yaml", "json", "jsonpath"):
            view.print_one(found[0])
        else:
            view.print_all(found, None)
    for message in missing:
        print(f"error: {message}", file=sys.stderr)
    return 1 if missing else 0


async def _follow(
    ctx: Context,
    kind: Kind,
    namespace: str | None,
    names: Sequence[str],
    selector: Selector,
    view: _View,
) -> int:
    """List, then print each change after the list, until a signal ends it."""
    async with ctx.open_store() as store:

        async def watch() -> int:
            items, revision = await store.list(
                kind.api_version, kind.kind, namespace=namespace, label_selector=selector
            )
            view.start_events(
                [o for o in sorted(items, key=render.sort_key) if not names or _name(o) in names]
            )
            events = store.watch(
                kind.api_version, kind.kind, namespace=namespace, since=revision,
                label_selector=selector,
            )  # fmt: skip
            async for event in events:
                if not names or _name(event.object) in names:
                    view.print_event(event.type, event.object)
            return 0

        return await until_signalled(watch())


def _name(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


class _View:
    """Prints objects of one kind in the chosen output format."""

    def __init__(self, kind: Kind, output: str, *, all_namespaces: bool):
        from setpoint.cli.jsonpath import Columns, Template, custom_columns

        self.kind = kind
        self.output, _, argument = output.partition("=")
        self.all_namespaces = all_namespaces
        self.widths: list[int] = []
        self.template = Template(argument) if self.output == "jsonpath" else None
        self.columns: Columns | None = None
        if self.output == "custom-columns":
            self.columns = custom_columns(argument)

    def _table(self, *, events: bool) -> render.Table | render.EventTable:
        return render.table_for(
            self.kind, wide=self.output == "wide", namespaces=self.all_namespaces, events=events
        )

    def _jsonpath(self, doc: Object) -> None:
        """kubectl prints the template's output as it is, with no newline of its own."""
        assert self.template is not None
        sys.stdout.write(self.template.render(doc))
        sys.stdout.flush()

    def print_one(self, obj: Object) -> None:
        if self.output == "jsonpath":
            self._jsonpath(obj)
        elif self.output == "yaml":
            _out(render.to_yaml(obj).rstrip("\n"))
        elif self.output == "json":
            _out(render.to_json(obj))
        else:
            self.print_all([obj], None)

    def print_all(self, items: Sequence[Object], revision: int | None) -> None:
        if self.output == "jsonpath":
            self._jsonpath(render.as_list(items, revision))
        elif self.columns is not None:
            for line in self.columns.table(items):
                _out(line)
        elif self.output == "yaml":
            _out(render.to_yaml(render.as_list(items, revision)).rstrip("\n"))
        elif self.output == "json":
            _out(render.to_json(render.as_list(items, revision)))
        elif self.output == "name":
            for obj in items:
                _out(render.object_ref(self.kind, _name(obj)))
        else:
            table = self._table(events=False)
            now = time.time()
            for line in render.format_table([table.header()] + [table.row(o, now) for o in items]):
                _out(line)

    def start_events(self, items: Sequence[Object]) -> None:
        """Watch output begins: the header (tables) and the current objects as ADDED."""
        if self.columns is not None:
            self.widths = []
            _out(self.columns.table([])[0])
            for obj in items:
                self.print_event("ADDED", obj)
        elif self.output in ("table", "wide"):
            table = self._table(events=True)
            now = time.time()
            rows = [table.header()] + [table.row(o, now, "ADDED") for o in items]
            self.widths = render.column_widths(rows)
            for row in rows:
                _out(render.format_row(row, self.widths))
        else:
            for obj in items:
                self.print_event("ADDED", obj)

    def print_event(self, type_: str, obj: Object) -> None:
        if self.output == "jsonpath":
            self._jsonpath(obj)
        elif self.columns is not None:
            _out(self.columns.table([obj])[1])
        elif self.output == "yaml":
            _out("---\n" + render.to_yaml({"type": type_, "object": obj}).rstrip("\n"))
        elif self.output == "json":
            _out(render.to_json({"type": type_, "object": obj}, compact=True))
        elif self.output == "name":
            _out(render.object_ref(self.kind, _name(obj)))
        else:
            row = self._table(events=True).row(obj, time.time(), type_)
            _out(render.format_row(row, self.widths))


def _out(text: str) -> None:
    print(text, flush=True)
