"""A file of controllers for `setpoint run`: the `Greeter` kind and its typed reconciler.

Run it:  ./dev setpoint run docs/examples/greeter.py     (until Ctrl-C)
then, in another terminal, declare a greeter (`--kinds` gives the CLI the kind):

    ./dev setpoint --kinds docs/examples/greeter.py apply -f docs/examples/greeter.yaml
    ./dev setpoint --kinds docs/examples/greeter.py get greeter first -o yaml

`register(registry)` adds the kind; `setup(manager)` adds the controller. The reconciler's
parameter is `Typed[GreeterSpec, GreeterStatus]`, so it gets the object with its spec and
status as those models, and what it sets in `status` is written when it returns (only if
anything changed).
"""

from setpoint import Kind, Manager, Registry, Schema, TerminalError, Typed
from setpoint.runtime import generation_changed


class GreeterSpec(Schema):
    name: str
    times: int = 1


class GreeterStatus(Schema):
    greeting: str = ""
    observed_generation: int = 0


GREETER = Kind("example.com/v1", "Greeter", spec=GreeterSpec, status=GreeterStatus)


def plan(spec: GreeterSpec) -> str:
    """Decide purely: what the greeting should be."""
    if not spec.name:
        raise TerminalError("spec.name is empty: nobody to greet", reason="NoName")
    return " ".join([f"Hello, {spec.name}!"] * spec.times)


async def greet(obj: Typed[GreeterSpec, GreeterStatus]) -> None:
    obj.status.greeting = plan(obj.spec)
    obj.status.observed_generation = obj.metadata["generation"]


def register(registry: Registry) -> None:
    registry.register(GREETER)


def setup(manager: Manager) -> None:
    manager.controller("greeter").for_(GREETER, predicates=[generation_changed]).complete(greet)
