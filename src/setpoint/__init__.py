"""setpoint: reconciliation loops for anything.

Declare what you want (the setpoint); controllers observe what is, diff it
against what is wanted, apply the difference, and do it again, forever.

The public API is what this module exports (pinned by tests/test_public_api.py)
plus the documented subpackages `setpoint.model`, `setpoint.store`,
`setpoint.runtime` and `setpoint.testing`.
"""

from setpoint import lazy

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing

if TYPE_CHECKING:
    from setpoint.clock import SYSTEM_CLOCK, Clock
    from setpoint.errors import (
        AlreadyExists,
        APIError,
        Conflict,
        DomainError,
        Error,
        Gone,
        Invalid,
        LeadershipLost,
        NotFound,
        StoreClosed,
        TerminalError,
        TransportError,
        UnknownKind,
    )
    from setpoint.model import (
        Kind,
        Object,
        Registry,
        Schema,
        Selector,
        get_condition,
        is_true,
        parse_selector,
        set_condition,
    )
    from setpoint.runtime import Manager, ManagerOptions, Reconciler, Request, Result, Typed
    from setpoint.store import Store, open_store

__version__ = "0.1.0.dev0"

__getattr__, __dir__ = lazy.exports(
    __name__,
    {
        "setpoint.clock": ("SYSTEM_CLOCK", "Clock"),
        "setpoint.errors": (
            "AlreadyExists",
            "APIError",
            "Conflict",
            "DomainError",
            "Error",
            "Gone",
            "Invalid",
            "LeadershipLost",
            "NotFound",
            "StoreClosed",
            "TerminalError",
            "TransportError",
            "UnknownKind",
        ),
        "setpoint.model.kinds": ("Kind", "Registry"),
        "setpoint.model.schema": ("Schema",),
        "setpoint.model.meta": ("Object",),
        "setpoint.model.selectors": ("Selector", "parse_selector"),
        "setpoint.model.conditions": ("get_condition", "is_true", "set_condition"),
        "setpoint.runtime.manager": ("Manager", "ManagerOptions"),
        "setpoint.runtime.reconciler": ("Reconciler", "Request", "Result"),
        "setpoint.runtime.typed": ("Typed",),
        "setpoint.store.base": ("Store",),
        "setpoint.store": ("open_store",),
    },
)

__all__ = [
    "SYSTEM_CLOCK",
    "APIError",
    "AlreadyExists",
    "Clock",
    "Conflict",
    "DomainError",
    "Error",
    "Gone",
    "Invalid",
    "Kind",
    "LeadershipLost",
    "Manager",
    "ManagerOptions",
    "NotFound",
    "Object",
    "Reconciler",
    "Registry",
    "Request",
    "Result",
    "Schema",
    "Selector",
    "Store",
    "StoreClosed",
    "TerminalError",
    "TransportError",
    "Typed",
    "UnknownKind",
    "__version__",
    "get_condition",
    "is_true",
    "open_store",
    "parse_selector",
    "set_condition",
]
