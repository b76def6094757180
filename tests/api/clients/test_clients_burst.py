"""A burst of changes to one object while a watch is open: the watcher sees every
intermediate resourceVersion, in order, none dropped or coalesced, each with the object as
that write left it. Raw HTTP (httpx), so that nothing between the test and the server
reorders, batches or retries."""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any

import httpx
from clients_kit import TIMEOUT, WIDGETS, World, widget

from setpoint.testing import ApiServer

BURST = 200
"""Changes in the burst."""

WRITERS = 20
"""Connections writing at once: the writes of a burst arrive together and are committed in
groups (the store's group commit), which is where an event could be coalesced."""


async def test_a_burst_of_changes_reaches_a_watcher_whole(
    served: tuple[ApiServer, World],
) -> None:
    api, world = served
    created = world.create(widget("burst"))
    http = httpx.AsyncClient(
        base_url=api.url,
        verify=ssl.create_default_context(cafile=str(api.certificate)),
        headers={"Authorization": f"Bearer {api.token}"},
        timeout=TIMEOUT,
        limits=httpx.Limits(max_connections=WRITERS + 1),
    )

    async def resize(size: int) -> tuple[int, int]:
        """Merge-patch the size; the (resourceVersion, size) the write answers with."""
        answer = await http.patch(
            f"{WIDGETS}/burst",
            content=json.dumps({"spec": {"size": size}}),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert answer.status_code == 200, answer.text
        written: dict[str, Any] = answer.json()
        return int(written["metadata"]["resourceVersion"]), written["spec"]["size"]

    params = {
        "watch": "true",
        "resourceVersion": created["metadata"]["resourceVersion"],
        "fieldSelector": "metadata.name=burst",
        "timeoutSeconds": str(int(TIMEOUT)),
    }
    async with (
        http,
        asyncio.timeout(TIMEOUT),
        http.stream("GET", WIDGETS, params=params) as stream,
    ):
        lines = stream.aiter_lines()

        async def next_event() -> tuple[str, int, int]:
            event = json.loads(await anext(lines))
            obj = event["object"]
            return event["type"], int(obj["metadata"]["resourceVersion"]), obj["spec"]["size"]

        first = await resize(1000)  # the watch is live before the burst
        assert await next_event() == ("MODIFIED", *first)

        writes = await asyncio.gather(*(resize(size) for size in range(BURST)))
        seen = [await next_event() for _ in range(BURST)]

    assert [(version, size) for _, version, size in seen] == sorted(writes)
    assert {kind for kind, _, _ in seen} == {"MODIFIED"}
    assert len({version for version, _ in writes}) == BURST  # every write its own revision
