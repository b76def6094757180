"""Typed reconcilers: a reconciler whose parameter is `Typed[Spec, Status]` gets the object
with its spec and status as the kind's models; what it changes in `status` is written once,
merged onto the stored status (fields its model does not know stay), and a reconcile that
changes nothing writes nothing. Reconcilers of `Request`s are untouched."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from setpoint import Result, TerminalError, Typed
from setpoint.model import Kind, Registry, Schema, get_condition
from setpoint.model.patch import merge_diff, merge_patch
from setpoint.runtime import Request
from setpoint.runtime.typed import takes_typed
from setpoint.testing import Harness, reconcile_until_stable


class BoxSpec(Schema):
    size: int = 1
    color: str = "red"


class BoxStatus(Schema):
    """What this controller knows of the status."""

    painted: str | None = None
    observed_generation: int | None = None
    conditions: list[dict[str, Any]] = Field(default_factory=list)


class NewerBoxStatus(BoxStatus):
    """The status as a newer schema has it, with a field the controller's model lacks."""

    audited_by: str | None = None


BOX = Kind("test.setpoint.dev/v1", "Box", spec=BoxSpec, status=BoxStatus)
NEWER_BOX = Kind("test.setpoint.dev/v1", "Box", spec=BoxSpec, status=NewerBoxStatus)


