"""The in-memory harness: a store and a manager for one test, a way to wait until every
controller has nothing left to do, and a collector of recorded `Event`s.

    async with Harness(registry=registry) as harness:
        harness.manager.controller("widgets").for_("widgets").complete(reconcile)
        await harness.start()
        await harness.store.create(widget)
        await reconcile_until_stable(harness)
        ...  # assert on the store: every controller has done all it would do

`Harness` opens the store on enter and builds a `Manager` on it, but does not
start it: the test registers its controllers first, then calls `start()`. On
exit it stops the manager (in-flight reconciles get the grace period) and
closes the store. Nothing here sleeps on the wall clock to wait for something;
waits poll the state of the world between loop turns and are bounded by a
timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from types import TracebackType

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.engine import builtin_kinds
from setpoint.errors import StoreClosed
from setpoint.model import Object, Registry
from setpoint.runtime.controller import Controller
from setpoint.runtime.events import EVENT
from setpoint.runtime.informer import Informer
from setpoint.runtime.manager import Manager, ManagerOptions
from setpoint.store import Store, WatchEvent, open_store

HARNESS_OPTIONS = ManagerOptions(grace_period=5.0)
"""The harness manager's default options: as `ManagerOptions()`, with a 5 s grace period."""

_BUSY_POLLS = 16
"""Checks made one loop turn apart before waiting polls back off to a millisecond apart, so
work in other threads (a SQLite writer, a sync reconciler) gets to run."""
_BACKOFF = 0.001


