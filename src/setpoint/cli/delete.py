"""`setpoint delete KIND NAME...`, `delete KIND -l SELECTOR` or `delete -f FILE`: remove objects.

Each object is deleted on its own: one that is missing is reported (exit 1)
and the others are still deleted. An object with finalizers is only marked
for deletion by the store; it goes when its finalizers are removed.

`--dry-run=plan` deletes nothing and shows what deleting would do to the objects and what
depends on them: `setpoint.cli.plan` adds this verb and runs that (`targets` and
`selected` say which objects, for both).
"""

from __future__ import annotations

import argparse
import sys

from setpoint.cli.apply import add_dry_run_plan_options, local_actor
from setpoint.cli.context import Context, add_kind_and_names, kind_and_names
from setpoint.cli.load import identify, read_manifests
from setpoint.cli.render import resource_name
from setpoint.errors import Error, Invalid, NotFound
from setpoint.model import Kind, Selector, parse_selector
from setpoint.store import Store, WriteOptions

Target = tuple[Kind, str, str | None]
"""(kind, name, namespace) of one object to delete."""


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add the `delete` verb (`setpoint.cli.plan` runs it when `--dry-run=plan` is given)."""
    p = verbs.add_parser(
        "delete",
        parents=parents,
        description="Delete objects: KIND NAME..., KIND/NAME..., KIND -l SELECTOR, or -f FILE.",
    )
    add_kind_and_names(p, kind_help=None)
    p.add_argument(
        "-f",
        "--filename",
        dest="filenames",
        action="append",
        metavar="FILE|DIR|-",
        help="delete the objects these manifests name",
    )
    p.add_argument("-l", "--selector", metavar="SELECTOR", help="delete every object matching")
    p.add_argument(
        "--ignore-not-found", action="store_true", help="a missing object is not an error"
    )
    add_dry_run_plan_options(p, "delete nothing, show what deleting does to what depends on them")
    p.set_defaults(run=run)
    return p


def targets(
    ctx: Context, args: argparse.Namespace
) -> tuple[list[Target], tuple[Kind, Selector] | None]:
    """The objects the arguments name, or (with `-l`) none and the kind and selector whose
    objects `selected` lists."""
    targets: list[Target] = []
    by_selector: tuple[Kind, Selector] | None = None
    if args.filenames:
        if args.kind or args.selector:
            raise Invalid("give either -f FILE or KIND NAME..., not both")
        manifests = read_manifests(args.filenames)
        if not manifests:
            raise Invalid("no objects passed to delete")
        for manifest in manifests:
            kind, obj = identify(manifest, ctx.registry, ctx.namespace, ctx.namespace_explicit)
            name = obj["metadata"].get("name")
            if not isinstance(name, str) or not name:
                raise Invalid(f"{manifest.where('metadata.name')}: metadata.name: required")
            targets.append((kind, name, obj["metadata"].get("namespace")))
    elif not args.kind:
        raise Invalid("say what to delete: KIND NAME..., KIND -l SELECTOR, or -f FILE")
    else:
        kind, names = kind_and_names(ctx.registry, args.kind, args.names)
        selector = parse_selector(args.selector)
        if names and selector.requirements:
            raise Invalid("give NAMEs or a selector (-l), not both")
        if not names and not selector.requirements:
            raise Invalid(f"give the names of the {kind.plural} to delete, or a selector (-l)")
        targets = [(kind, name, ctx.namespace_of(kind)) for name in names]
        if not names:
            by_selector = (kind, selector)
    return targets, by_selector


async def selected(
    ctx: Context,
    store: Store,
    named: list[Target],
    by_selector: tuple[Kind, Selector] | None,
) -> list[Target]:
    """The objects to delete: those `targets` named, or those its selector selects now."""
    if by_selector is None:
        return named
    kind, selector = by_selector
    namespace = ctx.namespace_of(kind)
    items, _ = await store.list(
        kind.api_version, kind.kind, namespace=namespace, label_selector=selector
    )
    if not items:
        print("No resources found", file=sys.stderr)
    return [(kind, o["metadata"]["name"], namespace) for o in items]


async def run(ctx: Context, args: argparse.Namespace) -> int:
    named, by_selector = targets(ctx, args)  # a bad request is refused before the store opens
    status = 0
    async with ctx.open_store() as store:
        for kind, name, namespace in await selected(ctx, store, named, by_selector):
            try:
                await store.delete(
                    kind.api_version,
                    kind.kind,
                    name,
                    namespace=namespace,
                    options=WriteOptions(actor=local_actor()),
                )
            except NotFound as exc:
                if not args.ignore_not_found:
                    print(f"error: {exc}", file=sys.stderr)
                    status = 1
                continue
            except Error as exc:
                print(f'error: {resource_name(kind)} "{name}": {exc}', file=sys.stderr)
                status = 1
                continue
            print(f'{resource_name(kind)} "{name}" deleted', flush=True)
    return status
