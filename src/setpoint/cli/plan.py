"""`setpoint plan -f FILE [-o text|json]` (and `setpoint apply --dry-run=plan -f FILE`): the steps
the controllers will take if the manifests are applied, in order, with their reasons; and
`setpoint delete --dry-run=plan ...`: the steps that follow deleting the objects named.

This module adds three verbs, `plan`, `apply` and `delete` (whose `run`s it wraps:
`--dry-run=plan` runs the forecast), so that neither `apply` nor `delete` imports it.

The manifests pass the same admission `apply` runs (`check_manifests`, dependency cycles),
are laid onto the stored objects in memory as `apply` would write them, and
`setpoint.engine.forecast` runs the kinds' pure plans forward from there. Nothing is
written. The footer names what the steps assume (a started process becomes Ready).
A deletion is forecast from the stored objects alone (`forecast_deletion`).
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from dataclasses import replace

import orjson

from setpoint.cli import apply, delete
from setpoint.cli.context import Context
from setpoint.cli.load import add_compose_namespace_option
from setpoint.engine.forecast import Forecast, forecast, forecast_deletion
from setpoint.errors import NotFound
from setpoint.model import Kind, Object
from setpoint.store import open_store
from setpoint.store.base import Store
from setpoint.workloads.kinds import CONTROLLER_REVISION, DEPLOYMENT, PROCESS


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    apply.add_parser(verbs, parents).set_defaults(run=_apply)
    delete.add_parser(verbs, parents).set_defaults(run=_delete)
    p = verbs.add_parser(
        "plan",
        parents=parents,
        description="Show the steps the controllers will take if the manifests are applied, "
        "in order, with their reasons. Nothing is written.",
    )
    add_plan_arguments(p)
    p.set_defaults(run=run)


async def _apply(ctx: Context, args: argparse.Namespace) -> int:
    """`apply`, or with `--dry-run=plan` this verb (nothing written)."""
    if args.dry_run == "plan":
        return await run(ctx, args)
    return await apply.run(ctx, args)


async def _delete(ctx: Context, args: argparse.Namespace) -> int:
    """`delete`, or with `--dry-run=plan` what deleting would do (nothing deleted)."""
    if args.dry_run == "plan":
        return await run_deletion(ctx, args)
    return await delete.run(ctx, args)


async def run_deletion(ctx: Context, args: argparse.Namespace) -> int:
    """`delete --dry-run=plan`: the steps that follow deleting the objects named; one that
    is missing is reported as `delete` reports it (exit 1, unless `--ignore-not-found`)."""
    named, by_selector = delete.targets(ctx, args)
    status = 0
    async with ctx.open_store() as store:
        current = await _stored(store)
        doomed: list[Object] = []
        for kind, name, namespace in await delete.selected(ctx, store, named, by_selector):
            try:
                doomed.append(await store.get(kind.api_version, kind.kind, name, namespace))
            except NotFound as exc:
                if not args.ignore_not_found:
                    print(f"error: {exc}", file=sys.stderr)
                    status = 1
    print_forecast(forecast_deletion(current, doomed), args.output)
    return status


def add_plan_arguments(p: argparse.ArgumentParser) -> None:
    apply.add_filename_option(p)
    p.add_argument("-o", "--output", choices=("text", "json"), default="text",
                   help="text (default) or json")  # fmt: skip
    add_compose_namespace_option(p)


async def _stored(store: Store) -> list[Object]:
    """The stored objects a forecast starts from: Deployments, Processes, revisions."""
    found: list[Object] = []
    for kind in (DEPLOYMENT, PROCESS, CONTROLLER_REVISION):
        items, _ = await store.list(kind.api_version, kind.kind)
        found += items
    return found


async def run(ctx: Context, args: argparse.Namespace) -> int:
    checked = apply.admitted(ctx, args, "plan")
    notes: tuple[str, ...] = ()
    try:
        async with ctx.open_store() as store:
            current, proposed = await _laid_onto(store, [(k, o) for _, k, o in checked])
    except NotFound as exc:  # no store yet: what `apply` would create it with
        if not str(exc).startswith("no store at"):
            raise
        store = await open_store("memory://", registry=ctx.registry, create=True)
        try:
            current, proposed = await _laid_onto(store, [(k, o) for _, k, o in checked])
        finally:
            await store.close()
        notes = ("no store yet: planned from an empty one",)
    result = forecast(current, proposed, time.time())
    print_forecast(replace(result, assumptions=result.assumptions + notes), args.output)
    return 0


async def _laid_onto(
    store: Store, checked: list[tuple[Kind, Object]]
) -> tuple[list[Object], list[Object]]:
    """(the stored objects a forecast starts from, the manifests' objects as `apply` would
    write them onto the stored ones), after the admission only a store can run."""
    await apply.refuse_dependency_cycles(store, [obj for _, obj in checked])
    current = await _stored(store)
    proposed: list[Object] = []
    for kind, obj in checked:
        meta = obj["metadata"]
        try:
            old = await store.get(kind.api_version, kind.kind, meta["name"], meta.get("namespace"))
        except NotFound:
            new = copy.deepcopy(obj)
        else:
            new = apply.declared_onto(old, obj)
            if kind.kind not in (DEPLOYMENT.kind, PROCESS.kind):
                current.append(old)
        kind.validate(new)
        proposed.append(new)
    return current, proposed


def print_forecast(result: Forecast, output: str) -> None:
    if output == "json":
        doc = {
            "steps": [s.as_dict() for s in result.steps],
            "settled": result.settled,
            "assumptions": list(result.assumptions),
        }
        print(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
        return
    if not result.steps:
        print("nothing to do")
    for step in result.steps:
        on = f" {step.target}" if step.target and step.target != step.name else ""
        print(f"{step.order:>3}. {step.kind}/{step.name}: {step.action}{on} ({step.reason})")
    if not result.settled:
        print("(the forecast stopped at its step budget: the plans had not settled)")
    for assumption in result.assumptions:
        print(f"note: {assumption}")