class Harness:
    """A store and an unstarted `Manager` for one test; an async context manager.

    `registry`: the kinds the store knows (default: every built-in kind,
    `setpoint.engine.builtin_kinds()`).
    `clock`: given to the store and the manager (default: the system clock;
    pass a `setpoint.testing.ManualClock` to move time by hand). `url`: the
    store to open (default `memory://`). `options`: the manager's options
    (default `HARNESS_OPTIONS`).

    Enter opens the store and builds the manager; register controllers on
    `harness.manager`, then `await harness.start()`. Exit stops the manager if
    it was started, waits for it to finish, and closes the store. An exception
    the manager's `run()` raised comes out of `stop()` (or of the exit, unless
    the block itself raised).
    """

    def __init__(
        self,
        *,
        registry: Registry | None = None,
        clock: Clock = SYSTEM_CLOCK,
        url: str = "memory://",
        options: ManagerOptions = HARNESS_OPTIONS,
    ) -> None:
        self._registry = registry
        self._clock = clock
        self._url = url
        self._options = options
        self._store: Store | None = None
        self._manager: Manager | None = None
        self._run: asyncio.Task[None] | None = None

    @property
    def store(self) -> Store:
        """The store, open between enter and exit."""
        if self._store is None:
            raise RuntimeError("the harness is not entered: use `async with Harness() as h`")
        return self._store

    @property
    def manager(self) -> Manager:
        """The manager on `store`; register controllers on it before `start()`."""
        if self._manager is None:
            raise RuntimeError("the harness is not entered: use `async with Harness() as h`")
        return self._manager

    @property
    def clock(self) -> Clock:
        """The clock the store and the manager read."""
        return self._clock

    @property
    def started(self) -> bool:
        """Whether `start()` was called and `stop()` was not."""
        return self._run is not None

    async def __aenter__(self) -> Harness:
        registry = self._registry if self._registry is not None else builtin_kinds()
        self._store = await open_store(self._url, registry, clock=self._clock)
        self._manager = Manager(self._store, clock=self._clock, options=self._options)
        return self

    async def start(self, *, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - see below
        """Run the manager; return once its caches have synced and its controllers run.

        Raises what `run()` raised if the manager stops before it has started,
        and `TimeoutError` if it has not started within `timeout` seconds.
        """
        manager = self.manager
        if self._run is not None:
            raise RuntimeError("the harness's manager is already started")
        self._run = asyncio.create_task(manager.run(), name="setpoint.testing.Harness")
        started = asyncio.create_task(manager.wait_started())
        try:
            done, _ = await asyncio.wait(
                {self._run, started}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            started.cancel()
        if started in done:
            return
        if self._run.done():
            run, self._run = self._run, None
            run.result()  # raises what run() raised
            raise RuntimeError("the manager stopped before it started")
        raise TimeoutError(f"the manager did not start within {timeout}s (caches not synced?)")

    async def stop(self) -> None:
        """Stop the manager and wait for `run()` to return; re-raise what it raised."""
        run, self._run = self._run, None
        if run is None:
            return
        self.manager.stop()
        await run

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc is None:
                await self.stop()
            else:
                with contextlib.suppress(Exception):  # the block's own error matters more
                    await self.stop()
        finally:
            store, self._store = self._store, None
            if store is not None:
                await store.close()


# -- waiting until nothing is left to do ------------------------------------------


async def reconcile_until_stable(
    target: Harness | Manager,
    *,
    timeout: float = 5.0,  # noqa: ASYNC109 - the timeout error says what is still busy
) -> None:
    """Return once the manager's controllers have nothing left to do; `TimeoutError` (naming
    what is still busy) if that does not happen within `timeout` seconds of wall time.

    Waits for the manager to have started first. The manager is *stable* when
    all of these hold at once:

    * every controller's work queue has no key in line, no key processing, and
      no delayed key whose due time (on the manager's clock) has come; keys
      scheduled for later (`requeue_after`, a rate-limited retry not yet due)
      do not count, so on a `ManualClock` they wait until the test advances time;
    * every informer of the manager has caught up with the store: its cache
      holds exactly the objects (by key and resourceVersion) that a list of the
      store with the informer's filters returns now, so no change already
      written is still on its way to a handler;

    and they still all hold after one more turn of the event loop, so a key
    enqueued by a callback already scheduled is not missed.

    Not waited for: the manager's runnables (the garbage collector, event
    expiry, anything given to `add_runnable`) and writes by other tasks or
    processes that have not reached the store when it checks. A manager that
    has stopped (a crashed controller stops it) is never stable: that raises
    `RuntimeError`.

    It polls: checks one loop turn apart, backing off to one millisecond apart
    after a few, so that threads (the SQLite writer, sync reconcilers) can run.
    """
    manager = target.manager if isinstance(target, Harness) else target
    started = False
    try:
        async with asyncio.timeout(timeout):
            await manager.wait_started()
            started = True
            polls = 0
            held = False
            while True:
                if manager.stopping:
                    raise RuntimeError("the manager has stopped: not waiting for it to settle")
                busy = await _busy(manager)
                if busy is None and held:
                    return
                held = busy is None
                polls = 0 if held else polls + 1
                await asyncio.sleep(0 if polls < _BUSY_POLLS else _BACKOFF)
    except TimeoutError:
        pass
    if not started:
        raise TimeoutError(f"not stable after {timeout}s: the manager has not started")
    busy = await _busy(manager, explain=True)
    raise TimeoutError(f"not stable after {timeout}s: {busy or 'it changed at every check'}")


async def _busy(manager: Manager, *, explain: bool = False) -> str | None:
    """None when the manager is stable (see `reconcile_until_stable`); else why not.

    With `explain`, every reason is collected; otherwise the first is enough.
    """
    reasons: list[str] = []
    for controller in manager.controllers:
        reason = _queue_busy(controller)
        if reason is not None:
            reasons.append(reason)
            if not explain:
                return reason
    revision: int | None = None
    for informer in _informers(manager):
        if revision is None:
            revision = await manager.store.revision()
        reason = await _informer_behind(informer, revision)
        if reason is not None:
            reasons.append(reason)
            if not explain:
                return reason
    return "; ".join(reasons) or None


def _queue_busy(controller: Controller) -> str | None:
    queue = controller.queue
    stats = queue.statistics()
    due = stats.delayed_due
    if stats.depth or stats.processing or due:
        return (
            f"controller {controller.name!r}: {stats.depth} in line, "
            f"{stats.processing} processing, {due} delayed and due"
        )
    return None


def _informers(manager: Manager) -> list[Informer]:
    informers: dict[int, Informer] = {id(i): i for i in manager.informers}
    for controller in manager.controllers:
        informers.setdefault(id(controller.informer), controller.informer)
    return list(informers.values())


async def _informer_behind(informer: Informer, revision: int) -> str | None:
    """None if the informer's cache holds what the store holds now; else how it differs."""
    cache = informer.cache
    what = f"informer of {informer.kind.kind!r}"
    if not informer.synced:
        return f"{what}: not synced"
    if cache.revision >= revision:
        return None
    # The cache's revision moves only on changes of its own kind: compare contents.
    kind = informer.kind
    items, _ = await informer.store.list(
        kind.api_version, kind.kind, informer.namespace, informer.label_selector
    )
    if len(items) != len(cache):
        return f"{what}: {len(cache)} cached, {len(items)} in the store"
    for obj in items:
        meta = obj["metadata"]
        cached = cache.get(meta["name"], meta.get("namespace"))
        theirs = None if cached is None else cached["metadata"]["resourceVersion"]
        if theirs != meta["resourceVersion"]:
            return (
                f"{what}: {meta['name']!r} is at resourceVersion {meta['resourceVersion']} "
                f"in the store, {theirs or 'absent'} in the cache"
            )
    return None


# -- collecting events -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CapturedEvent:
    """One `Event` as last seen: what happened (`reason`, `message`, `type`: Normal or
    Warning), to which object (`involved_kind`, `involved_name`) and how often (`count`)."""

    reason: str
    message: str
    type: str
    involved_kind: str
    involved_name: str
    count: int


class EventCapture:
    """Collects the `Event`s written to a store while it is entered; see `capture_events`."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._events: dict[tuple[str, str], CapturedEvent] = {}
        self._revision = 0
        self._failure: BaseException | None = None
        self._changed: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def events(self) -> list[CapturedEvent]:
        """Every `Event` created or changed since enter, in the order they first appeared,
        each in its latest state (an aggregated event shows its latest `count`)."""
        return list(self._events.values())

    async def __aenter__(self) -> EventCapture:
        kind = EVENT
        self._store.registry.register(kind)
        self._revision = await self._store.revision()
        self._changed = asyncio.get_running_loop().create_future()
        # Every kind is watched, so `sync` can tell when the capture has reached a revision.
        watch = self._store.watch(None, None, since=self._revision)
        self._task = asyncio.create_task(self._follow(watch), name="setpoint.testing.events")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc is None and self._failure is None:
                await self.sync()
        finally:
            if self._task is not None:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)

    async def sync(self, *, timeout: float = 5.0) -> None:  # noqa: ASYNC109 - bounds the exit
        """Return once every change committed to the store so far has been seen (the exit
        does this, so `events` read after the block is complete)."""
        target = await self._store.revision()
        async with asyncio.timeout(timeout):
            while self._revision < target:
                await self._next_change()

    async def wait_event(
        self,
        reason: str,
        *,
        involved_name: str | None = None,
        count: int = 1,
        timeout: float = 5.0,  # noqa: ASYNC109 - the timeout error lists the events seen
    ) -> CapturedEvent:
        """Return the first event with `reason` (about `involved_name`, if given) whose
        count has reached `count`; `TimeoutError` after `timeout` seconds."""

        def match() -> CapturedEvent | None:
            for event in self._events.values():
                if event.reason != reason or event.count < count:
                    continue
                if involved_name is None or event.involved_name == involved_name:
                    return event
            return None

        try:
            async with asyncio.timeout(timeout):
                while (found := match()) is None:
                    await self._next_change()
                return found
        except TimeoutError:
            seen = ", ".join(f"{e.reason}({e.involved_name})x{e.count}" for e in self.events)
            raise TimeoutError(
                f"no event {reason!r} within {timeout}s; seen: {seen or 'none'}"
            ) from None

    async def _next_change(self) -> None:
        if self._failure is not None:
            raise RuntimeError(f"the event capture stopped: {self._failure}") from self._failure
        assert self._changed is not None
        await asyncio.shield(self._changed)

    async def _follow(self, watch: AsyncIterator[WatchEvent]) -> None:
        kind = EVENT
        try:
            async for change in watch:
                obj = change.object
                if obj.get("apiVersion") == kind.api_version and obj.get("kind") == kind.kind:
                    self._record(obj)
                self._revision = change.revision
                self._notify()
            self._failure = StoreClosed("the store was closed")
        except Exception as exc:  # reported to whoever waits
            self._failure = exc
        self._notify()

    def _record(self, obj: Object) -> None:
        meta = obj["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        involved = obj.get("involvedObject") or {}
        self._events[key] = CapturedEvent(
            reason=str(obj.get("reason", "")),
            message=str(obj.get("message", "")),
            type=str(obj.get("type", "")),
            involved_kind=str(involved.get("kind", "")),
            involved_name=str(involved.get("name", "")),
            count=int(obj.get("count") or 1),
        )

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.get_running_loop().create_future()
        if changed is not None and not changed.done():
            changed.set_result(None)


def capture_events(store: Store) -> EventCapture:
    """Collect the `Event`s (apiVersion `v1`, as `setpoint.runtime.events` records them)
    that are created or changed in `store` while the returned capture is entered::

        async with capture_events(harness.store) as captured:
            ...
            await captured.wait_event("Started", involved_name="web-0")
        assert [e.reason for e in captured.events] == ["Started"]

    If the store's registry lacks the `Event` kind (a test's own `Registry`),
    it is registered there on enter, so an `EventRecorder` writing to this
    store is not refused. Events deleted while the capture runs stay in the
    list in their last state.
    """
    return EventCapture(store)
