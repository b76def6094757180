"""Serving the API on a store the way `setpoint serve` and `setpoint up` do: tokens, roles,
a checked bind address, the Host names served, the server, and a kubeconfig written for it.

    options = ServeOptions(port=0, kubeconfig=Path(".setpoint/kubeconfig"),
                           tls_directory=Path(".setpoint/tls"))
    async with serve_api(store, options) as api:
        print(api.url)

Tokens come from `token_file` (`setpoint.api.auth`, with the roles of `roles_file`), or
else are one new random admin token made for this run; with `client_ca_file`, client
certificates that CA signed authenticate too (their groups name their roles, among the
built-in ones and `roles_file`'s) (a kubeconfig with it is all anyone
needs, and it dies with the run). Only `anonymous_admin` serves without tokens, every
caller an admin, over plain HTTP: loopback only, and the CLI says so loudly. The
kubeconfig names the server and the most capable token (admin, else edit, else view, else
the first), and trusts the server's certificate: with tokens the server serves HTTPS, with
a self-signed certificate kept in `tls_directory`.

With tokens, a second listener serves the dashboard's page and the API for it over plain
HTTP on 127.0.0.1 (any port; loopback Host names only, whatever `accept_hosts` says), with
the one-step login of `setpoint.api.login`: a browser opens it with no certificate
warning, and `dashboard_link` is the link that logs it in. kubectl and the clients keep
HTTPS on the main port (the kubeconfig names it).

Every write the API takes passes the admission webhooks configured in the store
(`setpoint.runtime.webhooks.install_webhooks`, before the server accepts connections).

Host names served (`setpoint.api.browser_safety`): loopback names; on another address also
that address and this machine's names (so a kubeconfig naming either works); and the
`accept_hosts` patterns. No printing, no signals: those are the CLI's.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from setpoint.api.app import create_app
from setpoint.api.auth import (
    BUILTIN_ROLES,
    Authenticator,
    Role,
    User,
    check_bind,
    is_loopback,
    load_roles,
    new_token,
)
from setpoint.api.browser_safety import LOOPBACK_ONLY, HostRules
from setpoint.api.kubeconfig import kubeconfig, write_kubeconfig
from setpoint.api.login import LoginCodes
from setpoint.api.server import ApiServer, ServerLimits
from setpoint.api.tls import TlsFiles, ensure_certificate
from setpoint.errors import Invalid
from setpoint.files import read_secret
from setpoint.model import Registry
from setpoint.runtime.webhooks import install_webhooks
from setpoint.store.base import Store


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """Where and how to serve; see the module docstring."""

    host: str = "127.0.0.1"
    port: int = 0
    token_file: Path | None = None
    roles_file: Path | None = None
    anonymous_read: bool = False
    anonymous_admin: bool = False
    """No tokens: every caller is an admin, over plain HTTP (loopback only)."""
    accept_hosts: tuple[str, ...] = ()
    """More Host names to serve: regular expressions (`--accept-hosts`)."""
    kubeconfig: Path | None = None
    tls_directory: Path | None = None
    """Where the self-signed certificate is kept (made once, `setpoint.api.tls`); with
    tokens the server serves HTTPS (kubectl sends tokens over nothing else)."""
    tls: TlsFiles | None = None
    """A certificate and key of the caller's own, instead."""
    client_ca_file: Path | None = None
    """Client certificates this CA (PEM) signed authenticate (`--client-ca-file`)."""
    limits: ServerLimits = field(default_factory=ServerLimits)
    dashboard: bool = True
    """With tokens: serve the dashboard's page and the API for it over plain HTTP on a
    second listener, on loopback only, for the one-step login (`setpoint.api.login`)."""
    dashboard_port: int = 0


