"""`setpoint run FILE...`: run the controllers that Python files define, against the CLI's
store or API server, until Ctrl-C or SIGTERM (then exit 0), as `kopf run` does.

    setpoint run managedfile.py
    setpoint --server https://10.0.0.1:6443 run managedfile.py   # the kubeconfig's credentials

Each FILE may define `register(registry)`, which adds its kinds (as a `--kinds` file), and
must define `setup(manager)`, which adds its controllers and runnables to the `Manager`.
The store is every verb's (`--store`, `$SETPOINT_STORE`, the nearest `.setpoint/`, or
`--server` and the kubeconfig: `setpoint.cli.context`); a missing local store is created,
as `apply` does, since a controller writes. A file that cannot be imported, lacks `setup`,
or raises in `register` or `setup` ends the command with one line naming the file and the
line. Logs (one line per reconcile) go to stderr. This module only loads the files and runs
the manager: what a reconcile means is `setpoint.runtime`'s.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from setpoint.cli.context import Context
from setpoint.cli.kind_modules import describe, import_file
from setpoint.errors import Invalid


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "run",
        parents=parents,
        description="Run the controllers Python files define (each: `setup(manager)`, and "
        "`register(registry)` for its kinds) against the store or API server, until Ctrl-C "
        "or SIGTERM.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="a Python file of controllers")
    p.add_argument(
        "--grace-period",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds in-flight reconciles get to finish on Ctrl-C or SIGTERM (default 10)",
    )
    p.set_defaults(run=run)


async def run(ctx: Context, args: argparse.Namespace) -> int:
    from setpoint.runtime import Manager, ManagerOptions  # here: other verbs need no runtime

    modules = [_load(spec) for spec in args.files]
    for spec, module in modules:
        register = getattr(module, "register", None)
        if register is not None:
            _call(spec, module, register, ctx.registry)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S"
    )
    for chatty in ("httpx", "httpcore"):  # a line per request to a server: not for a terminal
        logging.getLogger(chatty).setLevel(logging.WARNING)
    async with ctx.open_store(create=True) as store:
        options = ManagerOptions(handle_signals=True, grace_period=args.grace_period)
        manager = Manager(store, options=options)
        for spec, module in modules:
            _call(spec, module, module.setup, manager)
        await manager.run()
    return 0


def _load(spec: str) -> tuple[str, ModuleType]:
    module = import_file(spec, spec)
    if not callable(getattr(module, "setup", None)):
        raise Invalid(f"{spec}: defines no setup(manager) function to add its controllers")
    return spec, module


def _call(spec: str, module: ModuleType, function: Callable[[Any], object], arg: object) -> None:
    """`function(arg)`; what it raises becomes one line naming `spec` and its line."""
    try:
        function(arg)
    except Exception as exc:
        name = getattr(function, "__name__", "?")
        raise Invalid(
            f"{spec}: {name}: {describe(exc, str(Path(module.__file__ or spec)))}"
        ) from exc
