"""A store reached over the Kubernetes REST API (`setpoint serve`, or any server that follows
the conventions): `HttpStore` (the `Store` contract, on httpx's async client) and
`HttpReader` (the synchronous `Reader`, for `setpoint get`).

    store = await open_store("http://127.0.0.1:8443", registry, credentials=Credentials(token=t))

* Paths come from the kind: `/api/v1/...` for the core group, `/apis/GROUP/VERSION/...`
  otherwise, `namespaces/NS/` for namespaced kinds, then the plural and the name; `/status`
  for `update_status`. The kinds the server serves (discovery: `/api`, `/apis`,
  `/apis/G/V`) that the registry lacks are defined in it as data, so kinds defined only
  on the server (a CustomResourceDefinition) can be named: `HttpStore.open` asks at once,
  `HttpReader` when a lookup misses (the registry's `refresh`). The server is the source,
  and it validates every write (no schema is checked here).
* `list` reads pages of `limit` objects, following `continue` (one snapshot on the server);
  its revision is the list's `resourceVersion`. `revision()` is a list of at most one
  object of the first kind the server serves: its `resourceVersion` is the store's revision.
* `watch` is `?watch=true&resourceVersion=N&allowWatchBookmarks=true`. A stream the server
  ends cleanly (its timeout) or that breaks is resumed from the last revision seen, events
  or bookmarks, as client-go's reflector does; an `ERROR` event or answer 410 raises `Gone`.
  A watch of every kind (`kind=None`) merges one watch per kind in revision order: revisions
  are store-wide and gapless, so revision N+1 follows N; a revision that never comes (a
  write of a kind not watched here) is skipped once `GAP_WAIT` seconds pass with later
  ones waiting. `since=0` is the API's `resourceVersion=0`: the current state as ADDED
  events, then changes (the history from revision 0 cannot be asked for).
* Write options (`WriteOptions`): a dry run is `dryRun=All`; the actor's manager, unless
  it is `setpoint` (the server takes that from the User-Agent, `setpoint`), is
  `fieldManager=` (which makes the server record the fields it writes, as kubectl's). The
  actor's user is not sent: the server names the user its token or client certificate
  authenticates.
* A failure answered as a Kubernetes `Status` is raised as the error of `setpoint.errors`
  it stands for (`status_error`): NotFound, AlreadyExists, Conflict, Invalid (with the field
  of `details.causes`), Gone, BadRequest, Unauthorized, Forbidden... A server that cannot be
  reached is `Error` naming it; a closed store `StoreClosed`. `compact` is refused: the
  server owns its history. Both clients set TCP_NODELAY (`SOCKET_OPTIONS`).

No server code, no retries of writes (a write whose answer is lost is not repeated: it may
have been made), no local validation.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import socket
import ssl
import tempfile
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote, urlsplit

import httpx

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
from setpoint.model import Kind, Object, Registry, Selector, codec
from setpoint.store.base import NO_OPTIONS, WatchEvent, WriteOptions

if TYPE_CHECKING:
    from setpoint.store.base import EventType

SOCKET_OPTIONS = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
"""A request goes out as headers then body: without TCP_NODELAY the body waits for the
server's delayed ACK of the headers (about 40 ms a request)."""
PAGE_SIZE = 500
"""Objects per page of `list` (`limit`)."""
GAP_WAIT = 1.0
"""Seconds a watch of every kind waits for a missing revision while later ones are ready."""
RECONNECT_DELAYS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
"""Seconds between attempts to resume a watch whose stream broke (then `Error`)."""
PATCH_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
}
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


def _namespace_of(kind: Kind, obj: Object) -> str | None:
    meta = obj.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    return (namespace or "default") if kind.namespaced else None


def _name_of(obj: Object) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        raise Invalid("required", field="metadata.name")
    return name


def _list_params(selector: str | Selector | None) -> dict[str, str]:
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


