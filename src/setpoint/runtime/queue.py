"""The work queue: keys waiting to be reconciled, deduplicated, delayed and rate-limited.

Semantics are client-go's workqueue, on asyncio:

* A key is never handed to two getters at once: `get` moves it to
  *processing* until `done(key)`.
* A key added while it is processing is processed again after `done`, once.
* Duplicates collapse: adding a key that is already waiting does nothing, and
  it keeps its place in line. Distinct keys come out in the order they went in.
* `add_after(key, delay)` puts the key in line once `delay` seconds have passed
  on the injected clock; scheduling a key that is already scheduled keeps the
  earlier time. `add_rate_limited(key)` is `add_after` with the delay the rate
  limiter gives; `forget(key)` resets the key's backoff after a success.
* `shutdown()` stops accepting keys and drops scheduled ones; keys already in
  line are still handed out, and `get` raises `ShutDown` once none is left.
  `await shutdown_and_drain()` also waits until nothing is in line or
  processing, so it needs workers that keep calling `get` until `ShutDown`
  (bound it with `asyncio.wait_for`).

Three structures hold the state, as in client-go: a FIFO of keys, the `dirty`
set (keys in line, or to be put back in line on `done`), and the `processing`
set (a dict, holding when each key was handed out). Delays live in a heap
keyed by due time, served by one background task that sleeps on the clock.
Every operation is O(1), or O(log n) for delays.

Exceptions: `Empty` (from `get_nowait` when no key is in line) and `ShutDown`
(from `get` and `get_nowait` once the queue is shut down and no key is in
line). Both are plain `Exception`s, not `setpoint.Error`s: they are how the
queue talks to its workers, not failures a user acts on.

Metrics: `statistics()` returns counters and gauges as an immutable snapshot;
a `QueueObserver` passed as `observer=` is told each key's time in line and
time in processing (client-go's `workqueue_queue_duration_seconds` and
`workqueue_work_duration_seconds`). This module does no I/O and reads time only
from the injected clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.runtime.ratelimit import RateLimiter, default_controller_limiter

T = TypeVar("T", bound=Hashable)


class Empty(Exception):
    """`get_nowait` found no key in line."""


class ShutDown(Exception):
    """The queue was shut down and no key is left in line: the worker should stop."""


@dataclass(frozen=True, slots=True)
class QueueStatistics:
    """A snapshot of a `WorkQueue`, taken by `WorkQueue.statistics()`.

    `depth`: keys in line. `delayed`: keys scheduled by `add_after` and not yet
    in line; `delayed_due`: those of them whose time has come (the delay task is
    about to put them in line). `processing`: keys handed out and not yet `done`. `adds`: times a
    key was put in line (adds that collapsed into a waiting key do not count).
    `retries`: calls to `add_rate_limited`. `longest_running_seconds`: how long
    the key processing longest has been processing. `unfinished_work_seconds`:
    the sum of that over every processing key.
    """

    depth: int
    delayed: int
    delayed_due: int
    processing: int
    adds: int
    retries: int
    longest_running_seconds: float
    unfinished_work_seconds: float


class QueueObserver:
    """Told how long each key waited and worked; these methods do nothing.

    Subclass it and override what you need. Methods are called synchronously
    from queue operations, so they must be quick and must not raise.
    Counters and gauges (depth, adds, retries, unfinished work) come from
    `WorkQueue.statistics()` instead. A queue without an observer does not
    record when each key went in line (as client-go's queue without metrics).
    """

    def on_get(self, wait_seconds: float) -> None:
        """A key was handed out after `wait_seconds` in line."""

    def on_done(self, work_seconds: float) -> None:
        """A key was marked done after `work_seconds` in processing."""


class WorkQueue(Generic[T]):
    """Keys to reconcile: deduplicated, each processed by one worker at a time.

    A worker loop::

        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            try:
                ...  # reconcile key; on failure: queue.add_rate_limited(key)
            finally:
                queue.done(key)

    `add`, `add_after`, `add_rate_limited` and `done` are synchronous;
    `add_after` with a positive delay must be called with the event loop
    running, since it starts the task that serves delays.
    """

    def __init__(
        self,
        *,
        clock: Clock = SYSTEM_CLOCK,
        limiter: RateLimiter | None = None,
        observer: QueueObserver | None = None,
    ) -> None:
        self._clock = clock
        self._limiter = limiter if limiter is not None else default_controller_limiter(clock)
        self._observer = observer
        # The FIFO. With an observer, `_line_since` runs alongside it: when each key went in line.
        self._line: deque[T] = deque()
        self._line_since: deque[float] = deque()
        self._dirty: set[T] = set()
        # processing key -> when it was handed out (insertion order: oldest first)
        self._processing: dict[T, float] = {}
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._shut_down = False
        self._adds = 0
        self._retries = 0
        # add_after: a heap of (due, sequence, key) and each key's current due time.
        # Entries whose due time is no longer the key's are stale and skipped.
        self._delays: list[tuple[float, int, T]] = []
        self._due: dict[T, float] = {}
        self._sequence = itertools.count()
        self._delay_task: asyncio.Task[None] | None = None
        self._delay_wakeup: asyncio.Future[None] | None = None

    # -- adding ---------------------------------------------------------------

    def add(self, key: T) -> None:
        """Put `key` in line, unless it is already waiting; after shutdown, do nothing.

        A key that is processing is put back in line when it is `done`.
        """
        if self._shut_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._put_in_line(key)

    def add_after(self, key: T, delay: float) -> None:
        """Put `key` in line after `delay` seconds (at once if `delay <= 0`).

        If `key` is already scheduled for earlier, the earlier time stands.
        """
        if self._shut_down:
            return
        if delay <= 0:
            self.add(key)
            return
        due = self._clock.monotonic() + delay
        current = self._due.get(key)
        if current is not None and current <= due:
            return
        self._due[key] = due
        sequence = next(self._sequence)
        heapq.heappush(self._delays, (due, sequence, key))
        if self._delays[0][1] == sequence:
            # The new earliest due time: the delay task must not sleep past it.
            self._wake_delay_task()
        if self._delay_task is None:
            self._delay_task = asyncio.get_running_loop().create_task(
                self._serve_delays(), name="setpoint.WorkQueue.delays"
            )

    def add_rate_limited(self, key: T) -> None:
        """Put `key` in line after the delay the rate limiter gives it (a retry)."""
        if self._shut_down:
            return
        self._retries += 1
        self.add_after(key, self._limiter.when(key))

    def forget(self, key: T) -> None:
        """`key` succeeded: reset its rate-limiter backoff. Does not remove it from the queue."""
        self._limiter.forget(key)

    def num_requeues(self, key: T) -> int:
        """How many times `key` was rate-limited since it was last forgotten."""
        return self._limiter.retries(key)

    # -- taking ---------------------------------------------------------------

    async def get(self) -> T:
        """Wait for a key in line, mark it processing and return it.

        Raises `ShutDown` once the queue is shut down and no key is in line.
        """
        while not self._line:
            if self._shut_down:
                raise ShutDown
            getter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()
                with contextlib.suppress(ValueError):
                    self._getters.remove(getter)  # O(waiting getters), on cancellation only
                if self._line and not getter.cancelled():
                    # This getter was woken for a key it will not take: pass the turn on.
                    self._wake_one_getter()
                raise
        return self._take()

    def get_nowait(self) -> T:
        """Mark the first key in line processing and return it.

        Raises `Empty` if no key is in line, or `ShutDown` if none is and the
        queue is shut down.
        """
        if not self._line:
            raise ShutDown if self._shut_down else Empty
        return self._take()

    def done(self, key: T) -> None:
        """Finish processing `key`; if it was added meanwhile, put it back in line.

        Raises `ValueError` if `key` is not processing (call `done` once per
        key that `get` returned).
        """
        started = self._processing.pop(key, None)
        if started is None:
            raise ValueError(f"done({key!r}): the key is not processing; call done once per get")
        if self._observer is not None:
            self._observer.on_done(self._clock.monotonic() - started)
        if key in self._dirty:
            self._put_in_line(key)
        elif self._shut_down and not self._processing and not self._line:
            self._release_drain_waiters()

    # -- stopping -------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop accepting keys and drop scheduled ones; wake getters.

        `get` raises `ShutDown` once no key is left in line.

        Idempotent. Keys processing may still be put back in line by `done` if
        they were added before the shutdown.
        """
        if self._shut_down:
            return
        self._shut_down = True
        self._delays.clear()
        self._due.clear()
        if self._delay_task is not None:
            self._delay_task.cancel()
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
        if not self._processing and not self._line:
            self._release_drain_waiters()

    async def shutdown_and_drain(self) -> None:
        """Shut down, then wait until no key is in line or processing."""
        self.shutdown()
        if not self._processing and not self._line:
            return
        drained: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._drain_waiters.append(drained)
        try:
            await drained
        finally:
            if drained in self._drain_waiters:
                self._drain_waiters.remove(drained)

    @property
    def is_shut_down(self) -> bool:
        """Whether `shutdown` was called."""
        return self._shut_down

    # -- looking --------------------------------------------------------------

    def __len__(self) -> int:
        """Keys in line (not counting scheduled or processing keys)."""
        return len(self._line)

    def statistics(self) -> QueueStatistics:
        """A snapshot of the queue's counters and gauges. O(keys processing + delayed)."""
        now = self._clock.monotonic()
        longest = 0.0
        unfinished = 0.0
        for started in self._processing.values():
            age = now - started
            longest = max(longest, age)
            unfinished += age
        return QueueStatistics(
            depth=len(self._line),
            delayed=len(self._due),
            delayed_due=sum(1 for due in self._due.values() if due <= now),
            processing=len(self._processing),
            adds=self._adds,
            retries=self._retries,
            longest_running_seconds=longest,
            unfinished_work_seconds=unfinished,
        )

    # -- internals ------------------------------------------------------------

    def _put_in_line(self, key: T) -> None:
        self._line.append(key)
        if self._observer is not None:
            self._line_since.append(self._clock.monotonic())
        self._adds += 1
        if self._getters:
            self._wake_one_getter()

    def _take(self) -> T:
        key = self._line.popleft()
        now = self._clock.monotonic()
        self._dirty.discard(key)
        self._processing[key] = now
        if self._observer is not None:
            self._observer.on_get(now - self._line_since.popleft())
        return key

    def _wake_one_getter(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    def _release_drain_waiters(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for drained in waiters:
            if not drained.done():
                drained.set_result(None)

    def _wake_delay_task(self) -> None:
        if self._delay_wakeup is not None and not self._delay_wakeup.done():
            self._delay_wakeup.set_result(None)

    def _move_due_keys(self) -> None:
        now = self._clock.monotonic()
        while self._delays and self._delays[0][0] <= now:
            due, _, key = heapq.heappop(self._delays)
            if self._due.get(key) == due:
                del self._due[key]
                self.add(key)

    async def _serve_delays(self) -> None:
        """Put scheduled keys in line when they are due; runs until shutdown."""
        loop = asyncio.get_running_loop()
        while not self._shut_down:
            self._move_due_keys()
            self._delay_wakeup = loop.create_future()
            if not self._delays:
                await self._delay_wakeup
                continue
            until_due = self._delays[0][0] - self._clock.monotonic()
            sleeper = loop.create_task(self._clock.sleep(until_due))
            try:
                await asyncio.wait(
                    {sleeper, self._delay_wakeup}, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                sleeper.cancel()
            if sleeper.done():
                sleeper.result()  # a clock whose sleep failed: let the failure out
