"""`setpoint wait --for=condition=TYPE[=STATUS] | --for=delete KIND/NAME... [--timeout 30s]`:
wait until objects meet a condition or are gone, as `kubectl wait`.

The objects are named (`KIND/NAME...` or `KIND NAME...`) or selected (`KIND -l SELECTOR`,
`KIND --all`) once, at the start. `condition=Ready` waits for status "True" (`=False`,
`=Unknown`: that status, in any case), and a condition whose `observedGeneration` is older
than the object's generation does not count (it speaks of an earlier spec). Each object
is reported as it gets there: `KIND/NAME condition met` or `KIND/NAME deleted`; after
`--timeout` (default 30s; 0 looks once) every other one is an error, `error: timed out
waiting for the condition on KIND/NAME`, and the exit status 1. A named object that does
not exist is an error for a condition, and already met for `delete`; a selector that
matches nothing is an error. For `delete`, an object replaced by a new one of the same
name (another uid) counts as deleted.

The current state is read once (`list`), then followed on the store's watch from that
revision: no polling.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass

from setpoint.cli.context import Context, add_kind_and_names, kind_and_names
from setpoint.cli.render import object_ref
from setpoint.errors import Invalid, NotFound
from setpoint.model import Kind, Object, get_condition, parse_selector
from setpoint.model.durations import parse_duration
from setpoint.store.base import Store


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "wait",
        parents=parents,
        description="Wait until each object has a condition (--for=condition=Ready, "
        "--for=condition=Ready=False) or is gone (--for=delete), as kubectl wait.",
    )
    add_kind_and_names(p, kind_help="e.g. process, or process/web", optional=False)
    p.add_argument(
        "--for",
        dest="wait_for",
        required=True,
        metavar="delete|condition=TYPE[=STATUS]",
        help="what to wait for",
    )
    p.add_argument("-l", "--selector", metavar="SELECTOR", help="the objects with these labels")
    p.add_argument("--all", action="store_true", help="every object of KIND in the namespace")
    p.add_argument(
        "--timeout",
        default="30s",
        metavar="DURATION",
        help="give up after this long, e.g. 90s or 5m (default 30s; 0: look once)",
    )
    p.set_defaults(run=run)


@dataclass(frozen=True)
class Wanted:
    """What to wait for: the object gone (`condition` None), or its `condition` at `status`."""

    condition: str | None
    status: str = "True"

    @classmethod
    def parse(cls, text: str) -> Wanted:
        if text == "delete":
            return cls(None)
        what, _, rest = text.partition("=")
        condition, _, status = rest.partition("=")
        if what != "condition" or not condition:
            raise Invalid(
                f"{text!r}: want delete, condition=TYPE or condition=TYPE=STATUS", field="--for"
            )
        return cls(condition, status or "True")

    def met_by(self, obj: Object) -> bool:
        """Whether `obj` has the condition at the status, for its current generation."""
        if self.condition is None:
            return False
        cond = get_condition(obj.get("status"), self.condition)
        if cond is None or str(cond.get("status", "")).lower() != self.status.lower():
            return False
        observed = cond.get("observedGeneration")
        generation = (obj.get("metadata") or {}).get("generation")
        return observed is None or generation is None or observed >= generation

    @property
    def met(self) -> str:
        return "condition met" if self.condition is not None else "deleted"


async def run(ctx: Context, args: argparse.Namespace) -> int:
    wanted = Wanted.parse(args.wait_for)
    timeout = parse_duration(args.timeout, "--timeout")
    kind, names = kind_and_names(ctx.registry, args.kind, args.names)
    selector = parse_selector(args.selector)
    if sum((bool(names), bool(selector.requirements), args.all)) != 1:
        raise Invalid("name the objects (KIND/NAME...), or select them with -l or --all")
    namespace = ctx.namespace_of(kind)
    async with ctx.open_store() as store:
        items, revision = await store.list(
            kind.api_version, kind.kind, namespace=namespace, label_selector=selector
        )
        current = {_name(o): o for o in items}
        if not names and not current:
            raise NotFound("no matching resources found")
        pending: dict[str, str] = {}  # name -> uid of the objects not there yet
        for name in names or sorted(current):
            obj = current.get(name)
            if obj is None and wanted.condition is not None:
                await store.get(kind.api_version, kind.kind, name, namespace)  # NotFound
            if obj is None or wanted.met_by(obj):
                _report(kind, name, wanted)
            else:
                pending[name] = str(obj["metadata"].get("uid", ""))
        if pending and timeout > 0:
            try:
                async with asyncio.timeout(timeout):
                    await _follow(store, kind, namespace, revision, wanted, pending)
            except TimeoutError:
                pass
    for name in sorted(pending):
        ref = object_ref(kind, name)
        print(f"error: timed out waiting for the condition on {ref}", file=sys.stderr)
    return 1 if pending else 0


async def _follow(
    store: Store,
    kind: Kind,
    namespace: str | None,
    revision: int,
    wanted: Wanted,
    pending: dict[str, str],
) -> None:
    """Take the objects that get there after `revision` out of `pending`, until none is left."""
    changes = store.watch(kind.api_version, kind.kind, namespace=namespace, since=revision)
    async for change in changes:
        name = _name(change.object)
        if name not in pending:
            continue
        uid = str(change.object["metadata"].get("uid", ""))
        if wanted.condition is None:
            met = change.type == "DELETED" or uid != pending[name]
        elif change.type == "DELETED":
            raise NotFound(f"{object_ref(kind, name)} was deleted while waiting for the condition")
        else:
            met = wanted.met_by(change.object)
        if met:
            _report(kind, name, wanted)
            del pending[name]
            if not pending:
                return


def _report(kind: Kind, name: str, wanted: Wanted) -> None:
    print(f"{object_ref(kind, name)} {wanted.met}", flush=True)


def _name(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))
