"""Who may call the API: bearer tokens from a token file, roles by kind and verb, and where
the server may listen. No HTTP here: the app asks `Authenticator.authenticate` and
`authorize`.

The token file is the Kubernetes static token file's layout with a role in the third
column, one token a line (blank lines and `#` comments skipped)::

    3f1c...e9,alice,admin
    77ab...01,ci,edit
    a0b2...5c,grafana,view
    5d0e...77,runner,process-reader      # a role of the roles file

A role is a list of rules, each a set of kinds and a set of verbs (`get`, `list`, `watch`,
`create`, `update`, `patch`, `delete`, `deletecollection`), as Kubernetes' RBAC. Three
are built in, as Kubernetes' aggregated roles:

* `view` reads (get, list, watch) every kind but Secrets;
* `edit` also writes, and reads Secrets, but does not define kinds (CustomResourceDefinitions
  are admin's) nor configure admission webhooks (Mutating/ValidatingWebhookConfigurations:
  a webhook's URL is a request the server makes, with every object it is shown);
* `admin` may do everything.

More roles come from a roles file (`load_roles`, YAML), each a list of rules naming kinds by
plural or kind name (resolved through the registry when the server starts; `*` for all)::

    process-reader:
      - kinds: [processes]
        verbs: [get, list, watch]
      - kinds: [Job]
        verbs: [create]

A subresource (`status`, `scale`) is authorized as its object's kind.

A client certificate signed by the server's client CA (`setpoint serve --client-ca-file`,
kube-apiserver's flag; the TLS handshake checks the signature) authenticates as Kubernetes
does: user = the subject's common name (CN), groups = its organizations (O). Its role is
what its groups name: `system:masters` is admin (as in Kubernetes), a group named `view`,
`edit`, `admin` or a role of the roles file is that role, several such groups give every
rule of each; a certificate whose groups name no role is authenticated and allowed
nothing. A valid certificate comes before any token (as kube-apiserver's x509
authenticator comes first). A request without a valid certificate or token is
`Unauthorized` (401), unless `anonymous_read` lets it read as `view`; a caller whose role
may not do what it asks is `Forbidden` (403). With no `Authenticator` at
all (`auth=None`) every caller is admin: `check_bind` allows that on loopback only.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from setpoint.errors import Error, Forbidden, Invalid, Unauthorized
from setpoint.files import read_secret
from setpoint.model import Kind, Registry

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
READ_VERBS = frozenset({"get", "list", "watch"})
ALL_VERBS = frozenset(VERBS)
SECRETS = "/Secret"
"""The key (`kind_key`) of the core group's Secret."""
CUSTOM_RESOURCE_DEFINITIONS = "apiextensions.k8s.io/CustomResourceDefinition"
WEBHOOK_CONFIGURATIONS = frozenset(
    {
        "admissionregistration.k8s.io/MutatingWebhookConfiguration",
        "admissionregistration.k8s.io/ValidatingWebhookConfiguration",
    }
)
"""Admission webhook configurations: each makes the server send requests (with the objects
written) to a URL it names, so only admins write them."""
ADMIN_ONLY = frozenset({CUSTOM_RESOURCE_DEFINITIONS}) | WEBHOOK_CONFIGURATIONS
"""Kinds `edit` reads but may not write."""


def kind_key(kind: Kind) -> str:
    """A kind as rules name it: `group/Kind`, whatever the version (`/Secret` for core)."""
    return f"{kind.group}/{kind.kind}"


@dataclass(frozen=True, slots=True)
class Rule:
    """`verbs` on `kinds` (None: every kind), except the kinds in `excluded`."""

    kinds: frozenset[str] | None
    verbs: frozenset[str]
    excluded: frozenset[str] = frozenset()

    def allows(self, verb: str, kind: Kind | None) -> bool:
        """Whether this rule lets `verb` be done on `kind` (None: a resource no kind
        serves, which answers 404: only a rule for every kind covers it)."""
        if verb not in self.verbs:
            return False
        if kind is None:
            return self.kinds is None
        key = kind_key(kind)
        return (self.kinds is None or key in self.kinds) and key not in self.excluded


