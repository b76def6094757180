"""`setpoint tune`: a relay experiment (Åström-Hägglund) on a plant, then PID gains by a rule.

    setpoint tune --plant sim [--time-constant S --dead-time S --gain G ...] --rule NAME
    setpoint tune --thermostat NAME [--rule NAME] [--apply]

`--plant sim` runs the experiment on a simulated room in this process (instantly);
`--thermostat NAME` runs it on a live Thermostat through the store (an engine must be
running it): the Thermostat is put in manual mode, its `spec.manualOutput` switched
between the relay's two levels as its temperature crosses the target, and put back as it
was at the end (`--apply` then writes the proposed gains into its `spec.pid`). Either way
it prints the ultimate gain Ku, the ultimate period Tu, and the gains of the chosen rule
(and of every rule with `--all`). The decisions are `setpoint.control.tuning`'s; this
module only drives them and prints.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass

from setpoint.cli.context import Context
from setpoint.control.plant import RoomPlant, RoomSettings
from setpoint.control.thermostat import THERMOSTAT
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
from setpoint.errors import Invalid
from setpoint.store.base import Store

_ROOM = RoomSettings()


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "tune",
        parents=parents,
        help="relay auto-tuning: find Ku and Tu of a plant, propose PID gains",
        description="Run a relay experiment (Astrom-Hagglund) on a simulated room (--plant "
        "sim) or a live Thermostat (--thermostat NAME), print the ultimate gain Ku and period "
        "Tu, and the PID gains a tuning rule gives.",
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--plant", choices=["sim"], help="tune a simulated room")
    target.add_argument("--thermostat", metavar="NAME", help="tune this live Thermostat")
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
    p.add_argument("--hysteresis", type=float, default=0.0, help="degrees (default 0)")
    p.add_argument("--cycles", type=int, default=4, help="oscillations to measure (default 4)")
    p.add_argument("--apply", action="store_true", help="write the gains into the Thermostat")
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        help="give up on a live experiment after this many seconds (default 600)",
    )
    sim = p.add_argument_group("simulated room (--plant sim)")
    sim.add_argument("--sample-seconds", type=float, default=5.0, help="default 5")
    sim.add_argument("--time-constant", type=float, default=_ROOM.time_constant)
    sim.add_argument("--dead-time", type=float, default=_ROOM.dead_time)
    sim.add_argument("--gain", type=float, default=_ROOM.gain, help="degrees per watt")
    sim.add_argument("--max-power", type=float, default=_ROOM.max_power)
    sim.add_argument("--outside", type=float, default=_ROOM.outside)
    sim.add_argument("--initial", type=float, default=_ROOM.initial)
    sim.add_argument("--noise", type=float, default=_ROOM.noise)
    sim.add_argument("--seed", type=int, default=_ROOM.seed)
    p.set_defaults(run=run)


async def run(ctx: Context, args: argparse.Namespace) -> int:
    if args.apply and not args.thermostat:
        raise Invalid("--apply writes gains into a Thermostat: give --thermostat NAME")
    if args.plant:
        experiment = _tune_simulated(args)
    else:
        async with ctx.open_store() as store:
            experiment = await _tune_thermostat(store, ctx.namespace, args)
    result = experiment.result
    print(experiment.where)
    print(f"Ku  {result.ku:.6g}  (ultimate gain, watts per degree)")
    print(f"Tu  {result.tu:.6g} s  (ultimate period)")
    print(f"oscillation amplitude  {result.amplitude:.4g} degrees")
    try:
        model: FirstOrderModel | None = identify(
            result, output=experiment.rest_output, measurement=experiment.rest_temperature
        )
    except Invalid as exc:
        if args.rule == MIN_IAE:
            raise
        model = None
        print(f"model  none fitted: {exc}")
    if model is not None:
        print(
            f"model  gain {model.gain:.4g} degrees/W, time constant "
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
                output_limits=(0.0, experiment.max_power),
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
    print(
        f"spec.pid: {{kp: {gains.kp:.4g}, ki: {gains.ki:.4g}, kd: {gains.kd:.4g}, "
        f"derivativeFilter: {gains.derivative_filter:.3g}}}"
    )
    if args.apply:
        async with ctx.open_store() as store:
            await store.patch(
                THERMOSTAT.api_version,
                THERMOSTAT.kind,
                args.thermostat,
                {"spec": {"pid": gains.as_dict()}},
                ctx.namespace,
            )
        print(f"thermostat/{args.thermostat} gains applied")
    return 0


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
class _Done:
    """A finished experiment: its result, where it ran, and the plant's operating point
    before it (for `identify`)."""

    result: RelayResult
    where: str
    rest_output: float
    rest_temperature: float
    max_power: float
    sample_seconds: float


def _tune_simulated(args: argparse.Namespace) -> _Done:
    settings = RoomSettings(
        time_constant=args.time_constant,
        dead_time=args.dead_time,
        gain=args.gain,
        max_power=args.max_power,
        outside=args.outside,
        initial=args.initial,
        noise=args.noise,
        seed=args.seed,
    )
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
        settings.max_power,
        args.sample_seconds,
    )


async def _tune_thermostat(store: Store, namespace: str, args: argparse.Namespace) -> _Done:
    api, kind, name = THERMOSTAT.api_version, THERMOSTAT.kind, args.thermostat
    obj = await store.get(api, kind, name, namespace)
    spec = obj["spec"]
    status = obj.get("status") or {}
    if status.get("temperature") is None or status.get("output") is None:
        raise Invalid(f"thermostat/{name} has no samples yet: is an engine running it?")
    rest_output, rest_temperature = float(status["output"]), float(status["temperature"])
    restore = {"mode": spec.get("mode", "auto"), "manualOutput": spec.get("manualOutput")}
    plant = spec.get("plant") or {}
    max_power = float(plant.get("maxPower", _ROOM.max_power))
    setpoint = float(spec["target"]) if args.setpoint is None else args.setpoint
    experiment = _experiment(args, setpoint, max_power)
    period = float(spec.get("sampleSeconds", 1.0))
    deadline = time.monotonic() + args.timeout
    last_seen: float | None = None
    applied: float | None = None
    try:
        while not experiment.done:
            if time.monotonic() > deadline:
                raise Invalid(f"thermostat/{name}: no steady oscillation within --timeout")
            now = (await store.get(api, kind, name, namespace)).get("status") or {}
            seen = now.get("simulatedSeconds")
            if now.get("temperature") is not None and seen != last_seen:
                last_seen = seen
                output = experiment.update(float(now["temperature"]), float(seen or 0.0))
                if output != applied:
                    patch = {"spec": {"mode": "manual", "manualOutput": output}}
                    await store.patch(api, kind, name, patch, namespace)
                    applied = output
            await asyncio.sleep(period / 2)
    finally:
        await store.patch(api, kind, name, {"spec": restore}, namespace)
    sample = period * float(plant.get("timeScale", 1.0))
    return _Done(
        experiment.result(),
        f"relay experiment on thermostat/{name}",
        rest_output,
        rest_temperature,
        max_power,
        sample,
    )