def _item(obj: Any, kind: Kind) -> Object:
    """A list item with its apiVersion and kind (the API may leave them out of items)."""
    if not isinstance(obj, dict):
        raise Error(f"the server answered a list with a non-object item: {obj!r:.80}")
    obj.setdefault("apiVersion", kind.api_version)
    obj.setdefault("kind", kind.kind)
    return obj


def _list_revision(body: Any) -> int:
    try:
        return int(body["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        raise Error("the server answered a list with no resourceVersion") from None


def _revision_of(obj: Object) -> int:
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


def _decode(response: httpx.Response) -> Any:
    try:
        return codec.decode(response.content)
    except ValueError:
        return None


# -- the async store -----------------------------------------------------------------------


class HttpStore:
    """The `Store` contract over the Kubernetes REST API; see the module docstring."""

    def __init__(
        self,
        server: str,
        registry: Registry | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self.server = check_server_url(server)
        self.registry = registry if registry is not None else Registry()
        self.credentials = credentials or Credentials()
        verify = self.credentials.verify()
        self._client = httpx.AsyncClient(
            base_url=self.server,
            headers=self.credentials.headers(),
            verify=verify,
            timeout=httpx.Timeout(30.0, connect=10.0),
            transport=httpx.AsyncHTTPTransport(
                verify=verify,
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
                socket_options=SOCKET_OPTIONS,
            ),
        )
        self._closed = False
        self._served: list[Kind] = []

    async def open(self) -> HttpStore:
        """Learn the server's kinds (discovery); `Error` if it cannot be reached."""
        try:
            self._served = await self._discover()
        except BaseException:
            await self.close()
            raise
        return self

    async def _discover(self) -> list[Kind]:
        versions = ["v1"] if await self._optional("/api") else []
        versions += group_versions(await self._optional("/apis"))
        kinds: list[Kind] = []
        for resource_list in await asyncio.gather(
            *(self._optional(group_path(v)) for v in versions)
        ):
            kinds += kinds_of(resource_list)
        return learn(self.registry, kinds)

    async def _optional(self, path: str) -> Any:
        """The body at `path`, or None if the server has no such path."""
        response = await self._send("GET", path)
        if response.status_code == 404:
            return None
        return self._answer(response)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = JSON,
    ) -> httpx.Response:
        if self._closed:
            raise StoreClosed("the store is closed")
        content = None if body is None else codec.encode(body)
        headers = {"Content-Type": content_type} if content is not None else None
        try:
            return await self._client.request(
                method, path, params=params, content=content, headers=headers
            )
        except httpx.TransportError as exc:
            if self._closed:
                raise StoreClosed("the store is closed") from None
            raise unreachable(self.server, exc, self.credentials) from None

    def _answer(self, response: httpx.Response) -> Any:
        body = _decode(response)
        if response.is_success:
            return body
        raise status_error(response.status_code, body, self.credentials)

    async def _write(self, method: str, path: str, options: WriteOptions, **kwargs: Any) -> Object:
        """`_object` for a write, with the query of its `options`."""
        params: dict[str, str] = {}
        if options.dry_run:
            params["dryRun"] = "All"
        manager = options.actor.manager if options.actor is not None else None
        if manager and manager != USER_AGENT:
            params["fieldManager"] = manager
        return await self._object(method, path, params=params or None, **kwargs)

    async def _object(self, method: str, path: str, **kwargs: Any) -> Object:
        body = self._answer(await self._send(method, path, **kwargs))
        if not isinstance(body, dict):
            raise Error(f"the server answered {method} {path} with no object")
        return body

    async def create(self, obj: Object, *, options: WriteOptions = NO_OPTIONS) -> Object:
        kind = self.registry.for_object(_mapping(obj))
        _name_of(obj)
        path = collection_path(kind, _namespace_of(kind, obj))
        return await self._write("POST", path, options, body=obj)

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = "default"
    ) -> Object:
        k = self.registry.get(api_version, kind)
        return await self._object("GET", item_path(k, name, namespace))

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
    ) -> tuple[builtins.list[Object], int]:
        items: builtins.list[Object] = []
        revision = 0
        async for page, page_revision in self.list_pages(
            api_version, kind, namespace, label_selector
        ):
            items.extend(page)
            revision = page_revision
        return items, revision

    async def list_encoded(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
    ) -> tuple[builtins.list[bytes], int]:
        items, revision = await self.list(api_version, kind, namespace, label_selector)
        return [codec.encode(obj) for obj in items], revision

    async def list_pages(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
        *,
        page_size: int = PAGE_SIZE,
    ) -> AsyncIterator[tuple[builtins.list[Object], int]]:
        k = self.registry.get(api_version, kind)
        path = collection_path(k, namespace)
        params = {**_list_params(label_selector), "limit": str(page_size)}
        while True:
            body = self._answer(await self._send("GET", path, params=params))
            yield [_item(o, k) for o in body.get("items") or ()], _list_revision(body)
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                return
            params["continue"] = token

    async def update(self, obj: Object, *, options: WriteOptions = NO_OPTIONS) -> Object:
        kind = self.registry.for_object(_mapping(obj))
        path = item_path(kind, _name_of(obj), _namespace_of(kind, obj))
        return await self._write("PUT", path, options, body=obj)

    async def update_status(self, obj: Object, *, options: WriteOptions = NO_OPTIONS) -> Object:
        kind = self.registry.for_object(_mapping(obj))
        path = item_path(kind, _name_of(obj), _namespace_of(kind, obj)) + "/status"
        return await self._write("PUT", path, options, body=obj)

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Any,
        namespace: str | None = "default",
        patch_type: str = "merge",
        *,
        options: WriteOptions = NO_OPTIONS,
    ) -> Object:
        k = self.registry.get(api_version, kind)
        content_type = PATCH_CONTENT_TYPES.get(patch_type)
        if content_type is None:
            raise Invalid(f"{patch_type!r}: want 'merge' or 'json'", field="patch_type")
        if patch_type == "merge" and not isinstance(patch, dict):
            raise Invalid("a merge patch must be a JSON object", field="patch")
        if patch_type == "json" and not (
            isinstance(patch, list) and all(isinstance(op, dict) for op in patch)
        ):
            raise Invalid("a JSON patch must be a list of operations", field="patch")
        path = item_path(k, name, namespace)
        return await self._write("PATCH", path, options, body=patch, content_type=content_type)

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = "default",
        *,
        propagation_policy: str = "Background",
        uid: str | None = None,
        resource_version: str | None = None,
        options: WriteOptions = NO_OPTIONS,
    ) -> Object:
        k = self.registry.get(api_version, kind)
        deleted = await self._write(
            "DELETE",
            item_path(k, name, namespace),
            options,
            body=delete_options(propagation_policy, uid, resource_version),
        )
        if deleted.get("kind") == "Status":  # removed at once, and the answer says only that
            return _gone_object(k, name, namespace, deleted)
        return deleted

    def watch(
        self,
        api_version: str | None,
        kind: str | None,
        namespace: str | None = None,
        since: int | None = None,
        label_selector: str | Selector | None = None,
    ) -> AsyncIterator[WatchEvent]:
        if kind is None:
            return self._watch_every_kind(namespace, since, label_selector)
        k = self.registry.get(api_version or "", kind)
        return self._watch(k, namespace, since, label_selector)

    async def _watch(
        self,
        kind: Kind,
        namespace: str | None,
        since: int | None,
        label_selector: str | Selector | None,
    ) -> AsyncIterator[WatchEvent]:
        """One kind's watch, resumed from the last revision seen (events and bookmarks)
        when its stream ends or breaks."""
        revision = await self.revision() if since is None else since
        path = collection_path(kind, namespace)
        base = {**_list_params(label_selector), "watch": "true", "allowWatchBookmarks": "true"}
        failures = 0
        while True:
            params = {**base, "resourceVersion": str(revision)}
            if self._closed:
                raise StoreClosed("the store is closed")
            try:
                async with self._client.stream("GET", path, params=params) as response:
                    if not response.is_success:
                        await response.aread()
                        self._answer(response)
                    async for line in response.aiter_lines():
                        if not line.strip():
                            continue
                        failures = 0
                        event = _watch_event(codec.decode(line), self.credentials)
                        # (max: since=0's initial ADDED events come by name, not revision)
                        revision = max(revision, event.revision)
                        if event.type != "BOOKMARK":
                            kind_of_event = cast("EventType", event.type)
                            obj = _item(event.object, kind)
                            yield WatchEvent(kind_of_event, obj, event.revision)
            except httpx.TransportError as exc:
                if self._closed:
                    raise StoreClosed("the store is closed") from None
                if failures >= len(RECONNECT_DELAYS):
                    lost = f"lost the watch of {kind.plural} at {self.server}: {exc}"
                    raise Error(lost) from None
                await asyncio.sleep(RECONNECT_DELAYS[failures])
                failures += 1

    async def _watch_every_kind(
        self,
        namespace: str | None,
        since: int | None,
        label_selector: str | Selector | None,
    ) -> AsyncIterator[WatchEvent]:
        """Every served kind's watch, merged in revision order (see the module docstring)."""
        start = await self.revision() if since is None else since
        merged: asyncio.Queue[WatchEvent | BaseException] = asyncio.Queue()

        async def pump(kind: Kind) -> None:
            try:
                async for event in self._watch(kind, None, start, label_selector):
                    merged.put_nowait(event)
            except BaseException as exc:  # handed to the reader, which raises it
                merged.put_nowait(exc)

        kinds = self._served or builtins.list(self.registry)
        pumps = [asyncio.ensure_future(pump(k)) for k in kinds]
        waiting: dict[int, WatchEvent] = {}
        after = start
        try:
            while True:
                if after + 1 not in waiting:
                    timeout = GAP_WAIT if waiting else None
                    try:
                        got = await asyncio.wait_for(merged.get(), timeout)
                    except TimeoutError:
                        after = min(waiting) - 1  # the revisions between were not ours
                        continue
                    if isinstance(got, BaseException):
                        raise got
                    if got.revision > after:
                        waiting[got.revision] = got
                    continue
                event = waiting.pop(after + 1)
                after = event.revision
                if namespace is None or event.object["metadata"].get("namespace") == namespace:
                    yield event
        finally:
            for task in pumps:
                task.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)

    async def revision(self) -> int:
        """The store's revision: the `resourceVersion` of a list of at most one object."""
        kinds = self._served or builtins.list(self.registry)
        if not kinds:
            raise Error(f"the server at {self.server} serves no kinds")
        path = collection_path(kinds[0], None)
        return _list_revision(self._answer(await self._send("GET", path, params={"limit": "1"})))

    async def compact(self, revision: int) -> None:
        if self._closed:
            raise StoreClosed("the store is closed")
        raise Invalid(
            f"{self.server}: the server owns its history and compacts it; a client cannot",
            field="store",
        )

    async def close(self) -> None:
        self._closed = True
        await self._client.aclose()


