"""`setpoint rollout status|history|undo|restart DEPLOYMENT` and `setpoint scale`, as kubectl.

* `rollout status deploy/web [--timeout 5m] [-w=false]`: follows the rollout through
  the store's watch, printing kubectl's progress lines, until it completes (exit 0),
  misses its progress deadline (`error: ... exceeded its progress deadline`, exit 1)
  or the timeout passes (exit 1).
* `rollout history deploy/web [--revision N]`: the revisions kept (REVISION,
  CHANGE-CAUSE), or one revision's template as YAML.
* `rollout undo deploy/web [--to-revision N]`: puts the template of revision N (by
  default the one before the current) back into the spec; the controller rolls to it.
* `rollout restart deploy/web`: stamps the template with `setpoint.dev/restartedAt`,
  which rolls every replica (`setpoint restart deployment/web` does the same:
  `setpoint.cli.restart`).
* `scale KIND/NAME --replicas N [--current-replicas M]`: through the scale
  subresource, for any kind that has one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import time
from collections.abc import Callable

import yaml

from setpoint.cli.apply import local_actor
from setpoint.cli.context import Context, kind_and_names, until_signalled
from setpoint.cli.render import human_duration, object_ref
from setpoint.cli.restart import request_restart
from setpoint.errors import Conflict, Invalid
from setpoint.model import Object, get_condition
from setpoint.model.durations import parse_duration
from setpoint.model.wellknown import CHANGE_CAUSE, CHANGED_BY, DEPLOYMENT_LABEL
from setpoint.runtime.leases import micro_time
from setpoint.runtime.scale import read_scale, write_scale
from setpoint.store import WriteOptions
from setpoint.store.base import Store
from setpoint.workloads.deployment import (
    CONTROLLER_REVISION,
    DEPLOYMENT,
    PROGRESSING,
    DeploymentSpecSchema,
)


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    rollout = verbs.add_parser(
        "rollout",
        parents=parents,
        description="Follow, list, undo or restart the rollout of a Deployment.",
    )
    actions = rollout.add_subparsers(
        title="actions", metavar="ACTION", required=True, parser_class=type(rollout)
    )
    p = actions.add_parser("status", parents=parents, help="follow a rollout until it is done")
    p.add_argument("target", metavar="deployment/NAME")
    p.add_argument(
        "--timeout", default="0", help="give up after this long (0: never), e.g. 90s, 5m"
    )
    p.add_argument(
        "-w", "--watch", default="true", choices=["true", "false"],
        help="follow until done (false: print the state once)",
    )  # fmt: skip
    p.set_defaults(run=status)
    p = actions.add_parser("history", parents=parents, help="list the revisions kept")
    p.add_argument("target", metavar="deployment/NAME")
    p.add_argument("--revision", type=int, default=0, help="show this revision's template")
    p.set_defaults(run=history)
    p = actions.add_parser("undo", parents=parents, help="roll back to an earlier revision")
    p.add_argument("target", metavar="deployment/NAME")
    p.add_argument(
        "--to-revision", type=int, default=0, help="the revision to go back to (default: previous)"
    )
    p.set_defaults(run=undo)
    p = actions.add_parser("restart", parents=parents, help="roll every replica afresh")
    p.add_argument("target", metavar="deployment/NAME")
    p.set_defaults(run=restart)

    p = verbs.add_parser(
        "scale",
        parents=parents,
        description="Set the desired replicas of KIND/NAME through its scale subresource.",
    )
    p.add_argument("target", metavar="KIND/NAME")
    p.add_argument("--replicas", type=int, required=True, help="the new number of replicas")
    p.add_argument(
        "--current-replicas", type=int, default=None,
        help="only scale if the current desired replicas is this",
    )  # fmt: skip
    p.set_defaults(run=scale)


def _deployment_name(ctx: Context, target: str) -> str:
    kind, names = kind_and_names(ctx.registry, target, [])
    if kind is not DEPLOYMENT:
        raise Invalid(f"{target!r}: rollout works on deployments (deployment/NAME)")
    if len(names) != 1:
        raise Invalid(f"{target!r}: want deployment/NAME")
    return names[0]


def rollout_state(obj: Object) -> tuple[bool, str]:
    """(done, message) of a Deployment's rollout, in kubectl's words."""
    name = obj["metadata"]["name"]
    status = obj.get("status") or {}
    generation = obj["metadata"].get("generation", 1)
    if status.get("observedGeneration", 0) < generation:
        return False, "Waiting for deployment spec update to be observed..."
    progressing = get_condition(status, PROGRESSING) or {}
    if progressing.get("reason") == "ProgressDeadlineExceeded":
        raise Invalid(f'deployment "{name}" exceeded its progress deadline')
    if progressing.get("reason") == "WaitingForDependency":
        return False, (
            f'Waiting for deployment "{name}" rollout to start: {progressing.get("message")}'
        )
    want = DeploymentSpecSchema.of(obj).replicas
    updated = int(status.get("updatedReplicas", 0))
    total = int(status.get("replicas", 0))
    available = int(status.get("availableReplicas", 0))
    wait = f'Waiting for deployment "{name}" rollout to finish: '
    if updated < want:
        return False, f"{wait}{updated} out of {want} new replicas have been updated..."
    if total > updated:
        return False, f"{wait}{total - updated} old replicas are pending termination..."
    if available < updated:
        return False, f"{wait}{available} of {updated} updated replicas are available..."
    return True, f'deployment "{name}" successfully rolled out'


async def status(ctx: Context, args: argparse.Namespace) -> int:
    name = _deployment_name(ctx, args.target)
    timeout = parse_duration(args.timeout, "--timeout")
    async with ctx.open_store() as store:

        async def follow() -> int:
            revision = await store.revision()
            obj = await store.get(DEPLOYMENT.api_version, DEPLOYMENT.kind, name, ctx.namespace)
            done, message = rollout_state(obj)
            print(message, flush=True)
            if done or args.watch == "false":
                return 0
            changes = store.watch(
                DEPLOYMENT.api_version, DEPLOYMENT.kind, ctx.namespace, since=revision
            )
            async for change in changes:
                if change.object["metadata"]["name"] != name:
                    continue
                if change.type == "DELETED":
                    raise Invalid(f'deployment "{name}" was deleted')
                done, now = rollout_state(change.object)
                if now != message:
                    print(now, flush=True)
                    message = now
                if done:
                    return 0
            return 1

        if not timeout:
            return await until_signalled(follow())
        try:
            async with asyncio.timeout(timeout):
                return await until_signalled(follow())
        except TimeoutError:
            raise Invalid(
                f"timed out waiting for the rollout ({human_duration(timeout)})"
            ) from None


async def _revisions(store: Store, namespace: str, name: str) -> list[Object]:
    items, _ = await store.list(
        CONTROLLER_REVISION.api_version,
        CONTROLLER_REVISION.kind,
        namespace,
        label_selector=f"{DEPLOYMENT_LABEL}={name}",
    )
    return sorted(items, key=lambda r: int(r.get("revision", 0)))


async def history(ctx: Context, args: argparse.Namespace) -> int:
    name = _deployment_name(ctx, args.target)
    async with ctx.open_store() as store:
        await store.get(DEPLOYMENT.api_version, DEPLOYMENT.kind, name, ctx.namespace)
        revisions = await _revisions(store, ctx.namespace, name)
    if args.revision:
        found = [r for r in revisions if r.get("revision") == args.revision]
        if not found:
            raise Invalid(f"unable to find the specified revision {args.revision}")
        print(f"{object_ref(DEPLOYMENT, name)} with revision #{args.revision}")
        print(yaml.safe_dump(found[0]["data"]["template"], sort_keys=False), end="")
        return 0
    print(object_ref(DEPLOYMENT, name))
    print("REVISION  CHANGE-CAUSE")
    for r in revisions:
        cause = (r["metadata"].get("annotations") or {}).get(CHANGE_CAUSE)
        print(f"{r['revision']:<9} {cause or '<none>'}")
    return 0


async def _update_template(
    store: Store, namespace: str, name: str, change: Callable[[Object], bool]
) -> tuple[Object, bool]:
    """Apply `change(obj) -> bool` to the Deployment by compare-and-swap; return the object
    and whether it changed."""
    for _ in range(8):
        obj = await store.get(DEPLOYMENT.api_version, DEPLOYMENT.kind, name, namespace)
        updated = copy.deepcopy(obj)
        if not change(updated):
            return obj, False
        annotations = updated["metadata"].setdefault("annotations", {})
        annotations[CHANGED_BY] = "setpoint rollout"
        with contextlib.suppress(Conflict):  # someone wrote meanwhile: read again
            return await store.update(updated, options=WriteOptions(actor=local_actor())), True
    raise Invalid(f'deployment "{name}" keeps changing; try again')


async def undo(ctx: Context, args: argparse.Namespace) -> int:
    name = _deployment_name(ctx, args.target)
    async with ctx.open_store() as store:
        obj = await store.get(DEPLOYMENT.api_version, DEPLOYMENT.kind, name, ctx.namespace)
        revisions = await _revisions(store, ctx.namespace, name)
        current = int((obj.get("status") or {}).get("currentRevision") or 0)
        if args.to_revision:
            target = [r for r in revisions if r.get("revision") == args.to_revision]
            if not target:
                raise Invalid(f"unable to find the specified revision {args.to_revision}")
        else:
            target = [r for r in revisions if int(r.get("revision", 0)) < current][-1:]
            if not target:
                raise Invalid("no rollout history found: nothing to roll back to")
        template = target[0]["data"]["template"]
        number = target[0]["revision"]

        def put_back(o: Object) -> bool:
            if o["spec"]["template"] == template:
                return False
            o["spec"]["template"] = copy.deepcopy(template)
            return True

        _, changed = await _update_template(store, ctx.namespace, name, put_back)
    ref = object_ref(DEPLOYMENT, name)
    if not changed:
        print(f"{ref} skipped rollback (current template already matches revision {number})")
    else:
        print(f"{ref} rolled back")
    return 0


async def restart(ctx: Context, args: argparse.Namespace) -> int:
    name = _deployment_name(ctx, args.target)
    async with ctx.open_store() as store:
        await request_restart(store, DEPLOYMENT, name, ctx.namespace, micro_time(time.time()))
    print(f"{object_ref(DEPLOYMENT, name)} restarted")
    return 0


async def scale(ctx: Context, args: argparse.Namespace) -> int:
    kind, names = kind_and_names(ctx.registry, args.target, [])
    if len(names) != 1:
        raise Invalid(f"{args.target!r}: want KIND/NAME")
    namespace = ctx.namespace_of(kind)
    async with ctx.open_store() as store:
        version = None
        if args.current_replicas is not None:
            current = await read_scale(store, kind, names[0], namespace)
            if current.replicas != args.current_replicas:
                raise Invalid(
                    f"expected {args.current_replicas} replicas, found {current.replicas}",
                    field="current-replicas",
                )
            version = current.resource_version
        await write_scale(
            store,
            kind,
            names[0],
            namespace,
            args.replicas,
            resource_version=version,
            options=WriteOptions(actor=local_actor()),
        )
    print(f"{object_ref(kind, names[0])} scaled")
    return 0
