"""The runtime's own kinds, `Event` (v1) and `Lease` (coordination.k8s.io/v1), the
Kubernetes core kinds stored with no controller (`Namespace`, `ConfigMap`, `Pod`: v1), and
`register`, which adds them, the kind of CRDs (`setpoint.model.crd.CRD`, kinds as data) and
the two kinds that configure admission webhooks (`setpoint.model.webhooks`) to a registry.

Only declarations: the schemas stay beside the code that writes them
(`setpoint.runtime.events`, `setpoint.runtime.leases`; `setpoint.runtime.core` for the
core kinds) and are named lazily, so naming
these kinds imports neither pydantic nor those modules. No I/O.
"""

from __future__ import annotations

from setpoint.model.crd import CRD
from setpoint.model.kinds import Kind, PrinterColumn, Registry
from setpoint.model.webhooks import MUTATING, VALIDATING

EVENT = Kind(
    "v1",
    "Event",
    plural="events",
    short_names=("ev",),
    namespaced=True,
    body="setpoint.runtime.events:EventBody",
)
"""The built-in `Event` kind (core group, as Kubernetes)."""

LEASE = Kind(
    "coordination.k8s.io/v1", "Lease", spec="setpoint.runtime.leases:LeaseSpec", plural="leases"
)
"""The built-in `Lease` kind (namespaced), as Kubernetes' coordination.k8s.io/v1 Lease."""

NAMESPACE = Kind(
    "v1",
    "Namespace",
    plural="namespaces",
    short_names=("ns",),
    namespaced=False,
    spec="setpoint.runtime.core:NamespaceSpec",
    status="setpoint.runtime.core:NamespaceStatus",
)
"""The `Namespace` kind (core group, cluster-scoped, as Kubernetes; no controller)."""

CONFIG_MAP = Kind(
    "v1",
    "ConfigMap",
    plural="configmaps",
    short_names=("cm",),
    namespaced=True,
    body="setpoint.runtime.core:ConfigMapBody",
)
"""The `ConfigMap` kind (core group, as Kubernetes)."""

POD = Kind(
    "v1",
    "Pod",
    plural="pods",
    short_names=("po",),
    namespaced=True,
    spec="setpoint.runtime.core:PodSpec",
    status="setpoint.runtime.core:PodStatus",
    columns=(PrinterColumn("STATUS", "status.phase"),),
    status_on_create=True,
)
"""The `Pod` kind (core group, as Kubernetes): stored, never run (no kubelet here)."""

KINDS = (EVENT, LEASE, CRD, NAMESPACE, CONFIG_MAP, POD, MUTATING, VALIDATING)
"""The kinds this package registers."""


def register(registry: Registry) -> None:
    """Add Event, Lease, CustomResourceDefinition, Namespace, ConfigMap, Pod,
    MutatingWebhookConfiguration and ValidatingWebhookConfiguration to `registry`."""
    for kind in KINDS:
        registry.register(kind)
