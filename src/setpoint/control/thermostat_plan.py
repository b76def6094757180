"""The Thermostat's plan, pure: its schemas, the loop (PID and simulated room) and `plan`.

`plan(spec, observed, now)` is one sample: the loop (a copy of the one observed, or a new
one resuming from the status) takes the spec, runs the room for the real seconds observed
since its last sample and computes the next output; `now` (wall-clock seconds) stamps the
conditions. The monotonic time of the sample travels in `Observed.sampled_at`, so the
plan reads no clock. No I/O (an import-linter contract holds it to that).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from setpoint.control.pid import PID, Limits
from setpoint.control.plant import RoomPlant, RoomSchema
from setpoint.model import READY, Object, Schema, set_condition
from setpoint.runtime.plan import Plan as KitPlan

__all__ = [
    "TRACE_POINTS",
    "Observed",
    "PidSchema",
    "Plan",
    "PlantSchema",
    "ThermostatLoop",
    "ThermostatSpecSchema",
    "ThermostatStatusSchema",
    "plan",
    "spec_of",
]

TRACE_POINTS = 240
"""The most samples `status.trace` keeps; past that, every other one is dropped."""

# -- the kind ------------------------------------------------------------------------


class PidSchema(Schema):
    """The controller's gains (output in watts, error in degrees, time in seconds)."""

    kp: float = Field(ge=0)
    ki: float = Field(default=0.0, ge=0)
    kd: float = Field(default=0.0, ge=0)
    derivative_filter: float = Field(default=0.0, ge=0)


class PlantSchema(RoomSchema):
    """The simulated room (`setpoint.control.plant.RoomSchema`), run `time_scale` simulated
    seconds per real second, losing heat `leak` times as fast as with the window shut."""

    time_scale: float = Field(default=1.0, gt=0)
    leak: float = Field(default=1.0, gt=0)


class ThermostatSpecSchema(Schema):
    """What temperature to hold, with which gains, and when to call it Ready."""

    target: float
    pid: PidSchema
    tolerance: float = Field(default=0.5, gt=0)
    samples_within_tolerance: int = Field(default=5, ge=1)
    sample_seconds: float = Field(default=1.0, gt=0)
    mode: Literal["auto", "manual"] = "auto"
    manual_output: float | None = Field(default=None, ge=0)
    plant: PlantSchema = Field(default_factory=PlantSchema)


class ComponentsSchema(Schema):
    p: float = 0.0
    i: float = 0.0
    d: float = 0.0


class StepSchema(Schema):
    before: float
    after: float
    at_seconds: float


class ThermostatStatusSchema(Schema):
    """What the controller observed (see the module docstring)."""

    temperature: float | None = None
    output: float | None = None
    error: float | None = None
    components: ComponentsSchema | None = None
    samples_within_tolerance: int = 0
    simulated_seconds: float = 0.0
    step: StepSchema | None = None
    trace: list[list[float]] = Field(default_factory=list)
    observed_generation: int | None = None
    conditions: list[dict[str, Any]] = Field(default_factory=list)


def spec_of(obj: Object) -> ThermostatSpecSchema:
    """The typed spec of a stored Thermostat: every default filled in, by the schema alone."""
    return ThermostatSpecSchema.model_validate(obj["spec"])


# -- the loop (no I/O, no clock) ----------------------------------------------------


