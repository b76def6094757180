"""The manager: runs informers, controllers and other runnables in one asyncio process,
and stops them gracefully.

One informer per kind is shared by every controller that watches it. `run()`
starts the informers, waits until their caches have synced, then starts the
controllers and runnables; `stop()` (or SIGTERM/SIGINT with `handle_signals`)
stops taking work, lets in-flight reconciles finish within the grace period,
and returns.

With `ManagerOptions.leader_election`, informers start at once but controllers
and runnables only once this manager holds the Lease named by
`leader_election_id` (see `setpoint.runtime.leases`). If leadership is lost, the
manager stops at once and `run()` raises `LeadershipLost` rather than risk two
leaders; a graceful stop releases the lease so a successor need not wait.

With `ManagerOptions.coordination` (`setpoint.runtime.coordination`), several managers share
the store: `leader` elects a leader per controller (the others stand by, informers warm),
`shard` splits every controller's keys among the live members (`setpoint.runtime.sharding`).
In both, user runnables run in every manager, and the garbage collector and event expiry in
the one that holds the Lease `leader_election_id`. A graceful stop lets in-flight reconciles
finish, lets go of every key (`Controller.on_lost`: a Process controller stops its children),
then releases the leases, so the others take over without waiting.

With `ManagerOptions.health_address`, an HTTP server answers `/healthz` (the
loop is alive), `/readyz` (caches synced, not stopping; independent of
leadership, so followers are ready too) and `/metrics` (Prometheus, with
controller-runtime's metric names; see `setpoint.runtime.metrics`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Invalid, LeadershipLost
from setpoint.model import Kind
from setpoint.model.wellknown import COORDINATION_LABEL
from setpoint.runtime.builder import ControllerBuilder
from setpoint.runtime.cache import Cache
from setpoint.runtime.controller import Controller, ControllerObserver
from setpoint.runtime.coordination import Coordination, lead
from setpoint.runtime.events import EventRecorder, expire_events
from setpoint.runtime.gc import GarbageCollector
from setpoint.runtime.health import serve, split_address
from setpoint.runtime.informer import Informer
from setpoint.runtime.kinds import EVENT, LEASE
from setpoint.runtime.leases import LeaderElector, LeaseSettings
from setpoint.runtime.metrics import Metrics
from setpoint.runtime.sharding import ShardMember
from setpoint.store import Store

if TYPE_CHECKING:
    from setpoint.http_server import HttpServer

log = logging.getLogger("setpoint.manager")

Runnable = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ManagerOptions:
    grace_period: float = 30.0
    """Seconds in-flight reconciles get to finish on shutdown."""
    handle_signals: bool = False
    """Stop on SIGTERM/SIGINT (for the main process; tests leave it off)."""
    leader_election: bool = False
    """Run controllers and runnables only while holding a Lease in the store."""
    leader_election_id: str = "setpoint-manager"
    """Name of the Lease; managers that share it elect one leader among them. With
    `coordination` leader or shard: the prefix of the controllers' leases, and the shard
    group's name."""
    leader_election_namespace: str = "default"
    coordination: Coordination = Coordination.SINGLE
    """How this manager shares the store with other managers: single (alone), leader (a
    leader per controller) or shard (keys split among members); see
    `setpoint.runtime.coordination`."""
    identity: str | None = None
    """This manager's name in the Lease; default: hostname + "_" + a random hex id."""
    lease: LeaseSettings = field(default_factory=LeaseSettings)
    """Lease duration, renew deadline and retry period."""
    health_address: str | None = None
    """HOST:PORT for /healthz, /readyz and /metrics ("127.0.0.1:0": any free port)."""
    garbage_collection: bool = True
    """Run the garbage collector: delete objects whose owners are gone (leader only)."""
    event_ttl: float | None = 3600.0
    """Delete Events older than this many seconds (leader only); None keeps them."""

    def __post_init__(self) -> None:
        if self.leader_election and self.coordination is not Coordination.SINGLE:
            raise Invalid(
                "leader_election elects one leader for the whole manager: use it only with "
                "coordination single",
                field="leader_election",
            )
        if self.health_address is not None:
            try:
                split_address(self.health_address)
            except ValueError as exc:
                raise Invalid(str(exc), field="health_address") from None


