"""Typed objects for reconcilers: `Typed[Spec, Status]`, one object of a kind with schemas,
its `spec` and `status` as the kind's pydantic models.

    async def reconcile(obj: Typed[GreetingSpec, GreetingStatus]) -> Result | None:
        obj.status.shown = obj.spec.repeat          # written once the reconcile ends

A reconciler opts in by its signature: when the first parameter of the function (or of
the `reconcile` method) the controller is given is annotated `Typed[...]`, the controller
reads the requested object and calls it with the typed view instead of the `Request`
(`reconciler_of`). A request for an object that is gone calls nothing: cleanup on delete
is a finalizer's work, done while the object is still there. A reconciler with any other
signature gets the `Request`, as before.

What the reconciler changes in `status` is written when the reconcile ends, whatever its
outcome, and only if it changed anything: the difference between the status as read and
as left (`status_changes`, a merge patch) is merged onto the object's current status in
the store (conflicts retried on a fresh read), so fields the model does not know (written
under a newer schema, by another writer) stay as they are, and a reconcile that changed
nothing writes nothing. Fields the model does not know are left out of `spec` and `status`
(`raw` has them); a spec or status the model refuses is a `TerminalError` naming the field.
The spec and metadata are for reading: a change to them goes through the store with `raw`.
"""

from __future__ import annotations

import copy
import inspect
import logging
import typing
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from setpoint.errors import Conflict, Invalid, NotFound, TerminalError
from setpoint.model import Kind, Object
from setpoint.model.patch import merge_diff, merge_patch
from setpoint.runtime.reconciler import Request, Result, requested_object
from setpoint.store import Store

if TYPE_CHECKING:
    from pydantic import BaseModel

SpecT = TypeVar("SpecT", bound="BaseModel")
StatusT = TypeVar("StatusT", bound="BaseModel")

log = logging.getLogger("setpoint.controller")

STATUS_WRITE_ATTEMPTS = 5
"""Reads and writes of the status tried before a conflict is the reconcile's error."""


class Typed(Generic[SpecT, StatusT]):
    """One object as its kind's models see it: `spec` and `status` (model instances),
    `metadata` and `raw` (the object as read, a dict). See the module docstring."""

    __slots__ = ("_status_read", "kind", "raw", "spec", "status")

    def __init__(self, kind: Kind, raw: Object, spec: SpecT, status: StatusT) -> None:
        from setpoint.model.schema import wire_form

        self.kind = kind
        self.raw = raw
        self.spec = spec
        self.status = status
        self._status_read = wire_form(status)

    @classmethod
    def of(cls, kind: Kind, obj: Object) -> Typed[Any, Any]:
        """`obj` (of `kind`, which has spec and status models) as a typed view; `Invalid`
        naming the field its models cannot take."""
        from setpoint.model.schema import model_of, parsed_leniently

        if kind.spec is None or kind.status is None:
            raise Invalid(f"{kind.kind} has no spec and status models: reconcile its dicts")
        spec = parsed_leniently(model_of(kind.spec), obj.get("spec"), "spec")
        status = parsed_leniently(model_of(kind.status), obj.get("status"), "status")
        return Typed(kind, obj, spec, status)

    @property
    def metadata(self) -> dict[str, Any]:
        return typing.cast(dict[str, Any], self.raw["metadata"])

    @property
    def name(self) -> str:
        return str(self.metadata["name"])

    @property
    def namespace(self) -> str:
        """The namespace ("" for a cluster-scoped kind)."""
        return str(self.metadata.get("namespace") or "")

    def status_changes(self) -> dict[str, Any]:
        """What the reconciler changed in `status`, as a merge patch of the status (`{}`:
        nothing)."""
        from setpoint.model.schema import wire_form

        return typing.cast(dict[str, Any], merge_diff(self._status_read, wire_form(self.status)))

    def __repr__(self) -> str:
        return (
            f"Typed({self.kind.kind} {self.namespace + '/' if self.namespace else ''}{self.name})"
        )


TypedFunc = Callable[[Typed[Any, Any]], Awaitable[Result | None]]
TypedReconcileFunc = (
    Callable[[Typed[Any, Any]], Awaitable[Result | None]]
    | Callable[[Typed[Any, Any]], Result | None]
)
"""A reconcile function of typed objects, async or sync (a sync one runs in a thread)."""


class TypedReconciler(Protocol):
    """An object whose `reconcile` takes typed objects."""

    async def reconcile(self, obj: Typed[Any, Any], /) -> Result | None: ...


def takes_typed(function: Callable[..., object]) -> bool:
    """Whether `function`'s first parameter is annotated `Typed` or `Typed[...]` (an
    annotation written as a string, `from __future__ import annotations`, is resolved in
    the function's module; one that cannot be is read by its name)."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return False
    if not parameters:
        return False
    annotation: object = parameters[0].annotation
    if isinstance(annotation, str):
        written = annotation
        try:
            annotation = typing.get_type_hints(function)[parameters[0].name]
        except Exception:
            head = written.partition("[")[0].strip()
            return head == "Typed" or head.endswith(".Typed")
    return bool(annotation is Typed or typing.get_origin(annotation) is Typed)


def reconciler_of(
    store: Store, kind: Kind, function: TypedFunc
) -> Callable[[Request], Awaitable[Result | None]]:
    """A reconcile of `Request`s that reads the object, calls `function` with its typed
    view and writes the status changes it made (see the module docstring)."""
    if kind.spec is None or kind.status is None:
        raise Invalid(
            f"{kind.kind} has no spec and status models, so a reconciler of it takes a "
            "Request (and reads dicts), not Typed"
        )

    async def reconcile(request: Request) -> Result | None:
        obj = await requested_object(store, kind, request)
        if obj is None:
            return None
        try:
            view = Typed.of(kind, obj)
        except Invalid as exc:
            raise TerminalError(str(exc), reason="InvalidObject") from None
        try:
            result = await function(view)
        except Exception:
            try:
                await write_status_changes(store, kind, request, view.status_changes())
            except Exception as exc:  # the reconcile's own error is the one it ends with
                log.warning("%s %s: cannot write the status: %s", kind.kind, request, exc)
            raise
        await write_status_changes(store, kind, request, view.status_changes())
        return result

    return reconcile


async def write_status_changes(
    store: Store, kind: Kind, request: Request, changes: dict[str, Any]
) -> None:
    """Merge `changes` onto the current status of the object `request` names and write it,
    if that changes it (nothing if the object is gone)."""
    if not changes:
        return
    for _ in range(STATUS_WRITE_ATTEMPTS):
        try:
            obj = await store.get(
                kind.api_version, kind.kind, request.name, request.namespace or None
            )
        except NotFound:
            return
        current = obj.get("status") or {}
        wanted = merge_patch(copy.deepcopy(current), changes)
        if wanted == current:
            return
        obj["status"] = wanted
        try:
            await store.update_status(obj)
            return
        except Conflict:
            continue
    raise Conflict(
        f"{kind.kind} {request}: the status changed under every one of "
        f"{STATUS_WRITE_ATTEMPTS} writes; trying again"
    )
