"""One watch request's stream: store changes as JSON lines `{"type", "object"}`, written
to a client that may be slow, or gone, without slowing anything else.

Three parts run per watch:

* the *pump* reads `Store.watch` as fast as the store yields and appends each event,
  encoded once, to the watch's own buffer, bounded in bytes (`WatchLimits.max_buffered_bytes`).
  A buffer that would overflow drops the watch: the connection is closed, the client
  relists and watches again (as the Kubernetes API server ends an unresponsive watcher).
  The store's fan-out never waits for this client.
* the *writer* sends what the buffer holds; each send must finish within
  `WatchLimits.send_timeout` (a client that stopped reading is dropped the same way), adds
  a `BOOKMARK` when asked (`allowWatchBookmarks`) after `bookmark_interval` of quiet, and
  ends the response cleanly at `timeoutSeconds`.
* a *listener* notices the client hang up and ends the other two.

A `since` revision older than the store's history (`Gone`) becomes an `ERROR` event
holding a 410 `Status` (reason `Expired`), as the API server's watch cache answers; so
does any other store error met after the stream started. Then the stream ends.

This module speaks raw ASGI (`__call__(scope, receive, send)`): it works under any ASGI
server. It decides nothing about objects: the caller gives the filter and the encoder.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.responses import Response

from setpoint.api.status import status_of
from setpoint.errors import Error
from setpoint.model import Kind, Object, Selector
from setpoint.store.base import Store

log = logging.getLogger("setpoint.api.watch")

Receive = Callable[[], Any]
Send = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class WatchLimits:
    """What one watch may cost the server."""

    max_buffered_bytes: int = 16 * 1024 * 1024
    """Encoded events waiting for a slow client beyond this drop the watch."""
    send_timeout: float = 30.0
    """A client that accepts no bytes for this long is dropped."""
    bookmark_interval: float = 30.0
    """Quiet this long sends a BOOKMARK (when the client allows them)."""
    max_timeout: float = 1800.0
    """The longest a watch runs (`timeoutSeconds` may ask for less), as the API server's
    minimum request timeout."""


@dataclass(frozen=True, slots=True)
class WatchRequest:
    """What to watch and how: the kind, namespace (None: all), label selector, an extra
    filter (field selector), the revision to start after, the objects to send first as
    ADDED (a watch with no resourceVersion), and how to encode objects (a Table row...)."""

    kind: Kind
    namespace: str | None
    label_selector: Selector
    keep: Callable[[Object], bool]
    since: int
    initial: list[Object]
    encode: Callable[[Object], Any]
    bookmarks: bool
    initial_events_end: bool
    timeout: float


class WatchCounts:
    """How many watches are open and how many were dropped for being slow, for tests and
    operators (`app.state.watches`); `wait_dropped(n)` returns once `n` were dropped."""

    def __init__(self) -> None:
        self.open = 0
        self.dropped = 0
        self._changed = asyncio.Condition()

    async def wait_dropped(self, count: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.dropped >= count)

    async def _drop(self) -> None:
        async with self._changed:
            self.dropped += 1
            self._changed.notify_all()


class _Buffer:
    """Encoded event lines waiting for the writer, bounded in bytes."""

    def __init__(self, limit: int) -> None:
        self.lines: deque[tuple[bytes, int]] = deque()
        self.size = 0
        self.limit = limit
        self.ready = asyncio.Event()
        self.closed = False
        self.overflowed = False

    def put(self, line: bytes, revision: int) -> bool:
        """Add a line; False (and the buffer overflowed) if it does not fit."""
        if self.size + len(line) > self.limit:
            self.overflowed = True
            self.ready.set()
            return False
        self.lines.append((line, revision))
        self.size += len(line)
        self.ready.set()
        return True

    def put_last(self, line: bytes) -> None:
        """A final line (an ERROR event): room is made for it."""
        self.lines.append((line, 0))
        self.size += len(line)
        self.close()

    def close(self) -> None:
        self.closed = True
        self.ready.set()

    def take(self) -> list[tuple[bytes, int]]:
        lines = list(self.lines)
        self.lines.clear()
        self.size = 0
        self.ready.clear()
        return lines


def event_line(type_: str, obj: Any) -> bytes:
    return orjson.dumps({"type": type_, "object": obj}) + b"\n"


class WatchStream(Response):
    """The ASGI response of one watch; see the module docstring."""

    def __init__(
        self, store: Store, request: WatchRequest, limits: WatchLimits, counts: WatchCounts
    ) -> None:
        super().__init__(media_type="application/json")
        self.counts = counts
        self.store = store
        self.request = request
        self.limits = limits
        self.buffer = _Buffer(limits.max_buffered_bytes)
        self.revision = request.since

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        pump = asyncio.create_task(self._pump(), name="watch-pump")
        writer = asyncio.create_task(self._write(send), name="watch-writer")
        listener = asyncio.create_task(_wait_disconnect(receive), name="watch-listener")
        self.counts.open += 1
        try:
            await asyncio.wait({writer, listener}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.counts.open -= 1
            for task in (pump, writer, listener):
                task.cancel()
            await asyncio.gather(pump, writer, listener, return_exceptions=True)
        if writer.done() and not writer.cancelled():
            if writer.exception() is not None:
                raise writer.exception()  # type: ignore[misc]
            if writer.result() is False:
                await self.counts._drop()

    async def _pump(self) -> None:
        req = self.request
        try:
            async for event in self.store.watch(
                req.kind.api_version,
                req.kind.kind,
                req.namespace,
                since=req.since,
                label_selector=req.label_selector,
            ):
                obj = event.object
                if event.type == "DELETED":
                    obj = {**obj, "metadata": {**obj["metadata"]}}
                    obj["metadata"]["resourceVersion"] = str(event.revision)
                if not req.keep(obj):
                    continue
                line = event_line(event.type, req.encode(obj))
                if not self.buffer.put(line, event.revision):
                    log.warning(
                        "dropped a watch of %s: its client reads too slowly", req.kind.plural
                    )
                    return
        except Error as exc:
            self.buffer.put_last(event_line("ERROR", status_of(exc)))
        finally:
            self.buffer.close()

    async def _write(self, send: Send) -> bool:
        """Send the stream; False if the client was too slow (the watch is dropped)."""
        req = self.request
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"cache-control", b"no-cache, private"),
                ],
            }
        )
        first = [event_line("ADDED", req.encode(obj)) for obj in req.initial]
        if req.initial_events_end:
            first.append(self._bookmark(initial_end=True))
        for line in first:
            if not await self._send(send, line):
                return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + req.timeout
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            wait = min(remaining, self.limits.bookmark_interval)
            try:
                async with asyncio.timeout(wait):
                    await self.buffer.ready.wait()
            except TimeoutError:
                bookmark = req.bookmarks and loop.time() < deadline
                if bookmark and not await self._send(send, self._bookmark()):
                    return False
                continue
            if self.buffer.overflowed:
                return False  # dropped: the response stays incomplete, the server closes it
            taken = self.buffer.take()  # everything waiting goes in one write
            if taken:
                if not await self._send(send, b"".join(line for line, _ in taken)):
                    return False
                self.revision = max(self.revision, *(revision for _, revision in taken))
            if self.buffer.closed and not self.buffer.lines:
                break
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return True

    async def _send(self, send: Send, line: bytes) -> bool:
        """Send event lines; False (the watch is dropped) if the client took too long."""
        try:
            async with asyncio.timeout(self.limits.send_timeout):
                await send({"type": "http.response.body", "body": line, "more_body": True})
        except TimeoutError:
            log.warning(
                "dropped a watch of %s: its client stopped reading", self.request.kind.plural
            )
            return False
        return True

    def _bookmark(self, *, initial_end: bool = False) -> bytes:
        kind = self.request.kind
        metadata: dict[str, Any] = {"resourceVersion": str(self.revision)}
        if initial_end:
            metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": metadata}
        return event_line("BOOKMARK", obj)


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return
