"""The controller builder: a readable way to wire a controller into a manager.

    manager.controller("managedfile")
        .for_(ManagedFile, predicates=[generation_changed])
        .owns(Process)
        .watches(ConfigMapKind, lambda obj: [Request(...)])
        .resync_every(60)
        .max_concurrent(4)
        .complete(reconciler)

It only connects informers to the controller's queue: every piece it uses
(`Informer`, `Controller`, predicates) can be used directly instead. It needs of the
manager only what `ControllerHost` names, so it does not import the manager (which
imports it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Protocol

from setpoint.clock import Clock
from setpoint.errors import Invalid
from setpoint.model import Kind, Object
from setpoint.runtime.controller import Controller, ControllerObserver, ControllerSettings
from setpoint.runtime.informer import Informer, InformerEvent
from setpoint.runtime.predicates import Predicate
from setpoint.runtime.reconciler import ReconcileFunc, Reconciler, Request
from setpoint.runtime.typed import TypedReconcileFunc, TypedReconciler

Mapper = Callable[[Object], Iterable[Request]]


class ControllerHost(Protocol):
    """What the builder needs of the manager it adds a controller to (`Manager` is one)."""

    @property
    def clock(self) -> Clock: ...

    @property
    def observer(self) -> ControllerObserver: ...

    def kind(self, kind: Kind | str) -> Kind:
        """A kind given as a `Kind` or as a person would type it."""
        ...

    def informer(self, kind: Kind | str) -> Informer:
        """The shared informer of `kind`."""
        ...

    def add_controller(self, controller: Controller) -> None:
        """Run `controller` with the others."""
        ...


def request_for(obj: Object) -> Request:
    meta = obj["metadata"]
    return Request(meta["name"], meta.get("namespace") or "")


def controller_owner(owner: Kind) -> Mapper:
    """Map an object to its controlling owner of kind `owner` (ownerReferences, controller=true)."""

    def mapper(obj: Object) -> Iterable[Request]:
        for ref in obj["metadata"].get("ownerReferences") or ():
            if (
                ref.get("controller")
                and ref["kind"] == owner.kind
                and (ref["apiVersion"] == owner.api_version)
            ):
                namespace = obj["metadata"].get("namespace") or "" if owner.namespaced else ""
                yield Request(ref["name"], namespace)

    return mapper


class ControllerBuilder:
    def __init__(self, manager: ControllerHost, name: str) -> None:
        self._manager = manager
        self._name = name
        self._for: Kind | None = None
        self._for_predicates: Sequence[Predicate] = ()
        self._watches: list[tuple[Kind, Mapper, Sequence[Predicate]]] = []
        self._predicates: list[Predicate] = []
        self._settings = ControllerSettings()

    def for_(self, kind: Kind | str, *, predicates: Sequence[Predicate] = ()) -> ControllerBuilder:
        """The kind this controller reconciles: its events enqueue the object itself."""
        self._for = self._manager.kind(kind)
        self._for_predicates = predicates
        return self

    def owns(self, kind: Kind | str, *, predicates: Sequence[Predicate] = ()) -> ControllerBuilder:
        """Events on objects of `kind` enqueue their controlling owner."""
        if self._for is None:
            raise Invalid("call for_() before owns()")
        return self.watches(kind, controller_owner(self._for), predicates=predicates)

    def watches(
        self, kind: Kind | str, mapper: Mapper, *, predicates: Sequence[Predicate] = ()
    ) -> ControllerBuilder:
        """Events on objects of `kind` enqueue whatever `mapper` returns for them."""
        self._watches.append((self._manager.kind(kind), mapper, predicates))
        return self

    def with_predicates(self, *predicates: Predicate) -> ControllerBuilder:
        """Filters applied to the events of every watched kind."""
        self._predicates.extend(predicates)
        return self

    def resync_every(self, seconds: float) -> ControllerBuilder:
        """Reconcile every cached object this often, even with no change (finds drift)."""
        self._settings = replace(self._settings, resync_every=seconds)
        return self

    def max_concurrent(self, workers: int) -> ControllerBuilder:
        self._settings = replace(self._settings, max_concurrent=workers)
        return self

    def complete(
        self, reconciler: Reconciler | ReconcileFunc | TypedReconciler | TypedReconcileFunc
    ) -> Controller:
        """Build the controller with `reconciler`: of `Request`s, or, when its parameter is
        annotated `Typed[Spec, Status]`, of typed objects (`setpoint.runtime.typed`)."""
        if self._for is None:
            raise Invalid(f"controller {self._name!r}: call for_(kind) before complete()")
        manager = self._manager
        controller = Controller(
            self._name,
            reconciler,
            manager.informer(self._for),
            settings=self._settings,
            clock=manager.clock,
            observer=manager.observer,
        )
        watches = [(self._for, lambda obj: (request_for(obj),), self._for_predicates)]
        for kind, mapper, predicates in [*watches, *self._watches]:
            manager.informer(kind).add_handler(
                _handler(controller, mapper, [*self._predicates, *predicates])
            )
        manager.add_controller(controller)
        return controller


def _handler(
    controller: Controller, mapper: Mapper, predicates: Sequence[Predicate]
) -> Callable[[InformerEvent], None]:
    def handle(event: InformerEvent) -> None:
        if not all(p(event) for p in predicates):
            return
        for request in mapper(event.object):
            controller.enqueue(request)
        if event.old is not None and event.type == "MODIFIED":
            for request in mapper(event.old):  # e.g. an owner reference that moved
                controller.enqueue(request)

    return handle
