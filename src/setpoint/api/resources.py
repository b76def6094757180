"""Resource requests: GET/POST a collection, GET/PUT/PATCH/DELETE an object, its `status`
and `scale` subresources, and watches, each carried out with the `Store` calls the CLI
makes. No validation of its own: a write goes through `Store.create/update/patch/delete`
(admission in `setpoint.model`, rules in `setpoint.store.rules`) with its `WriteOptions`:
a dry run (`dryRun=All`) is the store's, and the actor is the authenticated user, the
field manager (`fieldManager`, else the User-Agent's product) and the User-Agent, kept
with the write's revision (the timeline's "who"); server-side apply is
`setpoint.store.apply`; a PATCH or PUT that names a `fieldManager` records the fields it
changes as that manager's (`WriteOptions.record_fields`; the store does so for any writer
of an object that has managed fields). `kubectl get`'s Accept header gets a Table
(`setpoint.api.tables`); one asking `as=PartialObjectMetadata(List)` gets the metadata
only.

Reading bodies: at most `ApiSettings.max_body_bytes` (413 before reading when the
Content-Length says more, else as soon as the stream passes it), within
`body_timeout` seconds, and parsed by `setpoint.model.manifests.parse_manifests` with
the same limits (size, depth, aliases). An undecodable body is a 400; a content type
other than JSON, YAML or a patch type is a 415.

Lists are read in one store snapshot, each object as the JSON the store holds
(`Store.list_encoded`), and a page of plain objects is that JSON copied into the answer,
never decoded; with `limit` the rest is kept for a while (`ListSnapshots`) and served page
by page through `continue` tokens, so every page belongs to the same revision (an expired
token is 410 Gone: list again).
"""

from __future__ import annotations

import asyncio
import copy
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from setpoint.api import protobuf
from setpoint.api.query import (
    PATCH_TYPES,
    ContinueToken,
    FieldSelector,
    ResourcePath,
    answer_form,
    flag,
    media_type,
    non_negative_int,
    wants_table,
)
from setpoint.api.status import Target, success
from setpoint.api.tables import partial_metadata, table
from setpoint.api.watch import WatchCounts, WatchLimits, WatchRequest, WatchStream
from setpoint.clock import Clock
from setpoint.errors import (
    BadRequest,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    RequestEntityTooLarge,
    UnsupportedMediaType,
)
from setpoint.model import Kind, Object, Registry, Selector, apply_patch, codec
from setpoint.model.manifests import Limits, parse_manifests
from setpoint.runtime.scale import Scale, read_scale, scale_of, write_scale
from setpoint.store.base import Actor, Store, WriteOptions

MAX_BODY_BYTES = 3 * 1024 * 1024
"""Request bodies over 3 MiB are refused (413), as the Kubernetes API server's limit."""

_STATUS_RETRIES = 16


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """Limits and knobs of the API app (the HTTP server's own are in `ServerLimits`)."""

    max_body_bytes: int = MAX_BODY_BYTES
    body_timeout: float = 30.0
    """A request body must arrive within this many seconds (a trickled one is refused)."""
    watch: WatchLimits = field(default_factory=WatchLimits)
    list_snapshot_ttl: float = 60.0
    """How long the rest of a paged list is kept for its `continue` token."""
    max_list_snapshots: int = 16
    max_requests_in_flight: int = 400
    """Requests other than writes answered at once (watches aside); beyond, a 429."""
    max_writes_in_flight: int = 200
    """Writes (POST, PUT, PATCH, DELETE) answered at once; beyond, a 429."""


def json_response(body: Any, status_code: int = 200) -> Response:
    import orjson

    return Response(orjson.dumps(body), status_code=status_code, media_type="application/json")


class ListSnapshots:
    """Recent paged lists (each object as its JSON), by id, bounded in number and age."""

    def __init__(self, ttl: float, limit: int) -> None:
        self.ttl = ttl
        self.limit = limit
        self._kept: OrderedDict[str, tuple[float, list[bytes]]] = OrderedDict()

    def keep(self, items: list[bytes]) -> str:
        self._expire()
        snapshot = secrets.token_hex(8)
        self._kept[snapshot] = (time.monotonic(), items)
        while len(self._kept) > self.limit:
            self._kept.popitem(last=False)
        return snapshot

    def get(self, snapshot: str) -> list[bytes]:
        self._expire()
        kept = self._kept.get(snapshot)
        if kept is None:
            raise Gone(
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter."
            )
        return kept[1]

    def _expire(self) -> None:
        now = time.monotonic()
        for snapshot, (at, _) in list(self._kept.items()):
            if now - at > self.ttl:
                del self._kept[snapshot]


