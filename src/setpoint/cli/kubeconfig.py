"""`setpoint kubeconfig`: print (or write, mode 0600) a kubeconfig naming a setpoint API
server and a token, for kubectl and the Kubernetes client libraries.

    setpoint kubeconfig --server http://127.0.0.1:8080 --token-file tokens.csv > kc
    setpoint kubeconfig --server http://127.0.0.1:8080 --token "$TOKEN" -o ~/.kube/setpoint

With `--token-file`, the line of `--user` (default: the most capable token: admin, else
edit, else view). No I/O beyond reading the token file and writing the output.
"""

from __future__ import annotations

import argparse
import sys

import yaml

from setpoint.cli.context import Context
from setpoint.errors import Invalid


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "kubeconfig",
        parents=parents,
        description="Print a kubeconfig for a setpoint API server (`setpoint serve`), or "
        "write it with mode 0600 (-o FILE).",
    )
    p.add_argument("--server", required=True, help="the server's URL, e.g. http://127.0.0.1:8080")
    token = p.add_mutually_exclusive_group()
    token.add_argument("--token", help="the bearer token to use")
    token.add_argument("--token-file", metavar="FILE", help="take the token from this file")
    p.add_argument("--user", help="with --token-file: the name of the token's line")
    p.add_argument("-o", "--output", metavar="FILE", help="write it there (mode 0600)")
    p.set_defaults(run=run)


def run(ctx: Context, args: argparse.Namespace) -> int:
    from setpoint.api.auth import Authenticator
    from setpoint.api.kubeconfig import kubeconfig, write_kubeconfig
    from setpoint.api.serving import kubeconfig_token

    token = args.token
    if args.token_file:
        auth = Authenticator.from_file(args.token_file)
        if args.user:
            named = [t for t, user in auth.tokens.items() if user.name == args.user]
            if not named:
                raise Invalid(f"{args.token_file}: no token of the user {args.user!r}")
            token = named[0]
        else:
            token = kubeconfig_token(auth)
    config = kubeconfig(args.server, token, namespace=ctx.namespace)
    if args.output:
        print(f"wrote {write_kubeconfig(args.output, config)}")
    else:
        sys.stdout.write(yaml.safe_dump(config, sort_keys=False))
    return 0
