"""The API as an ASGI app: `create_app(store, auth=...)` routes a request to discovery,
OpenAPI or resources, after authentication, and turns every failure into a `Status`.

    app = create_app(store, auth=Authenticator.from_file("tokens.csv"))
    # serve it with `setpoint.api.server.serve`, or any ASGI server (uvicorn, hypercorn)

A request's path: the browser-safety checks (`setpoint.api.browser_safety`: Host, Origin,
a write's content type; a refusal is answered before anything else) -> authenticate
(`setpoint.api.auth`: client certificate, bearer token, or anonymous reads when allowed)
-> route (`/version`, `/api`, `/apis`, `/openapi/v2`, `/openapi/v3`, `/healthz`; the
dashboard's `/ui/` and read endpoints, `setpoint.api.dashboard` and `.insight`, and its
one-step login, `.login`) -> for a resource, find its kind in `store.registry`, authorize
the verb on that kind for the caller's role (discovery and OpenAPI: any authenticated
caller), and let `setpoint.api.resources` do it with the store. An `setpoint.Error` raised
on the way becomes the Status `setpoint.api.status` maps it to; any other exception is
logged with its traceback and answered with a 500 Status naming only its class. Warnings
admission webhooks answered a write with are sent as `Warning` headers (`warning_header`),
as kube-apiserver sends them (kubectl prints them).

The app holds no connection limits: those belong to the server (`setpoint.api.server`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from setpoint import __version__
from setpoint.api import dashboard, discovery, insight, openapi
from setpoint.api.auth import CLIENT_SUBJECT, NOBODY_CHECKS, Authenticator, User, authorize
from setpoint.api.browser_safety import LOOPBACK_ONLY, HostRules, refusal
from setpoint.api.in_flight import InFlight, is_long_running, too_many
from setpoint.api.login import LoginCodes
from setpoint.api.query import PATCH_TYPES, ResourcePath, media_type, parse_path
from setpoint.api.resources import (
    ApiSettings,
    Resources,
    json_response,
    kind_for,
    target_of,
    verb_of,
)
from setpoint.api.status import Target, status, status_of
from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import Error, NotFound
from setpoint.model import Kind
from setpoint.store.base import Store
from setpoint.store.webhooks import admission_warnings

log = logging.getLogger("setpoint.api")

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]

Endpoint = Callable[[Request], Awaitable[Response]]


def create_app(
    store: Store,
    *,
    auth: Authenticator | None,
    settings: ApiSettings | None = None,
    clock: Clock = SYSTEM_CLOCK,
    hosts: HostRules = LOOPBACK_ONLY,
    login: LoginCodes | None = None,
) -> Starlette:
    """The API app serving `store` to requests naming a Host of `hosts` (loopback names
    by default). `auth=None` lets every caller do everything: only for a server on
    loopback (`setpoint.api.auth.check_bind`). With `login`, the dashboard's one-step
    login is served too (`setpoint.api.login`)."""
    api = _Api(store, auth, settings or ApiSettings(), clock)
    core_path = api.guard(api.core_path)
    groups_path = api.guard(api.groups_path)
    routes = [
        # before the `/apis/...` catch-all:
        *(login.routes(api.user) if login is not None else []),
        *insight.routes(store, api.user, api.guard, api.resources.watches, api.settings.watch),
        *dashboard.routes(),
        Route("/version", api.guard(api.version), methods=["GET", "HEAD"]),
        Route("/api", api.guard(api.core), methods=["GET", "HEAD"]),
        Route("/api/{rest:path}", core_path, methods=METHODS),
        Route("/apis", api.guard(api.groups), methods=["GET", "HEAD"]),
        Route("/apis/{rest:path}", groups_path, methods=METHODS),
        Route("/openapi/v2", api.guard(api.openapi_v2), methods=["GET", "HEAD"]),
        Route("/openapi/v3", api.guard(api.openapi_index), methods=["GET", "HEAD"]),
        Route("/openapi/v3/{rest:path}", api.guard(api.openapi_path), methods=["GET", "HEAD"]),
        Route("/healthz", _ok, methods=["GET", "HEAD"]),
        Route("/livez", _ok, methods=["GET", "HEAD"]),
        Route("/readyz", _ok, methods=["GET", "HEAD"]),
    ]
    app = _ApiApp(
        routes=routes,
        exception_handlers={HTTPException: _http_exception, Exception: _unexpected},
    )
    app.resource_paths = (("/api/", core_path), ("/apis/", groups_path))
    app.hosts = hosts
    app.in_flight = InFlight(api.settings.max_requests_in_flight, api.settings.max_writes_in_flight)
    app.state.watches = api.resources.watches  # open and dropped watches (WatchCounts)
    return app


class _ApiApp(Starlette):
    """Starlette, with resource requests (`/api/...`, `/apis/...`) dispatched straight to
    their endpoint: the same endpoint the routes name, without Starlette's per-request
    middleware and route scan (most of a write's cost before). What such a request could
    meet there is kept: its endpoint is `guard`ed (every failure a Status), a failure
    while the response is sent is answered as `_unexpected` (if nothing was sent yet)
    and raised to the server, as Starlette's ServerErrorMiddleware does. Anything else
    (insight's routes under `/apis/`, methods no route allows, the rest of the app)
    goes through Starlette. Every HTTP request passes `browser_safety.refusal` first, then
    (unless it is a watch) the bound on requests in flight (`setpoint.api.in_flight`)."""

    resource_paths: tuple[tuple[str, Endpoint], ...] = ()
    hosts: HostRules = LOOPBACK_ONLY
    in_flight: InFlight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            refused = refusal(scope["method"], scope.get("scheme", "http"), headers, self.hosts)
            if refused is not None:
                body = status_of(refused)
                await json_response(body, body["code"])(scope, receive, send)
                return
            if not is_long_running(scope["path"], scope.get("query_string", b"")):
                await self._counted(scope, receive, send)
                return
        await self._answer(scope, receive, send)

    async def _counted(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a request counted in flight, or a 429 beyond the bound (`in_flight`)."""
        method = scope["method"]
        if not self.in_flight.enter(method):
            body, headers = too_many(method)
            response = json_response(body, 429)
            response.headers.update(headers)
            await response(scope, receive, send)
            return
        try:
            await self._answer(scope, receive, send)
        finally:
            self.in_flight.leave(method)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self._resource_endpoint(scope)
        if endpoint is None:
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        request = Request(scope, receive, send)
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            warnings: list[str] = []
            admission_warnings.set(warnings)  # this request's task only
            response = await endpoint(request)
            for warning in warnings:
                response.headers.append("Warning", warning_header(warning))
            await response(scope, receive, sending)
        except Exception as exc:
            if not started:
                await (await _unexpected(request, exc))(scope, receive, send)
            raise

    def _resource_endpoint(self, scope: Scope) -> Endpoint | None:
        """The endpoint of a resource request (its `rest` set as Starlette's route would)."""
        if scope["type"] != "http" or scope["method"] not in METHODS:
            return None
        path = _route_path(scope)
        if "\n" in path or path.startswith(_INSIGHT):  # what the routes' patterns decide
            return None
        for prefix, endpoint in self.resource_paths:
            if path.startswith(prefix):
                scope["path_params"] = {"rest": path[len(prefix) :]}
                return endpoint
        return None


_INSIGHT = insight.PREFIX + "/"


def warning_header(text: str) -> str:
    """A `Warning` header's value, as kube-apiserver writes one (code 299, agent `-`): the
    text on one line of printable ASCII, quoted, at most 1024 characters."""
    printable = "".join(c if " " <= c <= "~" else " " for c in " ".join(text.split()))[:1024]
    escaped = printable.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


def _route_path(scope: Scope) -> str:
    """The path the routes match: without the app's root path, as Starlette's router."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] == "/":
        return path[len(root) :]
    return path


async def _ok(request: Request) -> Response:
    return PlainTextResponse("ok")


async def _http_exception(request: Request, exc: Exception) -> Response:
    code = exc.status_code if isinstance(exc, HTTPException) else 500
    message = "the server could not find the requested resource" if code == 404 else str(exc)
    return json_response(status(code, message), code)


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    return json_response(status_of(exc), 500)


class _Api:
    def __init__(
        self, store: Store, auth: Authenticator | None, settings: ApiSettings, clock: Clock
    ) -> None:
        self.store = store
        self.auth = auth
        self.settings = settings
        self.resources = Resources(store, settings, clock)

    def guard(self, endpoint: Endpoint) -> Endpoint:
        """`endpoint` with every failure answered as a Status."""

        async def guarded(request: Request) -> Response:
            try:
                return await endpoint(request)
            except Error as exc:
                body = status_of(exc, request.state.target if _has_target(request) else None)
                return json_response(body, body["code"])
            except Exception as exc:
                return await _unexpected(request, exc)

        return guarded

    def user(self, request: Request) -> User:
        """Who sent `request` (`Unauthorized` if nobody the server knows), kept as
        `request.state.user` (the server's connection limits and the watches' memory budget
        read it there)."""
        if self.auth is None:
            user = NOBODY_CHECKS
        else:
            user = self.auth.authenticate(
                request.headers.get("authorization"), request.scope.get(CLIENT_SUBJECT)
            )
        request.state.user = user
        return user

    # -- discovery -----------------------------------------------------------------------

    async def version(self, request: Request) -> Response:
        self.user(request)
        return json_response(discovery.version_info(__version__))

    async def core(self, request: Request) -> Response:
        self.user(request)
        return json_response(discovery.core_versions())

    async def groups(self, request: Request) -> Response:
        self.user(request)
        return json_response(discovery.group_list(self.store.registry))

    async def core_path(self, request: Request) -> Response:
        user = self.user(request)
        segments = request.path_params["rest"].strip("/").split("/")
        if segments == [""]:  # `/api/`, as kr8s asks: Kubernetes serves it as `/api`
            return json_response(discovery.core_versions())
        if segments[0] != "v1":
            raise NotFound(f"the server does not serve version {segments[0]!r} of the core group")
        if len(segments) == 1:
            return self._resource_list("v1")
        return await self._resource(request, user, "v1", segments[1:])

    async def groups_path(self, request: Request) -> Response:
        user = self.user(request)
        segments = request.path_params["rest"].strip("/").split("/")
        if segments == [""]:
            return json_response(discovery.group_list(self.store.registry))
        if len(segments) == 1:
            group = discovery.group(self.store.registry, segments[0])
            if group is None:
                raise NotFound(f"the server does not serve the group {segments[0]!r}")
            return json_response(group)
        api_version = f"{segments[0]}/{segments[1]}"
        if len(segments) == 2:
            return self._resource_list(api_version)
        return await self._resource(request, user, api_version, segments[2:])

    def _resource_list(self, api_version: str) -> Response:
        found = discovery.resource_list(self.store.registry, api_version)
        if found is None:
            raise NotFound(f"the server does not serve {api_version}")
        return json_response(found)

    # -- resources -----------------------------------------------------------------------

    async def _resource(
        self, request: Request, user: User, api_version: str, segments: list[str]
    ) -> Response:
        path = parse_path(api_version, segments)
        if path is None:
            raise NotFound("the server could not find the requested resource")
        request.state.target = Target(resource=path.resource, name=path.name or "")
        verb = verb_of(request.method, path, dict(request.query_params))
        kind: Kind | None = None
        with contextlib.suppress(NotFound):  # unknown: only a role for every kind passes
            kind = kind_for(self.store.registry, path.api_version, path.resource)
        authorize(user, verb, kind, _shown(path))
        if (
            verb == "patch"
            and PATCH_TYPES.get(media_type(request.headers.get("content-type"))) == "apply"
        ):
            authorize(user, "create", kind, _shown(path))  # an apply creates what is missing
        if kind is not None:  # details name the group too, when known
            request.state.target = target_of(kind, path.name)
        return await self.resources.handle(request, path, user.name)

    # -- OpenAPI -------------------------------------------------------------------------

    async def openapi_v2(self, request: Request) -> Response:
        self.user(request)
        body, media_type = openapi.v2_document(request.headers.get("accept", ""))
        return Response(body, media_type=media_type)

    async def openapi_index(self, request: Request) -> Response:
        self.user(request)
        index = discovery.openapi_index(self.store.registry)
        index["paths"].update(openapi.index(self.store.registry)["paths"])
        return json_response(index)

    async def openapi_path(self, request: Request) -> Response:
        """One group-version's document: the schemas of `setpoint.api.openapi` with the
        server's own paths (`discovery.openapi_paths`) where it has none."""
        self.user(request)
        segments = request.path_params["rest"].strip("/").split("/")
        if segments == ["api", "v1"]:
            group, version = "", "v1"
        elif len(segments) == 3 and segments[0] == "apis":
            group, version = segments[1], segments[2]
        else:
            raise NotFound("no OpenAPI document at this path")
        document = openapi.group_version(self.store.registry, group, version)
        paths = document.setdefault("paths", {})
        for path, item in discovery.openapi_paths(self.store.registry, group, version).items():
            paths.setdefault(path, item)
        return json_response(document)


def _has_target(request: Request) -> bool:
    return hasattr(request.state, "target")


def _shown(path: ResourcePath) -> str:
    """How a Forbidden message names what was asked for."""
    where = f" in the namespace {path.namespace!r}" if path.namespace else ""
    sub = f"/{path.subresource}" if path.subresource else ""
    name = f' "{path.name}"' if path.name else ""
    return f"{path.resource}{sub}{name}{where}"
