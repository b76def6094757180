"""Refused writes: every bad input raises `Invalid` (or `Conflict`, `UnknownKind`) naming the
field, and nothing is written: the revision and every list stay exactly as they were."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from conformance_kit import API, first_event, gadget, note, snapshot, widget

from setpoint.errors import Conflict, Invalid, UnknownKind

Manifest = dict[str, Any]


def _set(path: str, value: Any) -> Callable[[Manifest], None]:
    """A change to a manifest: set `a.b.c` to `value` (or delete it when value is ...)."""

    def change(obj: Manifest) -> None:
        *parents, last = path.split(".")
        for part in parents:
            obj = obj.setdefault(part, {})
        if value is ...:
            obj.pop(last, None)
        else:
            obj[last] = value

    return change


BIG = 1_700_000  # bytes: over the 1.5 MiB limit however the object is serialized

BAD_MANIFESTS: list[tuple[str, Callable[[Manifest], None], type[Exception], str]] = [
    # (id, change to a valid widget, error, text the message must contain)
    ("no-api-version", _set("apiVersion", ...), Invalid, "apiVersion"),
    ("no-kind", _set("kind", ...), Invalid, "kind"),
    ("unknown-kind", _set("kind", "Sprocket"), UnknownKind, "Sprocket"),
    ("unknown-version", _set("apiVersion", "test.setpoint.dev/v9"), UnknownKind, "Widget"),
    ("no-metadata", _set("metadata", ...), Invalid, "metadata"),
    ("no-name", _set("metadata.name", ...), Invalid, "metadata.name"),
    ("empty-name", _set("metadata.name", ""), Invalid, "metadata.name"),
    ("upper-case-name", _set("metadata.name", "Bad_Name"), Invalid, "metadata.name"),
    ("name-with-space", _set("metadata.name", "a b"), Invalid, "metadata.name"),
    ("name-too-long", _set("metadata.name", "a" * 254), Invalid, "metadata.name"),
    ("bad-namespace", _set("metadata.namespace", "Not.A.Label"), Invalid, "metadata.namespace"),
    ("label-key", _set("metadata.labels", {"bad key!": "v"}), Invalid, "metadata.labels"),
    (
        "label-key-prefix",
        _set("metadata.labels", {"Bad_Prefix/k": "v"}),
        Invalid,
        "metadata.labels",
    ),
    ("label-value", _set("metadata.labels", {"k": "not valid!"}), Invalid, "metadata.labels"),
    ("label-value-long", _set("metadata.labels", {"k": "v" * 64}), Invalid, "metadata.labels"),
    ("label-value-type", _set("metadata.labels", {"k": 3}), Invalid, "metadata.labels"),
    ("labels-not-map", _set("metadata.labels", ["k"]), Invalid, "metadata.labels"),
    ("annotation-value", _set("metadata.annotations", {"k": 1}), Invalid, "metadata.annotations"),
    ("finalizer", _set("metadata.finalizers", ["not a name"]), Invalid, "metadata.finalizers"),
    ("owner-ref", _set("metadata.ownerReferences", [{"kind": "X"}]), Invalid, "ownerReferences"),
    ("spec-missing-field", _set("spec.size", ...), Invalid, "spec.size"),
    ("spec-negative", _set("spec.size", -1), Invalid, "spec.size"),
    ("spec-wrong-type", _set("spec.size", "three"), Invalid, "spec.size"),
    ("spec-unknown-field", _set("spec.bogus", 1), Invalid, "spec.bogus"),
    ("spec-list-item", _set("spec.tags", ["ok", 7]), Invalid, "spec.tags[1]"),
    ("spec-not-object", _set("spec", "big"), Invalid, "spec"),
    ("too-big", _set("spec.tags", ["x" * 1000] * (BIG // 1000)), Invalid, ""),
]


@pytest.mark.parametrize(
    ("change", "error", "field"),
    [pytest.param(c, e, f, id=i) for i, c, e, f in BAD_MANIFESTS],
)
async def test_create_refuses_bad_input(store, change, error, field) -> None:
    await store.create(widget("existing", 1, labels={"app": "web"}))
    await store.create(gadget("g1"))
    before = await snapshot(store)
    bad = widget("fresh", 2)
    change(bad)
    with pytest.raises(error) as info:
        await store.create(bad)
    assert field in str(info.value)
    assert await snapshot(store) == before


@pytest.mark.parametrize(
    ("change", "error", "field"),
    [
        pytest.param(c, e, f, id=i)
        for i, c, e, f in BAD_MANIFESTS
        if i not in ("no-name", "empty-name", "upper-case-name", "name-with-space", "name-too-long")
        and i not in ("no-api-version", "no-kind", "unknown-kind", "unknown-version", "no-metadata")
        and i != "bad-namespace"
    ],
)
async def test_update_refuses_bad_input(store, change, error, field) -> None:
    current = await store.create(widget("existing", 1, labels={"app": "web"}))
    before = await snapshot(store)
    bad = copy.deepcopy(current)
    change(bad)
    with pytest.raises(error) as info:
        await store.update(bad)
    assert field in str(info.value)
    assert await snapshot(store) == before


async def test_cluster_scoped_kind_refuses_a_namespace(store) -> None:
    before = await snapshot(store)
    bad = gadget("g1")
    bad["metadata"]["namespace"] = "default"
    with pytest.raises(Invalid, match=r"metadata\.namespace"):
        await store.create(bad)
    assert await snapshot(store) == before


async def test_objects_just_under_the_size_limit_are_accepted(store) -> None:
    obj = await store.create(note("big", "x" * 1_400_000))
    assert len((await store.get(API, "Note", "big"))["spec"]["data"]) == 1_400_000
    obj["spec"]["data"] = "y" * 1_700_000
    before = await snapshot(store)
    with pytest.raises(Invalid):
        await store.update(obj)
    assert await snapshot(store) == before


async def test_update_status_refuses_a_bad_status(store) -> None:
    obj = await store.create(widget("w1"))
    before = await snapshot(store)
    for status, field in [
        ({"readyReplicas": -1}, "status.readyReplicas"),
        ({"readyReplicas": "many"}, "status.readyReplicas"),
        ({"unknownThing": 1}, "status.unknownThing"),
    ]:
        with pytest.raises(Invalid) as info:
            await store.update_status(dict(obj, status=status))
        assert field in str(info.value)
    assert await snapshot(store) == before


async def test_stale_writes_are_conflicts_and_write_nothing(store) -> None:
    old = await store.create(widget("w1"))
    await store.update(dict(old, spec={"size": 5}))
    before = await snapshot(store)
    for attempt in (
        store.update(dict(old, spec={"size": 6})),
        store.update_status(dict(old, status={"phase": "x"})),
        store.patch(
            API,
            "Widget",
            "w1",
            {"metadata": {"resourceVersion": old["metadata"]["resourceVersion"]}},
        ),
    ):
        with pytest.raises(Conflict):
            await attempt
    assert await snapshot(store) == before


BAD_PATCHES: list[tuple[str, Any, str, str]] = [
    # (id, patch, patch_type, text the message must contain)
    ("merge-not-object", [1, 2], "merge", ""),
    ("merge-string", "size=3", "merge", ""),
    ("merge-bad-spec", {"spec": {"size": -4}}, "merge", "spec.size"),
    ("merge-unknown-field", {"spec": {"weight": 4}}, "merge", "spec.weight"),
    ("merge-bad-label", {"metadata": {"labels": {"k": "no way"}}}, "merge", "metadata.labels"),
    ("merge-drop-required", {"spec": {"size": None}}, "merge", "spec.size"),
    ("json-not-list", {"op": "add"}, "json", ""),
    ("json-unknown-op", [{"op": "frobnicate", "path": "/spec/size"}], "json", ""),
    (
        "json-missing-path",
        [{"op": "replace", "path": "/spec/nothing/here", "value": 1}],
        "json",
        "",
    ),
    ("json-bad-pointer", [{"op": "add", "path": "spec", "value": 1}], "json", ""),
    ("json-no-value", [{"op": "add", "path": "/spec/size"}], "json", ""),
    ("json-failed-test", [{"op": "test", "path": "/spec/size", "value": 99}], "json", ""),
    ("json-bad-spec", [{"op": "replace", "path": "/spec/size", "value": "x"}], "json", "spec.size"),
    ("json-remove-metadata", [{"op": "remove", "path": "/metadata"}], "json", "metadata"),
    ("rename", {"metadata": {"name": "other"}}, "merge", ""),
    ("move-namespace", {"metadata": {"namespace": "other"}}, "merge", ""),
    ("change-kind", {"kind": "Gadget"}, "merge", ""),
    ("unknown-patch-type", {"spec": {"size": 3}}, "strategic-sideways", ""),
]


@pytest.mark.parametrize(
    ("patch", "patch_type", "field"),
    [pytest.param(p, t, f, id=i) for i, p, t, f in BAD_PATCHES],
)
async def test_patch_refuses_bad_input(store, patch, patch_type, field) -> None:
    await store.create(widget("w1", 1, labels={"app": "web"}))
    before = await snapshot(store)
    with pytest.raises(Invalid) as info:
        await store.patch(API, "Widget", "w1", patch, patch_type=patch_type)
    assert field in str(info.value)
    assert await snapshot(store) == before


async def test_bad_label_selector_is_invalid(store) -> None:
    await store.create(widget("w1", labels={"a": "b"}))
    with pytest.raises(Invalid):
        await store.list(API, "Widget", label_selector="a in (b")
    with pytest.raises(Invalid):
        await first_event(store, API, "Widget", since=0, label_selector="a,,b")


async def test_unknown_kind_on_read_is_unknown_kind(store) -> None:
    with pytest.raises(UnknownKind):
        await store.get(API, "Sprocket", "x")
    with pytest.raises(UnknownKind):
        await store.list(API, "Sprocket")
