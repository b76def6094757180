"""`setpoint stop NAME...` and `setpoint start NAME...`: the daily verbs of process-compose
(`process stop` / `process start`) and docker compose, as a field of the object.

`stop` sets a Process's `spec.suspend` to true (as a Kubernetes Job's): the engine stops
its child (its stop signal, its grace period) and starts none until `start` clears it
(`setpoint.workloads.process`). It is a write to the store like any other, signed
`user@host`, so `kubectl patch process web --type merge -p '{"spec":{"suspend":true}}'`
does the same, and with no engine running the next one honours it. A NAME is a Process's
name, or `process/NAME`. Applying a manifest that does not say `suspend` again resumes
the Process (apply owns the spec), as `docker compose up` starts a stopped service.

It writes only the one field (a merge patch), never signals a process itself.
"""

from __future__ import annotations

import argparse

from setpoint.cli.apply import local_actor
from setpoint.cli.context import Context, check_name
from setpoint.cli.render import object_ref
from setpoint.errors import Invalid
from setpoint.model import Registry
from setpoint.store import WriteOptions
from setpoint.workloads.kinds import PROCESS


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    for verb, summary in (
        ("stop", "Stop Processes and keep them stopped (spec.suspend: true): the engine "
         "stops each child with its stop signal and starts none, whatever the restart "
         "policy, until `setpoint start`."),
        ("start", "Start Processes `setpoint stop` stopped (clears spec.suspend): the engine "
         "starts each child again once its dependencies hold."),
    ):  # fmt: skip
        p = verbs.add_parser(verb, parents=parents, description=summary)
        p.add_argument("names", nargs="+", metavar="NAME", help="a Process's name, or process/NAME")
        p.set_defaults(run=run, suspend=verb == "stop")


def process_names(registry: Registry, args: list[str]) -> list[str]:
    """The Process names of `NAME` or `process/NAME` arguments (`Invalid` naming one that
    is neither)."""
    names = []
    for arg in args:
        kind, slash, name = arg.partition("/")
        if not slash:
            kind, name = PROCESS.kind, arg
        if registry.resolve(kind).kind != PROCESS.kind:
            raise Invalid(f"{arg}: stop and start take Processes: NAME or process/NAME")
        check_name(name)
        names.append(name)
    return names


async def run(ctx: Context, args: argparse.Namespace) -> int:
    names = process_names(ctx.registry, args.names)
    patch = {"spec": {"suspend": bool(args.suspend)}}
    done = "stopped" if args.suspend else "started"
    async with ctx.open_store() as store:
        for name in names:
            await store.patch(
                PROCESS.api_version,
                PROCESS.kind,
                name,
                patch,
                ctx.namespace,
                options=WriteOptions(actor=local_actor()),
            )
            print(f"{object_ref(PROCESS, name)} {done}")
    return 0