def kind_for(registry: Registry, api_version: str, resource: str) -> Kind:
    kind = registry.for_resource(api_version, resource)
    if kind is not None:
        return kind
    raise NotFound(
        f'the server could not find the requested resource "{resource}" in {api_version}'
    )


def target_of(kind: Kind, name: str | None = None) -> Target:
    return Target(resource=kind.plural, group=kind.group, name=name or "", kind=kind.kind)


def verb_of(method: str, path: ResourcePath, params: dict[str, str]) -> str:
    """The Kubernetes verb of a request (what roles allow)."""
    if method in ("GET", "HEAD"):
        if path.name is None:
            return "watch" if flag(params, "watch") else "list"
        return "get"
    if method == "DELETE" and path.name is None:
        return "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower()
    )


class Resources:
    """Serves resource requests on one store; see the module docstring."""

    def __init__(self, store: Store, settings: ApiSettings, clock: Clock) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.snapshots = ListSnapshots(settings.list_snapshot_ttl, settings.max_list_snapshots)
        self.watches = WatchCounts()

    async def handle(self, request: Request, path: ResourcePath, user: str) -> Response:
        """Serve `request` to the user named `user` (authenticated and authorized already)."""
        request.state.user_name = user
        kind = kind_for(self.store.registry, path.api_version, path.resource)
        namespace = path.namespace
        if namespace is not None and not kind.namespaced:
            raise NotFound(f"{kind.plural} are not namespaced: drop the namespace from the path")
        if namespace is None and kind.namespaced and path.name is not None:
            raise NotFound(f"{kind.plural} are namespaced: give namespaces/NAMESPACE in the path")
        params = dict(request.query_params)
        method = request.method
        if (
            path.subresource not in (None, "status", "scale")
            or (path.subresource == "scale" and kind.scale is None)
            or (path.subresource == "status" and not kind.has_status)
        ):
            raise NotFound(f'{kind.plural} have no subresource "{path.subresource}"')
        if path.name is None:
            if method in ("GET", "HEAD"):
                if flag(params, "watch"):
                    return await self._watch(request, kind, namespace, params)
                return await self._list(request, kind, namespace, params)
            if method == "POST":
                return await self._create(request, kind, namespace, params)
            if method == "DELETE":
                return await self._delete_collection(request, kind, namespace, params)
            raise _method_not_allowed(method)
        name = path.name
        if path.subresource == "scale":
            return await self._scale(request, kind, name, namespace)
        if method in ("GET", "HEAD"):
            obj = await self.store.get(kind.api_version, kind.kind, name, namespace)
            if answer_form(request.headers.get("accept", "")) == "PartialObjectMetadata":
                return json_response(partial_metadata(obj))
            return self._answer(request, kind, obj, params)
        if method == "PUT":
            return await self._update(request, kind, name, namespace, params, path.subresource)
        if method == "PATCH":
            return await self._patch(request, kind, name, namespace, params, path.subresource)
        if method == "DELETE" and path.subresource is None:
            return await self._delete(request, kind, name, namespace, params)
        raise _method_not_allowed(method)

    # -- reads ---------------------------------------------------------------------------

    async def _list(
        self, request: Request, kind: Kind, namespace: str | None, params: dict[str, str]
    ) -> Response:
        """The objects as the store holds them, encoded (`Store.list_encoded`): a page of
        them is passed on as it is, decoded only for a Table, metadata only, or a field
        selector."""
        limit = non_negative_int(params, "limit")
        token = params.get("continue")
        form = answer_form(request.headers.get("accept", ""))
        if token:
            position = ContinueToken.decode(token)
            items = self.snapshots.get(position.snapshot)
            offset, revision = position.offset, position.revision
        else:
            selector = _label_selector(params)
            fields = FieldSelector.parse(params.get("fieldSelector"), kind)
            items, revision = await self.store.list_encoded(
                kind.api_version, kind.kind, namespace, selector
            )
            if fields:
                items = [data for data in items if fields.matches(codec.decode(data))]
            offset = 0
        metadata: dict[str, Any] = {"resourceVersion": str(revision)}
        if limit and offset + limit < len(items):
            snapshot = position.snapshot if token else self.snapshots.keep(items)
            next_token = ContinueToken(snapshot, offset + limit, revision)
            metadata["continue"] = next_token.encode()
            metadata["remainingItemCount"] = len(items) - offset - limit
            page = items[offset : offset + limit]
        else:
            page = items[offset:]
        if form == "Table":
            answer = self._table(kind, [codec.decode(data) for data in page], params)
            answer["metadata"] = metadata
            return json_response(answer)
        if form == "PartialObjectMetadata":
            return json_response(
                {
                    "apiVersion": "meta.k8s.io/v1",
                    "kind": "PartialObjectMetadataList",
                    "metadata": metadata,
                    "items": [partial_metadata(codec.decode(data)) for data in page],
                }
            )
        return Response(
            _list_body(kind.api_version, f"{kind.kind}List", metadata, page),
            media_type="application/json",
        )

    async def _watch(
        self, request: Request, kind: Kind, namespace: str | None, params: dict[str, str]
    ) -> Response:
        selector = _label_selector(params)
        fields = FieldSelector.parse(params.get("fieldSelector"), kind)
        version = params.get("resourceVersion", "")
        initial: list[Object] = []
        send_initial = flag(params, "sendInitialEvents")
        if version in ("", "0") or send_initial:
            items, since = await self.store.list(kind.api_version, kind.kind, namespace, selector)
            initial = [obj for obj in items if fields.matches(obj)]
        else:
            since = _revision(version)
        limits = self.settings.watch
        timeout = non_negative_int(params, "timeoutSeconds")
        as_table = wants_table(request.headers.get("accept", ""))

        def as_row(obj: Object) -> Any:
            return self._table(kind, [obj], params)

        watch = WatchRequest(
            kind=kind,
            namespace=namespace,
            label_selector=selector,
            keep=fields.matches if fields.requirements else None,
            since=since,
            initial=initial,
            encode=as_row if as_table else None,
            bookmarks=flag(params, "allowWatchBookmarks"),
            initial_events_end=send_initial,
            timeout=min(float(timeout), limits.max_timeout) if timeout else limits.max_timeout,
        )
        return WatchStream(self.store, watch, limits, self.watches)

    def _answer(
        self, request: Request, kind: Kind, obj: Object, params: dict[str, str], code: int = 200
    ) -> Response:
        if wants_table(request.headers.get("accept", "")):
            return json_response(self._table(kind, [obj], params), code)
        return json_response(obj, code)

    def _table(self, kind: Kind, objects: list[Object], params: dict[str, str]) -> dict[str, Any]:
        """A meta.k8s.io Table of `objects` (`setpoint.api.tables`)."""
        now = datetime.fromtimestamp(self.clock.now(), tz=UTC)
        include = params.get("includeObject") or "Metadata"
        return table(kind, objects, now=now, include_object=include)

    # -- writes --------------------------------------------------------------------------

    async def _create(
        self, request: Request, kind: Kind, namespace: str | None, params: dict[str, str]
    ) -> Response:
        obj = _object_of(await self._body(request), kind, namespace)
        meta = obj["metadata"]
        if not meta.get("name") and isinstance(meta.get("generateName"), str):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        if isinstance(meta.get("name"), str):
            request.state.target = target_of(kind, meta["name"])
        created = await self.store.create(obj, options=_options(request, params))
        return self._answer(request, kind, created, params, 201)

    async def _update(
        self,
        request: Request,
        kind: Kind,
        name: str,
        namespace: str | None,
        params: dict[str, str],
        subresource: str | None,
    ) -> Response:
        obj = _object_of(await self._body(request), kind, namespace)
        if obj["metadata"].get("name") != name:
            raise BadRequest(
                f"the name of the object ({obj['metadata'].get('name')!r}) does not match the "
                f'name on the URL ("{name}")'
            )
        options = _options(request, params)
        if subresource == "status":
            written = await self.store.update_status(obj, options=options)
        else:
            written = await self.store.update(obj, options=options)
        return self._answer(request, kind, written, params)

    async def _patch(
        self,
        request: Request,
        kind: Kind,
        name: str,
        namespace: str | None,
        params: dict[str, str],
        subresource: str | None,
    ) -> Response:
        patch_type = self._patch_type(request)
        body = await self._body(request, patch=patch_type)
        if patch_type == "apply":
            return await self._apply(request, kind, name, namespace, params, body, subresource)
        options = _options(request, params)
        if subresource == "status":
            written = await self._patch_status(kind, name, namespace, body, patch_type, options)
            return self._answer(request, kind, written, params)
        written = await self.store.patch(
            kind.api_version, kind.kind, name, body, namespace, patch_type, options=options
        )
        return self._answer(request, kind, written, params)

    async def _patch_status(
        self,
        kind: Kind,
        name: str,
        namespace: str | None,
        patch: Any,
        patch_type: str,
        options: WriteOptions,
    ) -> Object:
        """Patch the status only: read, patch, write with compare-and-swap; retried on a
        conflict unless the patch names the resourceVersion it expects."""
        for _ in range(_STATUS_RETRIES):
            current = await self.store.get(kind.api_version, kind.kind, name, namespace)
            patched = apply_patch(current, patch, patch_type)
            expected = (patched.get("metadata") or {}).get("resourceVersion")
            pinned = expected != current["metadata"]["resourceVersion"]
            new = copy.deepcopy(current)
            new["metadata"]["resourceVersion"] = expected
            if patched.get("status") is None:
                new.pop("status", None)
            else:
                new["status"] = patched["status"]
            try:
                return await self.store.update_status(new, options=options)
            except Conflict:
                if pinned:
                    raise
        raise Conflict(f'{kind.kind} "{name}": too many concurrent writers; try again')

    async def _apply(
        self,
        request: Request,
        kind: Kind,
        name: str,
        namespace: str | None,
        params: dict[str, str],
        body: Any,
        subresource: str | None,
    ) -> Response:
        """Server-side apply (`setpoint.store.apply`; `setpoint.model.managed_fields` decides),
        of the object or of its status."""
        from setpoint.store.apply import server_side_apply

        applied = await server_side_apply(
            self.store,
            kind,
            name,
            namespace,
            body,
            field_manager=params.get("fieldManager") or "kubectl",
            force=flag(params, "force"),
            options=_options(request, params),
            subresource=subresource,
        )
        return self._answer(request, kind, applied, params)

    async def _delete(
        self,
        request: Request,
        kind: Kind,
        name: str,
        namespace: str | None,
        params: dict[str, str],
    ) -> Response:
        propagation, uid, version = await self._delete_options(request, params)
        options = _options(request, params)
        last = await self.store.delete(
            kind.api_version,
            kind.kind,
            name,
            namespace,
            propagation_policy=propagation,
            uid=uid,
            resource_version=version,
            options=options,
        )
        if options.dry_run:  # the object as the delete would leave it (or its last state)
            return self._answer(request, kind, last, params)
        meta = last.get("metadata") or {}
        if meta.get("deletionTimestamp") and meta.get("finalizers"):
            try:  # it lingers until its finalizers go: answer with it, as it now is
                current = await self.store.get(kind.api_version, kind.kind, name, namespace)
                return self._answer(request, kind, current, params, 202)
            except NotFound:
                pass
        return json_response(success(target_of(kind, name), meta.get("uid")))

    async def _delete_collection(
        self, request: Request, kind: Kind, namespace: str | None, params: dict[str, str]
    ) -> Response:
        propagation, _, _ = await self._delete_options(request, params)
        selector = _label_selector(params)
        fields = FieldSelector.parse(params.get("fieldSelector"), kind)
        items, revision = await self.store.list(kind.api_version, kind.kind, namespace, selector)
        options = _options(request, params)
        deleted = []
        for obj in items:
            if not fields.matches(obj):
                continue
            meta = obj["metadata"]
            try:
                deleted.append(
                    await self.store.delete(
                        kind.api_version,
                        kind.kind,
                        meta["name"],
                        meta.get("namespace"),
                        propagation_policy=propagation,
                        uid=meta.get("uid"),
                        options=options,
                    )
                )
            except (NotFound, Conflict):
                continue  # gone (or replaced) meanwhile
        return json_response(
            {
                "apiVersion": kind.api_version,
                "kind": f"{kind.kind}List",
                "metadata": {"resourceVersion": str(revision)},
                "items": deleted,
            }
        )

    async def _delete_options(
        self, request: Request, params: dict[str, str]
    ) -> tuple[str, str | None, str | None]:
        """(propagationPolicy, uid and resourceVersion preconditions) of a delete, from
        its DeleteOptions body and query."""
        raw = await self._read(request)
        options: dict[str, Any] = {}
        if raw.strip():
            options = _only_object(
                self._parse(raw, media_type(request.headers.get("content-type")))
            )
        propagation = params.get("propagationPolicy") or options.get("propagationPolicy")
        if propagation is None:
            orphan = options.get("orphanDependents")
            if orphan is None and "orphanDependents" in params:
                orphan = flag(params, "orphanDependents")
            propagation = "Orphan" if orphan else "Background"
        if not isinstance(propagation, str):
            raise BadRequest("propagationPolicy: want Background, Foreground or Orphan")
        preconditions = options.get("preconditions") or {}
        if not isinstance(preconditions, dict):
            raise BadRequest("preconditions: want an object with uid and resourceVersion")
        uid, version = preconditions.get("uid"), preconditions.get("resourceVersion")
        return (
            propagation,
            str(uid) if uid is not None else None,
            str(version) if version is not None else None,
        )

    # -- scale ---------------------------------------------------------------------------

    async def _scale(
        self, request: Request, kind: Kind, name: str, namespace: str | None
    ) -> Response:
        method = request.method
        if method in ("GET", "HEAD"):
            scale = await read_scale(self.store, kind, name, namespace)
            obj = await self.store.get(kind.api_version, kind.kind, name, namespace)
            return json_response(_scale_body(obj, scale))
        if method not in ("PUT", "PATCH"):
            raise _method_not_allowed(method)
        if method == "PUT":
            wanted = _only_object(await self._body(request))
            version = (wanted.get("metadata") or {}).get("resourceVersion")
        else:
            patch_type = self._patch_type(request)
            if patch_type == "apply":
                raise UnsupportedMediaType("server-side apply is not served on /scale")
            patch = await self._body(request, patch=patch_type)
            obj = await self.store.get(kind.api_version, kind.kind, name, namespace)
            current = _scale_body(obj, scale_of(kind, obj))
            wanted = apply_patch(current, patch, patch_type)
            version = (wanted.get("metadata") or {}).get("resourceVersion")
            if version == current["metadata"]["resourceVersion"]:
                version = None  # not asked for: the patch applies to whatever is there
        replicas = (wanted.get("spec") or {}).get("replicas")
        if isinstance(replicas, bool) or not isinstance(replicas, int):
            raise Invalid(f"want a whole number, not {replicas!r}", field="spec.replicas")
        await write_scale(
            self.store,
            kind,
            name,
            namespace,
            replicas,
            resource_version=str(version) if version is not None else None,
            options=WriteOptions(actor=_options(request, {}).actor),
        )
        obj = await self.store.get(kind.api_version, kind.kind, name, namespace)
        return json_response(_scale_body(obj, scale_of(kind, obj)))

    # -- bodies --------------------------------------------------------------------------

    def _patch_type(self, request: Request) -> str:
        content = media_type(request.headers.get("content-type"))
        patch_type = PATCH_TYPES.get(content)
        if patch_type is None:
            raise UnsupportedMediaType(
                f"the body of a PATCH must be one of {', '.join(PATCH_TYPES)}, not "
                f"{content or 'unnamed'!r}"
            )
        return patch_type

    async def _read(self, request: Request) -> bytes:
        """The raw body, within the size and time limits."""
        limit = self.settings.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise RequestEntityTooLarge(f"the request body is over the limit of {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.settings.body_timeout):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise RequestEntityTooLarge(
                            f"the request body is over the limit of {limit} bytes"
                        )
                    chunks.append(chunk)
        except TimeoutError:
            raise BadRequest(
                f"the request body did not arrive within {self.settings.body_timeout:g} s"
            ) from None
        return b"".join(chunks)

    async def _body(self, request: Request, *, patch: str | None = None) -> Any:
        """The body as JSON data: an object (or, for a JSON patch, a list)."""
        raw = await self._read(request)
        content = media_type(request.headers.get("content-type"))
        if patch is not None:
            content = (
                "application/yaml"
                if patch == "apply" and content.endswith("yaml")
                else ("application/json")
            )
        if patch == "json":
            return self._parse(b'{"patch":' + raw + b"\n}", content)["patch"]
        return self._parse(raw, content)

    def _parse(self, raw: bytes, content: str) -> Any:
        if content == protobuf.MEDIA_TYPE:  # kubectl create configmap, secret, namespace
            return protobuf.decode(raw)
        if content in ("", "application/json", "*/*"):
            as_json = True
        elif content in ("application/yaml", "application/x-yaml", "text/yaml"):
            as_json = False
        else:
            raise UnsupportedMediaType(
                f"the body must be application/json or application/yaml, not {content!r}"
            )
        limits = Limits(max_bytes=self.settings.max_body_bytes)
        try:
            manifests = parse_manifests(raw, "request body", as_json=as_json, limits=limits)
        except Invalid as exc:
            raise BadRequest(str(exc)) from None
        if len(manifests) != 1:
            raise BadRequest(f"the request body must hold one object, not {len(manifests)}")
        return manifests[0].obj


