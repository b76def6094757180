"""Requests in flight, bounded as kube-apiserver bounds them (its `--max-requests-inflight`
and `--max-mutating-requests-inflight`, 400 and 200 by default): a request beyond the bound
of its class is answered at once with a 429 `TooManyRequests` Status and `Retry-After: 1`,
which kubectl (client-go), kopf and kr8s wait out and retry, instead of piling up in the
event loop until every client times out.

    limit = InFlight(max_reads=400, max_writes=200)
    if not limit.enter(method, long_running):
        ...  # answer `too_many()`
    try: ...
    finally: limit.leave(method, long_running)

Long-running requests (watches, followed logs) are not counted, as Kubernetes does not count
them: the watch limits (`setpoint.api.watch`) bound those. A request is counted from the moment
its head was read; one that fails authentication is refused before it reads its body, so an
unauthenticated client cannot hold a place.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs

from setpoint.api.query import flag
from setpoint.api.status import status

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
RETRY_AFTER_SECONDS = 1


@dataclass(slots=True)
class InFlight:
    """How many requests of each class are being answered, within their bounds."""

    max_reads: int
    max_writes: int
    reads: int = 0
    writes: int = 0
    refused: int = 0
    """Requests answered 429 since the start."""

    def enter(self, method: str) -> bool:
        """Count a request (False, and counted as refused, beyond its class's bound)."""
        if method in MUTATING:
            if self.writes >= self.max_writes:
                self.refused += 1
                return False
            self.writes += 1
        else:
            if self.reads >= self.max_reads:
                self.refused += 1
                return False
            self.reads += 1
        return True

    def leave(self, method: str) -> None:
        if method in MUTATING:
            self.writes -= 1
        else:
            self.reads -= 1


def is_long_running(path: str, query_string: bytes) -> bool:
    """A watch (`?watch=true`, or the old `/watch/` paths) or a followed log."""
    if "/watch/" in path:
        return True
    if not query_string:
        return False
    query = {
        name: values[-1]
        for name, values in parse_qs(query_string.decode("latin-1"), keep_blank_values=True).items()
    }
    return flag(query, "watch") or flag(query, "follow")  # as the routes read them


def too_many(method: str) -> tuple[dict[str, object], dict[str, str]]:
    """The 429 Status kube-apiserver answers, with its headers. A write's body is not read,
    so its connection is closed after the answer, and says so: a client that put it back in
    its pool would send the retry into a closed connection (kubectl's failed with EOF)."""
    body = status(429, "Too many requests, please try again later.")
    body["details"] = {"retryAfterSeconds": RETRY_AFTER_SECONDS}
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    if method in MUTATING:
        headers["Connection"] = "close"
    return body, headers
