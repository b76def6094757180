"""The `Greeting` kind (example.com/v1): a message to show `repeat` times.

Load it into the CLI with `--kinds examples/hello/kinds.py`: the CLI imports this file and
calls its `register(registry)`. A controller would show the message and record how many
times it did in `status.shown`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from setpoint import Kind, Registry, Schema


class GreetingSpec(Schema):
    """What the user wants: the message, and how many times to show it."""

    message: str
    repeat: int = Field(default=1, ge=1)


class GreetingStatus(Schema):
    """What was observed: conditions (`Ready`), the generation they describe, times shown."""

    observed_generation: int | None = None
    conditions: list[dict[str, Any]] = Field(default_factory=list)
    shown: int = 0


GREETING = Kind(
    "example.com/v1",
    "Greeting",
    spec=GreetingSpec,
    status=GreetingStatus,
    short_names=("gr",),
)


def register(registry: Registry) -> None:
    """Add the Greeting kind to `registry` (what `--kinds` calls)."""
    registry.register(GREETING)
