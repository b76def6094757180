"""The reconciler contract: `Request` in, `Result` out.

A reconciler is one method, `async reconcile(request) -> Result` (a plain
function works too, sync or async; a sync one runs in a thread). It is
level-triggered: the request carries only the object's key, never the event
that caused it. The reconciler reads the desired object as it is now, observes
the world, and acts on the whole difference.

What each outcome means:

* returns `Result()` or None: done; nothing to do until something changes.
* returns `Result(requeue_after=s)`: done for now; come back in `s` seconds.
* returns `Result(requeue=True)`: come back soon, rate-limited (backoff).
* raises `TerminalError`: cannot progress without a change from outside; not
  retried until the object changes (or the next resync, if the controller has
  one, looks at the world again); recorded as the object's `Stalled` condition,
  with `Ready` False for the same reason.
* raises anything else: an error; retried with per-key exponential backoff.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, slots=True, order=True)
class Request:
    """Which object to reconcile: its name and namespace ("" for cluster-scoped kinds)."""

    name: str
    namespace: str = ""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class Result:
    requeue_after: float | None = None
    requeue: bool = False


@runtime_checkable
class Reconciler(Protocol):
    async def reconcile(self, request: Request) -> Result | None: ...


ReconcileFunc = Callable[[Request], Awaitable[Result | None]] | Callable[[Request], Result | None]
