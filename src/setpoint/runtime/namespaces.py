"""The Namespaces a Kubernetes API server always has: `default` and `kube-system` exist
before anyone creates them, and clients count on it (kopf run with `--namespace=default`
waits until the `default` Namespace is listed before it watches anything in it).

`ensure_system_namespaces(store)` creates those that are missing, when the store's
registry has the core `v1 Namespace` kind (`setpoint.runtime.kinds`); it writes nothing
when they exist, so it may run at every start. The engine, `setpoint serve` and the test
kit's `ApiServer` call it beside `publish_kinds`.
"""

from __future__ import annotations

from setpoint.errors import AlreadyExists
from setpoint.store import Store

__all__ = ["SYSTEM_NAMESPACES", "ensure_system_namespaces"]

SYSTEM_NAMESPACES = ("default", "kube-system")
"""The Namespaces that exist from the start, as on a Kubernetes cluster."""


async def ensure_system_namespaces(store: Store) -> int:
    """Create each of `SYSTEM_NAMESPACES` that is missing; return how many were created."""
    if not store.registry.registered("v1", "Namespace"):
        return 0
    items, _ = await store.list("v1", "Namespace")
    present = {obj["metadata"]["name"] for obj in items}
    created = 0
    for name in SYSTEM_NAMESPACES:
        if name in present:
            continue
        try:
            await store.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            )
        except AlreadyExists:  # another process made it meanwhile
            continue
        created += 1
    return created