@dataclass(frozen=True, slots=True)
class Role:
    """A named list of rules: a request is allowed if one rule allows it."""

    name: str
    rules: tuple[Rule, ...]

    VIEW: ClassVar[Role]
    EDIT: ClassVar[Role]
    ADMIN: ClassVar[Role]

    def may(self, verb: str, kind: Kind | None) -> bool:
        return any(rule.allows(verb, kind) for rule in self.rules)


Role.VIEW = Role("view", (Rule(None, READ_VERBS, excluded=frozenset({SECRETS})),))
Role.EDIT = Role(
    "edit",
    (
        Rule(None, ALL_VERBS, excluded=ADMIN_ONLY),
        Rule(ADMIN_ONLY, READ_VERBS),
    ),
)
Role.ADMIN = Role("admin", (Rule(None, ALL_VERBS),))
BUILTIN_ROLES = {role.name: role for role in (Role.VIEW, Role.EDIT, Role.ADMIN)}


@dataclass(frozen=True, slots=True)
class User:
    name: str
    role: Role


ANONYMOUS = User("system:anonymous", Role.VIEW)
MASTERS = "system:masters"
"""The group whose certificates are admin, as in Kubernetes."""
Subject = tuple[tuple[str, str], ...]
"""A client certificate's subject as the TLS layer gives it: (attribute, value) pairs such
as ("commonName", "alice"), ("organizationName", "system:masters")."""
CLIENT_SUBJECT = "setpoint.client_subject"
"""The ASGI scope key under which the server (`setpoint.api.server`, as the `subject_key` of
`setpoint.http_server`) puts the `Subject` of the client certificate its TLS handshake
verified."""


def certificate_user(subject: Subject, roles: Mapping[str, Role]) -> User:
    """The user a verified client certificate's `subject` names (CN), with the role its
    groups (O) name among `roles` (see the module docstring); `Unauthorized` without a CN."""
    names = [value for attribute, value in subject if attribute == "commonName"]
    if not names or not names[0]:
        raise Unauthorized("Unauthorized: the client certificate names no user (CN)")
    groups = [value for attribute, value in subject if attribute == "organizationName"]
    granted = [
        Role.ADMIN if group == MASTERS else roles[group]
        for group in dict.fromkeys(groups)
        if group == MASTERS or group in roles
    ]
    if len(granted) == 1:
        return User(names[0], granted[0])
    name = "+".join(role.name for role in granted) or "none (no group names a role)"
    return User(names[0], Role(name, tuple(rule for role in granted for rule in role.rules)))


NOBODY_CHECKS = User("system:unauthenticated-loopback", Role.ADMIN)
"""The caller of a server with no `Authenticator` (loopback only, an explicit choice)."""


@dataclass(frozen=True)
class Authenticator:
    """Bearer tokens and what each may do; see the module docstring."""

    tokens: dict[str, User] = field(default_factory=dict)
    anonymous_read: bool = False
    roles: Mapping[str, Role] = field(default_factory=lambda: dict(BUILTIN_ROLES))
    """The roles a client certificate's groups may name: the built-in ones and the roles
    file's."""

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        anonymous_read: bool = False,
        roles: Mapping[str, Role] | None = None,
    ) -> Authenticator:
        """Read a token file; `Invalid` naming `path:line` for a line that is not
        `token,name,role` (a built-in role, or one of `roles`); refused (`PermissionError`,
        `setpoint.files.read_secret`) if it is another user's or others may write it (they
        could add a token of their own)."""
        text = read_secret(path, what="token file")
        return cls(
            parse_token_file(text, str(path), roles),
            anonymous_read=anonymous_read,
            roles={**BUILTIN_ROLES, **(roles or {})},
        )

    def authenticate(self, authorization: str | None, certificate: Subject | None = None) -> User:
        """The user a verified client certificate's subject (`certificate`), else an
        `Authorization` header, names; `Unauthorized` if they name none."""
        if certificate is not None:
            return certificate_user(certificate, self.roles)
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


def authorize(user: User, verb: str, kind: Kind | None, shown: str) -> None:
    """`Forbidden` unless `user` may `verb` objects of `kind`; `shown` names what was
    asked for (a plural, a path) in the message."""
    if not user.role.may(verb, kind):
        raise Forbidden(
            f'{shown} is forbidden: User "{user.name}" (role {user.role.name}) cannot {verb} it'
        )


