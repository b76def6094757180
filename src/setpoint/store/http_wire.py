"""The Kubernetes REST API as `setpoint.store.http`'s clients speak it, without a
connection: who the client is (`Credentials`: a bearer token or a client certificate, and
how to check the server), where a kind's objects are (`collection_path`, `item_path`), what
an answer means (`status_error`: a Kubernetes `Status` as the error of `setpoint.errors`
it stands for; the revisions of lists and objects) and what discovery says (`kinds_of`,
`group_versions`, `learn`).

No connection and no httpx: `Credentials.verify` builds the `ssl` context httpx takes
(loading a client certificate through a private temporary directory, removed at once).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from setpoint.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Error,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    RequestEntityTooLarge,
    StoreClosed,
    Unauthorized,
    UnsupportedMediaType,
)
from setpoint.model import Kind, Object, Registry, Selector

JSON = "application/json"
USER_AGENT = "setpoint"
"""What this client calls itself; the server takes it as the field manager of its writes."""
SIMPLE_ERRORS: dict[int, type[Error]] = {
    400: BadRequest,
    413: RequestEntityTooLarge,
    415: UnsupportedMediaType,
}
"""Answers raised as their error with the server's message."""


@dataclass(frozen=True)
class Credentials:
    """How to talk to a server: a bearer token or a client certificate (PEM, with its key),
    and how to check its TLS certificate (a PEM bundle, a CA file, or not at all)."""

    token: str | None = None
    ca_data: str | None = None
    ca_file: str | None = None
    insecure: bool = False
    client_cert: str | None = field(default=None, repr=False)
    client_key: str | None = field(default=None, repr=False)
    source: str = field(default="", compare=False)
    """Where the token came from (`--token`, a kubeconfig's path), named by auth errors."""

    def headers(self) -> dict[str, str]:
        headers = {"Accept": JSON, "User-Agent": USER_AGENT}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def verify(self) -> ssl.SSLContext | bool:
        """What httpx's `verify` takes: how to check the server, and the client certificate
        to present (`Invalid` if it and its key cannot be loaded)."""
        if self.client_cert is None or self.client_key is None:
            if self.insecure:
                return False
            if self.ca_data or self.ca_file:
                return ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
            return True
        if self.ca_data or self.ca_file:
            context = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        else:
            context = ssl.create_default_context()
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        _load_client_certificate(context, self.client_cert, self.client_key, self.source)
        return context


def _load_client_certificate(context: ssl.SSLContext, cert: str, key: str, source: str) -> None:
    """Load a client certificate and key given as PEM text: `ssl` reads them only from
    files, so they go through a private temporary directory, removed at once."""
    with tempfile.TemporaryDirectory(prefix="setpoint-client-") as directory:
        cert_path, key_path = os.path.join(directory, "cert.pem"), os.path.join(directory, "key")
        for path, text in ((cert_path, cert), (key_path, key)):
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                file.write(text)
        try:
            context.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as exc:
            where = f"{source}: " if source else ""
            raise Invalid(
                f"{where}the client certificate or its key cannot be used: {exc.reason or exc}",
                field="client-certificate",
            ) from None


