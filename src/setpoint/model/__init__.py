"""The resource model: objects, metadata rules, kinds, label selectors, conditions, patches,
and the masking of secret values (`setpoint.model.redaction`); kinds as CRDs
(`setpoint.model.crd`), the columns objects are listed with (`setpoint.model.columns`),
server-side apply's field ownership (`setpoint.model.managed_fields`) and the dependency
edges kinds declare, with the cycles they would close (`setpoint.model.dependency_graph`).

Everything here is pure: no I/O, no clock reads, no asyncio. Objects are plain
dicts in wire form (`apiVersion`, `kind`, `metadata`, `spec`, `status`).
"""

from setpoint import lazy

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

if TYPE_CHECKING:
    from setpoint.model import codec
    from setpoint.model.conditions import (
        READY,
        RECONCILING,
        STALLED,
        get_condition,
        is_true,
        remove_condition,
        set_condition,
        set_ready_summary,
    )
    from setpoint.model.kinds import Kind, PrinterColumn, Registry, ScaleSubresource
    from setpoint.model.meta import Object, object_key
    from setpoint.model.patch import apply_patch, merge_patch
    from setpoint.model.schema import Schema
    from setpoint.model.selectors import Requirement, Selector, parse_selector

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "setpoint.model.codec": ("codec",),
        "setpoint.model.conditions": (
            "READY",
            "RECONCILING",
            "STALLED",
            "get_condition",
            "is_true",
            "remove_condition",
            "set_condition",
            "set_ready_summary",
        ),
        "setpoint.model.kinds": ("Kind", "PrinterColumn", "Registry", "ScaleSubresource"),
        "setpoint.model.schema": ("Schema",),
        "setpoint.model.meta": ("Object", "object_key"),
        "setpoint.model.patch": ("apply_patch", "merge_patch"),
        "setpoint.model.selectors": ("Requirement", "Selector", "parse_selector"),
    },
)

__all__ = [
    "READY",
    "RECONCILING",
    "STALLED",
    "Kind",
    "Object",
    "PrinterColumn",
    "Registry",
    "Requirement",
    "ScaleSubresource",
    "Schema",
    "Selector",
    "apply_patch",
    "codec",
    "get_condition",
    "is_true",
    "merge_patch",
    "object_key",
    "parse_selector",
    "remove_condition",
    "set_condition",
    "set_ready_summary",
]
