"""`setpoint tune`: a relay experiment (Åström-Hägglund) on a plant, then PID gains by a rule.

    setpoint tune --plant sim [--time-constant S --dead-time S --gain G ...] --rule NAME
    setpoint tune --thermostat NAME [--rule NAME] [--apply]
    setpoint tune --autoscaler NAME [--rule NAME] [--apply] [--amplitude-replicas N]

`--plant sim` runs the experiment on a simulated room in this process (instantly).
`--thermostat NAME` and `--autoscaler NAME` run it on a live object through the store (an
engine must be running it): the object is put in manual mode, its manual output switched
between the relay's two levels as its measurement, watched in the store as its controller
records it, crosses the target, and its mode is put back as it was at the end, also on
Ctrl-C or an error. A Thermostat's output is `spec.manualOutput` (watts) against its
temperature; an Autoscaler's is `spec.manualReplicas` (its current count plus or minus
`--amplitude-replicas`, within min/max) against its metric, both in the units of its pid
algorithm (ln replicas against ln(metric / target)), so the gains fit `spec.pid`; its
target gets back the replica count it had, unless `--apply` hands it to the new gains.
`--apply` writes the proposed gains into `spec.pid` (an Autoscaler's `algorithm` becomes
`pid`). Either way it prints the ultimate gain Ku, the ultimate period Tu, and the gains of
the chosen rule (and of every rule with `--all`). The decisions are
`setpoint.control.tuning`'s; this module only drives them and prints.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, fields
from typing import Any

from setpoint.cli.context import Context
from setpoint.control.autoscaler import spec_of as autoscaler_spec_of
from setpoint.control.kinds import AUTOSCALER, THERMOSTAT
from setpoint.control.plant import RoomPlant, RoomSchema, RoomSettings
from setpoint.control.thermostat import spec_of as thermostat_spec_of
from setpoint.control.tuning import (
    MIN_IAE,
    RULES,
    FirstOrderModel,
    Gains,
    RelayExperiment,
    RelayResult,
    gains_for,
    identify,
    min_iae_gains,
    relay_tune,
)
from setpoint.errors import Gone, Invalid, NotFound
from setpoint.model import Kind, Object
from setpoint.model.durations import parse_duration
from setpoint.runtime.scale import read_scale, write_scale
from setpoint.store.base import Store

_ROOM_HELP = {"gain": "degrees per watt"}
"""Help for the simulated room's options (`--plant sim`: one for each `RoomSchema` field)."""
_LOG_RATIO_LIMIT = math.log(100.0)
"""ln(metric / target) is clipped to +-ln 100, as the pid algorithm clips it."""


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "tune",
        parents=parents,
        description="Run a relay experiment (Astrom-Hagglund) on a simulated room (--plant "
        "sim), a live Thermostat (--thermostat NAME) or a live Autoscaler (--autoscaler "
        "NAME), print the ultimate gain Ku and period Tu, and the PID gains a tuning rule "
        "gives.",
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--plant", choices=["sim"], help="tune a simulated room")
    target.add_argument("--thermostat", metavar="NAME", help="tune this live Thermostat")
    target.add_argument(
        "--autoscaler", metavar="NAME", help="tune this live Autoscaler's pid algorithm"
    )
    p.add_argument(
        "--rule",
        default=MIN_IAE,
        choices=[*sorted(RULES), MIN_IAE],
        help=f"the tuning rule (default: {MIN_IAE}: fit a model to the relay record and "
        "pick the gains with the least error and at most 10%% overshoot on it)",
    )
    p.add_argument("--all", action="store_true", help="also print the gains of every rule")
    p.add_argument(
        "--setpoint",
        type=float,
        help="the relay's switching point (default 21, or the Thermostat's target)",
    )
    p.add_argument(
        "--amplitude", type=float, help="relay amplitude, watts (default: half the maximum power)"
    )
    p.add_argument("--bias", type=float, help="relay bias, watts (default: half the maximum)")
    p.add_argument(
        "--amplitude-replicas",
        type=int,
        help="an Autoscaler's relay: its current replicas plus or minus this many "
        "(default: a quarter of them, at least 1), within minReplicas..maxReplicas",
    )
    p.add_argument(
        "--hysteresis",
        type=float,
        default=0.0,
        help="in the measurement's units: degrees, or ln(metric / target) for an "
        "Autoscaler, e.g. 0.05 for 5%% (default 0)",
    )
    p.add_argument("--cycles", type=int, default=4, help="oscillations to measure (default 4)")
    p.add_argument(
        "--apply", action="store_true", help="write the gains into the Thermostat or Autoscaler"
    )
    p.add_argument(
        "--timeout",
        default="10m",
        help="give up on a live experiment after this long: 600, 90s, 10m (default 10m)",
    )
    sim = p.add_argument_group("simulated room (--plant sim)")
    sim.add_argument("--sample-seconds", type=float, default=5.0, help="default 5")
    for name, default in RoomSchema().model_dump().items():  # a room's fields and defaults
        option = "--" + name.replace("_", "-")
        sim.add_argument(option, type=type(default), default=default, help=_ROOM_HELP.get(name))
    p.set_defaults(run=run)


