"""`setpoint kubeconfig`: print (or write, mode 0600) a kubeconfig naming a setpoint API
server and a token, for kubectl and the Kubernetes client libraries.

    setpoint kubeconfig --server http://127.0.0.1:8080 --token-file tokens.csv > kc
    setpoint kubeconfig --server http://127.0.0.1:8080 --token "$TOKEN" -o ~/.kube/setpoint

`--server` and `--token` are the global options (`setpoint.cli.store_location`): with
none, the server of the kubeconfig found is printed back. With `--token-file`, the line of
`--user` (default: the most capable token: admin, else edit, else view; the file is
checked as `setpoint serve --token-file` checks it). No I/O beyond reading the token file
and writing the output.
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
    p.add_argument(
        "--token-file", metavar="FILE", help="take the token from this file (not with --token)"
    )
    p.add_argument("--user", help="with --token-file: the name of the token's line")
    p.add_argument("-o", "--output", metavar="FILE", help="write it there (mode 0600)")
    p.set_defaults(run=run)


def run(ctx: Context, args: argparse.Namespace) -> int:
    from setpoint.api.auth import Authenticator
    from setpoint.api.kubeconfig import kubeconfig, write_kubeconfig
    from setpoint.api.serving import kubeconfig_token
    from setpoint.cli.serve import warn_if_others_may_read

    if not ctx.remote:
        raise Invalid("say which server, e.g. --server http://127.0.0.1:8080", field="--server")
    token = ctx.credentials.token if ctx.credentials else None
    if args.token_file and token:
        raise Invalid("give --token or --token-file, not both", field="--token-file")
    if args.token_file:
        warn_if_others_may_read(args.token_file)
        auth = Authenticator.from_file(args.token_file)
        if args.user:
            named = [t for t, user in auth.tokens.items() if user.name == args.user]
            if not named:
                raise Invalid(f"{args.token_file}: no token of the user {args.user!r}")
            token = named[0]
        else:
            token = kubeconfig_token(auth)
    config = kubeconfig(ctx.store_url, token, namespace=ctx.namespace)
    if args.output:
        print(f"wrote {write_kubeconfig(args.output, config)}")
    else:
        sys.stdout.write(yaml.safe_dump(config, sort_keys=False))
    return 0
