"""`setpoint restart KIND/NAME...`: restart a Process, run a Job again, or roll a Deployment.

It writes a request, never signals a process: the annotation `setpoint.dev/restartedAt`
(`setpoint.model.wellknown.RESTARTED_AT`) gets the time now, on the object itself for a
Process or a Job, on the pod template for a Deployment (as `kubectl rollout restart` does,
so every replica is replaced by a rolling update). The controllers act on it once per new
value: a Process's child is stopped and started again (or started, if it had ended), a Job
runs again from scratch; each start records the request it honours in `status.restartedAt`
(`setpoint.workloads.child_plan.ChildDesired.restart_requested`). With no engine running, the
next one does it.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import time

from setpoint.cli.apply import local_actor
from setpoint.cli.context import Context, kind_and_names
from setpoint.cli.render import object_ref
from setpoint.errors import Conflict, Invalid
from setpoint.model import Kind, Object
from setpoint.model.wellknown import CHANGED_BY, RESTARTED_AT
from setpoint.runtime.leases import micro_time
from setpoint.store import Store, WriteOptions
from setpoint.workloads.deployment import DEPLOYMENT
from setpoint.workloads.job import JOB
from setpoint.workloads.process import PROCESS

RESTARTABLE = (PROCESS, JOB, DEPLOYMENT)
"""The kinds `restart` takes."""
_ATTEMPTS = 8
"""Compare-and-swap attempts before giving up on an object that keeps changing."""


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "restart",
        parents=parents,
        description="Ask the engine to restart: a Process's child is stopped (its stop "
        "signal, its grace period) and started again, whatever its restart policy; a Job "
        "runs again from scratch; a Deployment replaces every replica by a rolling update. "
        "Returns once the request is stored; the engine carries it out once.",
    )
    p.add_argument("target", metavar="KIND/NAME", help="or KIND NAME...")
    p.add_argument("names", nargs="*", metavar="NAME", help=argparse.SUPPRESS)
    p.set_defaults(run=run)


async def run(ctx: Context, args: argparse.Namespace) -> int:
    kind, names = kind_and_names(ctx.registry, args.target, args.names)
    if not any(kind is k or kind.kind == k.kind for k in RESTARTABLE):
        raise Invalid(
            f"{kind.kind} cannot be restarted: restart takes a Process, Job or Deployment"
        )
    if not names:
        raise Invalid(f"restart {args.target}: which one? say {kind.singular}/NAME")
    stamp = micro_time(time.time())
    async with ctx.open_store() as store:
        for name in names:
            await request_restart(store, kind, name, ctx.namespace, stamp)
            print(f"{object_ref(kind, name)} restarted")
    return 0


async def request_restart(
    store: Store, kind: Kind, name: str, namespace: str, stamp: str
) -> Object:
    """Set `RESTARTED_AT` to `stamp` on the object (a Deployment: on its template, signed
    `setpoint restart` as a change of its spec) by compare-and-swap; return the object
    written. `setpoint apply` keeps the request when a manifest does not declare it."""
    for _ in range(_ATTEMPTS):
        obj = copy.deepcopy(await store.get(kind.api_version, kind.kind, name, namespace))
        target = obj
        if kind.kind == DEPLOYMENT.kind:  # a new template: a spec change, signed
            target = obj["spec"]["template"]
            obj["metadata"].setdefault("annotations", {})[CHANGED_BY] = "setpoint restart"
        target.setdefault("metadata", {}).setdefault("annotations", {})[RESTARTED_AT] = stamp
        with contextlib.suppress(Conflict):  # someone wrote meanwhile: read again
            return await store.update(obj, options=WriteOptions(actor=local_actor()))
    raise Invalid(f'{kind.singular} "{name}" keeps changing; try again')
