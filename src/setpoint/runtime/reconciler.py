"""The reconciler contract: `Request` in, `Result` out, and who owns which condition.

A reconciler is one method, `async reconcile(request) -> Result` (a plain
function works too, sync or async; a sync one runs in a thread). It is
level-triggered: the request carries only the object's key, never the event
that caused it. The reconciler reads the desired object as it is now, observes
the world, and acts on the whole difference.

What each outcome means:

* returns `Result()` or None: done; nothing to do until something changes.
* returns `Result(requeue_after=s)`: done for now; come back in `s` seconds.
* raises `TerminalError`: cannot progress without a change from outside; not
  retried until the object changes (or the next resync, if the controller has
  one, looks at the world again), or, with `retry_after=s`, once more in `s`
  seconds; recorded as the object's `Stalled` condition, with `Ready` False for
  the same reason, unless the reconciler writes that condition itself.
* raises anything else: an error; retried with per-key exponential backoff.

Conditions have one writer each. A reconciler owns the conditions it writes,
`Stalled` and `Ready` included, and the runtime never changes them. The runtime
writes `Stalled` (and `Ready=False`) only for a `TerminalError` it caught, marks
them with `owner: runtime/<controller>`, and on a later success removes only
conditions so marked. A reconciler that reports its own stall writes `Stalled`
itself and returns a `Result` (with `requeue_after` to look again); it never
reaches into its controller's queue.

`requested_object` reads the object a request names (None once it is gone): the first
step of most reconcilers. Nothing else here does I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from setpoint.errors import NotFound
from setpoint.model import Kind, Object
from setpoint.store import Store


@dataclass(frozen=True, slots=True, order=True)
class Request:
    """Which object to reconcile: its name and namespace ("" for cluster-scoped kinds)."""

    name: str
    namespace: str = ""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class Result:
    """What a reconcile asks for next (see the module docstring)."""

    requeue_after: float | None = None


@runtime_checkable
class Reconciler(Protocol):
    async def reconcile(self, request: Request) -> Result | None: ...


ReconcileFunc = Callable[[Request], Awaitable[Result | None]] | Callable[[Request], Result | None]


async def requested_object(store: Store, kind: Kind, request: Request) -> Object | None:
    """The object of `kind` that `request` names, as `store` has it now; None if it has
    none (deleted since the request was queued)."""
    try:
        return await store.get(kind.api_version, kind.kind, request.name, request.namespace or None)
    except NotFound:
        return None
