"""The scale subresource: read and set the replica count of any kind that declares one.

A kind registered with `scale=ScaleSubresource()` keeps its desired replicas at
`spec.replicas`, the observed count at `status.replicas` and its label selector (a
string) at `status.selector`, or at the paths it names, as a Kubernetes CRD's
`subresources.scale`. `setpoint scale` and the Autoscaler use these two functions and
need to know nothing else of the kind.

`write_scale` changes only the replica count, by compare-and-swap on the object's
resourceVersion: given `resource_version`, a newer object is a `Conflict` (the caller
decided on stale data); without it, it retries on conflicts with other writers.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from setpoint.errors import Conflict, Invalid
from setpoint.model import Kind, Object, ScaleSubresource
from setpoint.store.base import NO_OPTIONS, Store, WriteOptions

__all__ = ["Scale", "read_scale", "scale_of", "write_scale"]

_RETRIES = 16


@dataclass(frozen=True, slots=True)
class Scale:
    """An object's scale: desired `replicas`, observed `status_replicas`, its `selector`."""

    replicas: int
    status_replicas: int
    selector: str | None
    resource_version: str


def _subresource(kind: Kind) -> ScaleSubresource:
    if kind.scale is None:
        raise Invalid(f"{kind.kind} has no scale subresource", field="kind")
    return kind.scale


def _get(obj: Object, path: str) -> Any:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def scale_of(kind: Kind, obj: Object) -> Scale:
    """The scale of `obj`, an object of `kind`."""
    sub = _subresource(kind)
    selector = _get(obj, sub.label_selector_path) if sub.label_selector_path else None
    return Scale(
        replicas=int(_get(obj, sub.spec_replicas_path) or 0),
        status_replicas=int(_get(obj, sub.status_replicas_path) or 0),
        selector=selector if isinstance(selector, str) else None,
        resource_version=str(obj["metadata"].get("resourceVersion", "")),
    )


async def read_scale(store: Store, kind: Kind, name: str, namespace: str | None) -> Scale:
    """The scale of the object `name`; `NotFound` if it does not exist."""
    _subresource(kind)
    return scale_of(kind, await store.get(kind.api_version, kind.kind, name, namespace))


async def write_scale(
    store: Store,
    kind: Kind,
    name: str,
    namespace: str | None,
    replicas: int,
    *,
    resource_version: str | None = None,
    options: WriteOptions = NO_OPTIONS,
) -> Scale:
    """Set the desired replicas of `name` to `replicas`; return the scale written (with a
    dry run in `options`, as it would be)."""
    sub = _subresource(kind)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise Invalid(f"replicas must be a whole number >= 0, not {replicas!r}", field="replicas")
    *parents, leaf = sub.spec_replicas_path.split(".")
    for _ in range(_RETRIES):
        obj = await store.get(kind.api_version, kind.kind, name, namespace)
        current = str(obj["metadata"].get("resourceVersion", ""))
        if resource_version is not None and current != resource_version:
            raise Conflict(
                f"{kind.kind} {name!r} changed (resourceVersion {current}, "
                f"not {resource_version}); read its scale again"
            )
        if _get(obj, sub.spec_replicas_path) == replicas:
            return scale_of(kind, obj)
        updated = copy.deepcopy(obj)
        node = updated
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = replicas
        try:
            return scale_of(kind, await store.update(updated, options=options))
        except Conflict:
            if resource_version is not None:
                raise
    raise Conflict(f"{kind.kind} {name!r}: too many concurrent writers; try again")
