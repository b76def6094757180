"""`setpoint describe`: metadata, spec, status with its conditions, and the object's events.

The status and events are written in this process, as a controller would write
them (`update_status`, an `EventRecorder`), into the SQLite file the CLI reads;
the drawing itself (`describe_object`) is also checked in process with a fixed `now`.
"""

from __future__ import annotations

import asyncio
import time

from cli_kit import CLI, KINDS, Result
from test_cli_events import DAY, record_events

from setpoint.cli.describe import SUMMARIES, describe_object
from setpoint.cli.load import load_kinds
from setpoint.clock import rfc3339
from setpoint.engine import builtin_kinds
from setpoint.model import set_condition
from setpoint.store import open_store


def set_ready(cli: CLI, name: str, *, days_ago: float, shown: int) -> None:
    async def write() -> None:
        registry = builtin_kinds()
        load_kinds([str(KINDS)], registry)
        store = await open_store(cli.store, registry=registry)
        try:
            obj = await store.get("example.com/v1", "Greeting", name, "default")
            status = {"observedGeneration": 1, "shown": shown}
            set_condition(status, "Ready", True, reason="Shown", message="shown\ntwice",
                          now=time.time() - days_ago * DAY)  # fmt: skip
            await store.update_status({**obj, "status": status})
        finally:
            await store.close()

    asyncio.run(write())


def field(lines: list[str], label: str) -> str:
    """The value on the line `label:` starts."""
    (line,) = [line for line in lines if line.startswith(label + ":")]
    return line[len(label) + 1 :].strip()


def test_describe_shows_metadata_spec_conditions_and_the_objects_events(applied: CLI) -> None:
    set_ready(applied, "hello", days_ago=3, shown=2)
    record_events(
        applied,
        (5, "hello", "Normal", "Shown", "shown the message"),
        (4, "bonjour", "Warning", "Slow", "not about hello"),
        (3, "hello", "Normal", "Shown", "shown the message"),
        (2, "hello", "Warning", "Slow", "took long"),
    )
    lines = applied.ok("describe", "greeting", "hello").lines
    assert applied.ok("describe", "greeting/hello").lines[:4] == lines[:4]

    assert field(lines, "Name") == "hello"
    assert field(lines, "Namespace") == "default"
    assert field(lines, "Kind") == "Greeting"
    assert field(lines, "API Version") == "example.com/v1"
    labels = lines.index(next(line for line in lines if line.startswith("Labels:")))
    assert field(lines, "Labels") == "app=hello"
    assert lines[labels + 1].strip() == "lang=en"
    assert lines[labels + 1].index("lang") == lines[labels].index("app")  # aligned
    assert field(lines, "Annotations") == "<none>"
    created = applied.ok("get", "greeting/hello", "-o", "json").json()["metadata"]
    assert field(lines, "Created").startswith(created["creationTimestamp"] + " (")
    assert field(lines, "Created").endswith(" ago)")
    assert field(lines, "Generation") == "1"
    assert field(lines, "Observed Generation") == "1"
    assert field(lines, "Finalizers") == "<none>"
    assert field(lines, "Owner References") == "<none>"
    assert not any(line.startswith("Deletion Timestamp") for line in lines)

    spec, status, events = (lines.index(s) for s in ("Spec:", "Status:", "Events:"))
    assert spec < status < events
    assert lines[spec + 1 : status] == ["  message: Hello, world!", "  repeat: 2"]
    assert lines[status + 1] == "  Conditions:"
    assert lines[status + 2].split() == ["Type", "Status", "Reason", "Age", "Message"]
    assert lines[status + 4].split() == ["Ready", "True", "Shown", "3d", "shown", "twice"]
    assert lines[status + 5 : events] == ["  shown: 2"]
    assert lines[events + 1].split() == ["Type", "Reason", "Age", "From", "Message"]
    assert [line.split() for line in lines[events + 3 :]] == [
        ["Normal", "Shown", "3d", "(x2", "over", "5d)", "greeter", "shown", "the", "message"],
        ["Warning", "Slow", "2d", "greeter", "took", "long"],
    ]


def test_an_object_with_no_status_or_events_says_none(applied: CLI) -> None:
    lines = applied.ok("describe", "gr/bonjour").lines
    assert field(lines, "Observed Generation") == "<none>"
    assert field(lines, "Status") == "<none>"
    assert lines[-1] == "Events:  <none>"


def test_describe_without_a_name_describes_every_object_of_the_kind(applied: CLI) -> None:
    lines = applied.ok("describe", "greetings").lines
    assert [line.split()[1] for line in lines if line.startswith("Name:")] == ["bonjour", "hello"]


def one_error(result: Result) -> str:
    assert result.code == 1, result
    assert len(result.err_lines) == 1, result.err
    assert result.err.startswith("error: "), result.err
    return result.err


def test_errors(applied: CLI) -> None:
    missing = applied("describe", "greeting", "hello", "nope")
    assert 'Greeting "nope" not found' in one_error(missing)
    assert field(missing.lines, "Name") == "hello"  # the others are still described
    assert '"widgets"' in one_error(applied("describe", "widgets", "w"))
    assert "KIND" in one_error(applied("describe"))


def test_an_event_is_described_with_the_same_sections(cli: CLI) -> None:
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "hello.1"},
        "involvedObject": {"apiVersion": "example.com/v1", "kind": "Greeting", "name": "hello"},
        "reason": "Shown",
        "message": "shown",
        "type": "Normal",
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "source": {"component": "test"},
    }
    cli.ok("apply", "-f", str(cli.write("event.yaml", event)))
    lines = cli.ok("describe", "event", "hello.1").lines
    assert field(lines, "Reason") == "Shown"
    involved = lines.index("Involved Object:")
    assert "  name: hello" in lines[involved + 1 : involved + 4]


def test_describe_object_draws_deletion_owners_finalizers_and_a_kind_summary() -> None:
    now = 1_800_000_000.0
    obj = {
        "apiVersion": "test.dev/v1",
        "kind": "Thing",
        "metadata": {
            "name": "t",
            "creationTimestamp": rfc3339(now - 90),
            "deletionTimestamp": rfc3339(now - 5),
            "annotations": {"note": "x"},
            "finalizers": ["a.dev/cleanup", "b.dev/keep"],
            "ownerReferences": [{"kind": "Owner", "name": "o", "controller": True}],
        },
        "spec": {},
    }
    SUMMARIES[("test.dev/v1", "Thing")] = lambda o, at: [("Phase", "Stopping")]
    try:
        lines = describe_object(obj, [], now).splitlines()
    finally:
        del SUMMARIES[("test.dev/v1", "Thing")]
    assert "Namespace" not in "".join(lines)  # cluster-scoped
    assert field(lines, "Annotations") == "note: x"
    assert field(lines, "Created") == f"{rfc3339(now - 90)} (90s ago)"
    assert field(lines, "Phase") == "Stopping"
    assert field(lines, "Finalizers") == "a.dev/cleanup"
    assert lines[
        lines.index(next(x for x in lines if x.startswith("Finalizers:"))) + 1
    ].strip() == ("b.dev/keep")
    assert field(lines, "Owner References") == "Owner/o (controller)"
    assert field(lines, "Deletion Timestamp") == f"{rfc3339(now - 5)} (5s ago)"
    assert "Spec:  <none>" in lines
