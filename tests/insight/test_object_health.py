"""The one classification (`setpoint.insight.health`): what an object's conditions say
(ready, progressing, failed, none), what each timeline entry says, and the rules table the
dashboard reads, which must say what `health` does."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.insight.health import RULES, Health, entry_health, health


def obj(*conditions: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "kind": "Process",
        "metadata": {"name": "web", "namespace": "default"},
        "status": {"conditions": [{"type": t, "status": s, "reason": r} for t, s, r in conditions]},
    }


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ((), Health.UNKNOWN),
        ((("Ready", "True", "ReadinessProbeSucceeded"),), Health.READY),
        ((("Ready", "False", "Completed"),), Health.READY),
        ((("Ready", "False", "WaitingForDependency"),), Health.PROGRESSING),
        ((("Ready", "False", "ReadinessProbePending"),), Health.PROGRESSING),
        ((("Ready", "False", "Running"),), Health.PROGRESSING),  # a Job starting
        ((("Ready", "Unknown", "SomethingNew"),), Health.PROGRESSING),
        ((("Ready", "False", "CrashLoopBackOff"),), Health.FAILED),
        ((("Ready", "False", "Failed"),), Health.FAILED),
        ((("Ready", "False", "ReadinessProbeFailed"),), Health.FAILED),
        ((("Ready", "True", "Running"), ("Stalled", "True", "SpecInvalid")), Health.FAILED),
        (
            (("Ready", "False", "Running"), ("Failed", "True", "BackoffLimitExceeded")),
            Health.FAILED,
        ),
        ((("Ready", "True", "Running"), ("Stalled", "False", "Recovered")), Health.READY),
    ],
)
def test_health_of_an_object(
    conditions: tuple[tuple[str, str, str], ...], expected: Health
) -> None:
    assert health(obj(*conditions)) is expected


def test_a_failing_probe_is_a_failure_only_after_ready() -> None:
    failing = obj(("Ready", "False", "ReadinessProbeFailed"))
    assert health(failing, was_ready=False) is Health.PROGRESSING
    assert health(failing, was_ready=True) is Health.FAILED


def ref(name: str) -> dict[str, str]:
    return {"kind": "Process", "name": name, "namespace": "default"}


def became(name: str, type_: str, status: str, reason: str) -> dict[str, Any]:
    condition = {"type": type_, "status": status, "reason": reason}
    return {"ts": 1.0, "type": "condition", "object": ref(name), "condition": condition}


def test_a_healthy_start_has_no_failed_entry() -> None:
    entries = [
        {"ts": 0.5, "type": "change", "object": ref("web"), "action": "created"},
        became("web", "Ready", "False", "WaitingForDependency"),
        became("web", "Ready", "False", "ReadinessProbePending"),
        became("web", "Ready", "False", "ReadinessProbeFailed"),  # still starting
        {"ts": 1.0, "type": "event", "object": ref("web"), "eventType": "Warning"}
        | {"reason": "Unhealthy"},
        became("web", "Ready", "True", "ReadinessProbeSucceeded"),
        {"ts": 1.0, "type": "exit", "object": ref("init"), "exitCode": 0, "signal": None},
        {"ts": 1.0, "type": "exit", "object": ref("old"), "exitCode": None, "signal": 15}
        | {"stoppedOnRequest": True},
        became("web", "Stalled", "False", "Recovered"),
    ]
    said = entry_health(entries)
    assert Health.FAILED not in said
    assert said == [
        None,
        Health.PROGRESSING,
        Health.PROGRESSING,
        Health.PROGRESSING,
        Health.PROGRESSING,
        Health.READY,
        None,
        None,
        None,
    ]


def test_failures_after_ready_and_crashes_are_failed_entries() -> None:
    entries = [
        became("web", "Ready", "True", "ReadinessProbeSucceeded"),
        became("web", "Ready", "False", "ReadinessProbeFailed"),
        {"ts": 1.0, "type": "event", "object": ref("web"), "eventType": "Warning"}
        | {"reason": "Unhealthy"},
        {"ts": 1.0, "type": "exit", "object": ref("db"), "exitCode": 3, "signal": None}
        | {"stoppedOnRequest": False},
        became("db", "Ready", "False", "CrashLoopBackOff"),
        became("db", "Stalled", "True", "SpecInvalid"),
        {"ts": 1.0, "type": "event", "object": ref("db"), "eventType": "Warning"}
        | {"reason": "FailedStart"},
    ]
    assert entry_health(entries) == [Health.READY] + [Health.FAILED] * 6


def test_the_rules_table_says_what_health_does() -> None:
    """The dashboard classifies an object from `RULES` alone: follow them here as the page
    does and compare with `health` for every reason they name and one they do not."""
    reasons = [*RULES["failedReasons"], *RULES["probeFailedReasons"], *RULES["doneReasons"]]
    for reason in [*reasons, "WaitingForDependency"]:
        for status in ("True", "False", "Unknown"):
            o = obj(("Ready", status, reason))
            if status == "True" or reason in RULES["doneReasons"]:
                by_rules = Health.READY
            elif reason in RULES["failedReasons"] or reason in RULES["probeFailedReasons"]:
                by_rules = Health.FAILED
            else:
                by_rules = Health.PROGRESSING
            assert health(o) is by_rules, (status, reason)
    for type_ in RULES["failureConditions"]:
        assert health(obj(("Ready", "True", "Running"), (type_, "True", "X"))) is Health.FAILED


def test_an_object_says_by_its_times_whether_its_probe_failed_after_ready() -> None:
    """A False `Ready` keeps its transition time through starting and probing: one from
    before the child's start means it was never Ready since (still starting)."""

    def probed(changed: str, started: str) -> dict[str, Any]:
        o = obj(("Ready", "False", "ReadinessProbeFailed"))
        o["status"]["conditions"][0]["lastTransitionTime"] = changed
        o["status"]["startTime"] = started
        return o

    assert health(probed("2026-01-01T00:00:01Z", "2026-01-01T00:00:01.500Z")) is Health.PROGRESSING
    assert health(probed("2026-01-01T00:00:01Z", "2026-01-01T00:00:01Z")) is Health.PROGRESSING
    assert health(probed("2026-01-01T00:00:09Z", "2026-01-01T00:00:01.500Z")) is Health.FAILED
    assert health(probed("not a time", "2026-01-01T00:00:01.500Z")) is Health.FAILED
