"""Who removed an object, when the write does not say: an owned object (a Deployment's
replica) is its owner's controller's doing, not a person's; one without owners is unknown."""

from __future__ import annotations

from setpoint.insight.recording import entries_for, project


def replica(owners: list[dict[str, str]]) -> dict[str, object]:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {
            "name": "api-0",
            "namespace": "default",
            "uid": "u",
            "ownerReferences": owners,
        },
        "spec": {"args": ["x"]},
    }


def test_an_owned_object_removed_is_its_controllers_doing() -> None:
    owned = project(replica([{"kind": "Deployment", "name": "api", "uid": "d"}]), 1)
    [removed] = entries_for(owned, None, now=1.0)
    assert (removed["action"], removed["actor"]) == ("deleted", "controller")


def test_an_object_without_owners_removed_by_nobody_named_is_unknown() -> None:
    [removed] = entries_for(project(replica([]), 1), None, now=1.0)
    assert (removed["action"], removed["actor"]) == ("deleted", "unknown")
