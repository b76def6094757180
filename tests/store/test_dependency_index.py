"""The store's dependency index beyond the conformance suite: it lists each kind that
declares edges once per open store, not once per write (counted on a real SQLite store), and
a cycle already stored (written before its kind declared edges) blocks no other change."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from setpoint.errors import Invalid
from setpoint.model import Kind, Registry, Schema, Selector
from setpoint.store.sqlite import SqliteStore
from setpoint.workloads.kinds import register

API = "setpoint.dev/v1alpha1"


class CountingStore(SqliteStore):
    """A real SQLite store that counts the lists and gets it serves."""

    lists = 0
    gets = 0

    def list_pages(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | Selector | None = None,
        *,
        page_size: int = 500,
    ) -> AsyncIterator[tuple[list[dict[str, Any]], int]]:
        self.lists += 1
        return super().list_pages(api_version, kind, namespace, label_selector, page_size=page_size)

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = "default"
    ) -> dict[str, Any]:
        self.gets += 1
        return await super().get(api_version, kind, name, namespace)


def process(name: str, *on: str, args: tuple[str, ...] = ("true",)) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Process",
        "metadata": {"name": name},
        "spec": {"args": list(args), "dependsOn": [{"kind": "Process", "name": n} for n in on]},
    }


async def test_many_writes_list_each_declaring_kind_once(tmp_path: Path) -> None:
    registry = Registry()
    register(registry)
    store = await CountingStore(str(tmp_path / "state.db"), registry, sync="off").open()
    try:
        n = 200
        for i in range(n):  # a chain: p1 -> p0, p2 -> p1, ...
            await store.create(process(f"p{i}", *([f"p{i - 1}"] if i else [])))
        for i in range(1, n):  # every one edited, its edge kept
            obj = await store.get(API, "Process", f"p{i}")
            await store.update({**obj, "spec": {**obj["spec"], "args": ["sleep", "1"]}})
        gets_by_the_test = n - 1
        assert store.lists == 3  # Process, Job and Deployment: once each, at the first edge
        assert store.gets == gets_by_the_test

        p0 = await store.get(API, "Process", "p0")
        closing = {**p0, "spec": process("p0", f"p{n - 1}")["spec"]}
        with pytest.raises(Invalid, match=r"dependsOn cycle: Process/p0 -> Process/p199 -> "):
            await store.update(closing)
        assert store.lists == 3
        # Refusing reads the objects on the cycle again (the writer included), once each.
        assert store.gets == gets_by_the_test + 1 + 1 + (n - 1)  # the test's, the writer, p199..p1
    finally:
        await store.close()


class Ref(Schema):
    kind: str
    name: str


class StepSpec(Schema):
    needs: list[Ref] = []
    note: str = ""


def step_kind(*, declares: bool) -> Kind:
    return Kind(
        "example.com/v1", "Step", spec=StepSpec, depends_on="spec.needs" if declares else None
    )


def step(name: str, *needs: str, note: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Step",
        "metadata": {"name": name},
        "spec": {"needs": [{"kind": "Step", "name": n} for n in needs], "note": note},
    }


async def test_a_cycle_already_stored_blocks_no_other_change(tmp_path: Path) -> None:
    url = str(tmp_path / "state.db")
    before = Registry()
    before.register(step_kind(declares=False))
    old = await SqliteStore(url, before).open()
    try:
        await old.create(step("a", "b"))
        await old.create(step("b", "a"))  # stored while Step declared no edges
    finally:
        await old.close()

    now = Registry()
    now.register(step_kind(declares=True))
    store = await SqliteStore(url, now).open()
    try:
        a = await store.get("example.com/v1", "Step", "a")
        await store.update({**a, "spec": {**a["spec"], "note": "edited"}})  # edges kept
        await store.create(step("c", "a"))  # depends on the cycle, closes none
        a = await store.get("example.com/v1", "Step", "a")
        needs = [*a["spec"]["needs"], {"kind": "Step", "name": "c"}]
        with pytest.raises(Invalid, match="Step/a -> Step/c -> Step/a"):
            await store.update({**a, "spec": {**a["spec"], "needs": needs}})
        b = await store.get("example.com/v1", "Step", "b")
        await store.update({**b, "spec": {"needs": []}})  # the cycle broken
    finally:
        await store.close()
