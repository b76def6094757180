"""`setpoint apply -f`: declare objects from manifests; `apply_object` is the create-or-update.

`apply_object` is for every writer of desired state (this verb and the demo
today): it owns what the user declares (everything but `metadata` and
`status`, plus labels and annotations) and leaves the rest of the stored
object (status, finalizers, owner references) as it is.

Who changed a spec is noted for the timeline: given `notes` (the verb passes the
timeline of its store, `setpoint.insight.timeline`), `apply_object` notes
`user@host` against the spec it is about to write, and the recorder names that
actor on the change it then sees. The stored object carries no trace of it.

`check_manifests` is the whole admission of a set of manifests (every document
parsed, validated as the store will, within the store's size limit, and no object
named twice): `apply` writes nothing unless all pass, and if a write still fails it
stops there and says which objects were applied and which were not.
`refuse_dependency_cycles` is checked by every writer of manifests (`apply`,
`up`) before anything is written: a `spec.dependsOn` cycle among the objects
being applied and those already stored is refused as `Invalid`, naming it.
"""

from __future__ import annotations

import argparse
import copy
import getpass
import socket
from collections.abc import Sequence
from typing import Literal

from setpoint.cli.context import Context
from setpoint.cli.load import KINDS_HINT, Manifest, identify, read_manifests
from setpoint.cli.render import object_ref
from setpoint.errors import AlreadyExists, Conflict, Error, Invalid, NotFound, UnknownKind
from setpoint.model import Kind, Object, Registry
from setpoint.model.admission import refuse_duplicates
from setpoint.model.wellknown import RESTARTED_AT
from setpoint.store.base import Actor, Store, WriteOptions
from setpoint.store.rules import encode as stored_form
from setpoint.workloads.dependencies import find_cycle

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
            written = await store.update(_declared_onto(current, obj), options=options)
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


def _declared_onto(current: Object, desired: Object) -> Object:
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


WORKLOAD_KINDS = ("Process", "Job", "Deployment")
"""Kinds whose stored objects' `spec.dependsOn` count towards cycles (those registered)."""


async def refuse_dependency_cycles(store: Store, objects: Sequence[Object]) -> None:
    """Raise `Invalid` (`dependsOn cycle: Process/a -> Process/b -> Process/a`) if applying
    `objects` would close a `spec.dependsOn` cycle with them and the stored workloads.

    Reads only. An object being applied replaces the stored one of the same name.
    """
    edges: dict[_Node, list[_Node]] = {}
    for kind_name in WORKLOAD_KINDS:
        try:
            kind = store.registry.resolve(kind_name)
        except (UnknownKind, Invalid):
            continue
        items, _ = await store.list(kind.api_version, kind.kind)
        for item in items:
            _add_edges(store.registry, item, edges)
    for obj in objects:
        _add_edges(store.registry, obj, edges)
    keyed = {_key(n): [_key(t) for t in targets] for n, targets in edges.items()}
    names = {_key(n): n for n in edges} | {_key(t): t for ts in edges.values() for t in ts}
    cycle = find_cycle(keyed)
    if cycle is None:
        return
    nodes = [names[k] for k in cycle]
    one_namespace = len({namespace for _, namespace, _ in nodes}) == 1
    path = " -> ".join(
        f"{kind}/{name}" if one_namespace else f"{kind}/{namespace}/{name}"
        for kind, namespace, name in nodes
    )
    raise Invalid(f"dependsOn cycle: {path}; remove one of these dependencies; nothing was applied")


_Node = tuple[str, str, str]
"""(kind, namespace, name) of a workload in the dependency graph."""


def _key(node: _Node) -> str:
    return "/".join(node)


def _add_edges(registry: Registry, obj: Object, edges: dict[_Node, list[_Node]]) -> None:
    spec = obj.get("spec")
    meta = obj.get("metadata") or {}
    entries = spec.get("dependsOn") if isinstance(spec, dict) else None
    kind = _kind_name(registry, str(obj.get("kind", "")))
    node = (kind, str(meta.get("namespace") or "default"), str(meta.get("name", "")))
    targets: list[_Node] = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("kind") and entry.get("name"):
            namespace = str(entry.get("namespace") or node[1])
            kind_name = _kind_name(registry, str(entry["kind"]))
            targets.append((kind_name, namespace, str(entry["name"])))
    edges[node] = targets  # an applied object's edges replace the stored ones


def _kind_name(registry: Registry, name: str) -> str:
    """`Process` for `Process`, `process`, `proc` ...; a name no kind answers to stays as is."""
    try:
        return registry.resolve(name).kind
    except (UnknownKind, Invalid):
        return name


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "apply",
        parents=parents,
        description="Create objects that do not exist; update the declared fields, labels and "
        "annotations of those that do. Every document is validated before anything is written.",
    )
    p.add_argument(
        "-f",
        "--filename",
        dest="filenames",
        action="append",
        required=True,
        metavar="FILE|DIR|-",
        help="a manifest file, a directory of them, or - (stdin)",
    )
    p.set_defaults(run=run)


async def run(ctx: Context, args: argparse.Namespace) -> int:
    manifests = read_manifests(args.filenames)
    if not manifests:
        raise Invalid("no objects passed to apply")
    checked, problems = check_manifests(
        manifests, ctx.registry, ctx.namespace, ctx.namespace_explicit
    )
    if problems:
        raise Invalid(problems[0])
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
