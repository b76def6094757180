"""The controller: a work queue of `Request`s, workers that call the reconciler, and what
each outcome means (see `setpoint.runtime.reconciler`).

A key is reconciled by one worker at a time. Errors come back rate-limited;
`Result.requeue_after` schedules. A `TerminalError` is not retried (but after its
`retry_after`, if it has one) until the object changes. The runtime writes nothing to
the objects it reconciles: their status, conditions included, is their reconciler's
(the reconciler kit, `setpoint.runtime.kit`, records a plan's stall as `Stalled`).
Shutdown stops taking keys, lets in-flight reconciles
finish within the grace period, then cancels them. Every outcome is logged in one
line and reported to the `ControllerObserver` (metrics).

Several managers sharing a store (`setpoint.runtime.coordination`) decide which keys this
controller may start through its `gate`: a key the gate refuses is dropped when its turn
comes (its owner reconciles it). When the gate narrows, `stop_keys` waits for (and at last
cancels) the in-flight reconciles of keys no longer kept, then tells the reconciler's
`on_lost`; when it widens, `enqueue_cached` puts the newly allowed keys in line.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Error, Invalid, TerminalError
from setpoint.model import Kind
from setpoint.runtime.informer import Informer
from setpoint.runtime.queue import QueueObserver, ShutDown, WorkQueue
from setpoint.runtime.ratelimit import RateLimiter
from setpoint.runtime.reconciler import ReconcileFunc, Reconciler, Request, Result
from setpoint.runtime.typed import (
    TypedReconcileFunc,
    TypedReconciler,
    reconciler_of,
    takes_typed,
)
from setpoint.store import Store
from setpoint.tasks import cancel_and_wait

log = logging.getLogger("setpoint.controller")


class ControllerObserver:
    """Told of every reconcile; the default does nothing. `result` is one of
    success, error, requeue, requeue_after (controller-runtime's labels)."""

    def on_reconcile(self, controller: str, result: str, seconds: float) -> None:
        """One reconcile finished."""

    def queue_observer(self, controller: str) -> QueueObserver:
        return QueueObserver()


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    max_concurrent: int = 1
    resync_every: float | None = None
    limiter: RateLimiter | None = None

    def __post_init__(self) -> None:
        if self.max_concurrent < 1:
            raise Invalid("must be at least 1", field="max_concurrent")
        if self.resync_every is not None and self.resync_every <= 0:
            raise Invalid("must be positive", field="resync_every")


class Controller:
    """Reconciles the objects of `informer`'s kind, in `informer`'s store, with `reconciler`.

    `settings`: concurrency, resync and rate limiting; `clock`: for back-off and requeues;
    `observer`: told of every reconcile (default: nobody). Events reach the queue through
    `enqueue` (the builder connects informers to it).
    """

    def __init__(
        self,
        name: str,
        reconciler: Reconciler | ReconcileFunc | TypedReconciler | TypedReconcileFunc,
        informer: Informer,
        *,
        settings: ControllerSettings = ControllerSettings(),
        clock: Clock = SYSTEM_CLOCK,
        observer: ControllerObserver | None = None,
    ) -> None:
        self.name = name
        self.informer = informer
        self.kind: Kind = informer.kind
        self.store: Store = informer.store
        self.settings = settings
        self._clock = clock
        self._observer = observer or ControllerObserver()
        self.reconciler = reconciler
        """What reconciles (as given): a `setup` function returns the controller, and its
        caller reaches the reconciler (a table of children, listeners) through it."""
        self._reconcile = _as_async(reconciler, self.store, self.kind)
        self.queue: WorkQueue[Request] = WorkQueue(
            clock=clock, limiter=settings.limiter, observer=self._observer.queue_observer(name)
        )
        self._stopping = False
        self._active: dict[asyncio.Task[None], Request] = {}
        self.gate: Callable[[Request], bool] | None = None
        """Whether this process may start reconciling a key now (None: every key). Read
        when a worker takes the key, on the event loop, right before the reconcile starts."""
        self.on_lost: Callable[[Callable[[Request], bool]], Awaitable[None]] | None = None
        """Called by `stop_keys` once the lost keys' reconciles have ended, with the keys
        kept: let go of what the reconciler holds for the others (a Process controller
        stops their children, which their new owner starts)."""

    async def stop_keys(self, keep: Callable[[Request], bool], *, grace: float) -> None:
        """Return once no reconcile of a key that `keep` rejects is in flight: wait up to
        `grace` seconds for them to finish, then cancel them and wait for the cancellation.
        Narrow the `gate` first, or new reconciles of those keys may start meanwhile."""
        lost = {task for task, request in self._active.items() if not keep(request)}
        if lost:
            _, late = await asyncio.wait(lost, timeout=grace) if grace > 0 else (set(), lost)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        if self.on_lost is not None:
            await self.on_lost(keep)

    def enqueue_cached(self, select: Callable[[Request], bool]) -> int:
        """Put every cached object `select` accepts in line; return how many."""
        count = 0
        for namespace, name in self.informer.cache:
            request = Request(name, namespace)
            if select(request):
                self.enqueue(request)
                count += 1
        return count

    def enqueue(self, request: Request) -> None:
        self.queue.add(request)

    async def run(self) -> None:
        """Work until `shutdown` (or until cancelled, which cancels in-flight reconciles
        too); call after the informers have synced."""
        tasks = [
            asyncio.create_task(self._worker(), name=f"{self.name}-worker-{i}")
            for i in range(self.settings.max_concurrent)
        ]
        resync = None
        if self.settings.resync_every:
            resync = asyncio.create_task(self._resync(self.settings.resync_every))
        try:
            await asyncio.gather(*tasks)
        finally:
            await cancel_and_wait([*tasks, *([resync] if resync else []), *self._active])

    async def shutdown(self, grace: float = 30.0) -> None:
        """Stop taking keys; wait up to `grace` seconds for in-flight reconciles, then cancel."""
        self._stopping = True
        self.queue.shutdown()
        if self._active:
            _, late = await asyncio.wait(set(self._active), timeout=grace)
            for task in late:
                log.warning(
                    "controller=%s reconcile still running after %ss: cancelled", self.name, grace
                )
                task.cancel()

    async def _worker(self) -> None:
        while True:
            try:
                request = await self.queue.get()
            except ShutDown:
                return
            if self._stopping or (self.gate is not None and not self.gate(request)):
                self.queue.done(request)
                continue
            task = asyncio.create_task(self._process(request))
            self._active[task] = request
            task.add_done_callback(functools.partial(self._finished, request))
            # Shielded: cancelling a worker does not cut a reconcile short; shutdown
            # gives it the grace period, and `run` cancels what is left.
            await asyncio.shield(task)

    def _finished(self, request: Request, task: asyncio.Task[None]) -> None:
        self._active.pop(task, None)
        self.queue.done(request)

    async def _process(self, request: Request) -> None:
        start = self._clock.monotonic()
        error: BaseException | None = None
        try:
            result = await self._reconcile(request) or Result()
        except TerminalError as exc:
            outcome, error = "error", exc
            self.queue.forget(request)
            if exc.retry_after is not None and exc.retry_after > 0:
                self.queue.add_after(request, exc.retry_after)
        except Exception as exc:
            outcome, error = "error", exc
            self.queue.add_rate_limited(request)
        else:
            if result.requeue_after is not None and result.requeue_after > 0:
                outcome = "requeue_after"
                self.queue.forget(request)
                self.queue.add_after(request, result.requeue_after)
            else:
                outcome = "success"
                self.queue.forget(request)
        seconds = self._clock.monotonic() - start
        self._observer.on_reconcile(self.name, outcome, seconds)
        if error is None:
            log.info(
                "controller=%s key=%s result=%s duration_ms=%.2f",
                self.name,
                request,
                outcome,
                seconds * 1000,
            )
        else:
            log.warning(
                "controller=%s key=%s result=%s duration_ms=%.2f error=%r",
                self.name,
                request,
                outcome,
                seconds * 1000,
                str(error),
                exc_info=None if isinstance(error, Error) else error,
            )

    async def _resync(self, every: float) -> None:
        while not self._stopping:
            await self._clock.sleep(every)
            for namespace, name in self.informer.cache:
                self.enqueue(Request(name, namespace))


def _as_async(
    reconciler: Reconciler | ReconcileFunc | TypedReconciler | TypedReconcileFunc,
    store: Store,
    kind: Kind,
) -> Callable[[Request], Awaitable[Result | None]]:
    """One calling convention for objects with `reconcile`, async functions and sync functions
    (which run in a worker thread so they cannot block the loop), of a `Request` or, by
    their signature, of a `Typed` object (`setpoint.runtime.typed`)."""
    fn = cast(Callable[[Any], Any], getattr(reconciler, "reconcile", reconciler))
    typed = takes_typed(fn)
    if not inspect.iscoroutinefunction(fn):
        sync_fn = fn

        async def in_thread(argument: Any) -> Result | None:
            return cast(Result | None, await asyncio.to_thread(sync_fn, argument))

        with contextlib.suppress(AttributeError):
            in_thread.__name__ = sync_fn.__name__
        fn = in_thread
    if typed:
        return reconciler_of(store, kind, fn)
    return cast(Callable[[Request], Awaitable[Result | None]], fn)
