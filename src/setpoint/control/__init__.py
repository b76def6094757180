"""Feedback control: a pure PID controller, simulated plants, relay auto-tuning, the
Thermostat and the Autoscaler (holds a metric at a target by scaling a Deployment).

`register(registry)` adds this package's kinds to a registry; importing registers nothing.
"""

from setpoint.control.autoscaler import AUTOSCALER
from setpoint.control.thermostat import THERMOSTAT
from setpoint.model import Registry

KINDS = (THERMOSTAT, AUTOSCALER)
"""The kinds this package defines."""


def register(registry: Registry) -> None:
    """Add Thermostat and Autoscaler to `registry`."""
    for kind in KINDS:
        registry.register(kind)


__all__ = ["KINDS", "register"]
