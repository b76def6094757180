"""A first controller, whole: a `Greeter` kind and a reconciler that greets and reports Ready.

Run it:  ./dev run python docs/examples/first_controller.py
It uses an in-memory store, creates two greeters, waits until both are Ready,
prints them, and stops.
"""

import asyncio

from setpoint import Manager, Request, Result, Schema, TerminalError, open_store, set_condition
from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.model import Kind, Registry, get_condition
from setpoint.store import Store


class GreeterSpec(Schema):
    name: str
    times: int = 1


class GreeterStatus(Schema):
    greeting: str = ""
    observed_generation: int = 0
    conditions: list[dict[str, object]] = []


GREETER = Kind("example.com/v1", "Greeter", spec=GreeterSpec, status=GreeterStatus)


def plan(spec: dict[str, object]) -> str:
    """Decide purely: what the greeting should be."""
    if not spec["name"]:
        raise TerminalError("spec.name is empty: nobody to greet", reason="NoName")
    return " ".join([f"Hello, {spec['name']}!"] * int(str(spec["times"])))


class Greeter:
    """Level-based: reads the object as it is now and makes status agree with spec."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store, self.clock = store, clock

    async def reconcile(self, request: Request) -> Result:
        obj = await self.store.get("example.com/v1", "Greeter", request.name, request.namespace)
        status = obj.get("status") or {}
        status["greeting"] = plan(obj["spec"])
        status["observedGeneration"] = obj["metadata"]["generation"]
        set_condition(status, "Ready", True, reason="Greeted", now=self.clock.now())
        if status != obj.get("status"):
            obj["status"] = status
            await self.store.update_status(obj)
        return Result()


async def main() -> None:
    clock = SYSTEM_CLOCK
    registry = Registry()
    registry.register(GREETER)
    store = await open_store("memory://", registry, clock=clock)
    manager = Manager(store, clock=clock)
    manager.controller("greeter").for_(GREETER).complete(Greeter(store, clock))
    running = asyncio.create_task(manager.run())
    await manager.wait_started()

    for name, who in (("first", "world"), ("second", "setpoint")):
        await store.create({
            "apiVersion": "example.com/v1", "kind": "Greeter",
            "metadata": {"name": name}, "spec": {"name": who, "times": 2},
        })  # fmt: skip

    async def all_ready() -> list[dict[str, object]]:
        while True:
            items, _ = await store.list("example.com/v1", "Greeter")
            if all(get_condition(o.get("status"), "Ready") for o in items):
                return items
            await asyncio.sleep(0.01)

    for obj in await asyncio.wait_for(all_ready(), 10):
        print(f"{obj['metadata']['name']}: {obj['status']['greeting']}")
    manager.stop()
    await running
    await store.close()


if __name__ == "__main__":
    asyncio.run(main())