def authenticator_for(options: ServeOptions, registry: Registry) -> Authenticator | None:
    """The tokens `options` ask for (None: `anonymous_admin`, no tokens at all)."""
    if options.anonymous_admin:
        given = (options.token_file, options.roles_file, options.client_ca_file)
        if any(path is not None for path in given):
            raise Invalid(
                "anonymous admin access takes no token or roles file, nor a client CA: choose one"
            )
        return None
    if options.roles_file is not None and (options.token_file, options.client_ca_file) == (
        None,
        None,
    ):
        raise Invalid(
            "a roles file names roles for a token file's lines or client certificates' "
            "groups: give --token-file or --client-ca-file too"
        )
    roles = load_roles(options.roles_file, registry) if options.roles_file else {}
    if options.token_file is not None:
        return Authenticator.from_file(
            options.token_file, anonymous_read=options.anonymous_read, roles=roles
        )
    tokens = {new_token(): User("setpoint", Role.ADMIN)}
    return Authenticator(
        tokens, anonymous_read=options.anonymous_read, roles={**BUILTIN_ROLES, **roles}
    )


def kubeconfig_token(auth: Authenticator | None) -> str | None:
    """The most capable token of `auth`, for a kubeconfig."""
    if auth is None or not auth.tokens:
        return None
    for role in (Role.ADMIN, Role.EDIT, Role.VIEW):
        for token, user in auth.tokens.items():
            if user.role is role:
                return token
    return next(iter(auth.tokens))


def host_rules(host: str, accept_hosts: tuple[str, ...] = ()) -> HostRules:
    """The Host names a server listening on `host` serves (see the module docstring)."""
    names: set[str] = set()
    if not is_loopback(host):
        names |= {host, socket.gethostname(), socket.getfqdn()}
    return HostRules.of(names, accept_hosts)


@asynccontextmanager
async def serve_api(store: Store, options: ServeOptions) -> AsyncIterator[ApiServer]:
    """The API on `store`, serving until the block ends; the kubeconfig written once it
    accepts connections."""
    auth = authenticator_for(options, store.registry)
    if options.client_ca_file is not None:  # whoever may change it may add their own CA
        read_secret(options.client_ca_file, what="client CA file")
    chosen_callers = options.token_file is not None or options.client_ca_file is not None
    check_bind(options.host, token_file=chosen_callers)
    hosts = host_rules(options.host, options.accept_hosts)
    tls = options.tls
    if tls is None and auth is not None and auth.tokens:
        if options.tls_directory is None:
            raise Invalid("a server with tokens serves HTTPS: give it a TLS directory")
        tls = ensure_certificate(options.tls_directory, [options.host])
    await install_webhooks(store)  # every write the API takes passes the webhooks configured
    login = LoginCodes(auth) if tls is not None and auth is not None and auth.tokens else None
    app = create_app(store, auth=auth, hosts=hosts, login=login)
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(
            ApiServer(
                app,
                options.host,
                options.port,
                options.limits,
                tls=tls,
                client_ca=options.client_ca_file,
            )
        )
        if login is not None and options.dashboard:
            # the page's listener: plain HTTP, loopback only, loopback Host names only
            page_app = create_app(store, auth=auth, hosts=LOOPBACK_ONLY, login=login)
            page = await stack.enter_async_context(
                ApiServer(page_app, PAGE_HOST, options.dashboard_port, options.limits)
            )
            login.page_url = f"{page.url}/ui/"
            server.login = login
            token = kubeconfig_token(auth)
            server.login_user = auth.tokens[token] if auth is not None and token else None
        if options.kubeconfig is not None:
            certificate = tls.certificate_pem() if tls is not None else None
            config = kubeconfig(server.url, kubeconfig_token(auth), certificate=certificate)
            write_kubeconfig(options.kubeconfig, config)
        yield server


PAGE_HOST = "127.0.0.1"
"""Where the dashboard's plain-HTTP listener listens, whatever the API's address."""


def dashboard_link(server: ApiServer) -> str:
    """What `up` and `serve` print for the dashboard: its one-step login link (a new
    one-time code in its fragment), else the page on the API's own port."""
    if server.login is not None and server.login_user is not None:
        link = server.login.link(server.login_user)
        if link is not None:
            return link
    return f"{server.url}/ui/"
