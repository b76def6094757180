"""Serving the API on a store the way `setpoint serve` and `setpoint up` do: tokens, a
checked bind address, the server, and a kubeconfig written for it.

    options = ServeOptions(port=0, kubeconfig=Path(".setpoint/kubeconfig"))
    async with serve_api(store, options) as api:
        print(api.url)

Tokens come from `token_file` (`setpoint.api.auth`), or, with `fresh_token`, are one new
random admin token made for this run (what `up` does: a kubeconfig with it is all anyone
needs, and it dies with the run). The kubeconfig names the server and the most capable
token (admin, else edit, else view), and trusts the server's certificate: with tokens
the server serves HTTPS, with a self-signed certificate kept in `tls_directory`.
No printing, no signals: those are the CLI's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from setpoint.api.app import create_app
from setpoint.api.auth import Authenticator, Role, User, check_bind, new_token
from setpoint.api.kubeconfig import kubeconfig, write_kubeconfig
from setpoint.api.server import ApiServer, ServerLimits
from setpoint.api.tls import TlsFiles, ensure_certificate
from setpoint.errors import Invalid
from setpoint.store.base import Store


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """Where and how to serve; see the module docstring."""

    host: str = "127.0.0.1"
    port: int = 0
    token_file: Path | None = None
    fresh_token: bool = False
    anonymous_read: bool = False
    kubeconfig: Path | None = None
    tls_directory: Path | None = None
    """Where the self-signed certificate is kept (made once, `setpoint.api.tls`); with
    tokens the server serves HTTPS (kubectl sends tokens over nothing else)."""
    tls: TlsFiles | None = None
    """A certificate and key of the caller's own, instead."""
    limits: ServerLimits = field(default_factory=ServerLimits)


def authenticator_for(options: ServeOptions) -> Authenticator | None:
    """The tokens `options` ask for (None: no tokens, loopback only)."""
    if options.token_file is not None:
        return Authenticator.from_file(options.token_file, anonymous_read=options.anonymous_read)
    if options.fresh_token:
        tokens = {new_token(): User("setpoint", Role.ADMIN)}
        return Authenticator(tokens, anonymous_read=options.anonymous_read)
    if options.anonymous_read:
        return Authenticator({}, anonymous_read=True)
    return None


def kubeconfig_token(auth: Authenticator | None) -> str | None:
    """The most capable token of `auth`, for a kubeconfig."""
    if auth is None:
        return None
    for role in (Role.ADMIN, Role.EDIT, Role.VIEW):
        for token, user in auth.tokens.items():
            if user.role is role:
                return token
    return None


@asynccontextmanager
async def serve_api(store: Store, options: ServeOptions) -> AsyncIterator[ApiServer]:
    """The API on `store`, serving until the block ends; the kubeconfig written once it
    accepts connections."""
    auth = authenticator_for(options)
    check_bind(options.host, auth)
    tls = options.tls
    if tls is None and auth is not None and auth.tokens:
        if options.tls_directory is None:
            raise Invalid("a server with tokens serves HTTPS: give it a TLS directory")
        tls = ensure_certificate(options.tls_directory, [options.host])
    app = create_app(store, auth=auth)
    async with ApiServer(app, options.host, options.port, options.limits, tls=tls) as server:
        if options.kubeconfig is not None:
            certificate = tls.certificate_pem() if tls is not None else None
            config = kubeconfig(server.url, kubeconfig_token(auth), certificate=certificate)
            write_kubeconfig(options.kubeconfig, config)
        yield server