async def run(ctx: Context, args: argparse.Namespace) -> int:
    _check_options(args)
    if args.plant:
        experiment = _tune_simulated(args)
    else:
        async with ctx.open_store() as store:
            if args.thermostat:
                experiment = await _tune_thermostat(store, ctx.namespace, args)
            else:
                experiment = await _tune_autoscaler(store, ctx.namespace, args)
    units = experiment.units
    result = experiment.result
    print(experiment.where)
    print(f"Ku  {result.ku:.6g}  (ultimate gain, {units.gain})")
    print(f"Tu  {result.tu:.6g} s  (ultimate period)")
    print(f"oscillation amplitude  {result.amplitude:.4g} {units.measurement}")
    try:
        model: FirstOrderModel | None = identify(
            result,
            output=experiment.rest_output,
            measurement=experiment.rest_measurement,
            gain=experiment.known_gain,
        )
    except Invalid as exc:
        if args.rule == MIN_IAE:
            raise
        model = None
        print(f"model  none fitted: {exc}")
    if model is not None:
        print(
            f"model  gain {model.gain:.4g} {units.model_gain}, time constant "
            f"{model.time_constant:.4g} s, dead time {model.dead_time:.4g} s"
        )
    chosen: Gains | None = None
    for rule in [*sorted(RULES), MIN_IAE] if args.all else [args.rule]:
        if rule == MIN_IAE:
            if model is None:
                continue
            gains = min_iae_gains(
                model,
                result.ku,
                result.tu,
                output_limits=experiment.output_limits,
                operating_output=result.mean_output,
                sample_time=experiment.sample_seconds,
            )
        else:
            gains = gains_for(result.ku, result.tu, rule)
        if rule == args.rule:
            chosen = gains
        print(
            f"{rule}: kp={gains.kp:.6g} ki={gains.ki:.6g} kd={gains.kd:.6g} "
            f"derivativeFilter={gains.derivative_filter:.4g}"
        )
    assert chosen is not None
    gains = chosen
    if args.autoscaler:
        print(f"spec.pid: {{kp: {gains.kp:.4g}, ki: {gains.ki:.4g}, kd: {gains.kd:.4g}}}")
    else:
        print(
            f"spec.pid: {{kp: {gains.kp:.4g}, ki: {gains.ki:.4g}, kd: {gains.kd:.4g}, "
            f"derivativeFilter: {gains.derivative_filter:.3g}}}"
        )
    if args.apply:
        async with ctx.open_store() as store:
            await _apply(store, ctx.namespace, args, gains)
    return 0


