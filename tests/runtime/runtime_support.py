"""Helpers for runtime tests: object builders and condition waits."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


def widget(name: str, size: int = 0, **meta: object) -> dict[str, object]:
    return {
        "apiVersion": "test.setpoint.dev/v1",
        "kind": "Widget",
        "metadata": {"name": name, **meta},
        "spec": {"size": size},
    }


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 5.0) -> None:
    """Wait until `check()` holds, re-checking every few milliseconds; fail after `within` s."""
    async with asyncio.timeout(within):
        while not await check():  # noqa: ASYNC110 - the condition spans store and test state
            await asyncio.sleep(0.005)
