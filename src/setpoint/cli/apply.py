"""`setpoint apply -f`: declare objects from manifests; `apply_object` is the create-or-update.

`apply_object` is for every writer of desired state (this verb and the demo
today): it owns what the user declares (everything but `metadata` and
`status`, plus labels and annotations) and leaves the rest of the stored
object (status, finalizers, owner references) as it is.

Who changed a spec is noted for the timeline: given `notes` (the verb passes the
timeline of its store, `setpoint.insight.timeline`), `apply_object` notes
`user@host` against the spec it is about to write, and the recorder names that
actor on the change it then sees. The stored object carries no trace of it.

A process-compose file is read as `setpoint.cli.load.read_manifests` reads it;
`--compose-namespace NS` applies only its processes in namespace NS (process-compose's
`namespace start NS`, or `-n NS`).

`check_manifests` is the whole admission of a set of manifests (every document
parsed, validated as the store will, within the store's size limit, and no object
named twice): `apply` writes nothing unless all pass, and if a write still fails it
stops there and says which objects were applied and which were not.
The store refuses any write that closes a `dependsOn` cycle
(`setpoint.store.dependency_index`); `refuse_dependency_cycles` is what makes `apply` and
`up` refuse a set of manifests that would close one whole, before anything is written,
reading only the stored objects the set depends on.
"""

from __future__ import annotations

import argparse
import copy
import getpass
import socket
from collections.abc import Sequence
from typing import Literal

from setpoint.cli.context import Context
from setpoint.cli.load import (
    KINDS_HINT,
    Manifest,
    add_compose_namespace_option,
    identify,
    read_manifests,
)
from setpoint.cli.render import object_ref
from setpoint.errors import AlreadyExists, Conflict, Error, Invalid, NotFound, UnknownKind
from setpoint.model import Kind, Object, Registry
from setpoint.model.admission import refuse_duplicates
from setpoint.model.dependency_graph import (
    Node,
    cycle_message,
    declaring_kind,
    dependencies_of,
    find_cycle,
    node_of,
)
from setpoint.model.wellknown import RESTARTED_AT
from setpoint.store.base import Actor, Store, WriteOptions
from setpoint.store.rules import encode as stored_form

ApplyResult = Literal["created", "configured", "unchanged"]

ATTEMPTS = 10
"""Read-modify-write rounds before a busy object's `Conflict` is given to the caller."""

_USER_METADATA = ("labels", "annotations")
_NOT_DECLARED = ("apiVersion", "kind", "metadata", "status")


async def apply_object(store: Store, obj: Object, *, actor: Actor | None = None) -> ApplyResult:
    """Make the stored object say what `obj` declares; return what that took.

    Absent: created (status and server-set metadata in `obj` are ignored).
    Being deleted: `Conflict`, nothing written (what it declares would go with it).
    Present: its declared fields and labels/annotations are replaced by `obj`'s
    and the result is written with compare-and-swap on the stored
    `resourceVersion`; on `Conflict` it re-reads and tries again. Nothing to
    change (as the store decides, on `obj` validated): `unchanged`, and nothing is
    written. Raises `Invalid` (naming the field), writing nothing, when `obj` does not
    validate. Every write names `actor` (default: `local_actor()`), which the store keeps
    with it (the timeline's "who").
    """
    kind = store.registry.for_object(obj)
    meta = obj["metadata"]
    options = WriteOptions(actor=actor or local_actor())
    for _ in range(ATTEMPTS):
        try:
            current = await store.get(
                kind.api_version, kind.kind, meta["name"], namespace=meta.get("namespace")
            )
        except NotFound:
            try:
                await store.create(_for_create(obj), options=options)
            except AlreadyExists:
                continue  # created meanwhile: update it instead
            return "created"
        if current["metadata"].get("deletionTimestamp"):
            # As Kubernetes: writing onto it would be lost with it. Say so, write nothing.
            name = meta["name"]
            raise Conflict(
                f"{object_ref(kind, name)} is being deleted: apply again once it is gone "
                f"(setpoint wait --for=delete {kind.singular}/{name})"
            )
        try:
            # The store validates it (once) and writes nothing when nothing changes.
            written = await store.update(declared_onto(current, obj), options=options)
        except (Conflict, NotFound):
            continue  # changed or deleted meanwhile: read again
        version = current["metadata"]["resourceVersion"]
        return "unchanged" if written["metadata"]["resourceVersion"] == version else "configured"
    raise Conflict(
        f"{object_ref(kind, meta['name'])} kept changing while being applied "
        f"({ATTEMPTS} attempts); try again"
    )


