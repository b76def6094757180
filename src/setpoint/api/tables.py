"""`kubectl get`'s tables: objects of a kind as a `meta.k8s.io/v1` `Table`, what the server
answers to `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`.

The columns are `setpoint.model.columns.columns_for(kind)`, the ones `setpoint get`
prints, so the two never disagree: NAME, READY, the kind's own columns, AGE (the wide
ones at priority 1, which `kubectl get -o wide` shows), kubectl's own for core Events.
Cells are the strings the CLI prints (ages as `5m30s`, as the Kubernetes API server
renders them). Each row carries its object as `PartialObjectMetadata` (the default,
`includeObject=Metadata`), whole (`Object`) or not at all (`None`).

Pure: no I/O; the time the table is drawn at is `now`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from setpoint.errors import Invalid
from setpoint.model import Kind, Object
from setpoint.model.columns import Column, columns_for

INCLUDE_OBJECT = ("None", "Metadata", "Object")
"""The values of `includeObject`."""


def table(
    kind: Kind, objects: list[Object], *, now: datetime, include_object: str = "Metadata"
) -> dict[str, Any]:
    """A `meta.k8s.io/v1` Table of `objects` of `kind`; `Invalid` (field `includeObject`)
    for an `include_object` that is not None, Metadata or Object."""
    if include_object not in INCLUDE_OBJECT:
        raise Invalid(
            f"{include_object!r}: want one of {', '.join(INCLUDE_OBJECT)}", field="includeObject"
        )
    columns = columns_for(kind)
    at = now.timestamp()
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": [_definition(c) for c in columns],
        "rows": [_row(obj, columns, at, include_object) for obj in objects],
    }


def _definition(column: Column) -> dict[str, Any]:
    return {
        "name": column.name,
        "type": column.type,
        "format": column.format,
        "description": column.description,
        "priority": 1 if column.wide else 0,
    }


def _row(obj: Object, columns: tuple[Column, ...], at: float, include: str) -> dict[str, Any]:
    row: dict[str, Any] = {"cells": [c.cell(obj, at) for c in columns]}
    if include == "Object":
        row["object"] = obj
    elif include == "Metadata":
        row["object"] = partial_metadata(obj)
    return row


def partial_metadata(obj: Object) -> dict[str, Any]:
    """The object as `PartialObjectMetadata`: its kind and metadata, nothing else."""
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata") or {},
    }
