"""The modules that define kinds (`--kinds MODULE_OR_FILE`, `SETPOINT_KINDS`): import each
and call its `register(registry)`.

Every failure is a `setpoint.errors.Invalid` naming the module or file and, for a bug in
it, where it raised. Kept apart from manifest reading (`setpoint.cli.load`) so that a
verb which reads no manifest (`get`) imports no YAML. Nothing here touches a store.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterable
from types import ModuleType

from setpoint.errors import Error, Invalid
from setpoint.model.kinds import Registry

KINDS_HINT = (
    "kinds come from CustomResourceDefinitions in the store (setpoint apply -f crd.yaml), "
    "or --kinds MODULE_OR_FILE or SETPOINT_KINDS"
)
"""Added to every unknown-kind message the CLI prints."""


def load_kinds(specs: Iterable[str], registry: Registry) -> None:
    """Import each module (`pkg.kinds`) or file (`path/kinds.py`) and call its
    `register(registry)`, which adds its kinds to `registry`."""
    seen: set[str] = set()
    for raw in specs:
        spec = raw.strip()
        if not spec or spec in seen:
            continue
        seen.add(spec)
        if spec.endswith(".py") or "/" in spec or os.sep in spec:
            module = import_file(spec, f"--kinds {spec}")
        else:
            module = _load_module(spec)
        register = getattr(module, "register", None)
        if not callable(register):
            raise Invalid(
                f"--kinds {spec}: defines no register(registry) function to add its kinds"
            )
        try:
            register(registry)
        except Exception as exc:
            raise Invalid(f"--kinds {spec}: {describe(exc)}") from exc


def import_file(spec: str, label: str) -> ModuleType:
    """The module of the Python file `spec`, imported once per process; `Invalid` starting
    with `label` (what the user gave: `--kinds FILE`, `FILE`) when it cannot be."""
    import hashlib  # here: only a kinds file pays for these
    import importlib.util
    from pathlib import Path

    path = Path(spec).resolve()
    if not path.is_file():
        raise Invalid(f"{label}: no such file")
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    stem = re.sub(r"\W", "_", path.stem)
    name = f"_setpoint_kinds_{stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise Invalid(f"{label}: cannot be imported as Python")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module  # pydantic resolves annotations through sys.modules
    try:
        module_spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[name]
        if not isinstance(exc, Exception):
            raise
        raise Invalid(f"{label}: {describe(exc)}") from exc
    return module


def _load_module(spec: str) -> ModuleType:
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        return importlib.import_module(spec)
    except ModuleNotFoundError as exc:
        if exc.name and spec.startswith(exc.name):
            raise Invalid(
                f"--kinds {spec}: no module named {exc.name!r} (give an importable module "
                "or a .py file)"
            ) from None
        raise Invalid(f"--kinds {spec}: {describe(exc)}") from exc
    except Exception as exc:
        raise Invalid(f"--kinds {spec}: {describe(exc)}") from exc


def describe(exc: Exception, file: str | None = None) -> str:
    """`ValueError at kinds.py:12: bad thing`: enough to find a bug in a user's module. With
    `file`, the place named is the last one in that file (where the user's code called
    whatever raised), when the error passed through it."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError at {exc.filename}:{exc.lineno}: {exc.msg}"
    import traceback  # here: only a failing kinds module pays for it

    frames = list(traceback.extract_tb(exc.__traceback__))
    if file is not None:
        frames = [frame for frame in frames if frame.filename == file] or frames
    if isinstance(exc, Error):
        if file is None or not frames or frames[-1].filename != file:
            return str(exc)
        return f"at {file}:{frames[-1].lineno}: {exc}"
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}{where}: {exc}"
