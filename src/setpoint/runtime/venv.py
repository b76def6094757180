"""The engine's virtual environment as its children see it: what activating it would change.

An engine started as `.venv/bin/setpoint` (or `.venv/bin/python -m setpoint`) runs in
that virtual environment without it being activated: `PATH` may not name its `bin`
directory at all, so a child whose argv says `python3` would get whichever interpreter
`PATH` finds, without the packages installed next to setpoint. `activation(environ)`
returns the variables `bin/activate` would set, `PATH` with the environment's `bin` first
and `VIRTUAL_ENV`, for `setpoint.runtime.run_as` to merge into a command's
environment; a spec's own `env` is merged over them and wins. Outside a virtual
environment it returns nothing: children get the engine's `PATH` as it is.

Pure: the caller passes the environment and the prefixes (`sys.prefix`, `sys.base_prefix`
by default); it reads no file and changes no variable.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

__all__ = ["activation"]


def activation(
    environ: Mapping[str, str],
    *,
    prefix: str = sys.prefix,
    base_prefix: str = sys.base_prefix,
) -> dict[str, str]:
    """`PATH` and `VIRTUAL_ENV` as activating the environment at `prefix` would make them
    from `environ`; empty when `prefix` is no virtual environment (it is its base prefix).

    `PATH` is left as it is when its first entry already is the environment's `bin`
    (activated, or run by `uv run`); otherwise that directory goes first. An unset `PATH`
    becomes `bin` followed by the default search path.
    """
    if os.path.normpath(prefix) == os.path.normpath(base_prefix):
        return {}
    bin_dir = os.path.join(prefix, "bin")
    path = environ.get("PATH", os.defpath)
    first = path.split(os.pathsep, 1)[0]
    if not first or os.path.normpath(first) != os.path.normpath(bin_dir):
        path = os.pathsep.join([bin_dir, path]) if path else bin_dir
    return {"PATH": path, "VIRTUAL_ENV": prefix}
