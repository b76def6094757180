"""The work queue: one worker per key, re-queue on done, dedup, FIFO, delays, limits, shutdown."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from setpoint.runtime.queue import Empty, QueueObserver, ShutDown, WorkQueue
from setpoint.runtime.ratelimit import ItemExponentialLimiter
from setpoint.testing import ManualClock

TIMEOUT = 5.0


def drain_nowait(queue: WorkQueue[str], limit: int = 1000) -> list[str]:
    """Take every key in line, marking each done (at most `limit`, so a broken queue fails)."""
    taken = []
    for _ in range(limit):
        try:
            key = queue.get_nowait()
        except Empty:
            return taken
        taken.append(key)
        queue.done(key)
    raise AssertionError(f"the queue handed out more than {limit} keys: {taken[:10]}...")


# -- add / get / done ---------------------------------------------------------


def test_distinct_keys_come_out_in_order_and_duplicates_collapse() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    for key in ["a", "b", "a", "c", "b", "a"]:
        queue.add(key)
    assert len(queue) == 3
    assert drain_nowait(queue) == ["a", "b", "c"]
    assert queue.statistics().adds == 3


def test_key_added_while_processing_comes_back_once_after_done() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    queue.add("a")
    key = queue.get_nowait()

    queue.add("a")
    queue.add("a")
    assert len(queue) == 0  # not handed out again while it is processing
    with pytest.raises(Empty):
        queue.get_nowait()

    queue.done(key)
    assert drain_nowait(queue) == ["a"]
    assert len(queue) == 0


def test_done_for_a_key_not_processing_is_refused() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    queue.add("a")
    with pytest.raises(ValueError, match="not processing"):
        queue.done("a")
    assert queue.get_nowait() == "a"
    queue.done("a")
    with pytest.raises(ValueError, match="not processing"):
        queue.done("a")


async def test_get_waits_for_a_key() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert not getter.done()

    queue.add("a")
    assert await asyncio.wait_for(getter, TIMEOUT) == "a"
    assert queue.statistics().processing == 1


async def test_one_key_goes_to_one_getter() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)

    queue.add("a")
    queue.add("a")
    done, pending = await asyncio.wait(getters, timeout=TIMEOUT, return_when="FIRST_COMPLETED")
    assert [t.result() for t in done] == ["a"]
    assert len(pending) == 2

    queue.done("a")  # not added again while processing: it does not come back
    queue.add("b")
    done, pending = await asyncio.wait(pending, timeout=TIMEOUT, return_when="FIRST_COMPLETED")
    assert [t.result() for t in done] == ["b"]
    assert len(pending) == 1
    queue.shutdown()
    with pytest.raises(ShutDown):
        await asyncio.wait_for(pending.pop(), TIMEOUT)


async def test_cancelled_getter_passes_its_key_on() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)

    queue.add("a")  # wakes the first getter...
    first.cancel()  # ...which is cancelled before it can take the key
    assert await asyncio.wait_for(second, TIMEOUT) == "a"
    assert first.cancelled()
    assert queue.statistics().processing == 1


async def test_workers_never_process_one_key_at_the_same_time() -> None:
    queue: WorkQueue[int] = WorkQueue(clock=ManualClock())
    in_flight: set[int] = set()
    overlaps: list[int] = []
    processed: list[int] = []

    async def worker() -> None:
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            if key in in_flight:
                overlaps.append(key)
            in_flight.add(key)
            await asyncio.sleep(0)
            queue.add(key % 7)  # keys are re-added while other workers hold them
            await asyncio.sleep(0)
            in_flight.discard(key)
            processed.append(key)
            queue.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(5)]
    for key in range(50):
        queue.add(key)
        if key % 3 == 0:
            await asyncio.sleep(0)
    await asyncio.wait_for(queue.shutdown_and_drain(), TIMEOUT)
    await asyncio.wait_for(asyncio.gather(*workers), TIMEOUT)

    assert overlaps == []
    assert set(range(50)) <= set(processed)
    assert queue.statistics().processing == 0


# -- reference model (hypothesis) ----------------------------------------------


KEYS = st.sampled_from(["a", "b", "c", "d", "e"])


class QueueAgainstModel(RuleBasedStateMachine):
    """Random add / get_nowait / done sequences, checked against a plain reference model.

    The model: a list of keys in line, the set of keys being processed, and the
    set of keys added while being processed.
    """

    def __init__(self) -> None:
        super().__init__()
        self.queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
        self.line: list[str] = []
        self.processing: set[str] = set()
        self.added_while_processing: set[str] = set()
        self.delivered: list[str] = []

    @rule(key=KEYS)
    def add(self, key: str) -> None:
        self.queue.add(key)
        if key in self.line:
            return
        if key in self.processing:
            self.added_while_processing.add(key)
        else:
            self.line.append(key)

    @rule()
    def get_nowait(self) -> None:
        if not self.line:
            with pytest.raises(Empty):
                self.queue.get_nowait()
            return
        key = self.queue.get_nowait()
        assert key == self.line.pop(0), "distinct keys come out in the order they went in"
        assert key not in self.processing, "a key is never processing twice"
        self.processing.add(key)
        self.delivered.append(key)

    @precondition(lambda self: bool(self.processing))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.processing)))
        self.queue.done(key)
        self.processing.remove(key)
        if key in self.added_while_processing:
            self.added_while_processing.remove(key)
            self.line.append(key)

    @invariant()
    def same_shape_as_model(self) -> None:
        stats = self.queue.statistics()
        assert len(self.queue) == stats.depth == len(self.line)
        assert len(set(self.line)) == len(self.line), "duplicates collapse"
        assert stats.processing == len(self.processing)


TestQueueAgainstModel = QueueAgainstModel.TestCase
TestQueueAgainstModel.settings = settings(max_examples=200, stateful_step_count=40, deadline=None)


# -- add_after and rate limiting ------------------------------------------------


async def test_add_after_holds_the_key_until_it_is_due() -> None:
    clock = ManualClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 5.0)
    await asyncio.wait_for(clock.wait_sleepers(1), TIMEOUT)

    clock.advance(4.9)
    await asyncio.sleep(0)
    assert queue.statistics().delayed == 1
    with pytest.raises(Empty):
        queue.get_nowait()

    clock.advance(0.1)
    assert await asyncio.wait_for(queue.get(), TIMEOUT) == "a"
    assert queue.statistics().delayed == 0
    queue.shutdown()


async def test_add_after_twice_keeps_the_earlier_time() -> None:
    clock = ManualClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("late-then-early", 10.0)
    queue.add_after("late-then-early", 2.0)
    queue.add_after("early-then-late", 2.0)
    queue.add_after("early-then-late", 10.0)
    assert queue.statistics().delayed == 2

    clock.advance(2.0)
    got = {await asyncio.wait_for(queue.get(), TIMEOUT) for _ in range(2)}
    assert got == {"late-then-early", "early-then-late"}
    for key in got:
        queue.done(key)

    queue.add_after("sentinel", 8.0)  # due with the later times, after them
    clock.advance(8.0)
    assert await asyncio.wait_for(queue.get(), TIMEOUT) == "sentinel"
    stats = queue.statistics()
    assert (stats.depth, stats.delayed, stats.adds) == (0, 0, 3)
    queue.shutdown()


async def test_an_earlier_key_is_not_held_behind_a_later_one() -> None:
    clock = ManualClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("later", 100.0)
    await asyncio.wait_for(clock.wait_sleepers(1), TIMEOUT)  # the delay task sleeps until 100

    queue.add_after("sooner", 1.0)
    clock.advance(1.0)
    assert await asyncio.wait_for(queue.get(), TIMEOUT) == "sooner"
    assert queue.statistics().delayed == 1

    clock.advance(99.0)
    assert await asyncio.wait_for(queue.get(), TIMEOUT) == "later"
    queue.shutdown()


async def test_delayed_keys_come_out_in_due_order() -> None:
    clock = ManualClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    for key, delay in [("c", 3.0), ("a", 1.0), ("b", 2.0)]:
        queue.add_after(key, delay)
    clock.advance(5.0)
    got = [await asyncio.wait_for(queue.get(), TIMEOUT) for _ in range(3)]
    assert got == ["a", "b", "c"]
    queue.shutdown()


@pytest.mark.parametrize("delay", [0.0, -1.0])
def test_add_after_without_a_positive_delay_adds_at_once(delay: float) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    queue.add_after("a", delay)  # no event loop needed: nothing is scheduled
    assert queue.get_nowait() == "a"


async def test_add_after_of_a_waiting_key_collapses_when_due() -> None:
    clock = ManualClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add("a")
    queue.add_after("a", 1.0)
    queue.add_after("later", 5.0)  # keeps the delay task sleeping on the clock afterwards
    await asyncio.wait_for(clock.wait_sleepers(1), TIMEOUT)

    clock.advance(1.0)
    assert clock.waiting() == 0
    await asyncio.wait_for(clock.wait_sleepers(1), TIMEOUT)  # back asleep: "a" came due
    assert queue.statistics().delayed == 1
    assert drain_nowait(queue) == ["a"]
    queue.shutdown()


async def test_rate_limited_keys_back_off_until_forgotten() -> None:
    clock = ManualClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, limiter=ItemExponentialLimiter(1.0, 60.0))

    for expected_delay in [1.0, 2.0, 4.0]:
        queue.add_rate_limited("a")
        await asyncio.wait_for(clock.wait_sleepers(1), TIMEOUT)
        clock.advance(expected_delay - 0.5)
        await asyncio.sleep(0)
        with pytest.raises(Empty):
            queue.get_nowait()
        clock.advance(0.5)
        queue.done(await asyncio.wait_for(queue.get(), TIMEOUT))

    assert queue.num_requeues("a") == 3
    assert queue.statistics().retries == 3

    queue.forget("a")
    assert queue.num_requeues("a") == 0
    queue.add_rate_limited("a")
    clock.advance(1.0)
    assert await asyncio.wait_for(queue.get(), TIMEOUT) == "a"
    queue.shutdown()


async def test_default_limiter_reads_the_queue_clock() -> None:
    clock = ManualClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_rate_limited("a")
    assert queue.statistics().delayed == 1
    clock.advance(0.005)
    assert await asyncio.wait_for(queue.get(), TIMEOUT) == "a"
    queue.shutdown()


# -- shutdown --------------------------------------------------------------------


async def test_shutdown_wakes_waiting_getters_with_shutdown() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)

    queue.shutdown()
    for getter in getters:
        with pytest.raises(ShutDown):
            await asyncio.wait_for(getter, TIMEOUT)
    assert queue.is_shut_down


async def test_after_shutdown_keys_in_line_are_still_handed_out_then_shutdown() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    queue.add("a")
    queue.add("b")
    queue.shutdown()
    queue.add("c")  # refused
    queue.add_rate_limited("d")  # refused

    assert queue.get_nowait() == "a"
    assert await asyncio.wait_for(queue.get(), TIMEOUT) == "b"
    with pytest.raises(ShutDown):
        queue.get_nowait()
    with pytest.raises(ShutDown):
        await asyncio.wait_for(queue.get(), TIMEOUT)
    assert queue.statistics().retries == 0


async def test_shutdown_drops_scheduled_keys() -> None:
    clock = ManualClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    queue.add_after("a", 1.0)
    queue.shutdown()
    queue.add_after("b", 1.0)
    clock.advance(10.0)
    await asyncio.sleep(0)
    assert queue.statistics().delayed == 0
    with pytest.raises(ShutDown):
        queue.get_nowait()


async def test_shutdown_and_drain_waits_for_work_in_flight() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    queue.add("a")
    queue.add("b")
    first = queue.get_nowait()
    second = queue.get_nowait()
    queue.add("a")  # added before the shutdown, while processing: comes back once

    drain = asyncio.create_task(queue.shutdown_and_drain())
    await asyncio.sleep(0)
    assert queue.is_shut_down
    assert not drain.done()

    queue.done(second)
    await asyncio.sleep(0)
    assert not drain.done()

    queue.done(first)  # "a" goes back in line: still not drained
    await asyncio.sleep(0)
    assert not drain.done()
    again = await asyncio.wait_for(queue.get(), TIMEOUT)
    assert again == "a"
    queue.done(again)

    await asyncio.wait_for(drain, TIMEOUT)
    with pytest.raises(ShutDown):
        await asyncio.wait_for(queue.get(), TIMEOUT)


async def test_shutdown_and_drain_waits_for_keys_still_in_line() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    queue.add("a")
    queue.add("b")
    first = queue.get_nowait()
    drain = asyncio.create_task(queue.shutdown_and_drain())
    await asyncio.sleep(0)

    queue.done(first)  # nothing processing, but "b" is still in line
    await asyncio.sleep(0)
    assert not drain.done()

    queue.done(await asyncio.wait_for(queue.get(), TIMEOUT))
    await asyncio.wait_for(drain, TIMEOUT)


async def test_shutdown_and_drain_of_an_idle_queue_returns_at_once() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=ManualClock())
    await asyncio.wait_for(queue.shutdown_and_drain(), TIMEOUT)
    await asyncio.wait_for(queue.shutdown_and_drain(), TIMEOUT)  # idempotent


async def test_workers_finish_everything_in_line_on_drain() -> None:
    clock = ManualClock()
    queue: WorkQueue[int] = WorkQueue(clock=clock)
    finished: list[int] = []

    async def worker() -> None:
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            await clock.sleep(1.0)
            finished.append(key)
            queue.done(key)

    for key in range(6):
        queue.add(key)
    workers = [asyncio.create_task(worker()) for _ in range(2)]
    await asyncio.wait_for(clock.wait_sleepers(2), TIMEOUT)
    drain = asyncio.create_task(queue.shutdown_and_drain())

    async def advance_while_draining() -> None:
        while not drain.done():
            if clock.waiting():
                clock.advance(1.0)
            await asyncio.sleep(0)

    await asyncio.wait_for(advance_while_draining(), TIMEOUT)
    await asyncio.wait_for(asyncio.gather(*workers), TIMEOUT)
    assert sorted(finished) == list(range(6))


# -- statistics and observer -------------------------------------------------------


class RecordingObserver(QueueObserver):
    def __init__(self) -> None:
        self.waits: list[float] = []
        self.work: list[float] = []

    def on_get(self, wait_seconds: float) -> None:
        self.waits.append(wait_seconds)

    def on_done(self, work_seconds: float) -> None:
        self.work.append(work_seconds)


def test_statistics_report_time_in_processing() -> None:
    clock = ManualClock()
    queue: WorkQueue[str] = WorkQueue(clock=clock)
    empty = queue.statistics()
    assert (empty.depth, empty.processing, empty.longest_running_seconds) == (0, 0, 0.0)

    queue.add("a")
    queue.add("b")
    queue.add("c")
    queue.get_nowait()
    clock.advance(3.0)
    queue.get_nowait()
    clock.advance(2.0)

    stats = queue.statistics()
    assert (stats.depth, stats.processing, stats.adds) == (1, 2, 3)
    assert stats.longest_running_seconds == 5.0
    assert stats.unfinished_work_seconds == 7.0
    with pytest.raises(AttributeError):
        stats.depth = 0  # type: ignore[misc]


def test_observer_is_told_time_in_line_and_time_in_processing() -> None:
    clock = ManualClock()
    observer = RecordingObserver()
    queue: WorkQueue[str] = WorkQueue(clock=clock, observer=observer)

    queue.add("a")
    clock.advance(1.5)
    key = queue.get_nowait()
    queue.add("a")  # back in line at done, so its next wait starts then
    clock.advance(2.0)
    queue.done(key)
    clock.advance(0.25)
    queue.done(queue.get_nowait())

    assert observer.waits == [1.5, 0.25]
    assert observer.work == [2.0, 0.0]


def test_queue_of_tuples_is_generic_over_hashable_keys() -> None:
    queue: WorkQueue[tuple[str, str]] = WorkQueue(clock=ManualClock())
    queue.add(("default", "web-0"))
    queue.add(("default", "web-0"))
    assert queue.get_nowait() == ("default", "web-0")
    with pytest.raises(Empty):
        queue.get_nowait()
