"""Label selectors and namespaces narrow both `list` and `watch`, in the same way."""

from __future__ import annotations

import pytest
from conformance_kit import API, close_watch, take, take_until, widget

from setpoint.model import parse_selector

OBJECTS = [
    # (namespace, name, labels)
    ("a", "web-1", {"app": "web", "tier": "front"}),
    ("a", "web-2", {"app": "web", "tier": "front", "canary": "true"}),
    ("a", "api-1", {"app": "api", "tier": "back"}),
    ("b", "web-1", {"app": "web", "tier": "front"}),
    ("b", "db-1", {"app": "db"}),
    ("b", "bare", {}),
]

SELECTIONS = [
    # (selector, namespace, expected (namespace, name) pairs)
    ("app=web", None, {("a", "web-1"), ("a", "web-2"), ("b", "web-1")}),
    ("app==web,!canary", None, {("a", "web-1"), ("b", "web-1")}),
    ("app!=web", None, {("a", "api-1"), ("b", "db-1"), ("b", "bare")}),
    (
        "tier in (front,back)",
        None,
        {("a", "web-1"), ("a", "web-2"), ("a", "api-1"), ("b", "web-1")},
    ),
    ("tier notin (front)", None, {("a", "api-1"), ("b", "db-1"), ("b", "bare")}),
    ("tier", None, {("a", "web-1"), ("a", "web-2"), ("a", "api-1"), ("b", "web-1")}),
    ("!tier", "b", {("b", "db-1"), ("b", "bare")}),
    ("app=web", "a", {("a", "web-1"), ("a", "web-2")}),
    ("", "b", {("b", "web-1"), ("b", "db-1"), ("b", "bare")}),
    (None, "a", {("a", "web-1"), ("a", "web-2"), ("a", "api-1")}),
    ("app=nothing", None, set()),
    (None, "empty", set()),
]


def pairs(objects) -> set[tuple[str, str]]:
    return {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects}


async def fill(store) -> None:
    for namespace, name, labels in OBJECTS:
        await store.create(widget(name, namespace=namespace, labels=labels))


@pytest.mark.parametrize(("selector", "namespace", "expected"), SELECTIONS)
async def test_list_filters(store, selector, namespace, expected) -> None:
    await fill(store)
    items, revision = await store.list(API, "Widget", namespace=namespace, label_selector=selector)
    assert pairs(items) == expected
    assert revision == await store.revision()
    if selector:
        parsed = parse_selector(selector)
        again, _ = await store.list(API, "Widget", namespace=namespace, label_selector=parsed)
        assert pairs(again) == expected


@pytest.mark.parametrize(("selector", "namespace", "expected"), SELECTIONS)
async def test_watch_filters(store, selector, namespace, expected) -> None:
    start = await store.revision()
    await fill(store)
    end = await store.revision()
    # A sentinel every watch sees, so we know when the stream has passed everything before it.
    sentinel = await store.create(
        widget("zz-sentinel", namespace=namespace or "a", labels=sentinel_labels(selector))
    )
    events = store.watch(API, "Widget", namespace=namespace, since=start, label_selector=selector)
    try:
        got = await take_until(events, int(sentinel["metadata"]["resourceVersion"]))
    finally:
        await close_watch(events)
    assert got[-1].object["metadata"]["name"] == "zz-sentinel"
    seen = got[:-1]
    assert all(e.type == "ADDED" and e.revision <= end for e in seen)
    assert pairs(e.object for e in seen) == expected
    assert [e.revision for e in seen] == sorted(e.revision for e in seen)


def sentinel_labels(selector: str | None) -> dict[str, str]:
    """Labels that satisfy each selector in SELECTIONS."""
    return {
        "app=web": {"app": "web"},
        "app==web,!canary": {"app": "web"},
        "app!=web": {},
        "tier in (front,back)": {"tier": "back"},
        "tier notin (front)": {},
        "tier": {"tier": "x"},
        "!tier": {},
        "app=nothing": {"app": "nothing"},
    }.get(selector or "", {})


async def test_live_watch_filters_by_label_and_namespace(store) -> None:
    start = await store.revision()
    events = store.watch(API, "Widget", namespace="a", since=start, label_selector="app=web")
    try:
        await store.create(widget("x1", namespace="a", labels={"app": "web"}))
        await store.create(widget("x2", namespace="a", labels={"app": "api"}))
        await store.create(widget("x3", namespace="b", labels={"app": "web"}))
        obj = await store.create(widget("x4", namespace="a", labels={"app": "web"}))
        obj["spec"]["size"] = 7
        await store.update(obj)
        await store.delete(API, "Widget", "x1", namespace="a")
        got = await take(events, 4)
        assert [(e.type, e.object["metadata"]["name"]) for e in got] == [
            ("ADDED", "x1"),
            ("ADDED", "x4"),
            ("MODIFIED", "x4"),
            ("DELETED", "x1"),
        ]
    finally:
        await close_watch(events)


async def test_watch_every_kind_in_one_namespace(store) -> None:
    start = await store.revision()
    events = store.watch(None, None, namespace="a", since=start)
    try:
        await store.create(widget("w1", namespace="b"))
        mine = await store.create(widget("w1", namespace="a"))
        (event,) = await take(events, 1)
        assert event.object == mine
    finally:
        await close_watch(events)