def _list_body(
    api_version: str, list_kind: str, metadata: dict[str, Any], items: list[bytes]
) -> bytes:
    """A list's JSON from its objects' JSON, which is copied in, never decoded."""
    head = codec.encode(
        {"apiVersion": api_version, "kind": list_kind, "metadata": metadata, "items": []}
    )
    return b"".join((head[:-2], b",".join(items), b"]}"))


def _method_not_allowed(method: str) -> BadRequest:
    error = BadRequest(f"the server does not allow the method {method} here")
    error.code = 405
    error.reason = "MethodNotAllowed"
    return error


def _manager(request: Request, params: dict[str, str]) -> str:
    """The field manager a plain write is recorded under (`managed_fields.manager_of`)."""
    from setpoint.model.managed_fields import manager_of

    return manager_of(params.get("fieldManager"), request.headers.get("user-agent"))


def _options(request: Request, params: dict[str, str]) -> WriteOptions:
    """The store's options for the write `request` asks for: its dry run, and its actor
    (the user `handle` was given, the field manager, the User-Agent)."""
    agent = request.headers.get("user-agent")
    actor = Actor(request.state.user_name, _manager(request, params), agent)
    return WriteOptions(
        dry_run=_dry_run(params), actor=actor, record_fields=bool(params.get("fieldManager"))
    )


