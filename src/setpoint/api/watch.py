"""One watch request's stream: store changes as JSON lines `{"type", "object"}`, written
to a client that may be slow, or gone, without slowing anything else.

Three parts run per watch:

* the *pump* reads `Store.watch` as fast as the store yields and appends each event,
  encoded once, to the watch's own buffer, bounded in bytes (`WatchLimits.max_buffered_bytes`).
  When objects go out as stored (no field selector, no Table) and the store offers
  `watch_encoded` (the shared fan-out's backends), the object's JSON from the log is
  spliced into the line: no decode and no encode per event and watcher.
  A buffer that would overflow drops the watch at once: the connection is closed, the
  client relists and watches again (as the Kubernetes API server ends an unresponsive watcher).
  The store's fan-out never waits for this client.
* the *writer* sends what the buffer holds, everything waiting in one write; each send
  must finish within `WatchLimits.send_timeout` (a client that stopped reading is dropped
  the same way), adds a `BOOKMARK` when asked (`allowWatchBookmarks`) after
  `bookmark_interval` of quiet, and ends the response cleanly at `timeoutSeconds`. Those
  three times are kept by one timer per watch (`_check`), re-armed when it fires, not by a
  timeout around every send.
* a *listener* notices the client hang up and ends the other two.

What the watches of one user, and of the whole server, hold in memory is bounded too
(`WatchLimits.max_user_buffered_bytes`, `max_total_buffered_bytes`): each event line is
charged to its user (the app's `request.state.user`) and to the server from when it is
encoded until it was handed to the connection. The writer hands the connection at most
`SEND_PIECE_BYTES` at a time, each once the one before was taken (an ASGI send returns
once the connection's buffer is below its high-water mark), so what a connection holds
beyond the charged lines is one piece at most, whatever an event's size; an idle watch keeps
neither the last event it sent nor the objects it sent first. A line that would go beyond
either budget drops its watch, as an overflowing buffer does; a new watch is refused with
a 429 `Status` (`TooManyRequests`, `Retry-After`) while either is more than half used,
as the API server's priority and fairness turns requests away. Once watches that carried
`TRIM_AFTER_BYTES` between them have ended, or the last open watch ended after carrying
`TRIM_IDLE_BYTES`, the memory they freed is handed back to the system (glibc's
`malloc_trim`: freed blocks of big events otherwise stay in the process's heap).

A `since` revision older than the store's history (`Gone`) becomes an `ERROR` event
holding a 410 `Status` (reason `Expired`), as the API server's watch cache answers; so
does any other store error met after the stream started. Then the stream ends.

This module speaks raw ASGI (`__call__(scope, receive, send)`): it works under any ASGI
server. It decides nothing about objects: the caller gives the filter and the encoder.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.responses import Response

from setpoint.api.auth import User
from setpoint.api.status import status, status_of
from setpoint.errors import Error
from setpoint.model import Kind, Object, Selector, codec
from setpoint.store.base import EventType, Store
from setpoint.store.watchers import EncodedWatches
from setpoint.tasks import cancel_and_wait

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
    max_user_buffered_bytes: int = 64 * 1024 * 1024
    """Encoded events not yet taken by the connection, across every watch of one user:
    a line beyond it drops its watch, and a new watch is refused (429) while more than
    half of it is used."""
    max_total_buffered_bytes: int = 256 * 1024 * 1024
    """The same across every watch of the server."""


SEND_PIECE_BYTES = 64 * 1024
"""The most bytes handed to the connection at once: its high-water mark (asyncio's and
uvloop's default)."""
TRIM_AFTER_BYTES = 64 * 1024 * 1024
"""Once watches that carried this many bytes of events have ended, freed memory is handed
back to the system (`_trim_heap`)."""
TRIM_IDLE_BYTES = 1024 * 1024
"""The same when the last open watch ended, after ended watches carried this many."""


@dataclass(frozen=True, slots=True)
class WatchRequest:
    """What to watch and how: the kind, namespace (None: all), label selector, an extra
    filter (field selector; None: none), the revision to start after, the objects to send
    first as ADDED (a watch with no resourceVersion), and how to encode objects (a Table
    row...; None: as they are)."""

    kind: Kind
    namespace: str | None
    label_selector: Selector
    keep: Callable[[Object], bool] | None
    since: int
    initial: list[Object]
    encode: Callable[[Object], Any] | None
    bookmarks: bool
    initial_events_end: bool
    timeout: float


class WatchCounts:
    """How many watches are open, were dropped (for being slow, or over a budget) and were
    refused (a budget was full), and how many bytes of events they hold, in all
    (`buffered`) and per user (`buffered_by_user`), for tests and operators
    (`app.state.watches`); `wait_dropped(n)` returns once `n` were dropped."""

    def __init__(self) -> None:
        self.open = 0
        self.dropped = 0
        self.refused = 0
        self.buffered = 0
        self.buffered_by_user: dict[str, int] = {}
        self._carried = 0  # bytes of events of ended watches, since the last trim
        self._changed = asyncio.Condition()

    async def wait_dropped(self, count: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.dropped >= count)

    async def _drop(self) -> None:
        async with self._changed:
            self.dropped += 1
            self._changed.notify_all()

    def has_room(self, user: str, limits: WatchLimits) -> bool:
        """Whether a new watch of `user` may start: its budget and the server's are at
        most half used."""
        held = self.buffered_by_user.get(user, 0)
        return (
            2 * held <= limits.max_user_buffered_bytes
            and 2 * self.buffered <= limits.max_total_buffered_bytes
        )

    def charge(self, user: str, size: int, limits: WatchLimits, *, force: bool = False) -> bool:
        """Count `size` bytes held for `user`; False (nothing counted) beyond a budget,
        unless `force` (a final ERROR line: room is made for it)."""
        held = self.buffered_by_user.get(user, 0)
        if not force and (
            held + size > limits.max_user_buffered_bytes
            or self.buffered + size > limits.max_total_buffered_bytes
        ):
            return False
        self.buffered_by_user[user] = held + size
        self.buffered += size
        return True

    def release(self, user: str, size: int) -> None:
        """`size` bytes charged for `user` are no longer held."""
        if size:
            self.buffered -= size
            held = self.buffered_by_user[user] - size
            if held:
                self.buffered_by_user[user] = held
            else:
                del self.buffered_by_user[user]

    def ended(self, carried: int) -> None:
        """A watch that carried `carried` bytes of events ended."""
        self._carried += carried
        idle = self.open == 0 and self._carried >= TRIM_IDLE_BYTES
        if idle or self._carried >= TRIM_AFTER_BYTES:
            self._carried = 0
            _trim_heap()


def _load_malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, or None (another C library)."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_MALLOC_TRIM = _load_malloc_trim()


def _trim_heap() -> None:
    """Hand the heap's free memory back to the system: glibc keeps freed blocks (a big
    event's lines, the TLS buffers of its sends) in the process otherwise."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


class _Buffer:
    """Encoded event lines waiting for the writer, bounded in bytes: by its own limit, and
    by the budgets `charge` counts them against."""

    def __init__(self, limit: int, charge: Callable[[int, bool], bool]) -> None:
        self.lines: deque[tuple[bytes, int]] = deque()
        self.size = 0
        self.limit = limit
        self.charge = charge
        self.ready = asyncio.Event()
        self.closed = False
        self.overflowed = False

    def put(self, line: bytes, revision: int) -> bool:
        """Add a line; False (and the buffer overflowed) if it does not fit."""
        if self.size + len(line) > self.limit or not self.charge(len(line), False):
            self.overflowed = True
            self.ready.set()
            return False
        self.lines.append((line, revision))
        self.size += len(line)
        self.ready.set()
        return True

    def put_last(self, line: bytes) -> None:
        """A final line (an ERROR event): room is made for it."""
        self.charge(len(line), True)
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


_LINE_START = {t: b'{"type":"%s","object":' % t.encode() for t in ("ADDED", "MODIFIED")}
"""`event_line`'s bytes before the object, for the object's JSON spliced in as stored."""


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
        self.user = ""  # who watches (`request.state.user`): whose budget it is charged to
        self.charged = 0  # bytes charged to the budgets and not released yet
        self.carried = 0  # bytes of events charged in all
        self.over_budget = False  # a line did not fit in a budget: the watch is dropped
        self.buffer = _Buffer(limits.max_buffered_bytes, self._charge)
        self.revision = request.since
        self._loop = asyncio.get_running_loop()
        self._deadline = self._loop.time() + request.timeout
        self._last_sent = self._loop.time()  # when the last send began (quiet since then)
        self._sending_since: float | None = None  # when the send in progress began
        self._bookmark_due = False
        self._ended = False  # timeoutSeconds passed
        self._stalled = False  # a send outlasted send_timeout: the watch is dropped

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        user = (scope.get("state") or {}).get("user")
        self.user = user.name if isinstance(user, User) else ""
        if not self.counts.has_room(self.user, self.limits):
            await self._refuse(send)
            return
        pump = asyncio.create_task(self._pump(), name="watch-pump")
        writer = asyncio.create_task(self._write(send), name="watch-writer")
        listener = asyncio.create_task(_wait_disconnect(receive), name="watch-listener")
        self._timer = self._loop.call_at(self._next_check(), self._check, writer)
        self.counts.open += 1
        try:
            waiting = {pump, writer, listener}
            while True:  # the writer's end, the client's, or an overflow (not a send's end)
                done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if writer in done or listener in done or self.buffer.overflowed:
                    break
        finally:
            self.counts.open -= 1
            self._timer.cancel()
            await cancel_and_wait((pump, writer, listener))
            self._release(self.charged)
            self.counts.ended(self.carried)
        if writer.done() and not writer.cancelled() and writer.exception() is not None:
            raise writer.exception()  # type: ignore[misc]
        if self.buffer.overflowed or self._stalled:
            await self.counts._drop()

    async def _refuse(self, send: Send) -> None:
        """Answer 429: the user's watches (or the server's) hold too many unsent bytes."""
        self.counts.refused += 1
        whose = f"user {self.user!r}" if self.user else "the server"
        if 2 * self.counts.buffered > self.limits.max_total_buffered_bytes:
            whose = "the server"
        message = (
            f"too many watch events not yet read by their clients: the watches of {whose} "
            "hold more than half of their memory budget; read them, close some, or retry later"
        )
        log.warning("refused a watch of %s: %s", self.request.kind.plural, message)
        await send(
            {
                "type": "http.response.start",
                "status": 429,
                "headers": [(b"content-type", b"application/json"), (b"retry-after", b"1")],
            }
        )
        await send({"type": "http.response.body", "body": orjson.dumps(status(429, message))})

    def _charge(self, size: int, force: bool) -> bool:
        """Count `size` bytes against the user's budget and the server's (see the module
        docstring); False if it does not fit (the watch is dropped)."""
        if not self.counts.charge(self.user, size, self.limits, force=force):
            self.over_budget = True
            return False
        self.charged += size
        self.carried += size
        return True

    def _release(self, size: int) -> None:
        self.charged -= size
        self.counts.release(self.user, size)

    def _next_check(self) -> float:
        """When `_check` must look next: when a send begun now (or the one in progress) would
        be too slow; before the end, also at the deadline and when the quiet would be long
        enough for a bookmark."""
        sending = self._loop.time() if self._sending_since is None else self._sending_since
        due = sending + self.limits.send_timeout
        if not self._ended:
            due = min(due, self._deadline)
            if self.request.bookmarks:
                due = min(due, self._last_sent + self.limits.bookmark_interval)
        return due

    def _check(self, writer: asyncio.Task[bool]) -> None:
        """The watch's one timer: drops a watch whose send outlasted `send_timeout`, asks the
        writer for the end at the deadline, or for a bookmark after `bookmark_interval` of
        quiet; then re-arms itself."""
        now = self._loop.time()
        sending = self._sending_since
        if sending is not None and now - sending >= self.limits.send_timeout:
            log.warning(
                "dropped a watch of %s: its client stopped reading", self.request.kind.plural
            )
            self._stalled = True
            writer.cancel()
            return
        if not self._ended and now >= self._deadline:
            self._ended = True
            self.buffer.ready.set()
        elif self._quiet_for_bookmark(now):
            self._bookmark_due = True
            self._last_sent = now  # the quiet ends with this bookmark
            self.buffer.ready.set()
        self._timer = self._loop.call_at(self._next_check(), self._check, writer)

    def _quiet_for_bookmark(self, now: float) -> bool:
        quiet = now - self._last_sent >= self.limits.bookmark_interval
        return self.request.bookmarks and quiet and self._sending_since is None and not self._ended

    async def _pump(self) -> None:
        req = self.request
        store = self.store
        kind = req.kind
        try:
            if req.keep is None and req.encode is None and isinstance(store, EncodedWatches):
                async for encoded in store.watch_encoded(
                    kind.api_version,
                    kind.kind,
                    req.namespace,
                    since=req.since,
                    label_selector=req.label_selector,
                ):
                    if encoded.type == "DELETED":  # its resourceVersion is rewritten
                        line = self._line("DELETED", codec.decode(encoded.data), encoded.revision)
                    else:
                        line = b"".join((_LINE_START[encoded.type], encoded.data, b"}\n"))
                    if line is not None and not self._buffer(line, encoded.revision):
                        return
                    del encoded, line  # an idle watch holds no event
            else:
                async for event in store.watch(
                    kind.api_version,
                    kind.kind,
                    req.namespace,
                    since=req.since,
                    label_selector=req.label_selector,
                ):
                    line = self._line(event.type, event.object, event.revision)
                    if line is not None and not self._buffer(line, event.revision):
                        return
                    del event, line  # an idle watch holds no event
        except Error as exc:
            self.buffer.put_last(event_line("ERROR", status_of(exc)))
        finally:
            self.buffer.close()

    def _line(self, type_: EventType, obj: Object, revision: int) -> bytes | None:
        """The line of one event, None if the field selector leaves it out."""
        req = self.request
        if type_ == "DELETED":  # the object as deleted: at the revision of its deletion
            obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(revision)}}
        if req.keep is not None and not req.keep(obj):
            return None
        return event_line(type_, obj if req.encode is None else req.encode(obj))

    def _buffer(self, line: bytes, revision: int) -> bool:
        """Queue a line for the writer; False (the watch is dropped) if it does not fit."""
        if self.buffer.put(line, revision):
            return True
        self._log_drop()
        return False

    def _log_drop(self) -> None:
        plural = self.request.kind.plural
        if self.over_budget:
            whose = f"user {self.user!r}" if self.user else "the server"
            log.warning(
                "dropped a watch of %s: the watches of %s hold too many unsent events",
                plural,
                whose,
            )
        else:
            log.warning("dropped a watch of %s: its client reads too slowly", plural)

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
        if not await self._send_initial(send):
            return False
        if req.initial_events_end:
            await self._send(send, self._bookmark(initial_end=True))
        buffer = self.buffer
        while True:
            await buffer.ready.wait()
            if buffer.overflowed:
                return False  # dropped: the response stays incomplete, the server closes it
            if self._ended:
                break
            if buffer.lines:
                self._bookmark_due = False
                await self._send_waiting(send)  # takes them: `ready` is cleared
            else:
                buffer.ready.clear()
                if self._bookmark_due:
                    self._bookmark_due = False
                    await self._send(send, self._bookmark())
            if buffer.closed and not buffer.lines:
                break
        await self._send(send, b"", more=False)
        return True

    async def _send_initial(self, send: Send) -> bool:
        """Send the objects that exist as ADDED, encoded one at a time, each charged until
        it is sent, then let go of them; False if one does not fit in a budget."""
        encode = self.request.encode
        for obj in self.request.initial:
            line = event_line("ADDED", obj if encode is None else encode(obj))
            if not self._charge(len(line), False):
                self._log_drop()
                return False
            await self._send(send, line)
            self._release(len(line))
        self.request.initial.clear()  # this watch's own list: an idle watch holds none
        return True

    async def _send_waiting(self, send: Send) -> None:
        """Send every line waiting, in one write, then release their charge (nothing of
        them is kept once sent)."""
        taken = self.buffer.take()
        body = b"".join(line for line, _ in taken)
        await self._send(send, body)
        self._release(len(body))
        self.revision = max(self.revision, *(revision for _, revision in taken))

    async def _send(self, send: Send, body: bytes, *, more: bool = True) -> None:
        """Send event lines; a body over `SEND_PIECE_BYTES` in pieces of that size, each
        once the connection took the one before (a send returns once the connection's
        buffer is below its high-water mark), so that what a connection holds beyond the
        charged lines is one piece at most, whatever an event's size (a TLS connection
        would take a whole body at once); the time kept for `_check` (which cancels a
        send too slow)."""
        self._last_sent = self._sending_since = self._loop.time()
        if len(body) <= SEND_PIECE_BYTES:
            await send({"type": "http.response.body", "body": body, "more_body": more})
        else:
            for start in range(0, len(body), SEND_PIECE_BYTES):
                piece = body[start : start + SEND_PIECE_BYTES]
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            if not more:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        self._sending_since = None

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