def box(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": BOX.api_version,
        "kind": BOX.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def registry(kind: Kind = BOX) -> Registry:
    reg = Registry()
    reg.register(kind)
    return reg


async def paint(obj: Typed[BoxSpec, BoxStatus]) -> None:
    obj.status.painted = obj.spec.color
    obj.status.observed_generation = obj.metadata["generation"]


async def test_a_typed_reconciler_gets_models_and_its_status_is_written() -> None:
    seen: list[tuple[str, int, str]] = []

    async def reconcile(obj: Typed[BoxSpec, BoxStatus]) -> Result:
        assert isinstance(obj.spec, BoxSpec)
        assert isinstance(obj.status, BoxStatus)
        seen.append((obj.name, obj.spec.size, obj.raw["metadata"]["namespace"]))
        await paint(obj)
        return Result()

    async with Harness(registry=registry()) as harness:
        harness.manager.controller("boxes").for_(BOX).complete(reconcile)
        await harness.start()
        await harness.store.create(box("a", size=3, color="blue"))
        await reconcile_until_stable(harness)
        stored = await harness.store.get(BOX.api_version, BOX.kind, "a", "default")
    assert seen[0] == ("a", 3, "default")
    assert stored["status"] == {"painted": "blue", "observedGeneration": 1, "conditions": []}


async def test_a_reconcile_that_changes_nothing_writes_nothing() -> None:
    async with Harness(registry=registry()) as harness:
        controller = harness.manager.controller("boxes").for_(BOX).complete(paint)
        await harness.start()
        await harness.store.create(box("a"))
        await reconcile_until_stable(harness)
        before = await harness.store.revision()
        for _ in range(3):
            controller.enqueue(Request("a", "default"))
            await reconcile_until_stable(harness)
        assert await harness.store.revision() == before


async def test_a_reconciler_that_sets_nothing_leaves_an_object_without_status_alone() -> None:
    async def look(obj: Typed[BoxSpec, BoxStatus]) -> None:
        assert obj.status.conditions == []  # the model's defaults, not written back

    async with Harness(registry=registry()) as harness:
        harness.manager.controller("boxes").for_(BOX).complete(look)
        await harness.start()
        created = await harness.store.create(box("a"))
        await reconcile_until_stable(harness)
        stored = await harness.store.get(BOX.api_version, BOX.kind, "a", "default")
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert "status" not in stored


async def test_status_fields_the_model_does_not_know_survive_a_write() -> None:
    async with Harness(registry=registry(NEWER_BOX)) as harness:
        controller = harness.manager.controller("boxes").for_(BOX).complete(paint)
        await harness.start()
        created = await harness.store.create(box("a", color="green"))
        created["status"] = {"auditedBy": "the newer controller"}
        await harness.store.update_status(created)
        await reconcile_until_stable(harness)
        stored = await harness.store.get(BOX.api_version, BOX.kind, "a", "default")
        assert stored["status"]["auditedBy"] == "the newer controller"
        assert stored["status"]["painted"] == "green"
        before = await harness.store.revision()
        controller.enqueue(Request("a", "default"))
        await reconcile_until_stable(harness)
        assert await harness.store.revision() == before


async def test_status_changes_are_written_when_the_reconcile_raises() -> None:
    async def refuse(obj: Typed[BoxSpec, BoxStatus]) -> None:
        obj.status.painted = "never"
        raise TerminalError("no paint left", reason="NoPaint")

    async with Harness(registry=registry()) as harness:
        harness.manager.controller("boxes").for_(BOX).complete(refuse)
        await harness.start()
        await harness.store.create(box("a"))
        await reconcile_until_stable(harness)
        stored = await harness.store.get(BOX.api_version, BOX.kind, "a", "default")
    assert stored["status"]["painted"] == "never"
    assert get_condition(stored["status"], "Stalled") is None  # the runtime writes none


async def test_sync_functions_and_reconciler_objects_can_be_typed() -> None:
    class Painter:
        def __init__(self) -> None:
            self.names: list[str] = []

        async def reconcile(self, obj: Typed[BoxSpec, BoxStatus]) -> None:
            self.names.append(obj.name)
            obj.status.painted = "by object"

    def sync_paint(obj: Typed[BoxSpec, BoxStatus]) -> None:
        obj.status.painted = "in a thread"

    painter = Painter()
    async with Harness(registry=registry()) as harness:
        harness.manager.controller("objects").for_(BOX).complete(painter)
        await harness.start()
        await harness.store.create(box("a"))
        await reconcile_until_stable(harness)
    assert set(painter.names) == {"a"}  # again after its own status write: nothing to do
    async with Harness(registry=registry()) as harness:
        harness.manager.controller("threads").for_(BOX).complete(sync_paint)
        await harness.start()
        await harness.store.create(box("a"))
        await reconcile_until_stable(harness)
        stored = await harness.store.get(BOX.api_version, BOX.kind, "a", "default")
    assert stored["status"]["painted"] == "in a thread"


async def test_a_deleted_object_calls_no_typed_reconciler_and_requests_still_work() -> None:
    typed_calls: list[str] = []
    requests: list[Request] = []

    async def typed(obj: Typed[BoxSpec, BoxStatus]) -> None:
        typed_calls.append(obj.name)

    async def plain(request: Request) -> None:
        requests.append(request)

    async with Harness(registry=registry()) as harness:
        typed_controller = harness.manager.controller("typed").for_(BOX).complete(typed)
        harness.manager.controller("plain").for_(BOX).complete(plain)
        await harness.start()
        typed_controller.enqueue(Request("gone", "default"))
        await harness.store.create(box("a"))
        await reconcile_until_stable(harness)
    assert typed_calls == ["a"]
    assert requests == [Request("a", "default")]


def test_the_signature_decides() -> None:
    def by_string(obj: Typed[BoxSpec, BoxStatus]) -> None: ...  # a string: __future__

    def bare(obj: Typed) -> None: ...  # type: ignore[type-arg]

    def plain(request: Request) -> None: ...

    def unresolvable(obj: Typed[Missing, Missing]) -> None: ...  # type: ignore[name-defined]  # noqa: F821

    assert takes_typed(by_string)
    assert takes_typed(bare)
    assert takes_typed(unresolvable)
    assert not takes_typed(plain)
    assert not takes_typed(lambda request: None)


def test_merge_diff_is_the_patch_from_old_to_new() -> None:
    old = {"a": 1, "b": {"c": 2, "d": 3}, "e": [1]}
    new = {"a": 1, "b": {"c": 4}, "e": [1, 2], "f": "x"}
    patch = merge_diff(old, new)
    assert patch == {"b": {"c": 4, "d": None}, "e": [1, 2], "f": "x"}
    assert merge_patch(old, patch) == new
    assert merge_diff(new, new) == {}
