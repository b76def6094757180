"""The feedback-control kinds (`Thermostat`, `Autoscaler`) and `register`, which adds them
to a registry.

Only declarations: the schemas stay beside their controllers (`thermostat`,
`autoscaler`) and are named lazily, so naming these kinds imports neither pydantic nor
the controllers. No I/O.
"""

from __future__ import annotations

from setpoint.model.kinds import Kind, PrinterColumn, Registry

THERMOSTAT = Kind(
    "setpoint.dev/v1alpha1",
    "Thermostat",
    spec="setpoint.control.thermostat:ThermostatSpecSchema",
    status="setpoint.control.thermostat:ThermostatStatusSchema",
    namespaced=True,
    plural="thermostats",
    short_names=("thermo",),
    columns=(
        PrinterColumn("TARGET", "spec.target"),
        PrinterColumn("TEMPERATURE", "status.temperature", ".2f"),
        PrinterColumn("OUTPUT", "status.output", ".0f"),
    ),
)
"""The `Thermostat` kind."""

AUTOSCALER = Kind(
    "setpoint.dev/v1alpha1",
    "Autoscaler",
    spec="setpoint.control.autoscaler:AutoscalerSpecSchema",
    status="setpoint.control.autoscaler:AutoscalerStatusSchema",
    namespaced=True,
    plural="autoscalers",
    short_names=("as",),
    columns=(
        PrinterColumn("TARGET", "spec.scaleTargetRef.name"),
        PrinterColumn("METRIC", "status.currentMetric", ".3g"),
        PrinterColumn("REPLICAS", "status.currentReplicas"),
        PrinterColumn("DESIRED", "status.desiredReplicas"),
    ),
)
"""The `Autoscaler` kind."""

KINDS = (THERMOSTAT, AUTOSCALER)
"""The kinds this package defines."""


def register(registry: Registry) -> None:
    """Add Thermostat and Autoscaler to `registry`."""
    for kind in KINDS:
        registry.register(kind)
