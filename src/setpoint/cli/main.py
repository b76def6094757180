"""The `setpoint` command: parse arguments, load kinds, run one verb, and turn errors into one line.

A `setpoint.errors.Error`, an unreadable manifest, an unknown kind or a bad
argument ends the command with `error: <message>` on stderr and exit status 1,
never a traceback (an unexpected exception too: it is a bug, reported in one line;
SETPOINT_DEBUG=1 shows its traceback). Everything printed is escaped for the
terminal. Global options may be given before or after the verb.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO, cast

from setpoint.cli import (
    apply,
    delete,
    describe,
    down,
    events,
    explain,
    get,
    logs,
    rca,
    restart,
    rollout,
    timeline,
    tune,
    up,
    wait,
)
from setpoint.cli.context import DEFAULT_STORE, Context, store_url_for
from setpoint.cli.load import KINDS_HINT, load_kinds
from setpoint.cli.render import EscapedOutput
from setpoint.engine import builtin_kinds
from setpoint.errors import Error, UnknownKind

VERBS = (
    apply,
    get,
    describe,
    events,
    delete,
    logs,
    wait,
    rollout,
    restart,
    up,
    down,
    timeline,
    explain,
    rca,
    tune,
)
"""Every verb module, in the order `--help` lists them."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(1, f"error: {message} (see '{self.prog} --help')\n")


def _global_options(suffix: str) -> argparse.ArgumentParser:
    """The options every verb takes; `suffix` keeps values given before and after the verb apart."""
    p = _Parser(add_help=False, argument_default=argparse.SUPPRESS)
    p.add_argument(
        "--store",
        dest="store" + suffix,
        metavar="URL",
        help=f"memory://, sqlite:///relative.db or sqlite:////abs.db "
        f"(default: $SETPOINT_STORE, else {DEFAULT_STORE} in the nearest of this directory "
        "and its parents that has one)",
    )
    p.add_argument(
        "--kinds",
        dest="kinds" + suffix,
        action="append",
        metavar="MODULE_OR_FILE",
        help="a Python module or file that registers kinds (repeatable; "
        "also $SETPOINT_KINDS, comma-separated)",
    )
    p.add_argument(
        "-n",
        "--namespace",
        dest="namespace" + suffix,
        metavar="NAMESPACE",
        help='the namespace to work in (default: "default")',
    )
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="setpoint",
        parents=[_global_options("")],
        description="Declare what you want; controllers make it so. kubectl-like verbs over "
        "a setpoint store.",
    )
    verbs = parser.add_subparsers(
        title="verbs", metavar="VERB", required=True, parser_class=_Parser
    )
    parents = [_global_options("_after")]
    for verb in VERBS:
        verb.add_parser(verbs, parents)
    return parser


def _option(args: argparse.Namespace, name: str) -> Any:
    return getattr(args, name + "_after", getattr(args, name, None))


def make_context(args: argparse.Namespace) -> Context:
    """Register the built-in kinds and the user's, and resolve the global options against
    the environment."""
    kinds = os.environ.get("SETPOINT_KINDS", "").split(",")
    kinds += getattr(args, "kinds", []) + getattr(args, "kinds_after", [])
    registry = builtin_kinds()
    load_kinds(kinds, registry)
    namespace = _option(args, "namespace")
    store_url, searched = store_url_for(
        _option(args, "store") or os.environ.get("SETPOINT_STORE"), Path.cwd()
    )
    return Context(
        store_url=store_url,
        store_searched=searched,
        namespace=namespace or "default",
        namespace_explicit=namespace is not None,
        registry=registry,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: `sys.argv[1:]`); return the exit status.
    Everything it prints is escaped for the terminal (`render.EscapedOutput`)."""
    raw_out, raw_err = sys.stdout, sys.stderr
    sys.stdout = cast(TextIO, EscapedOutput(raw_out))
    sys.stderr = cast(TextIO, EscapedOutput(raw_err))
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = raw_out, raw_err


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        ctx = make_context(args)
        status: int = asyncio.run(args.run(ctx, args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`setpoint get -w | head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except UnknownKind as exc:
        return _fail(f"{exc} ({KINDS_HINT})")
    except Error as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc))
    except sqlite3.Error as exc:  # the machine's, e.g. a full or read-only disk under the store
        return _fail(f"the store's database: {exc}")
    except Exception as exc:
        if os.environ.get("SETPOINT_DEBUG"):
            raise
        return _fail(
            f"internal error: {type(exc).__name__}: {exc} (a bug in setpoint; "
            "SETPOINT_DEBUG=1 shows the traceback)"
        )
    return status


def _fail(message: str) -> int:
    print("error: " + " ".join(message.split()), file=sys.stderr)
    return 1
