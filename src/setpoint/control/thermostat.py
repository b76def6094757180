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

Each reconcile is one sample, run by the reconciler kit (`setpoint.runtime.kit`):
`observe` takes the object, the loop kept in memory and the time the injected clock says
has passed since its last sample; the pure `plan` (`setpoint.control.thermostat_plan`, on
a copy of that loop) advances the room by that time (times `timeScale`), feeds the
measurement to the PID (which sees simulated seconds), computes the heater power for the
next interval and returns the status; `act` keeps the new loop, the kit writes the status
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

from dataclasses import dataclass
from pathlib import Path

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.control.kinds import THERMOSTAT
from setpoint.control.thermostat_plan import (
    TRACE_POINTS,
    Observed,
    PidSchema,
    Plan,
    PlantSchema,
    ThermostatLoop,
    ThermostatSpecSchema,
    ThermostatStatusSchema,
    plan,
    spec_of,
)
from setpoint.control.tuning import step_response
from setpoint.errors import Invalid
from setpoint.model import Object
from setpoint.runtime.controller import Controller
from setpoint.runtime.kit import Acted, KindRules, KitReconciler
from setpoint.runtime.manager import Manager
from setpoint.runtime.predicates import generation_changed
from setpoint.runtime.reconciler import Request
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


class ThermostatController(KitReconciler[ThermostatSpecSchema, Observed, Plan]):
    """Reconciles Thermostats: one sample of each loop per reconcile (see the module
    docstring), on the kit. Keeps every loop in memory, by namespace and name, with the uid
    of the object it belongs to (a recreated object starts afresh)."""

    def __init__(self, store: Store, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._loops: dict[tuple[str, str], _Running] = {}
        rules = KindRules(THERMOSTAT, spec_of, self.observe, plan, self.act, cleanup=self.forget)
        super().__init__(store, rules, clock=clock)

    async def observe(self, obj: Object, spec: ThermostatSpecSchema) -> Observed:
        """The object and the loop kept for it, sampled now (the clock's monotonic time)."""
        del spec
        meta = obj["metadata"]
        uid = str(meta["uid"])
        status = obj.get("status") or {}
        generation = int(meta.get("generation", 1))
        now = self.clock.monotonic()
        running = self._loops.get((meta.get("namespace") or "", meta["name"]))
        if running is None or running.uid != uid:
            return Observed(uid, generation, status, None, 0.0, now)
        return Observed(uid, generation, status, running.loop, now - running.sampled_at, now)

    async def act(self, obj: Object, decided: Plan) -> Acted[Plan]:
        """Keep the sample's loop (the kit writes its status)."""
        meta = obj["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        self._loops[key] = _Running(str(meta["uid"]), decided.loop, decided.sampled_at)
        return Acted(obj, decided)

    async def forget(self, request: Request) -> None:
        """The Thermostat is gone: drop its loop."""
        self._loops.pop((request.namespace, request.name), None)


@dataclass
class _Running:
    uid: str
    loop: ThermostatLoop
    sampled_at: float


def setup(manager: Manager, settings: None = None) -> Controller:
    """Add the Thermostat controller to `manager`; return the controller. (It takes no
    settings.)"""
    del settings
    return (
        manager.controller("thermostat")
        .for_(THERMOSTAT, predicates=[generation_changed])
        .max_concurrent(4)
        .complete(ThermostatController(manager.store, clock=manager.clock))
    )


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
