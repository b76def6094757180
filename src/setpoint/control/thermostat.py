"""The `Thermostat` kind (setpoint.dev/v1alpha1, namespaced, short name `thermo`) and its
controller: a PID loop holding a simulated room (`setpoint.control.plant`) at a target
temperature, one sample per reconcile.

`spec`: `target` (degrees), `pid` {`kp`, `ki`, `kd`, `derivativeFilter`}, `tolerance`
(degrees, default 0.5), `samplesWithinTolerance` (default 5), `sampleSeconds` (seconds
between samples, default 1), `mode` (auto | manual), `manualOutput` (watts, in manual),
and `plant`: the simulated room (`timeConstant`, `deadTime`, `gain`, `maxPower`,
`outside`, `initial`, `noise`, `seed`, as `RoomSchema`; `timeScale`: simulated seconds
per real second, so a room that takes an hour to warm up can be watched in a minute;
`leak`: 1.0, or more with the window open).

`status`: `temperature` (measured), `output` (heater watts), `error`, `components`
{p, i, d}, `samplesWithinTolerance`, `simulatedSeconds`, `step` (the last setpoint step:
`before`, `after`, `atSeconds`) and `trace` (samples since that step, [seconds, setpoint,
temperature, output], thinned to at most `TRACE_POINTS`), `observedGeneration`, and the
condition `Ready`: True once the temperature has been within `tolerance` of the target
for `samplesWithinTolerance` samples in a row (reason `WithinTolerance`), else False
(`Settling`, or `Manual` in manual mode).

Each reconcile is one sample, observe -> plan -> apply: `observe` takes the object, the
loop kept in memory and the time the injected clock says has passed since its last
sample; the pure `plan` (on a copy of that loop) advances the room by that time (times
`timeScale`), feeds the measurement to the PID (which sees simulated seconds), computes
the heater power for the next interval and returns the status; `apply` writes the status
if it changed, and it comes back after `sampleSeconds`. A running room changes every
sample (`simulatedSeconds`, `trace`), so a Thermostat writes its status once a sample:
that is its output, what `describe --plot` draws. The room and the PID live in the
controller's memory; an engine that restarts resumes from the temperature and output in
the status, bumplessly. The spec is read typed (`spec_of`): its defaults are the
schema's, a room's those of `setpoint.control.plant.RoomSchema`.
`step_summary` (settling time and overshoot of the last step, for `describe`) and
`write_plot` (a PNG, with matplotlib) read only the object.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.control.kinds import THERMOSTAT
from setpoint.control.pid import PID, Limits
from setpoint.control.plant import RoomPlant, RoomSchema
from setpoint.control.tuning import step_response
from setpoint.errors import Invalid, NotFound
from setpoint.model import READY, Object, Schema, set_condition
from setpoint.runtime.controller import Controller
from setpoint.runtime.manager import Manager
from setpoint.runtime.predicates import generation_changed
from setpoint.runtime.reconciler import Request, Result
from setpoint.store import Store

__all__ = [
    "THERMOSTAT",
    "TRACE_POINTS",
    "Observed",
    "PidSchema",
    "Plan",
    "PlantSchema",
    "ThermostatController",
    "ThermostatLoop",
    "ThermostatSpecSchema",
    "ThermostatStatusSchema",
    "plan",
    "setup",
    "spec_of",
    "step_summary",
    "write_plot",
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


@dataclass(frozen=True, slots=True)
class Plan:
    """One sample: the status to write, the loop to keep and when to sample again. (A
    Thermostat records no events and has no children.)"""

    status: Mapping[str, Any]
    loop: ThermostatLoop
    requeue_after: float


def plan(spec: ThermostatSpecSchema, observed: Observed, *, now: float) -> Plan:
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
    return Plan(status, loop, spec.sample_seconds)


class ThermostatController:
    """Reconciles Thermostats: one sample of each loop per reconcile (see the module
    docstring), as observe -> `plan` -> apply. Keeps every loop in memory, by namespace and
    name, with the uid of the object it belongs to (a recreated object starts afresh)."""

    def __init__(self, store: Store, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.store = store
        self.clock = clock
        self._loops: dict[tuple[str, str], _Running] = {}

    async def reconcile(self, request: Request) -> Result | None:
        key = (request.namespace, request.name)
        try:
            obj = await self.store.get(
                THERMOSTAT.api_version, THERMOSTAT.kind, request.name, request.namespace
            )
        except NotFound:
            self._loops.pop(key, None)
            return None
        spec = spec_of(obj)
        sampled_at = self.clock.monotonic()
        observed = self.observe(obj, self._loops.get(key), sampled_at)
        decided = plan(spec, observed, now=self.clock.now())
        self._loops[key] = _Running(observed.uid, decided.loop, sampled_at)
        await self.apply(obj, decided)
        return Result(requeue_after=decided.requeue_after)

    def observe(self, obj: Object, running: _Running | None, now: float) -> Observed:
        """The object and the loop kept for it; `now` is the monotonic time of this sample."""
        meta = obj["metadata"]
        uid = str(meta["uid"])
        status = obj.get("status") or {}
        generation = int(meta.get("generation", 1))
        if running is None or running.uid != uid:
            return Observed(uid, generation, status, None, 0.0)
        return Observed(uid, generation, status, running.loop, now - running.sampled_at)

    async def apply(self, obj: Object, decided: Plan) -> None:
        """Write the status if it changed (a deleted object is gone: nothing to do)."""
        if decided.status == (obj.get("status") or {}):
            return
        updated = copy.deepcopy(obj)
        updated["status"] = dict(decided.status)
        with contextlib.suppress(NotFound):
            await self.store.update_status(updated)

    def attach(self, manager: Manager) -> Controller:
        """Wire this reconciler into `manager`; return the controller."""
        return (
            manager.controller("thermostat")
            .for_(THERMOSTAT, predicates=[generation_changed])
            .max_concurrent(4)
            .complete(self)
        )


@dataclass
class _Running:
    uid: str
    loop: ThermostatLoop
    sampled_at: float


def setup(manager: Manager) -> Controller:
    """Add the Thermostat controller to `manager`; return the controller."""
    return ThermostatController(manager.store, clock=manager.clock).attach(manager)


# -- for people: describe and plot --------------------------------------------------


def step_summary(obj: Object, now: float) -> list[tuple[str, str]]:
    """`describe`'s header fields for a Thermostat: the last setpoint step, its overshoot
    and settling time (within 2% of the step), from `status.step` and `status.trace`."""
    del now
    status = obj.get("status") or {}
    step = status.get("step")
    trace = status.get("trace") or []
    if not step or not trace:
        return [("Last Step", "<none>")]
    before, after = float(step["before"]), float(step["after"])
    fields = [("Last Step", f"{before:.4g} -> {after:.4g} at {float(step['atSeconds']):.0f}s")]
    if before == after:
        return fields
    response = step_response(
        [float(row[0]) for row in trace],
        [float(row[2]) for row in trace],
        step_time=float(step["atSeconds"]),
        before=before,
        after=after,
    )
    fields.append(("Overshoot", f"{response.overshoot * 100:.1f}%"))
    settling = response.settling_time
    fields.append(("Settling Time", "not settled" if settling is None else f"{settling:.0f}s"))
    return fields


def write_plot(obj: Object, path: Path | str) -> None:
    """Draw setpoint, temperature and heater output of `status.trace` to a PNG at `path`.
    Needs matplotlib (`pip install setpoint[plot]`); raises `Invalid` without it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise Invalid("--plot needs matplotlib: pip install 'setpoint[plot]'") from None
    trace = (obj.get("status") or {}).get("trace") or []
    if not trace:
        raise Invalid(f"{obj['metadata']['name']}: no samples yet to plot")
    times = [row[0] for row in trace]
    figure, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8, 5))
    top.plot(times, [row[1] for row in trace], label="setpoint")
    top.plot(times, [row[2] for row in trace], label="temperature")
    top.set_ylabel("degrees C")
    top.legend()
    bottom.plot(times, [row[3] for row in trace], label="heater output", color="tab:red")
    bottom.set_ylabel("watts")
    bottom.set_xlabel("simulated seconds")
    figure.suptitle(f"thermostat/{obj['metadata']['name']}")
    figure.savefig(str(path))
    plt.close(figure)