def parse_token_file(
    text: str, source: str, roles: Mapping[str, Role] | None = None
) -> dict[str, User]:
    """Tokens by value; `Invalid` naming `source:line` for a bad line, an unknown role or a
    repeated token."""
    known = {**BUILTIN_ROLES, **(roles or {})}
    tokens: dict[str, User] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip().strip('"') for p in line.split(",")]
        if len(parts) != 3 or not all(parts):
            raise Invalid(f"{source}:{number}: want token,name,role")
        token, name, role = parts
        if role not in known:
            names = ", ".join(sorted(known))
            raise Invalid(f"{source}:{number}: role {role!r}: want one of {names}")
        if token in tokens:
            raise Invalid(f"{source}:{number}: this token is already on an earlier line")
        tokens[token] = User(name, known[role])
    return tokens


def load_roles(path: str | Path, registry: Registry) -> dict[str, Role]:
    """The roles of the roles file at `path` (see the module docstring); `Invalid` naming
    the file, the role and the field for anything it cannot use; refused as a token file is
    (`setpoint.files.read_secret`) if it is another user's or others may write it (they
    could widen a role)."""
    source = str(path)
    try:
        data = yaml.safe_load(read_secret(path, what="roles file"))
    except yaml.YAMLError as exc:
        raise Invalid(f"{source}: invalid YAML: {' '.join(str(exc).split())}") from None
    return parse_roles(data, source, registry)


def parse_roles(data: Any, source: str, registry: Registry) -> dict[str, Role]:
    """Roles from a roles file's data; see `load_roles`."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise Invalid(f"{source}: want a mapping of role names to lists of rules")
    roles: dict[str, Role] = {}
    for name, rules in data.items():
        where = f"{source}: role {name!r}"
        if not isinstance(name, str) or not name.strip() or "," in name:
            raise Invalid(f"{where}: want a name without commas")
        if name in BUILTIN_ROLES:
            raise Invalid(f"{where}: a built-in role has this name; choose another")
        if not isinstance(rules, list) or not rules:
            raise Invalid(f"{where}: want a list of rules ({{kinds: [...], verbs: [...]}})")
        roles[name] = Role(
            name, tuple(_rule(r, f"{where}: rule {i + 1}", registry) for i, r in enumerate(rules))
        )
    return roles


def _rule(raw: Any, where: str, registry: Registry) -> Rule:
    if not isinstance(raw, dict) or set(raw) != {"kinds", "verbs"}:
        raise Invalid(f"{where}: want exactly kinds and verbs")
    kinds = _names(raw["kinds"], f"{where}: kinds")
    verbs = _names(raw["verbs"], f"{where}: verbs")
    unknown = sorted(set(verbs) - ALL_VERBS - {"*"})
    if unknown:
        raise Invalid(f"{where}: verbs: {unknown[0]!r} is not one of {', '.join(VERBS)}, *")
    keys: set[str] = set()
    for name in kinds:
        if name == "*":
            continue
        try:
            keys.add(kind_key(registry.resolve(name)))
        except Error as exc:
            raise Invalid(f"{where}: kinds: {exc}") from None
    return Rule(
        None if "*" in kinds else frozenset(keys),
        ALL_VERBS if "*" in verbs else frozenset(verbs),
    )


def _names(raw: Any, where: str) -> list[str]:
    if not isinstance(raw, list) or not raw or not all(isinstance(n, str) and n for n in raw):
        raise Invalid(f"{where}: want a list of names")
    return list(raw)


def readable_kinds(user: User, kinds: Iterable[Kind], verb: str = "list") -> list[Kind]:
    """The kinds among `kinds` whose objects `user` may `verb`."""
    return [kind for kind in kinds if user.role.may(verb, kind)]


def new_token() -> str:
    """A fresh random token (256 bits)."""
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or `localhost`) is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token_file: bool) -> None:
    """Refuse to listen on `host` beyond loopback unless the callers are chosen by the
    operator (`token_file`: a token file or a client CA; not a fresh token for this
    machine's user, nor none at all): `Invalid` saying why."""
    if not is_loopback(host) and not token_file:
        raise Invalid(
            f"refusing to listen on {host} without tokens: anyone who can reach it could "
            "change everything; give --token-file or --client-ca-file, or listen on 127.0.0.1",
            field="address",
        )
