"""Lazy re-exports for package `__init__`s (PEP 562), so that importing one module of a
package does not import its siblings, and `setpoint --help` imports almost nothing.

A package lists what it re-exports and from where; a name is imported the first time it
is read, then kept in the package's namespace::

    __getattr__, __dir__ = lazy.exports(__name__, {
        "setpoint.model.kinds": ("Kind", "Registry"),
        "setpoint.model.codec": ("codec",),   # the submodule itself
    })

The package repeats the same imports under `if TYPE_CHECKING:` so that type checkers
see them (`TYPE_CHECKING = False` in the module: importing `typing` costs a command's
start more than the names it guards). Imports nothing from setpoint and does no I/O.
"""

from __future__ import annotations

import importlib
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any


def exports(
    package: str, names_by_module: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, which re-exports each name from its
    module (a name equal to the module's last part is the module itself)."""
    module_of = {name: module for module, names in names_by_module.items() for name in names}
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        imported = importlib.import_module(module)
        value = imported if module == f"{package}.{name}" else getattr(imported, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *module_of})

    return __getattr__, __dir__