def check_server_url(url: str) -> str:
    """`url` without a trailing slash, if it is `http(s)://host[:port][/prefix]`; `Invalid`
    naming the field `server` otherwise (a query or fragment, userinfo, no host)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a bad port raises)
    except ValueError as exc:
        raise Invalid(f"{url!r}: not a URL ({exc})", field="server") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Invalid(f"{url!r}: want http(s)://host:port", field="server")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise Invalid(
            f"{url!r}: want http(s)://host:port with no query, fragment or user "
            "(give a token with --token or a kubeconfig)",
            field="server",
        )
    return url.rstrip("/")


# -- paths, pure ---------------------------------------------------------------------------


def group_path(api_version: str) -> str:
    """`/api/v1` for the core group, `/apis/GROUP/VERSION` otherwise."""
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


def collection_path(kind: Kind, namespace: str | None) -> str:
    """Where the objects of `kind` are listed and created: in `namespace`, or in every
    namespace when None (and always for a cluster-scoped kind)."""
    base = group_path(kind.api_version)
    if kind.namespaced and namespace is not None:
        base += f"/namespaces/{quote(namespace, safe='')}"
    return f"{base}/{kind.plural}"


def item_path(kind: Kind, name: str, namespace: str | None) -> str:
    where = (namespace or "default") if kind.namespaced else None
    return f"{collection_path(kind, where)}/{quote(name, safe='')}"


def namespace_of(kind: Kind, obj: Object) -> str | None:
    meta = obj.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    return (namespace or "default") if kind.namespaced else None


def name_of(obj: Object) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise Invalid("required", field="metadata.name")
    return name


def list_params(selector: str | Selector | None) -> dict[str, str]:
    text = str(Selector.of(selector))
    return {"labelSelector": text} if text else {}


# -- answers, pure -------------------------------------------------------------------------


def status_error(code: int, body: Any, credentials: Credentials | None = None) -> Error:
    """The error of `setpoint.errors` that the answer `code` with `body` (a Kubernetes
    `Status`, or anything else a proxy may answer) stands for."""
    status = body if isinstance(body, dict) and body.get("kind") == "Status" else {}
    reason = str(status.get("reason") or "")
    message = str(status.get("message") or "") or f"the server answered {code}"
    if code == 401:
        return Unauthorized(f"{message}: {_token_hint(credentials)}")
    if code == 403:
        return Forbidden(f"{message}: the role of {_token_hint(credentials, named=True)}")
    if code == 404:
        return NotFound(message)
    if code == 409:
        return AlreadyExists(message) if reason == "AlreadyExists" else Conflict(message)
    if code == 410:
        return Gone(message)
    if code in SIMPLE_ERRORS:
        return SIMPLE_ERRORS[code](message)
    if code == 422:
        details = status.get("details") if isinstance(status.get("details"), dict) else {}
        causes = details.get("causes") if isinstance(details, dict) else None
        field_name = None
        if isinstance(causes, list) and causes and isinstance(causes[0], dict):
            field_name = causes[0].get("field") or None
        error = Invalid(message)
        error.field = field_name
        return error
    if code == 503:
        return StoreClosed(f"the server is unavailable: {message}")
    return Error(f"the server answered {code} {reason}: {message}".strip())


def unreachable(server: str, exc: Exception, credentials: Credentials | None) -> Error:
    """The error of a request that got no answer; with a client certificate presented, a
    hint that the server may have refused it (TLS 1.3 servers close the connection)."""
    hint = ""
    if credentials is not None and credentials.client_cert:
        source = f" from {credentials.source}" if credentials.source else ""
        hint = f" (if it is up, it may refuse the client certificate{source})"
    return Error(f"cannot reach the server at {server}: {exc}{hint}")


def _token_hint(credentials: Credentials | None, *, named: bool = False) -> str:
    source = f" from {credentials.source}" if credentials and credentials.source else ""
    if credentials is not None and credentials.client_cert:  # it comes before a token
        if named:
            return f"the client certificate{source} does not allow this (its groups name it)"
        return f"the server does not accept the client certificate{source}"
    if credentials is None or not credentials.token:
        return (
            "no token was given (--token, or a kubeconfig with a user token or client certificate)"
        )
    if named:
        return f"the token{source} does not allow this (roles: view, edit, admin)"
    return f"the server does not accept the token{source}"


def item_of(obj: Any, kind: Kind) -> Object:
    """A list item with its apiVersion and kind (the API may leave them out of items)."""
    if not isinstance(obj, dict):
        raise Error(f"the server answered a list with a non-object item: {obj!r:.80}")
    obj.setdefault("apiVersion", kind.api_version)
    obj.setdefault("kind", kind.kind)
    return obj


def list_revision(body: Any) -> int:
    try:
        return int(body["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        raise Error("the server answered a list with no resourceVersion") from None


def revision_of(obj: Object) -> int:
    try:
        return int(obj["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        raise Error("the server sent an object with no resourceVersion") from None


def kinds_of(resource_list: Any) -> list[Kind]:
    """The kinds of a discovery `APIResourceList` (subresources left out)."""
    group_version = resource_list.get("groupVersion") if isinstance(resource_list, dict) else None
    if not isinstance(group_version, str):
        return []
    kinds = []
    for resource in resource_list.get("resources") or ():
        if not isinstance(resource, dict) or "/" in str(resource.get("name", "")):
            continue
        try:
            kinds.append(
                Kind(
                    group_version,
                    str(resource["kind"]),
                    plural=str(resource["name"]),
                    namespaced=bool(resource.get("namespaced", True)),
                    short_names=tuple(resource.get("shortNames") or ()),
                )
            )
        except (KeyError, Invalid):
            continue
    return kinds


def group_versions(group_list: Any) -> list[str]:
    """The group versions an `APIGroupList` (`/apis`) names (every served version)."""
    found = []
    for group in (group_list or {}).get("groups") or ():
        for version in group.get("versions") or ():
            if isinstance(version, dict) and isinstance(version.get("groupVersion"), str):
                found.append(version["groupVersion"])
    return found


def learn(registry: Registry, kinds: Iterable[Kind]) -> list[Kind]:
    """Define in `registry` the served kinds it lacks, as data (a kind it knows keeps its
    definition, with its schema and columns); return every served kind, as the registry
    has it. (No `registry.get`: a miss would call `refresh`, which may be discovery.)"""
    known = {(k.api_version, k.kind): k for k in registry}
    served = []
    for kind in kinds:
        have = known.get((kind.api_version, kind.kind))
        if have is None:
            registry.define(kind)
            have = kind
        served.append(have)
    return served
