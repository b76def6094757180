"""Predicates: which informer events are worth a reconcile. Pure functions of an event.

`generation_changed` skips status-only writes (the usual filter for a
controller's own kind); `labels_changed`, `annotations_changed`; combine with
`and_`, `or_`, `not_`. ADDED and DELETED events always pass the change filters.
"""

from __future__ import annotations

from collections.abc import Callable

from setpoint.runtime.informer import InformerEvent

Predicate = Callable[[InformerEvent], bool]


def _changed(field: str) -> Predicate:
    def predicate(event: InformerEvent) -> bool:
        if event.type != "MODIFIED" or event.old is None:
            return True
        return bool(event.old["metadata"].get(field) != event.object["metadata"].get(field))

    predicate.__name__ = f"{field}_changed"
    return predicate


generation_changed = _changed("generation")
labels_changed = _changed("labels")
annotations_changed = _changed("annotations")


def and_(*predicates: Predicate) -> Predicate:
    return lambda event: all(p(event) for p in predicates)


def or_(*predicates: Predicate) -> Predicate:
    return lambda event: any(p(event) for p in predicates)


def not_(predicate: Predicate) -> Predicate:
    return lambda event: not predicate(event)
