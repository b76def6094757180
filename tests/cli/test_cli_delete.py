"""`setpoint delete`: by name, KIND/NAME, selector and manifest; missing objects."""

from __future__ import annotations

import contextlib
import getpass
import socket
import sqlite3

from cli_kit import CLI, GREETINGS

from setpoint.store.watchers import decoded_writer


def names(cli: CLI) -> list[str]:
    return cli.ok("get", "greetings", "-o", "name").lines


def test_delete_by_name(applied: CLI) -> None:
    assert applied.ok("delete", "greeting", "hello").lines == [
        'greeting.example.com "hello" deleted'
    ]
    assert names(applied) == ["greeting.example.com/bonjour"]


def test_delete_by_kind_slash_name(applied: CLI) -> None:
    result = applied.ok("delete", "greetings/hello", "gr/bonjour")
    assert result.lines == [
        'greeting.example.com "hello" deleted',
        'greeting.example.com "bonjour" deleted',
    ]
    assert names(applied) == []


def test_delete_by_selector(applied: CLI) -> None:
    assert applied.ok("delete", "greetings", "-l", "lang=fr").lines == [
        'greeting.example.com "bonjour" deleted'
    ]
    assert names(applied) == ["greeting.example.com/hello"]


def test_delete_what_a_manifest_names(applied: CLI) -> None:
    assert applied.ok("delete", "-f", str(GREETINGS)).lines == [
        'greeting.example.com "hello" deleted',
        'greeting.example.com "bonjour" deleted',
    ]
    assert names(applied) == []


def test_a_missing_object_is_an_error_and_the_rest_are_still_deleted(applied: CLI) -> None:
    result = applied("delete", "greeting", "nope", "hello")
    assert result.code == 1
    assert result.lines == ['greeting.example.com "hello" deleted']
    assert len(result.err_lines) == 1
    assert result.err_lines[0].startswith("error: ")
    assert "nope" in result.err_lines[0]
    assert names(applied) == ["greeting.example.com/bonjour"]


def test_ignore_not_found(applied: CLI) -> None:
    result = applied.ok("delete", "greeting", "nope", "--ignore-not-found")
    assert result.out == ""


def test_a_delete_names_who_ran_it(applied: CLI) -> None:
    applied.ok("delete", "greeting", "hello")
    with contextlib.closing(sqlite3.connect(applied.directory / "state.db")) as db:
        (text,) = db.execute("SELECT writer FROM log ORDER BY revision DESC LIMIT 1").fetchone()
    verb, actor = decoded_writer(text)
    assert verb == "delete"
    assert actor is not None
    assert actor.user == f"{getpass.getuser()}@{socket.gethostname()}"
    assert actor.manager == "setpoint"
