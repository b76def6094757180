"""`setpoint convert FILE...`: print the setpoint manifests equivalent to process-compose
files, for users who want to keep going in setpoint's own format.

The files are read as `up` and `apply -f` read them (`setpoint.cli.load.read_manifests`:
several merged in order, a directory's default file and override); what setpoint does not
honour is printed on stderr, one `warning:` line per field, and the manifests on stdout as
one YAML stream (a `---` between objects) that `setpoint apply -f` reads back.
`--compose-namespace NS` converts only the processes in namespace NS, as process-compose's
`-n NS` runs them. Nothing here opens a store.
"""

from __future__ import annotations

import argparse
import sys

import yaml

from setpoint.cli.context import Context
from setpoint.cli.load import add_compose_namespace_option, read_manifests
from setpoint.errors import Invalid


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "convert",
        parents=parents,
        description="Print the setpoint manifests equivalent to process-compose files "
        "(several are merged in order, as process-compose merges them).",
    )
    p.add_argument("paths", nargs="+", metavar="FILE|DIR", help="a process-compose file")
    add_compose_namespace_option(p)
    p.set_defaults(run=run)


def run(ctx: Context, args: argparse.Namespace) -> int:
    manifests = read_manifests(args.paths, compose_namespaces=args.compose_namespaces)
    if not manifests:
        raise Invalid(f"{' '.join(args.paths)}: nothing to convert")
    sources = ", ".join(dict.fromkeys(m.path for m in manifests))
    sys.stdout.write(f"# setpoint manifests converted from {sources} by `setpoint convert`\n")
    sys.stdout.write(
        yaml.safe_dump_all(
            [m.obj for m in manifests], sort_keys=False, allow_unicode=True, width=1 << 16
        )
    )
    return 0