class Manager:
    def __init__(
        self,
        store: Store,
        *,
        clock: Clock = SYSTEM_CLOCK,
        options: ManagerOptions = ManagerOptions(),
        observer: ControllerObserver | None = None,
    ) -> None:
        self.store = store
        for builtin in (EVENT, LEASE):
            store.registry.register(builtin)
        self.clock = clock
        self.options = options
        self.observer = observer or Metrics()
        self.metrics = self.observer if isinstance(self.observer, Metrics) else None
        if self.metrics is not None:
            self.metrics.track_queues(lambda: {c.name: c.queue for c in self.controllers})
        self.health_server: HttpServer | None = None
        self._synced = False
        self.controllers: list[Controller] = []
        self._informers: dict[tuple[str, str], Informer] = {}
        self._runnables: list[Runnable] = []
        self._stop = asyncio.Event()
        self._started = asyncio.Event()
        self._running = False
        self.identity = options.identity or f"{socket.gethostname()}_{uuid.uuid4().hex}"
        """This manager's name in the leases it holds."""
        self._elector: LeaderElector | None = None
        if options.leader_election:
            self._elector = self._lease(options.leader_election_id)
        self.shard: ShardMember | None = None
        """This manager's membership of its shard group (coordination shard only)."""
        if options.coordination is Coordination.SHARD:
            member = ShardMember(
                store,
                group=options.leader_election_id,
                identity=self.identity,
                namespace=options.leader_election_namespace,
                clock=clock,
                settings=options.lease,
            )
            self.informer(LEASE).add_handler(lambda _: member.notify())
            self.shard = member
        self._leadership_lost = False

    @property
    def is_leader(self) -> bool:
        """Whether this manager's controllers may run: without leader election, once
        started; with it, while it holds the lease."""
        if self._elector is None:
            return self._started.is_set()
        return self._elector.is_leader

    @property
    def stopping(self) -> bool:
        """Whether `stop()` was called (or a signal or lost lease stopped it)."""
        return self._stop.is_set()

    @property
    def informers(self) -> list[Informer]:
        """Every informer this manager runs, one per kind."""
        return list(self._informers.values())

    def kind(self, kind: Kind | str) -> Kind:
        """A kind given as a `Kind` or as a person would type it (`widgets`, `Widget`)."""
        return kind if isinstance(kind, Kind) else self.store.registry.resolve(kind)

    def informer(self, kind: Kind | str) -> Informer:
        """The shared informer of `kind`, created on first use."""
        k = self.kind(kind)
        informer = self._informers.get((k.api_version, k.kind))
        if informer is None:
            informer = Informer(self.store, k, clock=self.clock)
            self._informers[(k.api_version, k.kind)] = informer
            if self._started.is_set():
                self._spawn(informer.run(), f"informer-{k.kind}")
        return informer

    def cache(self, kind: Kind | str) -> Cache:
        return self.informer(kind).cache

    def event_recorder(self, component: str) -> EventRecorder:
        """An `EventRecorder` writing Events from `component` into this manager's store."""
        return EventRecorder(self.store, component, clock=self.clock)

    def controller(self, name: str) -> ControllerBuilder:
        return ControllerBuilder(self, name)

    def add_controller(self, controller: Controller) -> None:
        if self._running:
            raise Invalid(f"controller {controller.name!r}: add controllers before run()")
        self.controllers.append(controller)

    def add_runnable(self, runnable: Runnable) -> None:
        """Run `runnable()` alongside the controllers; it is cancelled on shutdown."""
        if self._running:
            raise Invalid("add runnables before run()")
        self._runnables.append(runnable)

    def stop(self) -> None:
        self._stop.set()

    async def wait_started(self) -> None:
        """Return once caches have synced and controllers are running."""
        await self._started.wait()

    async def run(self) -> None:
        """Run until `stop()` (or a signal), then shut down gracefully."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._running = True
        loop = asyncio.get_running_loop()
        if self.options.handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop)
        for informer in self._informers.values():
            self._spawn(informer.run(), f"informer-{informer.kind.kind}")
        try:
            if self.options.health_address is not None:
                await self._serve_health(self.options.health_address)
            if not await self._until_stopped(
                asyncio.gather(*(i.wait_synced() for i in self._informers.values()))
            ):
                return
            self._synced = True
            if self._elector is not None and not await self._lead(self._elector):
                return
            self._start_work()
            self._started.set()
            log.info("manager started: %d controllers", len(self.controllers))
            await self._stop.wait()
        finally:
            log.info("manager stopping")
            # After losing the lease, in-flight reconciles get no grace: another leader may run.
            grace = 0.0 if self._leadership_lost else self.options.grace_period
            await asyncio.gather(*(c.shutdown(grace) for c in self.controllers))
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            if self.shard is not None and self._started.is_set():
                try:
                    # Let go of every key (a Process's child stops) before the others may
                    # take them over.
                    await asyncio.gather(*(c.stop_keys(_refuse, grace=0) for c in self.controllers))
                    await self.shard.leave()
                except Exception:
                    log.exception("could not delete the shard member lease")
            if self._elector is not None and not self._leadership_lost:
                try:
                    await self._elector.release()
                except Exception:
                    log.exception("could not release the leader lease")
            if self.health_server is not None:
                await self.health_server.close()
            if self.options.handle_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    with contextlib.suppress(Exception):
                        loop.remove_signal_handler(sig)
            log.info("manager stopped")
        if self._leadership_lost:
            raise LeadershipLost("lost the leader lease; stopped rather than risk two leaders")

    def _lease(self, name: str) -> LeaderElector:
        options = self.options
        mode = options.coordination
        return LeaderElector(
            self.store,
            name,
            namespace=options.leader_election_namespace,
            identity=self.identity,
            clock=self.clock,
            settings=options.lease,
            labels={} if mode is Coordination.SINGLE else {COORDINATION_LABEL: mode.value},
        )

    def _start_work(self) -> None:
        """Start the controllers and runnables, coordinated as `options.coordination` says."""
        if self.options.coordination is Coordination.SINGLE:
            for controller in self.controllers:
                self._spawn(controller.run(), f"controller-{controller.name}")
            for runnable in self._builtin_runnables() + self._runnables:
                self._spawn(runnable(), getattr(runnable, "__name__", "runnable"))
            return
        prefix = self.options.leader_election_id
        for controller in self.controllers:
            controller.gate = _refuse  # until its lease or its shard says otherwise
        if self.shard is not None:
            self.shard.controllers = list(self.controllers)
            for controller in self.controllers:
                controller.gate = self.shard.may_start
            self._spawn(self.shard.run(), f"shard-member-{self.identity}")
        else:
            for controller in self.controllers:
                elector = self._lease(f"{prefix}-{controller.name}")
                self._spawn(lead(controller, elector), f"lead-{controller.name}")
        for controller in self.controllers:
            self._spawn(controller.run(), f"controller-{controller.name}")
        for runnable in self._runnables:
            self._spawn(runnable(), getattr(runnable, "__name__", "runnable"))
        builtin = self._builtin_runnables()
        if builtin:
            self._spawn(self._run_while_leading(self._lease(prefix), builtin), "builtin-lead")

    async def _run_while_leading(self, elector: LeaderElector, runnables: list[Runnable]) -> None:
        """Run `runnables` while holding `elector`'s lease; stand again when it is lost."""
        try:
            while True:
                await elector.acquire()
                tasks = [asyncio.ensure_future(r()) for r in runnables]
                try:
                    await elector.hold()
                finally:
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            if elector.is_leader:
                await elector.release()

    def _builtin_runnables(self) -> list[Runnable]:
        runnables: list[Runnable] = []
        if self.options.garbage_collection:
            gc = GarbageCollector(self.store, registry=self.store.registry, clock=self.clock)
            runnables.append(gc.run)
        ttl = self.options.event_ttl
        if ttl is not None:

            async def expire() -> None:
                await expire_events(self.store, ttl=ttl, clock=self.clock)

            runnables.append(expire)
        return runnables

    async def _serve_health(self, address: str) -> None:
        host, port = split_address(address)
        metrics = self.metrics
        self.health_server = await serve(
            host,
            port,
            healthz=lambda: True,  # answering at all means the loop is alive
            readyz=lambda: self._synced and not self._stop.is_set(),
            metrics=metrics.render if metrics is not None else (lambda: b""),
        )

    async def _lead(self, elector: LeaderElector) -> bool:
        """Wait to acquire the lease (False if stopped first), then keep it held in a task
        that stops the manager when leadership is lost."""
        log.info("waiting for the leader lease as %s", elector.identity)
        if not await self._until_stopped(elector.acquire()):
            return False

        async def hold() -> None:
            try:
                await elector.hold()
            finally:  # returned or raised: either way we may no longer lead
                if not self._stop.is_set():
                    log.error("leader lease lost; stopping the manager")
                    self._leadership_lost = True
                    self.stop()

        self._spawn(hold(), "leader-hold")
        return True

    async def _until_stopped(self, work: Awaitable[object]) -> bool:
        """Await `work` unless `stop()` comes first (then cancel it and return False)."""
        task: asyncio.Future[object] = asyncio.ensure_future(work)
        stopped: asyncio.Future[object] = asyncio.ensure_future(self._stop.wait())
        done: set[asyncio.Future[object]] = set()
        try:
            done, _ = await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (task, stopped):
                t.cancel()
            await asyncio.gather(task, stopped, return_exceptions=True)
        if task not in done:
            return False
        task.result()  # raises what the work raised
        return True

    def _spawn(self, coro: Awaitable[None], name: str) -> asyncio.Task[None]:
        async def guarded() -> None:
            try:
                await coro
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed; stopping the manager", name)
                self.stop()

        task = asyncio.create_task(guarded(), name=name)
        self._tasks.add(task)
        return task


def _refuse(_: object) -> bool:
    return False
