"""An object's scale, read purely from the object: its desired and observed replica counts
and its label selector, at the paths its kind's `ScaleSubresource` names. No I/O
(`setpoint.runtime.scale` reads and writes scales in a store).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from setpoint.errors import Invalid
from setpoint.model.kinds import Kind, ScaleSubresource
from setpoint.model.meta import Object

__all__ = ["Scale", "scale_of", "scale_subresource", "value_at"]


@dataclass(frozen=True, slots=True)
class Scale:
    """An object's scale: desired `replicas`, observed `status_replicas`, its `selector`."""

    replicas: int
    status_replicas: int
    selector: str | None
    resource_version: str


def scale_subresource(kind: Kind) -> ScaleSubresource:
    if kind.scale is None:
        raise Invalid(f"{kind.kind} has no scale subresource", field="kind")
    return kind.scale


def value_at(obj: Object, path: str) -> Any:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def scale_of(kind: Kind, obj: Object) -> Scale:
    """The scale of `obj`, an object of `kind`."""
    sub = scale_subresource(kind)
    selector = value_at(obj, sub.label_selector_path) if sub.label_selector_path else None
    return Scale(
        replicas=int(value_at(obj, sub.spec_replicas_path) or 0),
        status_replicas=int(value_at(obj, sub.status_replicas_path) or 0),
        selector=selector if isinstance(selector, str) else None,
        resource_version=str(obj["metadata"].get("resourceVersion", "")),
    )