MANAGER = "setpoint"
"""The field manager of the CLI's writes (as its HTTP client's User-Agent names it)."""


def local_actor() -> Actor:
    """Who runs this command: `user@host`, manager `setpoint` (a server the store is reached
    through names the user its token authenticates instead)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return Actor(f"{user}@{socket.gethostname()}", MANAGER, MANAGER)


def _for_create(desired: Object) -> Object:
    obj = {k: v for k, v in desired.items() if k != "status"}
    keep = ("name", "namespace", "labels", "annotations", "finalizers", "ownerReferences")
    obj["metadata"] = {k: v for k, v in desired["metadata"].items() if k in keep}
    return obj


def declared_onto(current: Object, desired: Object) -> Object:
    """`current` with what `desired` declares laid onto it, as `apply_object` writes it."""
    updated = copy.deepcopy(current)
    for key in list(updated):
        if key not in _NOT_DECLARED and key not in desired:
            del updated[key]
    for key, value in desired.items():
        if key not in _NOT_DECLARED:
            updated[key] = copy.deepcopy(value)
    meta = updated["metadata"]
    for key in _USER_METADATA:
        value = desired["metadata"].get(key)
        if value:
            meta[key] = copy.deepcopy(value)
        else:
            meta.pop(key, None)
    _keep_restart_request(current, updated)
    return updated


def _keep_restart_request(current: Object, updated: Object) -> None:
    """Keep a restart request (`setpoint restart`) the manifest does not declare, on the
    object and on a pod template: it is not declared state, and dropping it from a
    Deployment's template would roll every replica once more (as kubectl's three-way apply
    keeps what it did not set)."""
    pairs = [(current.get("metadata"), updated["metadata"])]
    template = (current.get("spec") or {}).get("template")
    new_template = (updated.get("spec") or {}).get("template")
    if isinstance(template, dict) and isinstance(new_template, dict):
        pairs.append((template.get("metadata"), new_template.setdefault("metadata", {})))
    for old, new in pairs:
        stamp = ((old or {}).get("annotations") or {}).get(RESTARTED_AT)
        annotations = new.get("annotations") or {}
        if stamp is not None and RESTARTED_AT not in annotations:
            new["annotations"] = {**annotations, RESTARTED_AT: stamp}


def check_manifests(
    manifests: list[Manifest], registry: Registry, namespace: str, namespace_explicit: bool
) -> tuple[list[tuple[Manifest, Kind, Object]], list[str]]:
    """Validate every manifest without writing: the ones that pass, and the failures as
    one message (empty if none): the first, and how many more. Two manifests naming one
    object (kind, namespace, name) are a failure too."""
    ok: list[tuple[Manifest, Kind, Object]] = []
    problems: list[str] = []
    for manifest in manifests:
        try:
            kind, obj = identify(manifest, registry, namespace, namespace_explicit)
            checked = copy.deepcopy(obj)
            try:
                kind.validate(checked)
                stored_form(checked)  # over the store's size limit: refused now, not midway
            except Invalid as exc:
                name = checked.get("metadata", {}).get("name")
                ref = f"{object_ref(kind, name)}: " if isinstance(name, str) and name else ""
                raise Invalid(f"{manifest.where(exc.field)}: {ref}{exc}") from None
        except UnknownKind as exc:
            problems.append(f"{exc} ({KINDS_HINT})")
            continue
        except Invalid as exc:
            problems.append(str(exc))
            continue
        ok.append((manifest, kind, obj))
    try:
        refuse_duplicates((m.where(), _identity(k, obj)) for m, k, obj in ok)
    except Invalid as exc:
        problems.append(str(exc))
    if not problems:
        return ok, []
    more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
    return ok, [f"{problems[0]}{more}; nothing was applied"]


def _identity(kind: Kind, obj: Object) -> str:
    meta = obj["metadata"]
    if kind.namespaced:
        return f"{kind.kind}/{meta.get('namespace') or 'default'}/{meta['name']}"
    return f"{kind.kind}/{meta['name']}"


async def refuse_dependency_cycles(store: Store, objects: Sequence[Object]) -> None:
    """Raise `Invalid` (`dependsOn cycle: Process/a -> Process/b -> Process/a; remove one of
    these dependencies; nothing was applied`) if applying `objects` would close a dependency
    cycle among them and the stored objects.

    The store refuses the write that closes a cycle, for every writer; this check is what
    makes a set of manifests refused whole, before any of them is written. It reads only
    the stored objects the applied ones depend on, directly or not (one `get` each), never
    a list. An object being applied replaces the stored one of the same name.
    """
    registry = store.registry
    edges: dict[Node, frozenset[Node]] = {}
    for obj in objects:
        kind = registry.for_object(obj)
        edges[node_of(kind, obj)] = dependencies_of(registry, kind, obj)
    unread = [target for targets in edges.values() for target in targets]
    while unread:
        node = unread.pop()
        if node in edges:
            continue
        edges[node] = frozenset()
        declaring = declaring_kind(registry, node[0])
        if declaring is None:
            continue
        try:
            stored = await store.get(
                declaring.api_version, declaring.kind, node[2], node[1] or None
            )
        except NotFound:
            continue
        edges[node] = dependencies_of(registry, declaring, stored)
        unread.extend(edges[node])
    cycle = find_cycle(edges)
    if cycle is not None:
        raise Invalid(f"{cycle_message(cycle)}; nothing was applied")


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add the `apply` verb (`setpoint.cli.plan` runs it when `--dry-run=plan` is given)."""
    p = verbs.add_parser(
        "apply",
        parents=parents,
        description="Create objects that do not exist; update the declared fields, labels and "
        "annotations of those that do. Every document is validated before anything is written.",
    )
    add_filename_option(p)
    add_dry_run_plan_options(p, "write nothing, show the steps the controllers would take")
    add_compose_namespace_option(p)
    p.set_defaults(run=run)
    return p


