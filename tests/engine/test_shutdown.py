"""The stop order, pure: dependents stop before their dependencies, through finished objects
and Deployments; unrelated children and cycles wait for nobody; `StopTurns` carries it out."""

from __future__ import annotations

import asyncio
from typing import Any

from setpoint.engine.shutdown import Node, StopTurns, stop_order


def obj(kind: str, name: str, *needs: str, owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if owner:
        meta["ownerReferences"] = [{"kind": "Deployment", "name": owner, "controller": True}]
    deps = [{"kind": n.split("/")[0], "name": n.split("/")[1]} for n in needs]
    return {"kind": kind, "metadata": meta, "spec": {"dependsOn": deps}}


def node(ref: str) -> Node:
    kind, name = ref.split("/")
    return (kind, "default", name)


def test_dependents_stop_first_through_finished_jobs_and_deployments() -> None:
    objects = [
        obj("Process", "db"),
        obj("Job", "migrate", "Process/db"),  # finished: no child to stop
        obj("Deployment", "web", "Job/migrate"),
        obj("Process", "web-1", owner="web"),
        obj("Process", "client", "Deployment/web"),
        obj("Process", "alone"),
    ]
    stopping = [node(r) for r in ("Process/db", "Process/web-1", "Process/client", "Process/alone")]
    order = stop_order(objects, stopping)
    assert order == {
        node("Process/db"): {node("Process/web-1"), node("Process/client")},
        node("Process/web-1"): {node("Process/client")},
        node("Process/client"): frozenset(),
        node("Process/alone"): frozenset(),
    }


def test_kinds_are_named_as_the_registry_names_them_and_cycles_stop_together() -> None:
    objects = [obj("Process", "a", "process/b"), obj("Process", "b", "Process/a")]
    order = stop_order(objects, [node("Process/a"), node("Process/b")], canonical_kind=str.title)
    assert order == {node("Process/a"): frozenset(), node("Process/b"): frozenset()}


async def test_turns_wait_for_the_children_to_stop_first() -> None:
    turns = StopTurns(
        {node("Process/db"): frozenset({node("Process/web")}), node("Process/web"): frozenset()}
    )
    stopped: list[str] = []

    async def stop(name: str) -> None:
        await turns.wait_turn("Process", ("default", name))
        stopped.append(name)
        turns.stopped("Process", ("default", name))

    await asyncio.gather(stop("db"), stop("web"), stop("unknown"))
    assert stopped.index("web") < stopped.index("db")
