"""Ending asyncio tasks: `cancel_and_wait` (cancel some, wait until each has ended) and
`first_done` (wait for the first of some to end, then end the rest the same way).

Every runner of concurrent tasks ends them this way, so that none is left running, or
its exception unretrieved, after the code that started them returns. No clock, no I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

__all__ = ["cancel_and_wait", "first_done"]


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]]) -> None:
    """Cancel `tasks` and return once each has ended, whatever it raised (an exception of
    theirs is not raised here: read it from the task)."""
    ending = list(tasks)
    for task in ending:
        task.cancel()
    await asyncio.gather(*ending, return_exceptions=True)


async def first_done(*tasks: asyncio.Future[Any]) -> set[asyncio.Future[Any]]:
    """Wait until one of `tasks` has ended, then `cancel_and_wait` every one; return those
    that had ended by themselves. Cancelled while waiting, it ends them all the same."""
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait(tasks)
    return done
