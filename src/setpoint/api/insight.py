"""Read endpoints for what the Kubernetes API has no resource for, under the group
`insight.setpoint.dev/v1alpha1`: every object of every kind in one list and one watch, an
object's slice of the timeline, `explain`'s ranked causes, its root blocker, and a Process's
or Job's log (like `pods/log`, with `follow=true`). The dashboard reads these; so may anyone
holding a `view` token.

    (P = /apis/insight.setpoint.dev/v1alpha1, O = P/namespaces/NS/PLURAL/NAME)
    GET P/objects[?labelSelector=..][&watch=true&resourceVersion=N]   (+ healthRules)
    GET P/timeline[?limit=N]
    GET O/timeline
    GET O/explain[?at=TS]
    GET O/why
    GET O/log[?tailLines=N][&follow=true]

Health is `setpoint.insight.health`'s, decided once: each timeline entry that says how
its object is doing carries it (`health`: ready, progressing, failed), `why` carries the
object's, and `objects` sends its rules (`healthRules`) for the page to classify what
comes on the watch the same way, and the kinds it keeps behind a filter (`systemKinds`).

`objects` exists because a browser opens at most six connections to one server over
HTTP/1.1: one watch per kind would starve it. Its watch is the store's watch of all kinds
served by the API's own `WatchStream` (`WatchEvent` JSON lines, its buffer and send limits,
`timeoutSeconds`, `allowWatchBookmarks`, a slow client dropped). The timeline is the one
`setpoint up` records beside a SQLite store (`setpoint.insight.timeline`); the ranking is
`setpoint.insight.ranking`'s and the root-blocker walk `setpoint.insight.blockers`' (what
holds back: `workloads.dependencies.holds`): nothing is ranked or walked a second way. The
log is the file `setpoint logs` reads: its tail read backwards from the end (a big log
is not read whole), followed here on the server's side until the client goes away, with
the values of the Secrets the object's environment takes masked (`***`), as `describe`
masks the output it quotes.

Reads only: no route here writes. Who asks is the app's to say (`user_of`); what they may
read is their role's (`setpoint.api.auth`): an object's timeline, explanation, root blocker
and log need `get` on its kind; `objects` and the whole timeline leave out the kinds the
role may not read (Secrets, for `view`), and so do `explain`'s causes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from setpoint.api.auth import User, authorize, readable_kinds
from setpoint.api.query import flag
from setpoint.api.resources import json_response
from setpoint.api.status import status_of
from setpoint.api.watch import WatchCounts, WatchLimits, WatchRequest, WatchStream, event_line
from setpoint.engine import workspace_of
from setpoint.errors import BadRequest, Error, NotFound
from setpoint.insight.blockers import root_blockers
from setpoint.insight.entries import ObjectRef
from setpoint.insight.health import RULES, entry_health, health
from setpoint.insight.index import TimelineIndex
from setpoint.insight.ranking import (
    RankingSettings,
    confident_causes,
    failure_to_explain,
    target_state,
)
from setpoint.insight.recorder import Recorder
from setpoint.insight.timeline import Timeline, TimelineBackend, timeline_url_of
from setpoint.model import READY, STALLED, Kind, Object, get_condition
from setpoint.model.redaction import Redactor
from setpoint.model.selectors import parse_selector
from setpoint.model.wellknown import child_log_file
from setpoint.store.base import Store
from setpoint.tasks import first_done
from setpoint.workloads.dependencies import Dependency, holds
from setpoint.workloads.secret import resolve_env_in_store

log = logging.getLogger("setpoint.api.insight")

GROUP_VERSION = "insight.setpoint.dev/v1alpha1"
PREFIX = f"/apis/{GROUP_VERSION}"
TIMELINE_LIMIT = 5000
"""The most timeline entries one answer carries (the newest)."""
LOG_FOLLOW_INTERVAL = 0.2
"""How often a followed log file is read again for appended lines (the server's side)."""

Endpoint = Callable[[Request], Awaitable[Response]]
UserOf = Callable[[Request], User]
"""Who sent a request (the app's authentication; `Unauthorized` if nobody)."""


SYSTEM_KINDS = ("ControllerRevision", "CustomResourceDefinition", "Event", "Lease", "Namespace")
"""Kinds the server keeps for itself: the dashboard shows them behind a filter, after what
the user applied and what it made (workloads, Services, Secrets, custom kinds). Namespaces
are there too: the namespace filter names them."""

ALL_KINDS = Kind(GROUP_VERSION, "Object", plural="objects")
"""What the all-kinds watch's BOOKMARKs and log lines name."""


def routes(
    store: Store,
    user_of: UserOf,
    guard: Callable[[Endpoint], Endpoint],
    watches: WatchCounts,
    limits: WatchLimits,
) -> list[Route]:
    """The insight routes on `store`; mount them before the app's `/apis/...` catch-all.
    The all-kinds watch is a `WatchStream` (its limits, counted in `watches`)."""
    ins = _Insight(store, user_of, watches, limits)
    obj = PREFIX + "/namespaces/{namespace}/{plural}/{name}"
    return [
        Route(PREFIX + "/objects", guard(ins.objects), methods=["GET"]),
        Route(PREFIX + "/timeline", guard(ins.timeline), methods=["GET"]),
        Route(obj + "/timeline", guard(ins.object_timeline), methods=["GET"]),
        Route(obj + "/explain", guard(ins.explain), methods=["GET"]),
        Route(obj + "/why", guard(ins.why), methods=["GET"]),
        Route(obj + "/log", guard(ins.log), methods=["GET"]),
    ]


class _AllKindsWatch(WatchStream):
    """A `WatchStream` of the store's watch of every kind (its buffer, limits, bookmarks
    and hang-up detection are the API's own; only what it watches differs)."""

    async def _pump(self) -> None:
        req = self.request
        try:
            async for event in self.store.watch(
                None, None, since=req.since, label_selector=req.label_selector
            ):
                obj = event.object
                if req.keep is not None and not req.keep(obj):
                    continue
                if event.type == "DELETED":
                    obj = {**obj, "metadata": {**obj["metadata"]}}
                    obj["metadata"]["resourceVersion"] = str(event.revision)
                if not self.buffer.put(event_line(event.type, obj), event.revision):
                    log.warning("dropped a watch of every kind: its client reads too slowly")
                    return
        except Error as exc:
            self.buffer.put_last(event_line("ERROR", status_of(exc)))
        finally:
            self.buffer.close()


def state_of(obj: Object) -> str:
    """Ready, Stalled or Reconciling, as the dashboard colours it."""
    status = obj.get("status") or {}
    stalled = get_condition(status, STALLED)
    if stalled is not None and stalled.get("status") == "True":
        return "Stalled"
    ready = get_condition(status, READY)
    if ready is not None and ready.get("status") == "True":
        return "Ready"
    return "Reconciling"


class _Insight:
    def __init__(
        self, store: Store, user_of: UserOf, watches: WatchCounts, limits: WatchLimits
    ) -> None:
        self.store = store
        self.user_of = user_of
        self.watches = watches
        self.limits = limits
        self.timeline_url = timeline_url_of(store)
        self._catching_up = asyncio.Lock()  # one catch-up at a time: many requests, one list
        path = getattr(store, "path", None)  # a SQLite store: children's logs are beside it
        self.log_dir = (
            workspace_of(f"sqlite:///{path}").log_dir
            if isinstance(path, str) and path != ":memory:"
            else workspace_of("memory://").log_dir
        )

    # -- objects -------------------------------------------------------------------------

    async def objects(self, request: Request) -> Response:
        params = request.query_params
        verb = "watch" if flag(params, "watch") else "list"
        user = self.user_of(request)
        selector = params.get("labelSelector") or None
        if verb == "watch":
            since = _int(params.get("resourceVersion") or "0", "resourceVersion")
            timeout = _int(params.get("timeoutSeconds") or "0", "timeoutSeconds")
            request_ = WatchRequest(
                kind=ALL_KINDS,
                namespace=None,
                label_selector=parse_selector(selector),
                keep=self._readable(user, verb),
                since=since,
                initial=[],
                encode=lambda obj: obj,
                bookmarks=flag(params, "allowWatchBookmarks"),
                initial_events_end=False,
                timeout=min(timeout or self.limits.max_timeout, self.limits.max_timeout),
            )
            return _AllKindsWatch(self.store, request_, self.limits, self.watches)
        revision = await self.store.revision()
        items: list[Object] = []
        for kind in readable_kinds(user, self._kinds(), verb):
            found, _ = await self.store.list(kind.api_version, kind.kind, None, selector)
            items += found
        body = {
            "kind": "ObjectList",
            "apiVersion": GROUP_VERSION,
            "metadata": {"resourceVersion": str(revision)},
            "items": items,
            "healthRules": RULES,
            "systemKinds": list(SYSTEM_KINDS),
        }
        return json_response(body)

    def _kinds(self) -> list[Kind]:
        return sorted(self.store.registry, key=lambda k: (k.api_version, k.kind))

    def _readable(self, user: User, verb: str) -> Callable[[Object], bool]:
        """Whether `user` may `verb` an object, by its apiVersion and kind (a kind defined
        while a watch runs is looked up when its first object comes)."""
        known: dict[tuple[str, str], bool] = {}

        def readable(obj: Object) -> bool:
            key = (str(obj.get("apiVersion")), str(obj.get("kind")))
            if key not in known:
                try:
                    known[key] = user.role.may(verb, self.store.registry.get(*key))
                except Error:
                    known[key] = False
            return known[key]

        return readable

    def _hidden(self, user: User) -> frozenset[str]:
        """The kind names of the kinds `user` may not read (their timeline entries are
        left out of what `user` is shown)."""
        kinds = self.store.registry
        return frozenset(k.kind for k in kinds if not user.role.may("get", k))

    # -- timeline and explain ------------------------------------------------------------

    def _open_timeline(self) -> TimelineBackend | None:
        return Timeline.of_store(self.timeline_url) if self.timeline_url is not None else None

    async def _catch_up(self) -> None:
        """Record what the store shows that the timeline does not, unless a live recorder
        keeps it (`Recorder.catch_up`): writes made through this server with no engine
        running, or by a controller with a manager of its own, are then on it too. Requests
        that arrive during one wait for it (and then find little or nothing left to do)
        rather than each listing the store."""
        async with self._catching_up:
            timeline = await asyncio.to_thread(self._open_timeline)
            if timeline is None:
                return
            try:
                await Recorder(self.store, timeline).catch_up()
            finally:
                timeline.close()

    def _entries(
        self,
        ref: ObjectRef | None = None,
        limit: int = TIMELINE_LIMIT,
        hidden: frozenset[str] = frozenset(),
    ) -> list[Any]:
        timeline = self._open_timeline()
        if timeline is None:
            return []
        try:
            about = None
            if ref is not None:
                about = {"kind": ref.kind, "name": ref.name, "namespace": ref.namespace}
            entries = timeline.query(object=about, limit=limit)
        finally:
            timeline.close()
        return [
            _with_health(e, h)
            for e, h in zip(entries, entry_health(entries), strict=True)
            if not _about(e, hidden)
        ]

    async def timeline(self, request: Request) -> Response:
        hidden = self._hidden(self.user_of(request))
        limit = _int(request.query_params.get("limit") or str(TIMELINE_LIMIT), "limit")
        await self._catch_up()
        entries = await asyncio.to_thread(self._entries, None, min(limit, TIMELINE_LIMIT), hidden)
        return json_response({"kind": "Timeline", "apiVersion": GROUP_VERSION, "items": entries})

    async def object_timeline(self, request: Request) -> Response:
        ref = self._ref(request, "timeline")
        await self._catch_up()
        entries = await asyncio.to_thread(self._entries, ref)
        return json_response({"kind": "Timeline", "apiVersion": GROUP_VERSION, "items": entries})

    async def explain(self, request: Request) -> Response:
        ref = self._ref(request, "explain")
        text = request.query_params.get("at")
        at = _float(text, "at") if text else None
        hidden = self._hidden(self.user_of(request))
        await self._catch_up()
        body = await asyncio.to_thread(self._explain, ref, at, None, hidden)
        return json_response(body)

    def _explain(
        self,
        ref: ObjectRef,
        at: float | None,
        limit: int | None,
        hidden: frozenset[str] = frozenset(),
    ) -> dict[str, Any]:
        """`setpoint explain`'s answer for `ref` as JSON: the failure and the ranked causes,
        best first (empty when it is healthy, unknown, or no cause is confident)."""
        body: dict[str, Any] = {"kind": "Explanation", "apiVersion": GROUP_VERSION}
        body.update(object=_ref_json(ref), state="missing", failure=None, causes=[])
        timeline = self._open_timeline()
        if timeline is None:
            return body
        try:
            entries = timeline.query(until=at + 1.0 if at is not None else None)
        finally:
            timeline.close()
        if not entries:
            return body
        index = TimelineIndex.build(entries)
        body["state"] = state = target_state(index, ref, at)
        if state == "missing" or (state == "healthy" and index.failure_of(ref, at) is None):
            return body
        failure = failure_to_explain(index, ref, at)
        body["failure"] = {"ts": failure.ts, "failure": failure.failure}
        candidates = confident_causes(index, failure, RankingSettings(limit=limit))
        body["causes"] = [
            _readable_cause(c.as_json(), hidden) for c in candidates if not _about(c.entry, hidden)
        ]
        return body

    # -- why not Ready -------------------------------------------------------------------

    async def why(self, request: Request) -> Response:
        ref = self._ref(request, "why")
        kind = self._kind(request.path_params["plural"])
        obj = await self.store.get(kind.api_version, kind.kind, ref.name, _ns(kind, ref))
        chain = await self._root_chain(obj)
        hidden = self._hidden(self.user_of(request))
        await self._catch_up()
        explanation = await asyncio.to_thread(self._explain, ref, None, 1, hidden)
        top = explanation["causes"][0] if explanation["causes"] else None
        body = {
            "kind": "WhyNotReady",
            "apiVersion": GROUP_VERSION,
            "object": _ref_json(ref),
            "state": state_of(obj),
            "health": health(obj).value,
            "rootBlocker": chain,
            "topCause": top,
        }
        return json_response(body)

    async def _root_chain(self, obj: Object) -> dict[str, Any] | None:
        """The first chain of unmet dependencies from `obj` to its root blocker, as objects
        read now (the walk is `insight.blockers.root_blockers`)."""
        Key = tuple[str, str, str]
        found: dict[Key, Object | None] = {}
        said: dict[Key, str] = {}
        start: Key = (obj["kind"], obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
        found[start] = obj

        async def load(kind_name: str, name: str, namespace: str) -> tuple[Key, Object | None]:
            try:
                kind = self.store.registry.resolve(kind_name)
            except Error:
                return (kind_name, namespace, name), None
            key = (kind.kind, namespace if kind.namespaced else "", name)
            if key not in found:
                try:
                    ns = namespace if kind.namespaced else None
                    found[key] = await self.store.get(kind.api_version, kind.kind, name, ns)
                except NotFound:
                    found[key] = None
            return key, found[key]

        # read every object the walk may visit first (the walk itself is pure)
        held: dict[Key, list[Key]] = {}
        queue = [start]
        while queue:
            key = queue.pop()
            if key in held:
                continue
            held[key] = []
            current = found.get(key)
            if current is None:
                continue
            for entry in (current.get("spec") or {}).get("dependsOn") or ():
                try:
                    dep = Dependency.model_validate(entry)
                except ValidationError:
                    continue
                dkey, target = await load(dep.kind, dep.name, dep.namespace or key[1] or "default")
                message = holds(dep, target)
                if message is not None:
                    held[key].append(dkey)
                    said.setdefault(dkey, message)
                    queue.append(dkey)

        def is_end(key: Key) -> bool:
            target = found.get(key)
            return target is None or state_of(target) == "Stalled"

        chains = root_blockers(start, lambda k: held.get(k, []), is_end)
        if not chains:
            return None
        root = chains[0][-1]
        target = found.get(root)
        reason = ""
        if target is not None:
            ready = get_condition(target.get("status") or {}, READY) or {}
            reason = ": ".join(str(p) for p in (ready.get("reason"), ready.get("message")) if p)
        return {
            "path": [f"{k}/{n}" for k, _, n in chains[0]],
            "object": {"kind": root[0], "namespace": root[1], "name": root[2]},
            "state": state_of(target) if target is not None else "Missing",
            "message": said.get(root, ""),
            "reason": reason,
        }

    # -- logs ----------------------------------------------------------------------------

    async def log(self, request: Request) -> Response:
        ref = self._ref(request, "log")
        kind = self._kind(request.path_params["plural"])
        obj = await self.store.get(kind.api_version, kind.kind, ref.name, _ns(kind, ref))
        params = request.query_params
        tail = _int(params.get("tailLines") or "200", "tailLines")
        path = self.log_dir / child_log_file(ref.namespace, ref.name)
        follow = flag(params, "follow")
        # The values of the Secrets its environment takes, masked as `describe` masks them.
        secrets = (await resolve_env_in_store(self.store, obj, best_effort=True)).secret_values
        # The tail is read before the answer starts: what is appended after the client has
        # its headers is followed, never taken for part of the tail.
        data, offset = await asyncio.to_thread(_tail, path, tail)
        return _LogStream(_log_lines(path, data, offset, follow, Redactor(secrets)))

    # -- helpers -------------------------------------------------------------------------

    def _kind(self, plural: str) -> Kind:
        for kind in self.store.registry:
            if kind.plural == plural:
                return kind
        raise NotFound(f"the server does not serve the resource {plural!r}")

    def _ref(self, request: Request, sub: str) -> ObjectRef:
        """The object a per-object endpoint is about, once its caller may `get` it."""
        params = request.path_params
        user = self.user_of(request)
        kind = self._kind(params["plural"])
        authorize(user, "get", kind, f"{params['plural']}/{sub}")
        return ObjectRef(kind.kind, params["name"], params["namespace"])


def _with_health(entry: Any, found: Any) -> Any:
    """`entry` with the health it says of its object (`insight.health.entry_health`), as
    `health` (ready, progressing, failed), when it says one."""
    if found is None or not isinstance(entry, dict):
        return entry
    return {**entry, "health": found.value}


def _about(entry: Any, kinds: frozenset[str]) -> bool:
    """Whether a timeline entry is about (or links to) an object of one of `kinds`."""
    if not kinds or not isinstance(entry, dict):
        return False
    refs = (entry.get("object"), entry.get("from"), entry.get("to"))
    return any(isinstance(r, dict) and r.get("kind") in kinds for r in refs)


def _readable_cause(cause: dict[str, Any], kinds: frozenset[str]) -> dict[str, Any]:
    """A cause's JSON with each step of its path through an object of one of `kinds` (which
    the user may not read) shown as `(hidden)`, with no entry."""
    if not kinds:
        return cause

    def shown(ref: str) -> str:
        return "(hidden)" if ref.split("/", 1)[0] in kinds else ref

    cause["path"] = [shown(ref) for ref in cause["path"]]
    for hop in cause["hops"]:
        if _about(hop["entry"], kinds) or shown(hop["from"]) != hop["from"]:
            hop.update(to=shown(hop["to"]), entry=None)
            hop["from"] = shown(hop["from"])
        hop["to"] = shown(hop["to"])
    return cause


def _ns(kind: Kind, ref: ObjectRef) -> str | None:
    return ref.namespace if kind.namespaced else None


def _ref_json(ref: ObjectRef) -> dict[str, str]:
    return {"kind": ref.kind, "namespace": ref.namespace, "name": ref.name}


def _int(text: str, field: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"{field}: want a whole number, not {text!r}") from None
    if value < 0:
        raise BadRequest(f"{field}: want 0 or more")
    return value


def _float(text: str, field: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise BadRequest(f"{field}: want seconds since the epoch") from None


class _LogStream(StreamingResponse):
    """A log's lines as they come; ends when the client goes away, whatever the ASGI
    server's spec version (Starlette stops listening for that from 2.4 on, and a follow
    that finds nothing new never sends, so it would not learn of it either)."""

    def __init__(self, lines: AsyncIterator[bytes]) -> None:
        super().__init__(lines, media_type="text/plain")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        stream = asyncio.create_task(self.stream_response(send))
        gone = asyncio.create_task(_wait_disconnect(receive))
        try:
            await first_done(stream, gone)
        finally:
            await self.body_iterator.aclose()  # type: ignore[attr-defined]
        if stream.done() and not stream.cancelled() and stream.exception() is not None:
            raise stream.exception()  # type: ignore[misc]


async def _wait_disconnect(receive: Any) -> None:
    while (await receive()).get("type") != "http.disconnect":
        pass


async def _log_lines(
    path: Path, data: bytes, offset: int, follow: bool, redactor: Redactor
) -> AsyncIterator[bytes]:
    """The tail `data` of the log at `path` (`_tail`, which gives `offset`, where it ends),
    then (with `follow`) what is appended after `offset`, read again every
    `LOG_FOLLOW_INTERVAL`; secret values masked (`redactor`)."""
    if data:
        yield _masked(data, redactor)
    while follow:
        await asyncio.sleep(LOG_FOLLOW_INTERVAL)
        data, offset = await asyncio.to_thread(_read_from, path, offset)
        if data:
            yield _masked(data, redactor)


def _masked(data: bytes, redactor: Redactor) -> bytes:
    """Complete lines with every secret value replaced by `***` (bytes that are not UTF-8
    kept as they are)."""
    if not redactor:
        return data
    text = data.decode("utf-8", "surrogateescape")
    masked = "".join(redactor.text(line) for line in text.splitlines(keepends=True))
    return masked.encode("utf-8", "surrogateescape")


LOG_TAIL_BLOCK = 64 * 1024
"""A tail is read backwards from the end in blocks of this many bytes."""
LOG_TAIL_MAX_BYTES = 4 * 1024 * 1024
"""The most bytes a tail reads: lines beyond are left out (a longer line is cut)."""


def _tail(path: Path, count: int) -> tuple[bytes, int]:
    """The last `count` complete lines of `path`, read backwards from its end in blocks
    (at most `LOG_TAIL_MAX_BYTES`: a 10 MB log is not read whole for 200 lines), and the
    offset after them (where a follow goes on)."""
    try:
        with path.open("rb") as f:
            end = f.seek(0, 2)
            start = end
            blocks: list[bytes] = []
            newlines = 0
            while start > 0 and newlines <= count and end - start < LOG_TAIL_MAX_BYTES:
                size = min(LOG_TAIL_BLOCK, start, LOG_TAIL_MAX_BYTES - (end - start))
                start -= size
                f.seek(start)
                block = f.read(size)
                blocks.append(block)
                newlines += block.count(b"\n")
    except FileNotFoundError:
        return b"", 0
    data = b"".join(reversed(blocks))
    complete = data[: data.rfind(b"\n") + 1]
    offset = start + len(complete)
    if count == 0 or not complete:
        return b"", offset
    lines = complete.splitlines(keepends=True)
    if start > 0 and len(lines) > 1:  # the first may be a part of a line: left out
        lines = lines[1:]
    return b"".join(lines[-count:]), offset


def _read_from(path: Path, offset: int) -> tuple[bytes, int]:
    """The complete lines of `path` from `offset` on, and the offset after them (from the
    start again when the file shrank: it was rotated or truncated)."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            if size < offset:
                offset = 0
            f.seek(offset)
            chunk = f.read(size - offset)
    except FileNotFoundError:
        return b"", 0
    complete = chunk[: chunk.rfind(b"\n") + 1]
    return complete, offset + len(complete)
