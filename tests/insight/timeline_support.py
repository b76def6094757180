"""Helpers of the timeline tests: waiting, under a deadline, until the timeline holds what a
test expects (the recorder writes in batches, so entries appear a moment after the change)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from setpoint.insight.timeline import Timeline

TIMEOUT = 15.0
"""Seconds a wait may take before the test fails (never waited out when things work)."""


async def wait_for_entries(
    timeline: Timeline,
    predicate: Callable[[list[dict[str, Any]]], bool],
    *,
    within: float = TIMEOUT,
    **query: Any,
) -> list[dict[str, Any]]:
    """The entries `timeline.query(**query)` returns once `predicate` holds for them."""
    entries: list[dict[str, Any]] = []
    try:
        async with asyncio.timeout(within):
            while True:
                entries = await asyncio.to_thread(timeline.query, **query)
                if predicate(entries):
                    return entries
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise TimeoutError(f"not in the timeline within {within}s; it holds {entries}") from None


def of_type(entries: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e for e in entries if e.get("type") == type_]
