"""The manager: runs informers, controllers and other runnables in one asyncio process,
and stops them gracefully.

One informer per kind is shared by every controller that watches it. `run()`
starts the informers, waits until their caches have synced, then starts the
controllers and runnables; `stop()` (or SIGTERM/SIGINT with `handle_signals`)
stops taking work, lets in-flight reconciles finish within the grace period,
and returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.model import Kind
from setpoint.runtime.builder import ControllerBuilder
from setpoint.runtime.cache import Cache
from setpoint.runtime.controller import Controller, ControllerObserver
from setpoint.runtime.informer import Informer
from setpoint.store import Store

log = logging.getLogger("setpoint.manager")

Runnable = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class ManagerOptions:
    grace_period: float = 30.0
    """Seconds in-flight reconciles get to finish on shutdown."""
    handle_signals: bool = False
    """Stop on SIGTERM/SIGINT (for the main process; tests leave it off)."""


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
        self.clock = clock
        self.options = options
        self.observer = observer or ControllerObserver()
        self.controllers: list[Controller] = []
        self._informers: dict[tuple[str, str], Informer] = {}
        self._runnables: list[Runnable] = []
        self._stop = asyncio.Event()
        self._started = asyncio.Event()

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

    def controller(self, name: str) -> ControllerBuilder:
        return ControllerBuilder(self, name)

    def add_controller(self, controller: Controller) -> None:
        self.controllers.append(controller)

    def add_runnable(self, runnable: Runnable) -> None:
        """Run `runnable()` alongside the controllers; it is cancelled on shutdown."""
        self._runnables.append(runnable)

    def stop(self) -> None:
        self._stop.set()

    async def wait_started(self) -> None:
        """Return once caches have synced and controllers are running."""
        await self._started.wait()

    async def run(self) -> None:
        """Run until `stop()` (or a signal), then shut down gracefully."""
        self._tasks: set[asyncio.Task[None]] = set()
        loop = asyncio.get_running_loop()
        if self.options.handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop)
        informers = [
            self._spawn(i.run(), f"informer-{i.kind.kind}") for i in self._informers.values()
        ]
        try:
            await asyncio.gather(*(i.wait_synced() for i in self._informers.values()))
            work = [self._spawn(c.run(), f"controller-{c.name}") for c in self.controllers]
            work += [self._spawn(r(), getattr(r, "__name__", "runnable")) for r in self._runnables]
            self._started.set()
            log.info("manager started: %d controllers", len(self.controllers))
            await self._stop.wait()
        finally:
            log.info("manager stopping")
            await asyncio.gather(*(c.shutdown(self.options.grace_period) for c in self.controllers))
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            del informers
            if self.options.handle_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    with contextlib.suppress(Exception):
                        loop.remove_signal_handler(sig)
            log.info("manager stopped")

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
