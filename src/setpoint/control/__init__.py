"""Feedback control: a pure PID controller, simulated plants, relay auto-tuning, the
Thermostat and the Autoscaler (holds a metric at a target by scaling a Deployment).

`kinds` declares the kinds without importing the rest; `register(registry)` adds them to a
registry; importing registers nothing.
"""

from setpoint.control.kinds import KINDS, register

__all__ = ["KINDS", "register"]