def _dry_run(params: dict[str, str]) -> bool:
    value = params.get("dryRun")
    if value in (None, ""):
        return False
    if value != "All":
        raise BadRequest(f"dryRun={value!r}: the only dry run is All")
    return True


def _label_selector(params: dict[str, str]) -> Selector:
    try:
        return Selector.of(params.get("labelSelector") or None)
    except Invalid as exc:
        raise BadRequest(f"labelSelector: {exc}") from None


def _revision(text: str) -> int:
    try:
        revision = int(text)
    except ValueError:
        revision = -1
    if revision < 0:
        raise BadRequest(f"resourceVersion={text!r}: want a revision this server gave")
    return revision


def _only_object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest("the request body must be a JSON object")
    return value


def _object_of(body: Any, kind: Kind, namespace: str | None) -> Object:
    """The object of a POST or PUT body, checked against the URL: kind, version and namespace."""
    obj = _only_object(body)
    obj.setdefault("apiVersion", kind.api_version)
    obj.setdefault("kind", kind.kind)
    if obj["apiVersion"] != kind.api_version or obj["kind"] != kind.kind:
        raise BadRequest(
            f"the object is a {obj['kind']} of {obj['apiVersion']}, but the URL is for "
            f"{kind.plural} of {kind.api_version}"
        )
    meta = obj.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise Invalid("want an object", field="metadata")
    if kind.namespaced:
        given = meta.get("namespace")
        if given and namespace and given != namespace:
            raise BadRequest(
                "the namespace of the provided object does not match the namespace sent on "
                f"the request ({given!r}, not {namespace!r})"
            )
        if namespace:
            meta["namespace"] = namespace
    return obj


def _scale_body(obj: Object, scale: Scale) -> dict[str, Any]:
    """An autoscaling/v1 Scale of `obj`."""
    meta = obj["metadata"]
    metadata = {
        k: meta[k]
        for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        if k in meta
    }
    status: dict[str, Any] = {"replicas": scale.status_replicas}
    if scale.selector:
        status["selector"] = scale.selector
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": metadata,
        "spec": {"replicas": scale.replicas},
        "status": status,
    }
