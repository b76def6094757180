"""`setpoint get -w`: the current list, then every change made by other commands, until a signal.

The watcher is a real subprocess; changes come from separate `apply`/`delete`
processes; its output is read line by line with a timeout.
"""

from __future__ import annotations

import json
import signal

from cli_kit import CLI, columns, greeting


def test_watch_table_shows_changes_from_other_processes_until_ctrl_c(applied: CLI) -> None:
    watch = applied.start("get", "greetings", "-w")
    assert columns(watch.expect(lambda line: "NAME" in line, "the header")) == [
        "EVENT",
        "NAME",
        "READY",
        "AGE",
    ]
    watch.expect(lambda line: columns(line)[:2] == ["ADDED", "hello"], "hello as it is")

    applied.ok("apply", "-f", str(applied.write("x.yaml", greeting("hello", repeat=5))))
    watch.expect(lambda line: columns(line)[:2] == ["MODIFIED", "hello"], "hello modified")
    applied.ok("delete", "greeting", "bonjour")
    watch.expect(lambda line: columns(line)[:2] == ["DELETED", "bonjour"], "bonjour deleted")

    code, err = watch.stop(signal.SIGINT)
    assert (code, err) == (0, "")


def test_watch_json_prints_one_event_document_per_line_until_sigterm(applied: CLI) -> None:
    watch = applied.start("get", "greetings", "-w", "-o", "json")
    first = json.loads(watch.expect(lambda line: True, "the first event"))
    assert first["type"] == "ADDED"

    applied.ok("apply", "-f", str(applied.write("x.yaml", greeting("hello", repeat=7))))
    line = watch.expect(lambda line: json.loads(line)["type"] == "MODIFIED", "a MODIFIED event")
    event = json.loads(line)
    assert event["object"]["metadata"]["name"] == "hello"
    assert event["object"]["spec"]["repeat"] == 7

    code, err = watch.stop(signal.SIGTERM)
    assert (code, err) == (0, "")


def test_watch_by_name_and_selector_shows_only_those(applied: CLI) -> None:
    by_name = applied.start("get", "greeting", "hello", "-w", "-o", "name")
    by_label = applied.start("get", "greetings", "-l", "lang=fr", "-w", "-o", "name")
    by_name.expect(lambda line: line == "greeting.example.com/hello", "hello as it is")
    by_label.expect(lambda line: line == "greeting.example.com/bonjour", "bonjour as it is")

    # bonjour changes first: by the time hello's change arrives, bonjour's would have too.
    applied.ok("apply", "-f", str(applied.write("b.yaml", greeting("bonjour", "Salut"))))
    applied.ok("apply", "-f", str(applied.write("h.yaml", greeting("hello", "Hi"))))
    by_name.expect(lambda line: True, "hello's change")
    by_label.expect(lambda line: True, "bonjour's change")

    for watch, only in ((by_name, "hello"), (by_label, "bonjour")):
        code, err = watch.stop(signal.SIGINT)
        assert (code, err) == (0, "")
        assert {line.rpartition("/")[2] for line in watch.seen} == {only}


def test_watch_yaml_separates_event_documents(applied: CLI) -> None:
    watch = applied.start("get", "greeting", "hello", "-w", "-o", "yaml")
    assert watch.expect(lambda line: True, "the first line") == "---"
    watch.expect(lambda line: line == "type: ADDED", "the event type")
    applied.ok("delete", "greeting", "hello")
    watch.expect(lambda line: line == "type: DELETED", "the DELETED event")
    code, err = watch.stop(signal.SIGINT)
    assert (code, err) == (0, "")
