"""`setpoint up DIR|FILE`: the main job. Runs the engine (`setpoint.engine`: every built-in
controller and the timeline recorder) on the local store, applies the manifests and shows
them converging until stopped.

The store is the CLI's (by default `sqlite:///.setpoint/state.db`), so `get`,
`describe`, `events`, `logs`, `delete` and `apply` run from the same directory reach
it with no flags. Children's state files and logs go beside the SQLite file
(`setpoint.engine.workspace_of`), in directories of mode 0700.

One engine per store: if another `up` already runs on the store, this one prints one line
naming it (`error: an engine (pid 1234 on host x) already runs on ...`) and exits 1 before
applying anything or touching a child.

Stopping: the first SIGINT or SIGTERM stops the engine gracefully (in-flight reconciles
finish, then every child gets its `stopSignal`, SIGTERM by default, and SIGKILL after its
own `terminationGracePeriodSeconds`), and `up` exits 0. A second one stops the rest at once
(SIGKILL), as docker compose does. If `up` dies without stopping (SIGKILL, a crash) the
children keep running and the next `up` re-adopts them.

This module is the terminal's part only: manifests, the live view, signals and messages.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from setpoint.cli.apply import apply_object, check_manifests, refuse_dependency_cycles
from setpoint.cli.context import Context
from setpoint.cli.live import StatusBoard, view_for
from setpoint.cli.load import read_manifests
from setpoint.cli.render import object_ref
from setpoint.control.kinds import AUTOSCALER, THERMOSTAT
from setpoint.engine import Engine, EngineSettings
from setpoint.errors import Invalid
from setpoint.model import Kind, Object
from setpoint.workloads.kinds import DEPLOYMENT, JOB, PROCESS, SERVICE

SHOWN = (DEPLOYMENT, PROCESS, JOB, SERVICE, THERMOSTAT, AUTOSCALER)
"""The kinds the live view shows."""


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "up",
        parents=parents,
        help="run the workload controllers, apply manifests, show them converge",
        description="Apply the manifests in DIR (or FILE), run every built-in controller "
        "in this process and show each object's readiness until Ctrl-C or SIGTERM, which "
        "stop every child cleanly (a second one kills them at once). Running it again "
        "adopts children that still run; only one `up` runs on a store at a time.",
    )
    p.add_argument("path", metavar="DIR|FILE", help="a manifest file or a directory of them")
    p.set_defaults(run=run)


async def run(ctx: Context, args: argparse.Namespace) -> int:
    manifests = read_manifests([args.path])
    if not manifests:
        raise Invalid(f"{args.path}: no manifests (*.yaml, *.yml, *.json) found")
    checked, problems = check_manifests(
        manifests, ctx.registry, ctx.namespace, ctx.namespace_explicit
    )
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        return 1
    async with ctx.open_store(create=True) as store:
        await refuse_dependency_cycles(store, [obj for _, _, obj in checked])
        objects = [(kind, obj) for _, kind, obj in checked]
        async with Engine(store, EngineSettings(store_url=ctx.store_url)) as engine:
            return await _run_engine(engine, objects)


async def _run_engine(engine: Engine, objects: list[tuple[Kind, Object]]) -> int:
    board = StatusBoard()
    for kind in SHOWN:
        engine.manager.informer(kind).add_handler(board.on_change)
    signalled = _on_signals(engine)
    try:
        notes = engine.recorder.timeline if engine.recorder is not None else None
        for kind, obj in objects:
            result = await apply_object(engine.store, obj, notes=notes)
            print(f"{object_ref(kind, obj['metadata']['name'])} {result}", flush=True)
        view = asyncio.create_task(view_for(board).run())
        try:
            await engine.run()
        finally:
            view.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await view
    finally:
        _restore_signals()
    if not signalled.is_set():
        print("error: the engine stopped by itself; see the messages above", file=sys.stderr)
        return 1
    return 0


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _on_signals(engine: Engine) -> asyncio.Event:
    """The first SIGINT or SIGTERM stops `engine` gracefully; the second kills what is left
    at once. The event returned is set once one arrived."""
    loop = asyncio.get_running_loop()
    signalled = asyncio.Event()

    def stop() -> None:
        if signalled.is_set():
            print("stopping the rest at once (SIGKILL)", file=sys.stderr, flush=True)
            engine.kill()
            return
        signalled.set()
        running = engine.running_children()
        if running:
            print(
                f"stopping {running} processes ... (again to kill them at once)",
                file=sys.stderr,
                flush=True,
            )
        engine.stop()

    for sig in _SIGNALS:
        loop.add_signal_handler(sig, stop)
    return signalled


def _restore_signals() -> None:
    loop = asyncio.get_running_loop()
    for sig in _SIGNALS:
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(sig)
