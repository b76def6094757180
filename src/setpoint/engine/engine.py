"""The engine: every built-in controller in one manager on one store, as `setpoint up` runs it
(and, later, the API server).

    engine = Engine(store, EngineSettings(store_url=url))
    async with engine:             # claims the store's engine lease, wires the controllers
        ...                        # apply manifests, watch `engine.manager`'s informers
        await engine.run()         # until stop(); then every child is stopped

What it wires: the engine becomes a child subreaper (a child's daemonized grandchild is
re-parented to it and reaped by it, `setpoint.workloads.supervisor`), a `Manager` (options
from `EngineSettings.manager`), the Process, Job,
Deployment, Service, Thermostat and Autoscaler controllers, and the timeline recorder
(`setpoint.insight.recorder`), with children's state files and logs in the `Workspace`
beside the store, whose directories are made (or tightened to) mode 0700 (`setpoint.files`).
The users commands may run as are `EngineSettings.allowed_users`' (`self.users`, a
`setpoint.runtime.run_as.UserPolicy`, checked when the engine is made: `Invalid` for a user
the machine lacks, or one a non-root engine cannot switch to); the Process, Job,
Deployment and Autoscaler controllers get it.
Entering claims the store's engine lease first (`setpoint.engine.claim`), then publishes
the CRD of every kind registered in Python (`setpoint.store.kinds.publish_kinds`, written
only when missing or changed):
a second engine on the same store is refused with `EngineRunning` before it touches
anything, so it can never stop or adopt the first one's children.

Several engines may share one store (`EngineSettings.manager.coordination` leader or shard,
`setpoint up --ha`): they claim no engine lease (and refuse to start beside an engine that
holds it, as it refuses to start beside them: `setpoint.engine.claim.running_members`); each
keeps its children's state files in a workspace of its own (`member_workspace`), so a
Process runs on the engine that owns it (shard) or leads its controller (leader).

Stopping: `stop()` stops the manager (in-flight reconciles finish), then `run()` stops every
child with its own stop signal and grace period, dependents before their dependencies
(`setpoint.engine.shutdown`: the reverse of `dependsOn`; unrelated children in parallel).
`kill()` during that stop (a second Ctrl-C) SIGKILLs what is left at once. If `run()` ends
any other way (an exception, a lost engine lease) the children are left running for the
next engine to adopt. Exit releases the lease, so the next engine need not wait.

No printing, no signal handling, no manifests: those belong to the caller (`setpoint.cli.up`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.control import autoscaler, thermostat
from setpoint.engine.claim import (
    EngineHolder,
    claim_engine_lease,
    coordinated_running,
    engine_running,
    running_engine,
    running_members,
)
from setpoint.engine.shutdown import Node, StopTurns, stop_order
from setpoint.errors import Invalid, LeadershipLost, UnknownKind
from setpoint.files import ensure_private_dir
from setpoint.runtime.coordination import Coordination
from setpoint.runtime.leases import LeaderElector
from setpoint.runtime.manager import Manager, ManagerOptions
from setpoint.runtime.namespaces import ensure_system_namespaces
from setpoint.runtime.run_as import UserPolicy
from setpoint.store import Store, sqlite_path
from setpoint.store.kinds import publish_kinds
from setpoint.workloads import deployment, job, process, reaper, service, supervisor
from setpoint.workloads.job import JOB, JobController, JobSettings
from setpoint.workloads.process import PROCESS, ProcessController, ProcessSettings

if TYPE_CHECKING:
    from setpoint.insight.recorder import Recorder

log = logging.getLogger("setpoint.engine")

WORKSPACE = Path(".setpoint")
"""The workspace of stores that are not SQLite files (relative to the working directory)."""


@dataclass(frozen=True, slots=True)
class Workspace:
    """Where Processes' state files (`state_dir`), Jobs' (`job_state_dir`) and both's
    logs (`log_dir`) live. Each controller takes every state file in its directory for its
    own, so the two state directories are apart."""

    state_dir: Path
    job_state_dir: Path
    log_dir: Path

    @property
    def engine_log(self) -> Path:
        """Where an engine started in the background (`setpoint up -d`) writes its output:
        `engine.log` beside the state directories."""
        return self.state_dir.parent / "engine.log"

    def make_private(self) -> None:
        """Make its directories mode 0700 (`setpoint.files.ensure_private_dir`: one that is
        a symbolic link or another user's is refused), tightening those in a `.setpoint/`
        (and it) if an earlier version made them 0755; never the directory of a store
        elsewhere (`/tmp` for `sqlite:////tmp/x.db`)."""
        base = self.state_dir.parent
        if base.name == WORKSPACE.name:
            ensure_private_dir(base)
        for directory in (self.state_dir, self.job_state_dir, self.log_dir):
            ensure_private_dir(directory)


def workspace_of(store_url: str) -> Workspace:
    """`run/`, `run/jobs/` and `logs/` beside a SQLite store's file, else under `./.setpoint/`."""
    base = WORKSPACE
    if urlsplit(store_url).scheme == "sqlite":
        base = Path(sqlite_path(store_url)).parent
    return Workspace(base / "run", base / "run" / "jobs", base / "logs")


def member_workspace(workspace: Workspace, identity: str) -> Workspace:
    """The workspace of the engine named `identity` among several sharing a store: state
    files under `run/members/IDENTITY/` (each engine adopts only its own children), logs
    shared (a Process's log is written by whichever engine runs it)."""
    state_dir = workspace.state_dir / "members" / identity
    return Workspace(state_dir, state_dir / "jobs", workspace.log_dir)


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """What an engine needs besides its store."""

    store_url: str
    """The store's URL: names it in messages, and places the timeline and the workspace."""
    workspace: Workspace | None = None
    """Default: `workspace_of(store_url)`."""
    manager: ManagerOptions = field(default_factory=ManagerOptions)
    record_timeline: bool = True
    """Run the timeline recorder (what `timeline` and `explain` read)."""
    allowed_users: frozenset[str] | None = None
    """The users Processes, Jobs and Deployments (and Autoscalers' commands) may run as
    (`setpoint up --allow-user`). None: the engine's own user, and, when the engine is
    root, any user of the machine (a command without `user:` runs as root already, so
    switching to another user gives it no more power). A list: only those users, root
    itself (a spec without `user:`, on a root engine) included only if listed. An engine
    that is not root cannot switch users: it may list only its own. See
    `setpoint.runtime.run_as`."""


class Engine:
    """The built-in controllers on one store; see the module docstring.

    Between enter and exit: `manager` (add informer handlers before `run()`), `recorder`
    (None without `record_timeline`) and `holder` (this engine in the lease)."""

    def __init__(
        self, store: Store, settings: EngineSettings, *, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.holder = EngineHolder.this_process()
        self.manager = Manager(store, clock=clock, options=settings.manager)
        self.users = UserPolicy.of(settings.allowed_users)
        self.workspace = settings.workspace or workspace_of(settings.store_url)
        if self.coordinated and settings.workspace is None:
            self.workspace = member_workspace(self.workspace, self.manager.identity)
        self.recorder: Recorder | None = None
        self._lease: LeaderElector | None = None
        self._holding: asyncio.Task[None] | None = None
        self._lease_lost = False
        self._processes: ProcessController | None = None
        self._jobs: JobController | None = None
        self._entered = False

    @property
    def coordinated(self) -> bool:
        """Whether this engine shares its store with others (coordination leader or shard)."""
        return self.settings.manager.coordination is not Coordination.SINGLE

    async def __aenter__(self) -> Engine:
        """Claim the engine lease (`EngineRunning` if another engine holds it, or coordinated
        engines run), or, coordinated, make sure no such single engine runs; then wire the
        controllers."""
        url = self.settings.store_url
        if self.coordinated:
            holder = await running_engine(self.store, now=self.clock.now())
            if holder is not None:
                raise engine_running(url, str(holder))
        else:
            self._lease = await claim_engine_lease(
                self.store, self.holder, store_url=url, clock=self.clock
            )
            members = await running_members(self.store, now=self.clock.now())
            if members:
                await self._lease.release()
                self._lease = None
                raise coordinated_running(url, members)
            self._holding = asyncio.create_task(self._hold(self._lease), name="engine-lease")
        self._entered = True
        await publish_kinds(self.store, self.store.registry)  # kinds as data: CRDs
        await ensure_system_namespaces(self.store)  # `default`, `kube-system`
        self._wire()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._holding is not None:
            self._holding.cancel()
            await asyncio.gather(self._holding, return_exceptions=True)
        if self._lease is not None and not self._lease_lost:
            try:
                await self._lease.release()
            except Exception:
                log.exception("could not release the engine lease")

    def _wire(self) -> None:
        manager, ws = self.manager, self.workspace
        ws.make_private()
        # A child's daemonized grandchild is re-parented to the engine, which reaps it.
        supervisor.become_subreaper()
        reaper.watch_exits_by_pidfd()  # not a thread per child (Python 3.11)
        manager.add_runnable(supervisor.reap_orphans_forever)
        if self.settings.record_timeline:
            # Imported here: the recorder (and its log parser) only where an engine runs.
            from setpoint.insight.recorder import setup as record_timeline

            self.recorder = record_timeline(
                manager,
                store_url=self.settings.store_url,
                log_dir=ws.log_dir,
                # The engine lease makes this the store's one engine: its recorder takes the
                # timeline over at once (from a killed one whose word still holds, too).
                # Engines that share a store take turns.
                take_over=not self.coordinated,
            )
        processes = process.setup(manager, ProcessSettings(ws.state_dir, ws.log_dir, self.users))
        assert isinstance(processes.reconciler, ProcessController)
        self._processes = processes.reconciler
        jobs = job.setup(manager, JobSettings(ws.job_state_dir, ws.log_dir, self.users))
        assert isinstance(jobs.reconciler, JobController)
        self._jobs = jobs.reconciler
        deployment.setup(manager, deployment.DeploymentSettings(self.users))
        service.setup(manager)
        thermostat.setup(manager)
        autoscaler.setup(manager, autoscaler.AutoscalerSettings(self.users))

    def running_children(self) -> int:
        """How many children (Processes' and Jobs' attempts) run now."""
        return sum(len(t.pids()) for t in self._tables())

    def stop(self) -> None:
        """Stop gracefully: the manager, then (in `run()`) every child with its own grace."""
        self.manager.stop()

    def kill(self) -> None:
        """Stop at once: as `stop()`, and SIGKILL every child being stopped (a second Ctrl-C)."""
        self.manager.stop()
        for table in self._tables():
            table.kill_stopping()

    @property
    def stopping(self) -> bool:
        return self.manager.stopping

    async def run(self) -> None:
        """Run the manager until `stop()`, then stop every child; see the module docstring.
        Raises `LeadershipLost` (children left running) if the engine lease was lost."""
        if not self._entered:
            raise RuntimeError("enter the engine (`async with engine:`) before run()")
        try:
            await self.manager.run()
        except BaseException:
            await self._detach()
            raise
        if self._lease_lost:
            await self._detach()
            raise LeadershipLost(
                "lost the engine lease; stopped, leaving the children to the next engine"
            )
        turns = StopTurns(await self._stop_order())
        await asyncio.gather(*(t.stop_all(turns=turns) for t in self._tables()))

    async def _stop_order(self) -> dict[Node, frozenset[Node]]:
        """Which children stop before which (`setpoint.engine.shutdown`), from the objects
        as the store has them; no order (all at once) if the store cannot say."""
        stopping = [
            (t.kind.kind, namespace or "default", name)
            for t in self._tables()
            for namespace, name in await t.children_to_stop()
        ]
        registry = self.store.registry
        try:
            objects = [
                obj
                for kind in (PROCESS, JOB, deployment.DEPLOYMENT)
                for obj in (await self.store.list(kind.api_version, kind.kind))[0]
            ]
        except Exception:
            log.exception("could not read the objects to order the stop: stopping all at once")
            return {}

        def canonical_kind(name: str) -> str:
            try:
                return registry.resolve(name).kind
            except (UnknownKind, Invalid):  # not registered, or ambiguous: as spelt
                return name

        return stop_order(objects, stopping, canonical_kind=canonical_kind)

    def _tables(self) -> list[ProcessController | JobController]:
        return [t for t in (self._processes, self._jobs) if t is not None]

    async def _detach(self) -> None:
        for table in self._tables():
            with contextlib.suppress(Exception):
                await table.detach()

    async def _hold(self, lease: LeaderElector) -> None:
        """Renew the engine lease; if it is lost, stop (another engine may take over)."""
        await lease.hold()
        log.error("the engine lease was lost; stopping, leaving the children running")
        self._lease_lost = True
        self.manager.stop()