def _check_options(args: argparse.Namespace) -> None:
    parse_duration(args.timeout, "--timeout")  # refused before a live object is touched
    if args.apply and not (args.thermostat or args.autoscaler):
        raise Invalid(
            "--apply writes gains into a live object: give --thermostat NAME or --autoscaler NAME"
        )
    if args.autoscaler:
        for option in ("setpoint", "bias", "amplitude"):
            if getattr(args, option) is not None:
                raise Invalid(
                    f"--{option} is for a Thermostat or a simulated room; an Autoscaler's "
                    "relay switches at its metric's target, between its current replicas "
                    "plus or minus --amplitude-replicas",
                    field=f"--{option}",
                )
    elif args.amplitude_replicas is not None:
        raise Invalid("--amplitude-replicas is for --autoscaler", field="--amplitude-replicas")


async def _apply(store: Store, namespace: str, args: argparse.Namespace, gains: Gains) -> None:
    if args.thermostat:
        await store.patch(
            THERMOSTAT.api_version,
            THERMOSTAT.kind,
            args.thermostat,
            {"spec": {"pid": gains.as_dict()}},
            namespace,
        )
        print(f"thermostat/{args.thermostat} gains applied")
        return
    pid = {"kp": gains.kp, "ki": gains.ki, "kd": gains.kd}
    await store.patch(
        AUTOSCALER.api_version,
        AUTOSCALER.kind,
        args.autoscaler,
        {"spec": {"algorithm": "pid", "pid": pid}},
        namespace,
    )
    print(f"autoscaler/{args.autoscaler} gains applied (algorithm: pid)")


def _experiment(args: argparse.Namespace, setpoint: float, max_power: float) -> RelayExperiment:
    bias = args.bias if args.bias is not None else max_power / 2
    amplitude = args.amplitude if args.amplitude is not None else min(bias, max_power - bias)
    return RelayExperiment(
        setpoint,
        bias=bias,
        amplitude=amplitude,
        hysteresis=args.hysteresis,
        cycles=args.cycles,
    )


@dataclass(frozen=True)
class _Units:
    """How the figures of one kind of plant read."""

    gain: str
    measurement: str
    model_gain: str


_ROOM_UNITS = _Units("watts per degree", "degrees", "degrees/W")
_SCALER_UNITS = _Units(
    "ln replicas per ln(metric/target)", "ln(metric/target)", "ln(target/metric) per ln replica"
)


@dataclass(frozen=True)
class _Done:
    """A finished experiment: its result, where it ran, and the plant's operating point
    before it (for `identify`), in the units of the controller the gains are for."""

    result: RelayResult
    where: str
    rest_output: float
    rest_measurement: float
    output_limits: tuple[float, float]
    sample_seconds: float
    units: _Units = _ROOM_UNITS
    known_gain: float | None = None
    """The plant's static gain when it is known rather than measured."""


def _tune_simulated(args: argparse.Namespace) -> _Done:
    settings = RoomSettings(**{f.name: getattr(args, f.name) for f in fields(RoomSettings)})
    plant = RoomPlant(settings)  # starts at rest at `initial`
    rest_output = min(max(settings.steady_power(settings.initial), 0.0), settings.max_power)
    setpoint = 21.0 if args.setpoint is None else args.setpoint
    experiment = _experiment(args, setpoint, settings.max_power)
    result = relay_tune(
        plant.step,
        plant.measure(),
        experiment,
        sample_time=args.sample_seconds,
        max_time=max(1e5, 200 * settings.time_constant),
    )
    return _Done(
        result,
        f"relay experiment on a simulated room: {plant.time:g} s simulated",
        rest_output,
        settings.initial,
        (0.0, settings.max_power),
        args.sample_seconds,
    )


# -- live plants: the relay over the store -------------------------------------------


@dataclass(frozen=True)
class _Sample:
    """One measurement a controller recorded: `key` changes with every new one."""

    key: object
    measurement: float
    time: float


@dataclass(frozen=True)
class _LivePlant:
    """A live object the relay drives: what to watch, how to read a sample from it, and
    how to apply the relay's output to it."""

    kind: Kind
    name: str
    namespace: str
    sample_of: Callable[[Object], _Sample | None]
    write_output: Callable[[float], Awaitable[None]]


