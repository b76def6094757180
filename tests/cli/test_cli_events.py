"""`setpoint events` and `get events`: kubectl's event columns, oldest first, one object's
events, errors, and `-w` following events recorded by another process.

Events are written the way controllers write them, by an `EventRecorder` (in
this process, on a manual clock days in the past so ages print the same for
minutes) into the SQLite file the CLI subprocess reads.
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
from collections.abc import Sequence

from cli_kit import CLI, KINDS, Result, greeting

from setpoint.cli.load import load_kinds
from setpoint.engine import builtin_kinds
from setpoint.runtime import EventRecorder
from setpoint.store import open_store
from setpoint.testing import ManualClock

DAY = 86400.0

Record = tuple[float, str, str, str, str]
"""(days ago, Greeting name or namespace/name, type, reason, message)."""


def record_events(cli: CLI, *records: Record) -> None:
    """Record events about Greetings with one recorder (identical ones aggregate: `count`),
    oldest first, each at its time in the past."""

    async def record() -> None:
        registry = builtin_kinds()
        load_kinds([str(KINDS)], registry)
        store = await open_store(cli.store, registry=registry)
        now = time.time()
        clock = ManualClock(start=now - max(r[0] for r in records) * DAY)
        recorder = EventRecorder(store, "greeter", clock=clock)
        try:
            for days, ref, type_, reason, message in sorted(records, key=lambda r: -r[0]):
                clock.advance(max(0.0, now - days * DAY - clock.now()))
                namespace, _, name = ref.rpartition("/")
                obj = await store.get("example.com/v1", "Greeting", name, namespace or "default")
                await recorder.record(obj, type_, reason, message)
        finally:
            await store.close()
        assert recorder.failed == recorder.dropped == 0

    asyncio.run(record())


def cells(line: str) -> list[str]:
    """A table row's cells (columns are two or more spaces apart; `LAST SEEN` has one)."""
    return re.split(r"\s{2,}", line.strip())


def rows(lines: Sequence[str]) -> list[list[str]]:
    return [cells(line) for line in lines]


HEADER = ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
HELLO_SHOWN = ["3d (x2 over 5d)", "Normal", "Shown", "greeting/hello", "shown the message"]
BONJOUR_SLOW = ["4d", "Warning", "Slow", "greeting/bonjour", "took long"]


def record_three(cli: CLI) -> None:
    record_events(
        cli,
        (5, "hello", "Normal", "Shown", "shown the message"),
        (4, "bonjour", "Warning", "Slow", "took long"),
        (3, "hello", "Normal", "Shown", "shown the message"),
    )


def test_table_has_kubectls_columns_oldest_last_seen_first(applied: CLI) -> None:
    record_three(applied)
    assert rows(applied.ok("events").lines) == [HEADER, BONJOUR_SLOW, HELLO_SHOWN]


def test_one_objects_events_however_it_is_named(applied: CLI) -> None:
    record_three(applied)
    for args in (
        ("greeting/hello",),
        ("greeting", "hello"),
        ("gr", "hello"),
        ("--for", "greeting/hello"),
        ("--for", "greetings.example.com/hello"),
    ):
        assert rows(applied.ok("events", *args).lines) == [HEADER, HELLO_SHOWN], args
    assert rows(applied.ok("events", "greetings").lines) == [HEADER, BONJOUR_SLOW, HELLO_SHOWN]


def test_namespaces_keep_events_apart_unless_all_are_asked_for(applied: CLI) -> None:
    applied.ok("apply", "-f", str(applied.write("x.yaml", greeting("hello", namespace="one"))))
    record_three(applied)
    record_events(applied, (2, "one/hello", "Normal", "Elsewhere", "in namespace one"))
    elsewhere = ["2d", "Normal", "Elsewhere", "greeting/hello", "in namespace one"]
    assert rows(applied.ok("events", "greeting/hello").lines) == [HEADER, HELLO_SHOWN]
    assert rows(applied.ok("-n", "one", "events", "greeting/hello").lines) == [HEADER, elsewhere]
    assert rows(applied.ok("events", "greeting/hello", "-A").lines) == [
        ["NAMESPACE", *HEADER],
        ["default", *HELLO_SHOWN],
        ["one", *elsewhere],
    ]


def test_no_events_is_said_on_stderr_and_succeeds(applied: CLI) -> None:
    for args in (("events",), ("events", "greeting/bonjour")):
        result = applied(*args)
        assert (result.code, result.out) == (0, ""), args
        assert result.err_lines == ["No events found in default namespace."]


def one_error(result: Result) -> str:
    assert (result.code, result.out) == (1, ""), result
    assert len(result.err_lines) == 1, result.err
    assert result.err.startswith("error: "), result.err
    return result.err


def test_an_object_that_is_not_there_is_an_error(applied: CLI) -> None:
    assert 'Greeting "nope" not found' in one_error(applied("events", "greeting/nope"))
    assert '"widget"' in one_error(applied("events", "--for", "widget/w"))
    assert "KIND/NAME" in one_error(applied("events", "--for", "greeting"))
    assert "once" in one_error(applied("events", "greeting/hello", "--for", "greeting/hello"))
    assert "one object" in one_error(applied("events", "greeting", "hello", "bonjour"))


def test_get_events_uses_the_event_columns(applied: CLI) -> None:
    record_three(applied)
    lines = applied.ok("get", "events").lines
    assert cells(lines[0]) == HEADER
    assert sorted(rows(lines[1:])) == sorted([BONJOUR_SLOW, HELLO_SHOWN])
    assert cells(applied.ok("get", "events", "-o", "wide").lines[0]) == [
        "LAST SEEN",
        "TYPE",
        "REASON",
        "OBJECT",
        "SUBOBJECT",
        "SOURCE",
        "MESSAGE",
        "FIRST SEEN",
        "COUNT",
        "NAME",
    ]
    assert cells(applied.ok("get", "greetings").lines[0]) == ["NAME", "READY", "AGE"]


def test_watch_prints_new_and_updated_events_of_the_object(applied: CLI) -> None:
    record_events(applied, (5, "hello", "Normal", "Shown", "shown the message"))
    watch = applied.start("events", "--for", "greeting/hello", "-w")
    assert cells(watch.expect(lambda line: "LAST SEEN" in line, "the header")) == HEADER
    watch.expect(lambda line: cells(line)[0] == "5d", "the event there was")

    record_events(applied, (4, "bonjour", "Warning", "Slow", "took long"))  # not about hello
    record_events(applied, (0, "hello", "Warning", "Slow", "took long"))
    line = watch.expect(lambda line: "Slow" in line, "the new event")
    assert cells(line)[1:] == ["Warning", "Slow", "greeting/hello", "took long"]
    assert not any("bonjour" in seen for seen in watch.seen)

    code, err = watch.stop(signal.SIGINT)
    assert (code, err) == (0, "")


def test_watch_of_a_namespace_shows_a_count_going_up(applied: CLI) -> None:
    watch = applied.start("events", "-w")
    watch.expect(lambda line: "LAST SEEN" in line, "the header")
    record_three(applied)
    watch.expect(lambda line: "(x2 over 5d)" in line, "hello's event counted twice")
    code, err = watch.stop(signal.SIGTERM)
    assert (code, err) == (0, "")