def delete_options(
    propagation_policy: str, uid: str | None, resource_version: str | None
) -> dict[str, Any]:
    """A `DeleteOptions` body."""
    options: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": propagation_policy,
    }
    preconditions = {"uid": uid, "resourceVersion": resource_version}
    if any(v is not None for v in preconditions.values()):
        options["preconditions"] = {k: v for k, v in preconditions.items() if v is not None}
    return options


def _gone_object(kind: Kind, name: str, namespace: str | None, status: Object) -> Object:
    """What a `Status` answering a delete says of the object it removed: its identity (the
    API server answers the object itself for custom resources, a `Status` for others)."""
    details = status.get("details") if isinstance(status.get("details"), dict) else {}
    meta: dict[str, Any] = {"name": name}
    if kind.namespaced:
        meta["namespace"] = namespace or "default"
    if isinstance(details, dict) and details.get("uid"):
        meta["uid"] = details["uid"]
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": meta}


@dataclass(frozen=True, slots=True)
class _Event:
    type: str
    object: Object
    revision: int


def _watch_event(line: Any, credentials: Credentials) -> _Event:
    """One line of a watch stream; an `ERROR` event is raised as its error (410: `Gone`)."""
    if not isinstance(line, dict) or not isinstance(line.get("object"), dict):
        raise Error(f"the server sent a watch event that is not one: {line!r:.80}")
    kind, obj = line.get("type"), line["object"]
    if kind == "ERROR":
        raise status_error(int(obj.get("code") or 500), obj, credentials)
    if kind not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
        raise Error(f"the server sent a watch event of unknown type {kind!r:.40}")
    return _Event(kind, obj, _revision_of(obj))


