"""A simulated room with a heater: the thermal plant the Thermostat, the tuning tests and
`bench/control.py` control. Deterministic: no clock (time advances by `step`'s `dt`), no
I/O, noise from a `random.Random` seeded by the settings.

The model is first order with dead time. With heater power `u` (watts, 0..`max_power`),
applied `dead_time` seconds late (the heater warms up, the air carries the heat to the
sensor), and the room losing heat to the outside::

    time_constant * dT/dt = outside - T + gain * u(t - dead_time) / leak     (times leak)

so that at a steady power the room settles at `outside + gain * u / leak`, approached
with time constant `time_constant / leak`. `leak` is 1 normally; opening a window
(`open_window(2.0)`) doubles the heat loss: the room cools faster and needs more power.
`step` integrates exactly (the input is piecewise constant), so results do not depend on
the step size. `RoomSchema` is a room's wire form and holds its defaults.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass

from pydantic import Field

from setpoint.errors import Invalid
from setpoint.model import Schema

__all__ = ["RoomPlant", "RoomSchema", "RoomSettings"]


class RoomSchema(Schema):
    """A room as a manifest writes it (a Thermostat's `spec.plant`, `setpoint tune --plant
    sim`): camelCase, bounds checked, and the one place its defaults are defined."""

    time_constant: float = Field(default=600.0, gt=0)
    dead_time: float = Field(default=60.0, ge=0)
    gain: float = Field(default=0.01, gt=0)
    max_power: float = Field(default=3000.0, gt=0)
    outside: float = 10.0
    initial: float = 15.0
    noise: float = Field(default=0.0, ge=0)
    seed: int = 0

    def settings(self, initial: float | None = None) -> RoomSettings:
        """The `RoomSettings` of this room (`initial`, if given, overrides its own)."""
        return RoomSettings(
            time_constant=self.time_constant,
            dead_time=self.dead_time,
            gain=self.gain,
            max_power=self.max_power,
            outside=self.outside,
            initial=self.initial if initial is None else initial,
            noise=self.noise,
            seed=self.seed,
        )


@dataclass(frozen=True, slots=True)
class RoomSettings:
    """A room: seconds, degrees Celsius and watts. `noise` is the standard deviation of
    the measurement noise (degrees); `seed` makes it repeatable. No defaults here: they are
    `RoomSchema`'s (`RoomSchema(noise=0.02).settings()`), defined once."""

    time_constant: float
    dead_time: float
    gain: float
    """Degrees above the outside per watt, at steady state."""
    max_power: float
    outside: float
    initial: float
    noise: float
    seed: int

    def __post_init__(self) -> None:
        for name in ("time_constant", "gain", "max_power"):
            if not getattr(self, name) > 0:
                raise Invalid(f"{getattr(self, name)}: must be > 0", field=name)
        for name in ("dead_time", "noise"):
            if not getattr(self, name) >= 0:
                raise Invalid(f"{getattr(self, name)}: must be >= 0", field=name)

    def steady_power(self, temperature: float, leak: float = 1.0) -> float:
        """The power that holds the room at `temperature` (may be out of 0..max_power)."""
        return (temperature - self.outside) * leak / self.gain


class RoomPlant:
    """The room's state: `temperature` (true), `time` (seconds simulated), `leak`."""

    __slots__ = ("_history", "_random", "leak", "settings", "temperature", "time")

    def __init__(self, settings: RoomSettings) -> None:
        self.settings = settings
        self.temperature = settings.initial
        self.time = 0.0
        self.leak = 1.0
        # (from time, power): the heater's power since each time, oldest first. The room
        # feels the power of `dead_time` ago; entries older than that are dropped.
        # It starts in equilibrium: the heater has long been at the power that holds
        # `initial` (within 0..max_power).
        held = min(max(settings.steady_power(settings.initial), 0.0), settings.max_power)
        self._history: deque[tuple[float, float]] = deque([(-math.inf, held)])
        self._random = random.Random(settings.seed)

    def open_window(self, leak: float = 2.0) -> None:
        """Multiply the heat loss by `leak` (1.0: window closed)."""
        if not leak > 0:
            raise Invalid(f"{leak}: must be > 0", field="leak")
        self.leak = leak

    def close_window(self) -> None:
        self.leak = 1.0

    def step(self, power: float, dt: float) -> float:
        """Run the heater at `power` (clamped to 0..max_power) for `dt` seconds; return the
        measured temperature at the end (the true one plus noise)."""
        if dt < 0:
            raise Invalid(f"{dt}: must be >= 0", field="dt")
        settings = self.settings
        power = min(max(power, 0.0), settings.max_power)
        history = self._history
        if history[-1][0] == self.time:
            history.pop()
        if history[-1][1] != power:
            history.append((self.time, power))
        start = self.time - settings.dead_time
        end = start + dt
        rate = self.leak / settings.time_constant
        temperature = self.temperature
        for i, (since, applied) in enumerate(history):
            until = history[i + 1][0] if i + 1 < len(history) else math.inf
            lo, hi = max(since, start), min(until, end)
            if hi > lo:
                steady = settings.outside + settings.gain * applied / self.leak
                temperature = steady + (temperature - steady) * math.exp(-(hi - lo) * rate)
            if until >= end:
                break
        while len(history) > 1 and history[1][0] <= end:
            history.popleft()
        self.temperature = temperature
        self.time += dt
        return self.measure()

    def measure(self) -> float:
        """The sensor's reading now: the temperature plus noise."""
        noise = self.settings.noise
        if noise == 0.0:
            return self.temperature
        return self.temperature + self._random.gauss(0.0, noise)