async def _run_relay(
    store: Store, plant: _LivePlant, experiment: RelayExperiment, within: float
) -> RelayResult:
    """Feed `experiment` every new sample of the live object, as the store's watch shows
    it, and write its output when it changes, until it is done; `Invalid` after
    `within` seconds. Restoring the object is the caller's (it knows what it was)."""
    seen: object = _NO_SAMPLE
    applied: float | None = None
    samples = switches = 0
    ref = f"{plant.kind.kind.lower()}/{plant.name}"
    try:
        async with asyncio.timeout(within):
            versions = _versions(store, plant.kind, plant.name, plant.namespace)
            async with contextlib.aclosing(versions):
                async for obj in versions:
                    sample = plant.sample_of(obj)
                    if sample is None or sample.key == seen:
                        continue
                    seen = sample.key
                    samples += 1
                    output = experiment.update(sample.measurement, sample.time)
                    if experiment.done:
                        break
                    if output != applied:
                        switches += applied is not None
                        await plant.write_output(output)
                        applied = output
    except TimeoutError:
        if samples < 2:
            why = "no new samples: is an engine running it?"
        elif switches == 0:
            why = (
                f"the relay never switched in {samples} samples: the measurement stayed on "
                "one side of the target at both of its levels"
            )
        else:
            why = f"the relay switched {switches} times in {samples} samples"
        raise Invalid(
            f"{ref}: no steady oscillation within --timeout ({within:g}s): {why}"
        ) from None
    return experiment.result()


_NO_SAMPLE = object()


async def _versions(
    store: Store, kind: Kind, name: str, namespace: str
) -> AsyncGenerator[Object, None]:
    """The object now, then every version of it the store's watch shows (repeats are
    possible); `NotFound` once it is deleted."""
    while True:
        revision = await store.revision()
        yield await store.get(kind.api_version, kind.kind, name, namespace)
        try:
            async for event in store.watch(kind.api_version, kind.kind, namespace, since=revision):
                if event.object["metadata"]["name"] != name:
                    continue
                if event.type == "DELETED":
                    raise NotFound(f"{kind.kind.lower()}/{name} was deleted")
                yield event.object
        except Gone:
            continue  # history compacted under us: read it again


async def _tune_thermostat(store: Store, namespace: str, args: argparse.Namespace) -> _Done:
    api, kind, name = THERMOSTAT.api_version, THERMOSTAT.kind, args.thermostat
    obj = await store.get(api, kind, name, namespace)
    typed = thermostat_spec_of(obj)
    status = obj.get("status") or {}
    if status.get("temperature") is None or status.get("output") is None:
        raise Invalid(f"thermostat/{name} has no samples yet: is an engine running it?")
    rest_output, rest_temperature = float(status["output"]), float(status["temperature"])
    restore = {"mode": typed.mode, "manualOutput": typed.manual_output}
    max_power = typed.plant.max_power
    setpoint = typed.target if args.setpoint is None else args.setpoint
    experiment = _experiment(args, setpoint, max_power)

    def sample_of(current: Object) -> _Sample | None:
        now = current.get("status") or {}
        if now.get("temperature") is None:
            return None
        seen = now.get("simulatedSeconds")
        return _Sample(seen, float(now["temperature"]), float(seen or 0.0))

    async def write_output(output: float) -> None:
        patch = {"spec": {"mode": "manual", "manualOutput": output}}
        await store.patch(api, kind, name, patch, namespace)

    live = _LivePlant(THERMOSTAT, name, namespace, sample_of, write_output)
    try:
        result = await _run_relay(
            store, live, experiment, parse_duration(args.timeout, "--timeout")
        )
    finally:
        await store.patch(api, kind, name, {"spec": restore}, namespace)
    sample = typed.sample_seconds * typed.plant.time_scale
    return _Done(
        result,
        f"relay experiment on thermostat/{name}",
        rest_output,
        rest_temperature,
        (0.0, max_power),
        sample,
    )


