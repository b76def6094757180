"""The built-in kinds: one registry holding every kind setpoint itself defines.

Each package registers its own kinds by an explicit call (`setpoint.runtime.register`,
`setpoint.workloads.register`, `setpoint.control.register`); `builtin_kinds` makes those
calls on a new registry. Nothing is registered by importing a module. No I/O.
"""

from __future__ import annotations

from setpoint import control, runtime, workloads
from setpoint.model import Registry


def builtin_kinds() -> Registry:
    """A new registry with every built-in kind: Event and Lease, Process, Job, Deployment,
    ControllerRevision, Service, Thermostat and Autoscaler. Add user kinds to it with
    `Registry.register` (or a kinds module's `register(registry)`)."""
    registry = Registry()
    for register in (runtime.register, workloads.register, control.register):
        register(registry)
    return registry
