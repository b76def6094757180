"""`setpoint serve`: serve the store over the Kubernetes-compatible HTTP API
(`setpoint.api`) until Ctrl-C or SIGTERM, and write a kubeconfig for it.

    setpoint serve --port 8080 --token-file tokens.csv
    KUBECONFIG=.setpoint/kubeconfig kubectl get processes

It serves only: no controllers run (that is `setpoint up`, which serves the API too).
By default it listens on 127.0.0.1 with one new random admin token (as `up`); with
`--token-file` the file's tokens instead, their roles built in or named in `--roles-file`;
with `--client-ca-file` client certificates that CA signed too (`setpoint.api.auth`).
Another address needs `--token-file` (anyone who can reach the port could otherwise change
everything). The kubeconfig (by default `kubeconfig` in the store's workspace,
`.setpoint/kubeconfig` for the default store) holds the server's URL and the most capable
token, with mode 0600. It serves HTTPS (kubectl sends tokens over nothing else): with a
self-signed certificate made once in the workspace's `tls/` (the kubeconfig trusts it), or
your own. `--insecure-allow-anonymous-admin` serves plain HTTP with no token, every caller
an admin (loopback only; a warning on stderr says so). Host names beyond loopback (and the
address it listens on) are served only with `--accept-hosts`. A token file of another
user, or one others may write, is refused; one others may read is used with a warning
line. The workspace is made private only when it is a `.setpoint/`: the directory of a
store elsewhere is left as it is (`setpoint.files`).
`--max-connections` raises the server's connection limit: over HTTP/1.1 every watch holds a
connection, so a client watching every kind of a store with hundreds needs hundreds.
This module is the terminal's part: options, warnings, one line saying where it serves,
signals.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from setpoint.cli.context import Context, until_signalled
from setpoint.errors import Invalid

if TYPE_CHECKING:
    from setpoint.api.server import ServerLimits

MAX_CONNECTIONS = 1024
"""`--max-connections`' default: `ServerLimits.max_connections` (here, not imported: the
API's modules load only when it serves)."""


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "serve",
        parents=parents,
        description="Serve the store over a Kubernetes-compatible HTTP API, so that kubectl "
        "and the Kubernetes client libraries work against it, until Ctrl-C or SIGTERM. "
        "Runs no controllers (`setpoint up` does, and serves the API too).",
    )
    p.add_argument(
        "--address",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1; any other needs --token-file)",
    )
    p.add_argument("--port", type=int, default=8080, help="the port (default 8080; 0: a free one)")
    p.add_argument(
        "--token-file",
        metavar="FILE",
        help="bearer tokens, one `token,name,role` a line (role: view, edit, admin or one "
        "of --roles-file); default: one new admin token, written to the kubeconfig",
    )
    p.add_argument(
        "--roles-file",
        metavar="FILE",
        help="more roles for --token-file and --client-ca-file (YAML: each role a list of "
        "{kinds, verbs} rules)",
    )
    p.add_argument(
        "--anonymous-read",
        action="store_true",
        help="let requests without a token read as the view role (get, list, watch; not Secrets)",
    )
    p.add_argument(
        "--insecure-allow-anonymous-admin",
        action="store_true",
        help="no tokens, plain HTTP: every caller on this machine may do everything, "
        "including run commands as you (loopback only)",
    )
    add_accept_hosts(p)
    p.add_argument(
        "--tls-cert-file",
        metavar="FILE",
        help="with tokens the server serves HTTPS: its certificate (PEM; default: a "
        "self-signed one, made once in the workspace's tls/ directory)",
    )
    p.add_argument("--tls-private-key-file", metavar="FILE", help="the certificate's key (PEM)")
    p.add_argument(
        "--client-ca-file",
        metavar="FILE",
        help="client certificates this CA (PEM) signed authenticate: user = CN, groups = O; "
        "group system:masters is admin, a group named view, edit, admin or a role of "
        "--roles-file has that role",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=MAX_CONNECTIONS,
        metavar="N",
        help=f"connections served at once, watches included (default {MAX_CONNECTIONS}; 503 "
        "beyond): a client holds one per kind it watches",
    )
    p.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="where to write a kubeconfig for this server (default: `kubeconfig` beside "
        "the store's workspace, .setpoint/kubeconfig for the default store)",
    )
    p.set_defaults(run=run)