def _scaler_measurement(status: dict[str, Any], metric: dict[str, Any]) -> float | None:
    """An Autoscaler's recorded metric as its pid algorithm measures it, negated so that
    more replicas raise it: ln(target / metric), the metric per replica (an `AverageValue`
    total divided by the count it was read at), clipped to +-ln 100."""
    value = status.get("currentMetric")
    if value is None:
        return None
    value = float(value)
    if metric.get("targetType") == "AverageValue":
        value /= max(int(status.get("currentReplicas") or 1), 1)
    ratio = value / float(metric["target"])
    if ratio <= 0:
        return _LOG_RATIO_LIMIT
    return min(max(-math.log(ratio), -_LOG_RATIO_LIMIT), _LOG_RATIO_LIMIT)


async def _tune_autoscaler(store: Store, namespace: str, args: argparse.Namespace) -> _Done:
    api, kind, name = AUTOSCALER.api_version, AUTOSCALER.kind, args.autoscaler
    obj = await store.get(api, kind, name, namespace)
    spec = obj["spec"]
    typed = autoscaler_spec_of(obj)
    metric = spec["metric"]
    rest_measurement = _scaler_measurement(obj.get("status") or {}, metric)
    if rest_measurement is None:
        raise Invalid(f"autoscaler/{name} has no metric reading yet: is an engine running it?")
    ref = spec["scaleTargetRef"]
    target_kind = store.registry.get(typed.scale_target_ref.api_version, ref["kind"])
    before = (await read_scale(store, target_kind, ref["name"], namespace)).replicas
    low, high = typed.min_replicas, typed.max_replicas
    centre = min(max(before, low, 1), high)
    step = args.amplitude_replicas
    if step is None:
        step = max(1, round(centre / 4))
    if step < 1:
        raise Invalid(f"{step}: must be >= 1", field="--amplitude-replicas")
    fewest, most = max(low, centre - step, 1), min(high, centre + step)
    if fewest >= most:
        raise Invalid(
            f"autoscaler/{name}: minReplicas {low} .. maxReplicas {high} leave the relay no "
            "room to move",
            field="--amplitude-replicas",
        )
    experiment = RelayExperiment(
        0.0,  # ln(target / target)
        bias=(math.log(most) + math.log(fewest)) / 2,
        amplitude=(math.log(most) - math.log(fewest)) / 2,
        hysteresis=args.hysteresis,
        cycles=args.cycles,
    )
    restore = {"mode": typed.mode, "manualReplicas": typed.manual_replicas}
    started = time.monotonic()

    def sample_of(current: Object) -> _Sample | None:
        status = current.get("status") or {}
        measurement = _scaler_measurement(status, metric)
        if measurement is None:
            return None
        # every status write is a new reading: the controller writes status only after
        # reading the metric, and nobody else writes it
        key = json.dumps(status, sort_keys=True)
        return _Sample(key, measurement, time.monotonic() - started)

    async def write_output(output: float) -> None:
        patch = {"spec": {"mode": "manual", "manualReplicas": round(math.exp(output))}}
        await store.patch(api, kind, name, patch, namespace)

    live = _LivePlant(AUTOSCALER, name, namespace, sample_of, write_output)
    finished = False
    try:
        result = await _run_relay(
            store, live, experiment, parse_duration(args.timeout, "--timeout")
        )
        finished = True
    finally:
        if not (finished and args.apply):
            # while still manual, so that the controller does not set the relay's count
            # again meanwhile; then to make sure, whether or not it runs
            hold = {"spec": {"mode": "manual", "manualReplicas": before}}
            await store.patch(api, kind, name, hold, namespace)
            await write_scale(store, target_kind, ref["name"], namespace, before)
        await store.patch(api, kind, name, {"spec": restore}, namespace)
    return _Done(
        result,
        f"relay experiment on autoscaler/{name}: {ref['kind'].lower()}/{ref['name']} "
        f"between {fewest} and {most} replicas around metric target {float(metric['target']):g}",
        math.log(max(before, 1)),
        rest_measurement,
        (math.log(max(low, 1)), math.log(high)),
        typed.period_seconds,
        _SCALER_UNITS,
        known_gain=1.0,
    )