def add_filename_option(p: argparse.ArgumentParser) -> None:
    """`-f FILE|DIR|-`, required and repeatable: the manifests a verb reads."""
    what = "a manifest file, a directory of them, or - (stdin)"
    p.add_argument("-f", "--filename", dest="filenames", action="append", required=True,
                   metavar="FILE|DIR|-", help=what)  # fmt: skip


def add_dry_run_plan_options(p: argparse.ArgumentParser, instead: str) -> None:
    """`--dry-run=plan` (`instead` says what the verb does then: `setpoint.cli.plan` runs
    it) and `-o text|json`, the form of that forecast."""
    p.add_argument("--dry-run", choices=("plan",), help=f"plan: {instead} (setpoint plan)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text",
                   help="with --dry-run=plan: text (default) or json")  # fmt: skip


def admitted(
    ctx: Context, args: argparse.Namespace, verb: str
) -> list[tuple[Manifest, Kind, Object]]:
    """The manifests `args.filenames` name, each checked as `check_manifests` does; any
    failure (or no object at all) is refused as one line naming `verb`."""
    manifests = read_manifests(args.filenames, compose_namespaces=args.compose_namespaces)
    if not manifests:
        raise Invalid(f"no objects passed to {verb}")
    checked, problems = check_manifests(
        manifests, ctx.registry, ctx.namespace, ctx.namespace_explicit
    )
    if problems:
        raise Invalid(problems[0])
    return checked


async def run(ctx: Context, args: argparse.Namespace) -> int:
    checked = admitted(ctx, args, "apply")
    async with ctx.open_store(create=True) as store:
        await refuse_dependency_cycles(store, [obj for _, _, obj in checked])
        actor = local_actor()
        written: list[str] = []
        for i, (manifest, kind, obj) in enumerate(checked):
            ref = object_ref(kind, obj["metadata"]["name"])
            try:
                result = await apply_object(store, obj, actor=actor)
            except Error as exc:
                left = [object_ref(k, o["metadata"]["name"]) for _, k, o in checked[i + 1 :]]
                raise type(exc)(
                    f"{manifest.where(getattr(exc, 'field', None))}: {ref}: {exc}; "
                    f"{_listed('applied before it', written)}; "
                    f"{_listed('not applied', [ref, *left])}"
                ) from None
            written.append(ref)
            print(f"{ref} {result}", flush=True)
    return 0


def _listed(what: str, refs: list[str]) -> str:
    return f"{what}: {', '.join(refs)}" if refs else f"{what}: none"