def add_accept_hosts(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--accept-hosts",
        metavar="REGEXES",
        action="append",
        default=[],
        help="serve requests naming these Host names too (comma-separated regular "
        "expressions matched against the whole name, e.g. '^myhost\\.lan$'); by default "
        "only loopback names and the address it listens on",
    )


def accept_hosts(given: list[str]) -> tuple[str, ...]:
    """`--accept-hosts` values as patterns (each value split at commas, as kubectl proxy)."""
    return tuple(p for value in given for p in value.split(",") if p.strip())


INSECURE_WARNING = (
    "warning: --insecure-allow-anonymous-admin: no tokens, plain HTTP; every program and "
    "user on this machine may read and change everything, and run commands as you"
)


def workspace_base(ctx: Context) -> Path:
    """The store's workspace directory (`.setpoint/` for the default store, made private and
    checked as setpoint's own); the directory of a store elsewhere is made if missing and
    otherwise left as it is (it is the user's: `/tmp` for `sqlite:////tmp/x.db`)."""
    from setpoint.engine import workspace_of
    from setpoint.files import PRIVATE_DIR_NAME, ensure_private_dir

    base = workspace_of(ctx.store_url).state_dir.parent
    if base.name == PRIVATE_DIR_NAME or not base.exists():
        return ensure_private_dir(base)
    return base


def warn_if_others_may_read(token_file: str) -> None:
    """A warning line on stderr if other users of the machine may read `token_file`."""
    from setpoint.files import others_may_read

    if others_may_read(token_file):
        print(
            f"warning: other users of this machine may read {token_file}, and with it its "
            f"tokens: chmod 600 {token_file}",
            file=sys.stderr,
        )


def server_limits(max_connections: int) -> ServerLimits:
    """The server's limits with `--max-connections`; connections without a token keep at
    most half of them (at most the default's 512), so they cannot starve those with one."""
    from setpoint.api.server import ServerLimits

    if max_connections < 2:
        raise Invalid(f"--max-connections {max_connections}: want at least 2")
    default = ServerLimits().max_unauthenticated
    return ServerLimits(
        max_connections=max_connections,
        max_unauthenticated=min(default, max_connections // 2),
    )


def run(ctx: Context, args: argparse.Namespace) -> int:
    from setpoint.api.server import run_api_loop

    return run_api_loop(_serve(ctx, args))


async def _serve(ctx: Context, args: argparse.Namespace) -> int:
    from setpoint.api.serving import ServeOptions, serve_api
    from setpoint.api.tls import TlsFiles
    from setpoint.cli.dashboard import dashboard_line
    from setpoint.runtime.namespaces import ensure_system_namespaces
    from setpoint.store.kinds import publish_kinds

    if not 0 <= args.port <= 65535:
        raise Invalid(f"--port {args.port}: want 0 to 65535")
    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        raise Invalid("give both --tls-cert-file and --tls-private-key-file, or neither")
    tls = None
    if args.tls_cert_file:
        tls = TlsFiles(Path(args.tls_cert_file), Path(args.tls_private_key_file))
    if args.token_file:
        warn_if_others_may_read(args.token_file)
    base = workspace_base(ctx)
    options = ServeOptions(
        host=args.address,
        port=args.port,
        token_file=Path(args.token_file) if args.token_file else None,
        roles_file=Path(args.roles_file) if args.roles_file else None,
        anonymous_read=args.anonymous_read,
        anonymous_admin=args.insecure_allow_anonymous_admin,
        accept_hosts=accept_hosts(args.accept_hosts),
        kubeconfig=Path(args.kubeconfig) if args.kubeconfig else base / "kubeconfig",
        tls_directory=base / "tls",
        tls=tls,
        client_ca_file=Path(args.client_ca_file) if args.client_ca_file else None,
        limits=server_limits(args.max_connections),
    )
    if options.anonymous_admin:
        print(INSECURE_WARNING, file=sys.stderr, flush=True)
    async with ctx.open_store(create=True) as store, serve_api(store, options) as api:
        await publish_kinds(store, store.registry)  # kinds as data: the Python kinds' CRDs
        await ensure_system_namespaces(store)
        print(
            f"serving the API on {api.url} (KUBECONFIG={options.kubeconfig} kubectl get all)",
            flush=True,
        )
        print(dashboard_line(api), flush=True)
        return await until_signalled(api.wait_forever())
