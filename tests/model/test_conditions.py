"""Status conditions: `lastTransitionTime` moves only when a condition's status changes, and
`set_condition` says whether anything changed."""

from __future__ import annotations

from typing import Any

from setpoint.clock import rfc3339
from setpoint.model import (
    READY,
    RECONCILING,
    STALLED,
    get_condition,
    is_true,
    remove_condition,
    set_condition,
)

T0 = 1_800_000_000.0
T1 = T0 + 60
T2 = T0 + 120


def test_new_condition_gets_every_field() -> None:
    status: dict[str, Any] = {}
    assert set_condition(
        status, READY, True, reason="AllReplicasReady", message="3/3", now=T0, observed_generation=2
    )
    assert status["conditions"] == [
        {
            "type": "Ready",
            "status": "True",
            "reason": "AllReplicasReady",
            "message": "3/3",
            "observedGeneration": 2,
            "lastTransitionTime": rfc3339(T0),
        }
    ]


def test_same_status_keeps_transition_time_but_updates_the_rest() -> None:
    status: dict[str, Any] = {}
    set_condition(status, READY, "False", reason="Starting", now=T0)
    assert set_condition(
        status, READY, "False", reason="WaitingForDB", message="db not ready", now=T1
    )
    cond = get_condition(status, READY)
    assert cond is not None
    assert cond["lastTransitionTime"] == rfc3339(T0)
    assert cond["reason"] == "WaitingForDB"
    assert cond["message"] == "db not ready"


def test_status_change_moves_transition_time() -> None:
    status: dict[str, Any] = {}
    set_condition(status, READY, False, reason="Starting", now=T0)
    assert set_condition(status, READY, True, reason="Ready", now=T1)
    assert get_condition(status, READY)["lastTransitionTime"] == rfc3339(T1)  # type: ignore[index]
    assert set_condition(status, READY, "Unknown", reason="Lost", now=T2)
    assert get_condition(status, READY)["lastTransitionTime"] == rfc3339(T2)  # type: ignore[index]


def test_setting_the_same_condition_again_changes_nothing() -> None:
    status: dict[str, Any] = {}
    set_condition(status, READY, True, reason="Ready", message="ok", now=T0, observed_generation=1)
    before = [dict(c) for c in status["conditions"]]
    assert not set_condition(
        status, READY, True, reason="Ready", message="ok", now=T2, observed_generation=1
    )
    assert status["conditions"] == before


def test_observed_generation_change_is_a_change_but_not_a_transition() -> None:
    status: dict[str, Any] = {}
    set_condition(status, READY, True, reason="Ready", now=T0, observed_generation=1)
    assert set_condition(status, READY, True, reason="Ready", now=T1, observed_generation=2)
    cond = get_condition(status, READY)
    assert cond == {
        "type": "Ready",
        "status": "True",
        "reason": "Ready",
        "message": "",
        "observedGeneration": 2,
        "lastTransitionTime": rfc3339(T0),
    }


def test_a_condition_without_a_transition_time_gets_one() -> None:
    status: dict[str, Any] = {
        "conditions": [{"type": "Ready", "status": "True", "reason": "R", "message": ""}]
    }
    assert set_condition(status, READY, True, reason="R", now=T1)
    assert get_condition(status, READY)["lastTransitionTime"] == rfc3339(T1)  # type: ignore[index]


def test_conditions_are_independent_and_keep_their_order() -> None:
    status: dict[str, Any] = {}
    set_condition(status, READY, False, reason="Starting", now=T0)
    set_condition(status, RECONCILING, True, reason="Progressing", now=T0)
    set_condition(status, STALLED, False, reason="Fine", now=T0)
    set_condition(status, RECONCILING, False, reason="Done", now=T1)
    assert [c["type"] for c in status["conditions"]] == [READY, RECONCILING, STALLED]
    assert get_condition(status, READY)["lastTransitionTime"] == rfc3339(T0)  # type: ignore[index]
    assert get_condition(status, RECONCILING)["lastTransitionTime"] == rfc3339(T1)  # type: ignore[index]
    assert get_condition(status, STALLED)["lastTransitionTime"] == rfc3339(T0)  # type: ignore[index]


def test_get_condition_and_is_true() -> None:
    status: dict[str, Any] = {}
    assert get_condition(status, READY) is None
    assert get_condition(None, READY) is None
    assert not is_true(None, READY)
    set_condition(status, READY, True, reason="Ready", now=T0)
    assert is_true(status, READY)
    set_condition(status, READY, "Unknown", reason="Lost", now=T1)
    assert not is_true(status, READY)
    # get_condition hands out a copy.
    cond = get_condition(status, READY)
    assert cond is not None
    cond["status"] = "True"
    assert not is_true(status, READY)


def test_remove_condition() -> None:
    status: dict[str, Any] = {}
    set_condition(status, READY, True, reason="Ready", now=T0)
    set_condition(status, STALLED, False, reason="Fine", now=T0)
    assert remove_condition(status, STALLED)
    assert not remove_condition(status, STALLED)
    assert [c["type"] for c in status["conditions"]] == [READY]
    assert not remove_condition({}, READY)


def test_ready_summary_follows_its_parts() -> None:
    from setpoint.model import set_ready_summary

    status: dict[str, Any] = {}
    assert set_ready_summary(status, ["Started", "Migrated"], now=10.0)
    ready = get_condition(status, "Ready")
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "StartedMissing")
    set_condition(status, "Started", True, reason="Running", now=11.0)
    set_condition(status, "Migrated", False, reason="Pending", message="3 to go", now=11.0)
    set_ready_summary(status, ["Started", "Migrated"], now=12.0)
    ready = get_condition(status, "Ready")
    assert ready is not None
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "Pending", "3 to go")
    set_condition(status, "Migrated", True, reason="Done", now=13.0)
    assert set_ready_summary(status, ["Started", "Migrated"], now=14.0)
    ready = get_condition(status, "Ready")
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("True", "AllReady")
    assert not set_ready_summary(status, ["Started", "Migrated"], now=15.0)
