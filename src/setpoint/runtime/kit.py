"""The reconciler kit: one observe -> plan -> apply loop that every built-in controller runs.

A kind gives the kit a `KindRules` value: its `Kind`, a `finalizer` (or None), and
five functions: `desired(obj)` (pure: what the object asks for), `observe(obj, desired)`
(async I/O: what is), `plan(desired, observed, now)` (pure, in the kind's own plan module:
a `setpoint.runtime.plan.Plan`), `act(obj, plan)` (async I/O: the kind's own actions) and
`cleanup(request)` (the object is gone: let go of what the kind holds for it). `holds(request)`
says whether the kind still holds something in the world for the object (a running child):
its finalizer stays on until it holds nothing.

For each request `KitReconciler.reconcile`:

1. reads the object (`requested_object`); absent: `cleanup`, done;
2. being deleted: a kind without a finalizer lets go of it (`cleanup`), done; a kind with
   one plans and acts as usual (its plan sees the deletion in its desired state);
   otherwise adds the finalizer if it is missing;
3. `desired`, `observe`, `plan` (with the clock's `now()`), records the plan's events,
   then `act`: the kind's actions, which may amend the plan (a listener that could not
   open, a replica the store refused) or ask to look again at once (a child was stopped:
   the next plan records its exit and may start the next one), up to `LOOKS` looks;
4. the common part: the status (the plan's, or the stored one when the plan has none,
   with `Stalled` set from `plan.stall`, and
   `Ready=False` unless the plan says why it is not Ready already; or `Stalled` removed
   when there is none) written only if it differs
   from the stored one; a deleting object's finalizer released once the kind `holds`
   nothing; `Result(requeue_after=plan.requeue_after)`.

Events are recorded before `act`: an exit the plan records precedes the start the act
makes. The kit writes no condition but `Stalled` (and `Ready=False` with it, for a stall),
and drops the `owner` mark an earlier runtime wrote on conditions it owned, the next time
it writes the object's status. No clock reads but the one `now()` per plan; the kit
decides nothing a kind's plan does not say.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import NotFound
from setpoint.model import (
    READY,
    STALLED,
    Kind,
    Object,
    get_condition,
    remove_condition,
    set_condition,
)
from setpoint.runtime.events import EventRecorder
from setpoint.runtime.lifecycle import add_finalizer, is_deleting, remove_finalizer
from setpoint.runtime.plan import Plan
from setpoint.runtime.reconciler import Request, Result, requested_object
from setpoint.store import Store

__all__ = ["LOOKS", "Acted", "KindRules", "KitReconciler", "status_with_stall"]

log = logging.getLogger("setpoint.kit")

LOOKS = 4
"""Plans one reconcile may make (stop, record the exit, start: three; one spare)."""

D = TypeVar("D")
O = TypeVar("O")  # noqa: E741 - Observed
P = TypeVar("P", bound=Plan)


@dataclass(frozen=True, slots=True)
class Acted(Generic[P]):
    """What a kind's `act` did: the object as it is now (None: it is gone, stop here), the
    plan to finish with (the one given, or amended: another status, a stall, a requeue),
    and `again`: observe and plan anew before finishing."""

    obj: Object | None
    plan: P
    again: bool = False


async def _nothing(_: Request) -> None:
    return None


def _holds_nothing(_: Request) -> bool:
    return False


@dataclass(frozen=True)
class KindRules(Generic[D, O, P]):
    """What makes the kit a controller of one kind (see the module docstring)."""

    kind: Kind
    desired: Callable[[Object], D]
    observe: Callable[[Object, D], Awaitable[O]]
    plan: Callable[[D, O, float], P]
    act: Callable[[Object, P], Awaitable[Acted[P]]]
    cleanup: Callable[[Request], Awaitable[None]] = _nothing
    finalizer: str | None = None
    holds: Callable[[Request], bool] = _holds_nothing


def status_with_stall(
    status: Mapping[str, Any], stall: tuple[str, str] | None, *, generation: int, now: float
) -> dict[str, Any]:
    """`status` with `Stalled` set from `stall` (and `Ready=False` for the same reason,
    unless the plan's status says why it is not Ready already), or `Stalled` removed when
    there is none; no condition keeps an `owner` mark (an earlier runtime's). Pure."""
    out = dict(status)
    conditions = [dict(c) for c in out.get("conditions") or []]
    for condition in conditions:
        condition.pop("owner", None)
    if conditions or "conditions" in out:
        out["conditions"] = conditions
    if stall is not None:
        reason, message = stall
        set_condition(out, STALLED, True, reason=reason, message=message, now=now,
                      observed_generation=generation)  # fmt: skip
        ready = get_condition(out, READY)
        if ready is None or ready.get("status") != "False":  # a plan's own why-not stands
            set_condition(out, READY, False, reason=reason, message=message, now=now,
                          observed_generation=generation)  # fmt: skip
    else:
        remove_condition(out, STALLED)
    return out


class KitReconciler(Generic[D, O, P]):
    """Reconciles the objects of `rules.kind` by the kit's loop (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        rules: KindRules[D, O, P],
        events: EventRecorder | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.store = store
        self.rules = rules
        self.events = events
        self.clock = clock

    async def reconcile(self, request: Request) -> Result | None:
        rules = self.rules
        obj = await requested_object(self.store, rules.kind, request)
        if obj is None:
            await rules.cleanup(request)
            return None
        deleting = is_deleting(obj)
        if deleting and rules.finalizer is None:
            await rules.cleanup(request)
            return None
        if not deleting and rules.finalizer is not None and add_finalizer(obj, rules.finalizer):
            obj = await self.store.update(obj)
        for _ in range(LOOKS):
            desired = rules.desired(obj)
            step = rules.plan(desired, await rules.observe(obj, desired), self.clock.now())
            await self._record(obj, step)
            acted = await rules.act(obj, step)
            if acted.obj is None:
                return None
            obj, step = acted.obj, acted.plan
            if not acted.again:
                return await self._finish(request, obj, step)
        raise RuntimeError(f"{rules.kind.kind} {request}: no plan settled after {LOOKS} looks")

    async def _record(self, obj: Object, step: Plan) -> None:
        if self.events is None:
            return
        for event in step.events:
            record = self.events.warning if event.warning else self.events.normal
            await record(obj, event.reason, event.message)

    async def _finish(self, request: Request, obj: Object, step: P) -> Result | None:
        status = step.status if step.status is not None else obj.get("status") or {}
        written = await self.write_status(obj, status, step.stall)
        if written is None:
            return None
        obj = written
        finalizer = self.rules.finalizer
        if (
            finalizer is not None
            and is_deleting(obj)
            and not self.rules.holds(request)
            and remove_finalizer(obj, finalizer)
        ):
            with contextlib.suppress(NotFound):
                await self.store.update(obj)
            return None
        if step.requeue_after is not None and step.requeue_after > 0:
            return Result(requeue_after=step.requeue_after)
        return None

    async def write_status(
        self, obj: Object, status: Mapping[str, Any], stall: tuple[str, str] | None = None
    ) -> Object | None:
        """Store `status` (with `stall`, see `status_with_stall`) as `obj`'s, unless it says
        what the stored one does; return the object as stored (None: it is gone). A `Conflict`
        propagates: the reconcile is retried and looks again."""
        generation = int(obj["metadata"].get("generation", 1))
        new = status_with_stall(status, stall, generation=generation, now=self.clock.now())
        kind = self.rules.kind
        stored = obj.get("status") or {}
        if new == stored or kind.validate_status(new) == kind.validate_status(stored):
            return obj
        obj = {**obj, "status": new}
        try:
            return await self.store.update_status(obj)
        except NotFound:
            return None
