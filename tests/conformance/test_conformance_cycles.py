"""Dependency cycles on every backend: a write whose edges (`Kind.depends_on`, here a Task's
`spec.after`) close a cycle is refused, naming the cycle and the field, with nothing
written; a write that closes none is accepted, and removing an edge or an object lets the
reverse edge in (`setpoint.store.dependency_index`)."""

from __future__ import annotations

import asyncio

import pytest
from conformance_kit import API, snapshot, task, widget

from setpoint.errors import Invalid


async def test_the_write_closing_a_two_object_cycle_is_refused(store) -> None:
    await store.create(task("a", "b"))
    before = await snapshot(store)
    with pytest.raises(Invalid) as refused:
        await store.create(task("b", "a"))
    assert str(refused.value).endswith(  # over HTTP, after `Task... "b" is invalid: `
        "spec.after: dependsOn cycle: Task/b -> Task/a -> Task/b; remove one of these dependencies"
    )
    assert refused.value.field == "spec.after"
    assert await snapshot(store) == before


async def test_an_update_or_a_patch_closing_a_three_object_cycle_is_refused(store) -> None:
    await store.create(task("a", "b"))
    await store.create(task("b", "c"))
    c = await store.create(task("c"))
    before = await snapshot(store)
    cycle = "Task/c -> Task/a -> Task/b -> Task/c"
    with pytest.raises(Invalid, match=cycle):
        await store.update({**c, "spec": {"after": [{"kind": "Task", "name": "a"}]}})
    # Named by its plural, a Task is the same node.
    with pytest.raises(Invalid, match=cycle):
        await store.patch(API, "Task", "c", {"spec": {"after": [{"kind": "tasks", "name": "a"}]}})
    add_a = [{"op": "add", "path": "/spec/after/-", "value": {"kind": "Task", "name": "a"}}]
    with pytest.raises(Invalid, match=cycle):
        await store.patch(API, "Task", "c", add_a, patch_type="json")
    assert await snapshot(store) == before


async def test_a_self_dependency_is_refused(store) -> None:
    with pytest.raises(Invalid, match="dependsOn cycle: Task/a -> Task/a;"):
        await store.create(task("a", "a"))
    assert (await snapshot(store))[1]["Task"] == []


async def test_a_cycle_across_namespaces_names_them(store) -> None:
    await store.create(
        {
            **task("a", namespace="one"),
            "spec": {"after": [{"kind": "Task", "name": "b", "namespace": "two"}]},
        }
    )
    closing = task("b", namespace="two")
    closing["spec"]["after"] = [{"kind": "Task", "name": "a", "namespace": "one"}]
    with pytest.raises(Invalid, match="Task/two/b -> Task/one/a -> Task/two/b;"):
        await store.create(closing)
    # The same names in one namespace are other objects: no cycle.
    await store.create(task("b", "a", namespace="one"))


async def test_a_graph_without_cycles_is_accepted(store) -> None:
    # A diamond, a dependency on another kind (which declares no edges), and one on an
    # object that does not exist (yet).
    await store.create(widget("w"))
    for obj in (
        task("d", "Widget/w"),
        task("b", "d"),
        task("c", "d", "missing"),
        task("a", "b", "c"),
    ):
        await store.create(obj)
    items, _ = await store.list(API, "Task")
    assert sorted(i["metadata"]["name"] for i in items) == ["a", "b", "c", "d"]
    # An update that keeps the edges, or changes them without closing a cycle, passes.
    d = await store.get(API, "Task", "d")
    await store.update({**d, "spec": {"after": [{"kind": "Task", "name": "missing"}]}})


async def test_removing_an_edge_or_deleting_an_object_lets_the_reverse_edge_in(store) -> None:
    a = await store.create(task("a", "b"))
    b = await store.create(task("b"))
    reverse = {**b, "spec": {"after": [{"kind": "Task", "name": "a"}]}}
    with pytest.raises(Invalid):
        await store.update(reverse)
    await store.update({**a, "spec": {"after": []}})
    await store.update(reverse)  # b -> a, now that a no longer depends on b

    await store.create(task("x", "y"))
    await store.delete(API, "Task", "x")
    await store.create(task("y", "x"))  # x is gone: y -> x closes nothing
    with pytest.raises(Invalid, match="Task/x -> Task/y -> Task/x"):
        await store.create(task("x", "y"))


async def test_of_two_writes_closing_a_cycle_at_once_one_is_refused(store) -> None:
    results = await asyncio.gather(
        store.create(task("a", "b")), store.create(task("b", "a")), return_exceptions=True
    )
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(refused) == 1, results
    assert isinstance(refused[0], Invalid)
    assert "dependsOn cycle" in str(refused[0])
    items, _ = await store.list(API, "Task")
    assert len(items) == 1


@pytest.fixture
async def pair(shared_stores):
    url = shared_stores.new_url()
    return await shared_stores.open(url), await shared_stores.open(url)


async def test_a_cycle_closed_through_an_edge_the_other_opener_wrote_is_refused(pair) -> None:
    first, second = pair
    await second.create(task("y", "z"))  # the second's index is built before the first writes
    await first.create(task("z", "x"))
    with pytest.raises(Invalid, match="Task/x -> Task/y -> Task/z -> Task/x"):
        await second.create(task("x", "y"))
    items, _ = await second.list(API, "Task")
    assert sorted(i["metadata"]["name"] for i in items) == ["y", "z"]


async def test_an_edge_the_other_opener_removed_never_refuses_a_write(pair) -> None:
    first, second = pair
    await second.create(task("y", "z"))  # the second's index holds y -> z
    y = await first.get(API, "Task", "y")
    await first.update({**y, "spec": {"after": []}})
    # Even where the second has not learnt of the removal (etcd), the write is accepted:
    # a cycle is read again from the store before a write is refused.
    await second.create(task("z", "y"))
    stored = await first.get(API, "Task", "z")
    assert [ref["name"] for ref in stored["spec"]["after"]] == ["y"]