@dataclass
class ThermostatLoop:
    """One Thermostat's room, PID and bookkeeping. `advance` takes the real seconds that
    passed; nothing here reads a clock."""

    plant: RoomPlant
    pid: PID
    output: float = 0.0
    within: int = 0
    target: float | None = None
    step: dict[str, float] | None = None
    trace: list[list[float]] = field(default_factory=list)
    stride: int = 1
    skipped: int = 0
    measurement: float = 0.0
    resuming: bool = False
    """Set by `start` when it resumes from a status: its switch to auto is no new step."""

    @classmethod
    def start(cls, spec: ThermostatSpecSchema, status: Mapping[str, Any] | None) -> ThermostatLoop:
        """A loop for `spec`, resuming from `status` (temperature, output) if it has one."""
        status = status or {}
        temperature = status.get("temperature")
        plant = RoomPlant(spec.plant.settings(temperature))
        limits = (0.0, plant.settings.max_power)
        pid = PID(0.0, limits=Limits(output=limits))
        loop = cls(plant, pid, measurement=plant.measure())
        if temperature is not None and status.get("output") is not None:
            # Resume: as if the heater had been run by hand at the recorded output, so the
            # switch to auto (in `configure`) continues from it without a bump.
            loop.output = min(max(float(status["output"]), 0.0), plant.settings.max_power)
            pid.set_auto_mode(False, loop.output)
            loop.resuming = True
            pid.update(loop.measurement, plant.time)
        if status.get("step"):
            step = status["step"]
            loop.target = float(step["after"])
            loop.step = {k: float(step[k]) for k in ("before", "after", "atSeconds")}
        return loop

    def configure(self, spec: ThermostatSpecSchema) -> None:
        """Take the (possibly changed) spec: gains, target, plant parameters, mode."""
        gains = spec.pid
        pid = self.pid
        pid.tunings = (gains.kp, gains.ki, gains.kd)
        pid.derivative_filter = gains.derivative_filter
        settings = spec.plant.settings(self.plant.settings.initial)
        if settings != self.plant.settings:
            self.plant.settings = settings
            pid.output_limits = (0.0, settings.max_power)
        self.plant.leak = spec.plant.leak
        target = spec.target
        manual = spec.mode == "manual"
        if target != self.target:
            self._new_step(self.target if self.target is not None else self.measurement, target)
        elif not manual and not pid.auto_mode and not self.resuming:
            # Back from manual (or a tuning experiment): the loop starts from wherever the
            # room is now; that is the step worth describing.
            self._new_step(self.measurement, target)
        pid.setpoint = target
        if manual:
            output = spec.manual_output
            pid.set_auto_mode(False, output if output is not None else self.output)
        else:
            pid.set_auto_mode(True)
        self.resuming = False

    def _new_step(self, before: float, after: float) -> None:
        self.step = {"before": before, "after": after, "atSeconds": self.plant.time}
        self.trace = []
        self.stride, self.skipped = 1, 0
        self.within = 0
        self.target = after

    def advance(self, spec: ThermostatSpecSchema, real_seconds: float) -> None:
        """Run the room for `real_seconds` (times the time scale) at the current output,
        measure, and compute the output for the next interval."""
        scale = spec.plant.time_scale
        self.measurement = self.plant.step(self.output, max(0.0, real_seconds) * scale)
        now = self.plant.time
        output = self.pid.update(self.measurement, now)
        if spec.mode == "manual" and spec.manual_output is not None:
            output = spec.manual_output
        self.output = min(max(output, 0.0), self.plant.settings.max_power)
        target = spec.target
        if abs(self.measurement - target) <= spec.tolerance:
            self.within += 1
        else:
            self.within = 0
        self._record(now, target)

    def _record(self, now: float, target: float) -> None:
        self.skipped += 1
        if self.skipped < self.stride:
            return
        self.skipped = 0
        self.trace.append(
            [round(now, 3), target, round(self.measurement, 4), round(self.output, 3)]
        )
        if len(self.trace) > TRACE_POINTS:
            self.trace = self.trace[::2]
            self.stride *= 2

    def status(
        self, spec: ThermostatSpecSchema, generation: int, old: Mapping[str, Any], now: float
    ) -> dict[str, Any]:
        """The status to write, at wall-clock time `now` (for condition timestamps)."""
        p, i, d = self.pid.components
        status: dict[str, Any] = {
            "temperature": round(self.measurement, 4),
            "output": round(self.output, 3),
            "error": round(spec.target - self.measurement, 4),
            "components": {"p": round(p, 3), "i": round(i, 3), "d": round(d, 3)},
            "samplesWithinTolerance": self.within,
            "simulatedSeconds": round(self.plant.time, 3),
            "trace": [list(row) for row in self.trace],
            "observedGeneration": generation,
            "conditions": [dict(c) for c in old.get("conditions") or []],
        }
        if self.step is not None:
            status["step"] = dict(self.step)
        wanted = spec.samples_within_tolerance
        tolerance = spec.tolerance
        if spec.mode == "manual":
            ready, reason, message = False, "Manual", "manual mode: the output is spec.manualOutput"
        elif self.within >= wanted:
            ready, reason = True, "WithinTolerance"
            message = f"within {tolerance:g} of {spec.target:g} for {wanted} samples"
        else:
            ready, reason = False, "Settling"
            message = (
                f"temperature {self.measurement:.2f}, target {spec.target:g}: "
                f"{self.within}/{wanted} samples within {tolerance:g}"
            )
        set_condition(
            status,
            READY,
            ready,
            reason=reason,
            message=message,
            now=now,
            observed_generation=generation,
        )
        return status


# -- observe -> plan (pure) -> apply ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Observed:
    """What `observe` saw: the Thermostat (uid, generation, status), the loop kept in memory
    for it (None: none yet, or it belonged to an earlier object of that name) and the real
    seconds since that loop's last sample."""

    uid: str
    generation: int
    status: Mapping[str, Any]
    loop: ThermostatLoop | None
    elapsed: float
    sampled_at: float = 0.0
    """The monotonic time of this sample (the next one measures its elapsed time from it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan(KitPlan):
    """One sample: the status to write, the loop to keep (sampled at `sampled_at`,
    monotonic) and when to sample again. (A Thermostat records no events and has no
    children.)"""

    loop: ThermostatLoop
    sampled_at: float = 0.0


def plan(spec: ThermostatSpecSchema, observed: Observed, now: float) -> Plan:
    """One sample, pure: the loop (a copy of the one observed, or a new one resuming from
    the status) takes the spec, runs the room for the elapsed seconds and computes the next
    output; `now` (wall-clock seconds) stamps the conditions. Never mutates `observed`."""
    if observed.loop is None:
        loop = ThermostatLoop.start(spec, observed.status)
    else:
        loop = copy.deepcopy(observed.loop)
    loop.configure(spec)
    loop.advance(spec, observed.elapsed)
    status = loop.status(spec, observed.generation, observed.status, now)
    return Plan(
        status=status, loop=loop, sampled_at=observed.sampled_at, requeue_after=spec.sample_seconds
    )
