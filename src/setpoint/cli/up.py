"""`setpoint up DIR|FILE`: the main job. One process runs the built-in workload controllers
on the local store, applies the manifests and shows them converging until stopped, and
records the timeline (`setpoint.insight.recorder`) that `timeline` and `explain` read.

The store is the CLI's (by default `sqlite:///.setpoint/state.db`), so `get`,
`describe`, `events`, `logs`, `delete` and `apply` run from the same directory reach
it with no flags. Children's state files go to `run/` and their logs to `logs/`, next
to the SQLite file (`.setpoint/run/`, `.setpoint/logs/`; `./.setpoint/` for other
stores): see `workspace_of`; the Job controller keeps its state files apart, in
`run/jobs/` (each controller takes every state file in its directory for its own).

Stopping: SIGINT or SIGTERM stops the manager (in-flight reconciles finish), then
every child (its `stopSignal`, SIGTERM by default, then SIGKILL after its own
`terminationGracePeriodSeconds`),
and exits 0. A further signal while stopping is ignored. If `up` dies without stopping
(SIGKILL, a crash) the children keep running and the next `up` re-adopts them.

Job attempts are stopped along with the Processes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from setpoint.cli.apply import apply_object, check_manifests, refuse_dependency_cycles
from setpoint.cli.context import Context
from setpoint.cli.live import StatusBoard, view_for
from setpoint.cli.load import read_manifests
from setpoint.cli.render import object_ref
from setpoint.control import autoscaler, thermostat
from setpoint.control.autoscaler import AUTOSCALER
from setpoint.control.thermostat import THERMOSTAT
from setpoint.errors import Invalid
from setpoint.model import Kind, Object
from setpoint.runtime.manager import Manager, ManagerOptions
from setpoint.store.base import Store
from setpoint.workloads import deployment, service
from setpoint.workloads.deployment import DEPLOYMENT
from setpoint.workloads.job import JOB, JobController, JobSettings
from setpoint.workloads.process import PROCESS, ProcessController, ProcessSettings
from setpoint.workloads.service import SERVICE

WORKSPACE = Path(".setpoint")


@dataclass(frozen=True, slots=True)
class Workspace:
    """Where Processes' state files (`state_dir`), Jobs' (`job_state_dir`) and both's
    logs (`log_dir`) live."""

    state_dir: Path
    job_state_dir: Path
    log_dir: Path


def workspace_of(store_url: str) -> Workspace:
    """`run/` and `logs/` beside a SQLite store's file, else under `./.setpoint/`."""
    base = WORKSPACE
    if urlsplit(store_url).scheme == "sqlite":
        path = store_url.split("://", 1)[1].split("?", 1)[0][1:]
        base = Path(path).parent
    return Workspace(base / "run", base / "run" / "jobs", base / "logs")


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
        "stop every child cleanly. Running it again adopts children that still run.",
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
    workspace = workspace_of(ctx.store_url)
    async with ctx.open_store(create=True) as store:
        await refuse_dependency_cycles(store, [obj for _, _, obj in checked])
        objects = [(kind, obj) for _, kind, obj in checked]
        return await _run_engine(store, objects, workspace, ctx.store_url)


async def _run_engine(
    store: Store, objects: list[tuple[Kind, Object]], ws: Workspace, store_url: str
) -> int:
    # The recorder (and drain3 with it) is imported by the engine alone, not by every verb.
    from setpoint.insight.recorder import setup as record_timeline

    manager = Manager(store, options=ManagerOptions())
    recorder = record_timeline(manager, store_url=store_url, log_dir=ws.log_dir)
    processes = ProcessController(
        store,
        manager.event_recorder("process-controller"),
        ProcessSettings(ws.state_dir, ws.log_dir),
        clock=manager.clock,
    )
    processes.attach(manager)
    jobs = JobController(
        store,
        manager.event_recorder("job-controller"),
        JobSettings(ws.job_state_dir, ws.log_dir),
        clock=manager.clock,
    )
    jobs.attach(manager)
    deployment.setup(manager, clock=manager.clock)
    service.setup(manager)
    thermostat.setup(manager)
    autoscaler.setup(manager)
    shown = [DEPLOYMENT, PROCESS, JOB, SERVICE, THERMOSTAT, AUTOSCALER]
    board = StatusBoard()
    for kind in shown:
        manager.informer(kind).add_handler(board.on_change)

    signalled = _on_signals(manager)
    try:
        for kind, obj in objects:
            result = await apply_object(store, obj, notes=recorder.timeline)
            print(f"{object_ref(kind, obj['metadata']['name'])} {result}", flush=True)
        view = asyncio.create_task(view_for(board).run())
        try:
            await manager.run()
        except BaseException:
            # Not a graceful stop: leave the children running for the next `up` to adopt.
            await processes.detach()
            await jobs.detach()
            raise
        finally:
            view.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await view
        if processes.pids():
            print(f"stopping {len(processes.pids())} processes ...", file=sys.stderr, flush=True)
        await asyncio.gather(processes.stop_all(), jobs.stop_all())
    finally:
        _restore_signals()
    if not signalled.is_set():
        print("error: the engine stopped by itself; see the messages above", file=sys.stderr)
        return 1
    return 0


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _on_signals(manager: Manager) -> asyncio.Event:
    """The first SIGINT or SIGTERM stops `manager`; later ones are ignored (children are
    being stopped). The event returned is set once one arrived."""
    loop = asyncio.get_running_loop()
    signalled = asyncio.Event()

    def stop() -> None:
        if signalled.is_set():
            print("still stopping children ...", file=sys.stderr, flush=True)
            return
        signalled.set()
        manager.stop()

    for sig in _SIGNALS:
        loop.add_signal_handler(sig, stop)
    return signalled


def _restore_signals() -> None:
    loop = asyncio.get_running_loop()
    for sig in _SIGNALS:
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(sig)
