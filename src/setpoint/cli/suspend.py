"""`setpoint stop NAME...` and `setpoint start NAME...`: the daily verbs of process-compose
(`process stop` / `process start`) and docker compose, as a field of the object.

`stop` sets `spec.suspend` to true on a Process or a Job (as on a Kubernetes Job): the
engine stops its child (its stop signal, its grace period) and starts none until `start`
clears it (`setpoint.workloads.process`, `setpoint.workloads.job`; a Job that has finished
stays as it ended). It is a write to the store like any other, signed `user@host`, so
`kubectl patch process web --type merge -p '{"spec":{"suspend":true}}'` does the same, and
with no engine running the next one honours it. A NAME is `process/NAME`, `job/NAME`, or a
bare name that names one Process or one Job (one that names both is refused, naming
both). A Deployment is not stopped: it is scaled to 0 (`setpoint scale`). Applying a
manifest that does not say `suspend` again resumes the object (apply owns the spec), as
`docker compose up` starts a stopped service.

Every NAME is resolved, and found in the store, before anything is written: a refused NAME
leaves every object as it was. It writes only the one field (a merge patch), never signals
a process itself.
"""

from __future__ import annotations

import argparse

from setpoint.cli.apply import local_actor
from setpoint.cli.context import Context, check_name
from setpoint.cli.render import object_ref
from setpoint.errors import Invalid, NotFound
from setpoint.model import Kind, Registry
from setpoint.store import Store, WriteOptions
from setpoint.workloads.kinds import DEPLOYMENT, JOB, PROCESS

SUSPENDABLE = (PROCESS, JOB)
"""The kinds with a `spec.suspend`, which `stop` and `start` write."""


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    for verb, summary in (
        ("stop", "Stop Processes and Jobs and keep them stopped (spec.suspend: true): the "
         "engine stops each child with its stop signal and starts none, whatever the "
         "restart policy, until `setpoint start`. A Job that has finished stays as it "
         "ended. A Deployment is scaled to 0 instead (setpoint scale)."),
        ("start", "Start Processes and Jobs `setpoint stop` stopped (clears spec.suspend): "
         "the engine starts each child again once its dependencies hold; a Job goes on "
         "with its run."),
    ):  # fmt: skip
        p = verbs.add_parser(verb, parents=parents, description=summary)
        p.add_argument(
            "names",
            nargs="+",
            metavar="NAME",
            help="a Process's or a Job's name, or process/NAME, job/NAME",
        )
        p.set_defaults(run=run, suspend=verb == "stop")


def _kind_of(registry: Registry, arg: str) -> tuple[Kind | None, str]:
    """The kind a `KIND/NAME` argument names (None for a bare NAME) and the name; `Invalid`
    for a kind `stop` and `start` do not take, a Deployment saying how to stop it."""
    kind_arg, slash, name = arg.partition("/")
    if not slash:
        return None, check_name(arg)
    kind = registry.resolve(kind_arg)
    if kind.kind == DEPLOYMENT.kind and kind.api_version == DEPLOYMENT.api_version:
        raise Invalid(
            f"{arg}: a Deployment is not stopped but scaled to 0: "
            f"setpoint scale deployment/{name} --replicas 0"
        )
    if not any(kind.kind == k.kind and kind.api_version == k.api_version for k in SUSPENDABLE):
        raise Invalid(
            f"{arg}: stop and start take Processes and Jobs: NAME, process/NAME or job/NAME"
        )
    return kind, check_name(name)


async def _exists(store: Store, kind: Kind, name: str, namespace: str) -> bool:
    try:
        await store.get(kind.api_version, kind.kind, name, namespace)
    except NotFound:
        return False
    return True


async def resolve(
    store: Store, registry: Registry, args: list[str], namespace: str
) -> list[tuple[Kind, str]]:
    """The (kind, name) of each `NAME`, `process/NAME` or `job/NAME` argument, each found
    in `namespace`: `Invalid` (naming the argument) for one that is not, or for a bare
    NAME that names both a Process and a Job."""
    targets: list[tuple[Kind, str]] = []
    for arg in args:
        kind, name = _kind_of(registry, arg)
        if kind is not None:
            if not await _exists(store, kind, name, namespace):
                raise Invalid(f'{arg}: no {kind.kind} "{name}" in namespace {namespace}')
            targets.append((kind, name))
            continue
        found = [k for k in SUSPENDABLE if await _exists(store, k, name, namespace)]
        if not found:
            raise Invalid(f'{arg}: no Process or Job "{name}" in namespace {namespace}')
        if len(found) > 1:
            both = " and ".join(f"{k.singular}/{name}" for k in found)
            raise Invalid(f"{arg}: {both} both exist: say which")
        targets.append((found[0], name))
    return targets


async def run(ctx: Context, args: argparse.Namespace) -> int:
    patch = {"spec": {"suspend": bool(args.suspend)}}
    done = "stopped" if args.suspend else "started"
    async with ctx.open_store() as store:
        targets = await resolve(store, ctx.registry, args.names, ctx.namespace)
        for kind, name in targets:
            await store.patch(
                kind.api_version,
                kind.kind,
                name,
                patch,
                ctx.namespace,
                options=WriteOptions(actor=local_actor()),
            )
            print(f"{object_ref(kind, name)} {done}")
    return 0
