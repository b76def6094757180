"""`setpoint.tasks`: ending tasks leaves none running, whatever they raise."""

from __future__ import annotations

import asyncio

import pytest

from setpoint.tasks import cancel_and_wait, first_done


async def _wait_forever(started: asyncio.Event) -> None:
    started.set()
    await asyncio.Event().wait()


async def _refuse_cancel(started: asyncio.Event) -> None:
    """Raise something else than CancelledError when cancelled."""
    try:
        await _wait_forever(started)
    except asyncio.CancelledError:
        raise RuntimeError("cleanup failed") from None


async def test_cancel_and_wait_ends_every_task_and_raises_none_of_their_errors() -> None:
    started = [asyncio.Event() for _ in range(3)]
    tasks = [
        asyncio.create_task(_wait_forever(started[0])),
        asyncio.create_task(_refuse_cancel(started[1])),
        asyncio.create_task(_wait_forever(started[2])),
    ]
    for event in started:
        await event.wait()
    await cancel_and_wait(tasks)
    assert all(task.done() for task in tasks)
    assert tasks[0].cancelled()
    assert tasks[2].cancelled()
    assert isinstance(tasks[1].exception(), RuntimeError)


async def test_cancel_and_wait_takes_ended_tasks_and_none() -> None:
    ended: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    ended.set_result(1)
    await cancel_and_wait([ended])
    await cancel_and_wait([])
    assert ended.result() == 1


async def test_first_done_returns_what_ended_and_ends_the_rest() -> None:
    started = asyncio.Event()
    answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    waiting = asyncio.create_task(_wait_forever(started))
    answering = asyncio.ensure_future(answer)
    await started.wait()
    answer.set_result("here")
    done = await first_done(waiting, answering)
    assert done == {answering}
    assert answering.result() == "here"
    assert waiting.cancelled()


async def test_first_done_cancelled_while_waiting_ends_every_task() -> None:
    started = [asyncio.Event(), asyncio.Event()]
    tasks = [asyncio.create_task(_wait_forever(event)) for event in started]
    waiter = asyncio.create_task(first_done(*tasks))
    for event in started:
        await event.wait()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert all(task.cancelled() for task in tasks)
