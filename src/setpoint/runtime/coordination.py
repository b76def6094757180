"""How several managers that share a store split the work: the coordination modes, and
leader election per controller.

* `single`: this manager runs every controller and assumes it is alone on the store;
  whoever starts it makes sure of that (the engine claims the store's engine lease,
  `setpoint.engine.claim`; `ManagerOptions.leader_election` is the whole-manager form).
* `leader`: each controller runs in one manager at a time, the holder of its own Lease
  (`<leader_election_id>-<controller>`); in the others it stands by, informers warm, and
  takes over within the lease duration after the holder dies or releases (`lead`).
* `shard`: every manager runs every controller, each on the keys it owns
  (`setpoint.runtime.sharding`).

Store calls only (through `LeaderElector`); the manager does the wiring.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import Protocol

from setpoint.runtime.leases import LeaderElector
from setpoint.runtime.reconciler import Request

log = logging.getLogger("setpoint.coordination")


class Coordination(enum.StrEnum):
    """How a manager shares its store with other managers; see the module docstring."""

    SINGLE = "single"
    LEADER = "leader"
    SHARD = "shard"


class LedController(Protocol):
    """What `lead` needs of a controller (`Controller` is one)."""

    name: str
    gate: Callable[[Request], bool] | None

    async def stop_keys(self, keep: Callable[[Request], bool], *, grace: float) -> None: ...

    def enqueue_cached(self, select: Callable[[Request], bool]) -> int: ...


async def lead(controller: LedController, elector: LeaderElector) -> None:
    """Run `controller` only while `elector` holds its lease, forever (cancel to stop).

    Standing by, the controller's gate refuses every key (and it first lets go of what an
    earlier run of this process left: a Process controller's children). On winning, every
    cached key is put in line; on losing, the gate closes and in-flight reconciles are
    cancelled at once (another manager may start them after the lease duration) and the
    controller lets go of its keys (`Controller.on_lost`), then it stands again.
    Cancelling it releases the lease if held: do that after the controller stopped.
    """
    leading = False

    def gate(_: Request) -> bool:
        return leading and elector.is_leader

    controller.gate = gate
    try:
        await controller.stop_keys(_nothing, grace=0)  # what an earlier run of ours left
        while True:
            await elector.acquire()
            leading = True
            queued = controller.enqueue_cached(_everything)
            log.info(
                "controller %s: leading as %s (%d keys)", controller.name, elector.identity, queued
            )
            await elector.hold()
            leading = False
            log.warning("controller %s: lost its lease; standing by", controller.name)
            await controller.stop_keys(_nothing, grace=0)
    finally:
        leading = False
        if elector.is_leader:
            try:
                await controller.stop_keys(_nothing, grace=0)  # its children stop first
                await elector.release()
            except Exception:
                log.exception("controller %s: could not release its lease", controller.name)


def _everything(_: Request) -> bool:
    return True


def _nothing(_: Request) -> bool:
    return False
