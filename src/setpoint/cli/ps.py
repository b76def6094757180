"""`setpoint ps`: the table `setpoint up` shows, once, from the store: one row per
workload (Deployments, Processes, Jobs, Services, and the control kinds, those registered)
with its readiness, phase, restarts, pid, age and why it is not Ready, and under an object
that waits the root blocker along its `dependsOn` chain with a command to run
(`setpoint.cli.status_table`). The verb compose users reach for (`docker compose ps`,
`process-compose process list`); `get all` gives kubectl's tables instead.

It only reads (`Context.reader`: no event loop), in the terminal's width (`COLUMNS`,
else 80 when the output is no terminal).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time

from setpoint.cli.context import Context
from setpoint.cli.get import ALL
from setpoint.cli.status_table import Key, key_of, kind_aliases, line_text, view_lines
from setpoint.errors import UnknownKind
from setpoint.model import Kind, Object, parse_selector


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "ps",
        parents=parents,
        description="Show every workload as `setpoint up` does, once: readiness, phase, "
        "restarts, pid, age and why it is not Ready, with what it waits for.",
    )
    p.add_argument(
        "-l", "--selector", metavar="SELECTOR", help="label selector, e.g. app=web,tier!=db"
    )
    p.add_argument(
        "-A", "--all-namespaces", action="store_true", help="list objects in every namespace"
    )
    p.set_defaults(run=run)


def run(ctx: Context, args: argparse.Namespace) -> int:
    kinds = [kind for name in ALL if (kind := _kind(ctx, name)) is not None]
    selector = parse_selector(args.selector)
    objects: dict[Key, Object] = {}
    with ctx.reader() as reader:
        for kind in kinds:
            namespace = None if args.all_namespaces else ctx.namespace_of(kind)
            items, _ = reader.list(
                kind.api_version, kind.kind, namespace=namespace, label_selector=selector
            )
            objects.update((key_of(obj), obj) for obj in items)
    if not objects:
        where = "" if args.all_namespaces else f" in {ctx.namespace} namespace"
        print(f"No resources found{where}.", file=sys.stderr)
        return 0
    width = shutil.get_terminal_size().columns
    for line in view_lines(objects, width, time.time(), aliases=kind_aliases(kinds)):
        print(line_text(line))
    return 0


def _kind(ctx: Context, name: str) -> Kind | None:
    try:
        return ctx.registry.resolve(name)
    except UnknownKind:
        return None
