"""Who may call the API: bearer tokens from a token file, three roles, and where the server
may listen. No HTTP here: the app asks `Authenticator.authenticate` and `authorize`.

The token file is the Kubernetes static token file's layout with a role in the third
column, one token a line (blank lines and `#` comments skipped)::

    3f1c...e9,alice,admin
    77ab...01,ci,edit
    a0b2...5c,grafana,view

Roles: `view` reads (get, list, watch), `edit` also writes, `admin` may do everything
(today the same as `edit`). A request without a valid token is `Unauthorized` (401),
unless `anonymous_read` lets it read; a token whose role may not do what it asks is
`Forbidden` (403). With no `Authenticator` at all (`auth=None`) every caller may do
everything: `check_bind` allows that on loopback only.
"""

from __future__ import annotations

import enum
import hmac
import ipaddress
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from setpoint.errors import Forbidden, Invalid, Unauthorized

READ_VERBS = frozenset({"get", "list", "watch"})


class Role(enum.Enum):
    VIEW = "view"
    EDIT = "edit"
    ADMIN = "admin"

    def may(self, verb: str) -> bool:
        return verb in READ_VERBS or self is not Role.VIEW


@dataclass(frozen=True, slots=True)
class User:
    name: str
    role: Role


ANONYMOUS = User("system:anonymous", Role.VIEW)
NOBODY_CHECKS = User("system:unauthenticated-loopback", Role.ADMIN)
"""The caller of a server with no `Authenticator` (loopback only)."""


@dataclass(frozen=True)
class Authenticator:
    """Bearer tokens and what each may do; see the module docstring."""

    tokens: dict[str, User] = field(default_factory=dict)
    anonymous_read: bool = False

    @classmethod
    def from_file(cls, path: str | Path, *, anonymous_read: bool = False) -> Authenticator:
        """Read a token file; `Invalid` naming `path:line` for a line that is not
        `token,name,role`."""
        text = Path(path).read_text(encoding="utf-8")
        return cls(parse_token_file(text, str(path)), anonymous_read=anonymous_read)

    def authenticate(self, authorization: str | None) -> User:
        """The user an `Authorization` header names; `Unauthorized` if it names none."""
        if authorization is None or not authorization.strip():
            if self.anonymous_read:
                return ANONYMOUS
            raise Unauthorized("Unauthorized: a bearer token is required")
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() == "bearer" and token:
            found = None
            for known, user in self.tokens.items():  # compare every one: no timing hint
                if hmac.compare_digest(known.encode(), token.encode()):
                    found = user
            if found is not None:
                return found
        raise Unauthorized("Unauthorized: the token is not valid")


def authorize(user: User, verb: str, resource: str) -> None:
    """`Forbidden` unless `user` may `verb` the `resource` (a plural, or a path)."""
    if not user.role.may(verb):
        raise Forbidden(
            f'{resource} is forbidden: User "{user.name}" (role {user.role.value}) '
            f"cannot {verb} it; a token with role edit or admin can"
        )


def parse_token_file(text: str, source: str) -> dict[str, User]:
    """Tokens by value; `Invalid` naming `source:line` for a bad line or a repeated token."""
    tokens: dict[str, User] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip().strip('"') for p in line.split(",")]
        if len(parts) != 3 or not all(parts):
            raise Invalid(f"{source}:{number}: want token,name,role")
        token, name, role = parts
        try:
            user = User(name, Role(role))
        except ValueError:
            raise Invalid(f"{source}:{number}: role {role!r}: want view, edit or admin") from None
        if token in tokens:
            raise Invalid(f"{source}:{number}: this token is already on an earlier line")
        tokens[token] = user
    return tokens


def new_token() -> str:
    """A fresh random token (256 bits)."""
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or `localhost`) is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, auth: Authenticator | None) -> None:
    """Refuse to listen on `host` beyond loopback without tokens: `Invalid` saying why."""
    if not is_loopback(host) and (auth is None or not auth.tokens):
        raise Invalid(
            f"refusing to listen on {host} without tokens: anyone who can reach it could "
            "change everything; give --token-file, or listen on 127.0.0.1",
            field="address",
        )
