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
  it stands for (`status_error`, in `setpoint.store.http_wire` with the credentials, the
  paths and discovery's answers): NotFound, AlreadyExists, Conflict, Invalid (with the field
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
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import httpx

from setpoint.errors import (
    Error,
    Invalid,
    StoreClosed,
)
from setpoint.model import Kind, Object, Registry, Selector, codec
from setpoint.store.base import NO_OPTIONS, WatchEvent, WriteOptions
from setpoint.store.http_wire import (
    JSON,
    USER_AGENT,
    Credentials,
    check_server_url,
    collection_path,
    group_path,
    group_versions,
    item_of,
    item_path,
    kinds_of,
    learn,
    list_params,
    list_revision,
    name_of,
    namespace_of,
    revision_of,
    status_error,
    unreachable,
)
from setpoint.tasks import cancel_and_wait

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


def _answered(response: httpx.Response, credentials: Credentials) -> Any:
    """The decoded body of a success; else the error it stands for (`status_error`)."""
    body = _decode(response)
    if response.is_success:
        return body
    raise status_error(response.status_code, body, credentials)


def _decode(response: httpx.Response) -> Any:
    try:
        return codec.decode(response.content)
    except ValueError:
        return None


# -- the async store -----------------------------------------------------------------------


def _client_settings(server: str, credentials: Credentials) -> dict[str, Any]:
    """What both clients are made with (their transports are told `verify` again): the
    server, the headers, how to check the server and the timeouts."""
    return {
        "base_url": server,
        "headers": credentials.headers(),
        "verify": credentials.verify(),
        "timeout": httpx.Timeout(30.0, connect=10.0),
    }


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
        settings = _client_settings(self.server, self.credentials)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
        self._client = httpx.AsyncClient(
            **settings,
            transport=httpx.AsyncHTTPTransport(
                verify=settings["verify"], limits=limits, socket_options=SOCKET_OPTIONS
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
        return _answered(response, self.credentials)

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
        name_of(obj)
        path = collection_path(kind, namespace_of(kind, obj))
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
        params = {**list_params(label_selector), "limit": str(page_size)}
        while True:
            body = self._answer(await self._send("GET", path, params=params))
            yield [item_of(o, k) for o in body.get("items") or ()], list_revision(body)
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                return
            params["continue"] = token

    async def update(self, obj: Object, *, options: WriteOptions = NO_OPTIONS) -> Object:
        kind = self.registry.for_object(_mapping(obj))
        path = item_path(kind, name_of(obj), namespace_of(kind, obj))
        return await self._write("PUT", path, options, body=obj)

    async def update_status(self, obj: Object, *, options: WriteOptions = NO_OPTIONS) -> Object:
        kind = self.registry.for_object(_mapping(obj))
        path = item_path(kind, name_of(obj), namespace_of(kind, obj)) + "/status"
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
        base = {**list_params(label_selector), "watch": "true", "allowWatchBookmarks": "true"}
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
                            obj = item_of(event.object, kind)
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
            await cancel_and_wait(pumps)

    async def revision(self) -> int:
        """The store's revision: the `resourceVersion` of a list of at most one object."""
        kinds = self._served or builtins.list(self.registry)
        if not kinds:
            raise Error(f"the server at {self.server} serves no kinds")
        path = collection_path(kinds[0], None)
        return list_revision(self._answer(await self._send("GET", path, params={"limit": "1"})))

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
    return _Event(kind, obj, revision_of(obj))


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
        settings = _client_settings(self.server, self.credentials)
        self._client = httpx.Client(
            **settings,
            transport=httpx.HTTPTransport(verify=settings["verify"], socket_options=SOCKET_OPTIONS),
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
        return _answered(response, self.credentials)

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
        params = {**list_params(label_selector), "limit": str(PAGE_SIZE)}
        items: builtins.list[Object] = []
        while True:
            body = self._answer(self._send(path, params))
            items += [item_of(o, k) for o in body.get("items") or ()]
            token = (body.get("metadata") or {}).get("continue")
            if not token:
                return items, list_revision(body)
            params["continue"] = token

    def close(self) -> None:
        if self._refreshes and self.registry.refresh == self.discover:
            self.registry.refresh = None
        with contextlib.suppress(Exception):
            self._client.close()
