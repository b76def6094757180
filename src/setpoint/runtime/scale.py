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

from setpoint.errors import Conflict, Invalid
from setpoint.model import Kind
from setpoint.model.scale import Scale, scale_of, scale_subresource, value_at
from setpoint.store.base import NO_OPTIONS, Store, WriteOptions

__all__ = ["Scale", "read_scale", "scale_of", "write_scale"]

_RETRIES = 16


async def read_scale(store: Store, kind: Kind, name: str, namespace: str | None) -> Scale:
    """The scale of the object `name`; `NotFound` if it does not exist."""
    scale_subresource(kind)
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
    sub = scale_subresource(kind)
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
        if value_at(obj, sub.spec_replicas_path) == replicas:
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
