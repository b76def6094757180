"""`setpoint delete KIND NAME...`, `delete KIND -l SELECTOR` or `delete -f FILE`: remove objects.

Each object is deleted on its own: one that is missing is reported (exit 1)
and the others are still deleted. An object with finalizers is only marked
for deletion by the store; it goes when its finalizers are removed.
"""

from __future__ import annotations

import argparse
import sys

from setpoint.cli.apply import local_actor
from setpoint.cli.context import Context, kind_and_names
from setpoint.cli.load import identify, read_manifests
from setpoint.cli.render import resource_name
from setpoint.errors import Error, Invalid, NotFound
from setpoint.model import Kind, Selector, parse_selector
from setpoint.store import WriteOptions


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "delete",
        parents=parents,
        description="Delete objects: KIND NAME..., KIND/NAME..., KIND -l SELECTOR, or -f FILE.",
    )
    p.add_argument("kind", nargs="?", metavar="KIND")
    p.add_argument("names", nargs="*", metavar="NAME")
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
    p.set_defaults(run=run)


async def run(ctx: Context, args: argparse.Namespace) -> int:
    targets: list[tuple[Kind, str, str | None]] = []
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

    status = 0
    async with ctx.open_store() as store:
        if by_selector is not None:
            kind, selector = by_selector
            namespace = ctx.namespace_of(kind)
            items, _ = await store.list(
                kind.api_version, kind.kind, namespace=namespace, label_selector=selector
            )
            targets = [(kind, o["metadata"]["name"], namespace) for o in items]
            if not targets:
                print("No resources found", file=sys.stderr)
        for kind, name, namespace in targets:
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
