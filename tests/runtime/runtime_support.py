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


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    """Wait until `check()` holds, re-checking whenever the loop has run other work."""

    async def loop() -> None:
        while not await check():
            await asyncio.sleep(0.005)

    await asyncio.wait_for(loop(), timeout)