def _mapping(obj: Any) -> Object:
    if not isinstance(obj, dict):
        raise Invalid("an object must be a mapping")
    return obj


# -- the synchronous reader ----------------------------------------------------------------


class HttpReader:
    """The `Reader` over the API (httpx's synchronous client): `get` and `list` as
    `HttpStore` answers them. Discovery runs when a kind is not found (it becomes the
    registry's `refresh` while the reader is open, unless one is set), or by `discover`."""

    def __init__(
        self, server: str, registry: Registry, credentials: Credentials | None = None
    ) -> None:
        self.server = check_server_url(server)
        self.registry = registry
        self.credentials = credentials or Credentials()
        verify = self.credentials.verify()
        self._client = httpx.Client(
            base_url=self.server,
            headers=self.credentials.headers(),
            verify=verify,
            timeout=httpx.Timeout(30.0, connect=10.0),
            transport=httpx.HTTPTransport(verify=verify, socket_options=SOCKET_OPTIONS),
        )
        self._refreshes = registry.refresh is None
        if self._refreshes:
            registry.refresh = self.discover

    def discover(self) -> None:
        """Learn the kinds the server serves (`learn`)."""
        versions = ["v1"] if self._optional("/api") else []
        versions += group_versions(self._optional("/apis"))
        kinds: builtins.list[Kind] = []
        for version in versions:
            kinds += kinds_of(self._optional(group_path(version)))
        learn(self.registry, kinds)

    def _optional(self, path: str) -> Any:
        response = self._send(path)
        return None if response.status_code == 404 else self._answer(response)

    def _send(self, path: str, params: dict[str, str] | None = None) -> httpx.Response:
        try:
            return self._client.get(path, params=params)
        except httpx.TransportError as exc:
            raise unreachable(self.server, exc, self.credentials) from None

    def _answer(self, response: httpx.Response) -> Any:
        body = _decode(response)
        if response.is_success:
            return body
        raise status_error(response.status_code, body, self.credentials)

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = "default"
    ) -> Object:
        k = self.registry.get(api_version, kind)
        body = self._answer(self._send(item_path(k, name, namespace)))
        if not isinstance(body, dict):
            raise Error("the server answered a get with no object")
        return body

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
    ) -> tuple[builtins.list[Object], int]:
        k = self.registry.get(api_version, kind)
        path = collection_path(k, namespace)
        params = {**_list_params(label_selector), "limit": str(PAGE_SIZE)}
        items: builtins.list[Object] = []
        while True:
            body = self._answer(self._send(path, params))
            items += [_item(o, k) for o in body.get("items") or ()]
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                return items, _list_revision(body)
            params["continue"] = token

    def close(self) -> None:
        if self._refreshes and self.registry.refresh == self.discover:
            self.registry.refresh = None
        with contextlib.suppress(Exception):
            self._client.close()
