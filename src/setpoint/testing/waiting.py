"""Waiting on the world in tests: for a stored object to reach a state (through the store's
watch, never by sleeping), and for free ports to run test servers on.

`wait_for(store, kind, name, predicate)` returns the object as soon as `predicate` holds
for it (it is given None once the object does not exist), or raises `TimeoutError` with
the object's last status. `free_port_range(count)` finds `count` consecutive loopback
ports free now, below Linux's ephemeral range, where an outgoing connection could take
one between the check and the test's use of it.
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Callable

from setpoint.errors import NotFound
from setpoint.model import Kind, Object
from setpoint.store.base import Store

__all__ = ["free_port_range", "wait_for"]

EPHEMERAL_START = 32768
"""Linux's default `ip_local_port_range` starts here."""


async def wait_for(
    store: Store,
    kind: Kind,
    name: str,
    predicate: Callable[[Object | None], bool],
    *,
    namespace: str | None = "default",
    within: float = 10.0,
) -> Object | None:
    """The object `name` of `kind` (None once it does not exist) as soon as `predicate` holds
    for it; `TimeoutError` naming its last status after `within` seconds."""
    last: Object | None = None
    try:
        async with asyncio.timeout(within):
            revision = await store.revision()
            try:
                last = await store.get(kind.api_version, kind.kind, name, namespace)
            except NotFound:
                last = None
            if predicate(last):
                return last
            changes = store.watch(kind.api_version, kind.kind, namespace, since=revision)
            async for event in changes:
                if event.object["metadata"]["name"] != name:
                    continue
                last = None if event.type == "DELETED" else event.object
                if predicate(last):
                    return last
    except TimeoutError:
        status = None if last is None else last.get("status")
        raise TimeoutError(f"{name}: not there within {within}s; last status: {status}") from None
    raise AssertionError(f"the watch of {kind.kind} ended")


def free_port_range(count: int, *, low: int = 20000) -> int:
    """The first of `count` consecutive ports on 127.0.0.1 that can be bound now."""
    for _ in range(200):
        start = random.randrange(low, EPHEMERAL_START - count)
        if all(_bindable(port) for port in range(start, start + count)):
            return start
    raise RuntimeError(f"no {count} consecutive free ports in {low}-{EPHEMERAL_START}")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
