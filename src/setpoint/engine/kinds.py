"""The built-in kinds: one registry holding every kind setpoint itself defines.

Each package registers its own kinds by an explicit call (`setpoint.runtime.register`,
`setpoint.workloads.register`, `setpoint.control.register`); `builtin_kinds` makes those
calls on a new registry. Nothing is registered by importing a module. The kinds are
declared in each package's `kinds` module, which names its schemas lazily: this imports
no pydantic and no controller. No I/O.
"""

from __future__ import annotations

from setpoint.control import kinds as control
from setpoint.model.kinds import Registry
from setpoint.runtime import kinds as runtime
from setpoint.workloads import kinds as workloads


def builtin_kinds() -> Registry:
    """A new registry with every built-in kind: Event, Lease, CustomResourceDefinition,
    Namespace, ConfigMap and Pod (core v1, no controller), Mutating- and
    ValidatingWebhookConfiguration, Process, Job, Deployment,
    ControllerRevision, Service, Thermostat and Autoscaler. Add user kinds to it with
    `Registry.register` (or a kinds module's `register(registry)`)."""
    registry = Registry()
    for register in (runtime.register, workloads.register, control.register):
        register(registry)
    return registry
