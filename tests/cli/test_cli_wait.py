"""`setpoint wait`: `--for=condition=TYPE[=STATUS]` and `--for=delete` on named or selected
objects, as kubectl; a timeout names each object not there yet (exit 1); a missing object
is an error for a condition and already deleted for `delete`.

The conditions are written in this process, as a controller would write them
(`update_status`), into the SQLite file the real CLI (a subprocess) waits on; the CLI
follows the store's watch. Nothing sleeps: each step waits for the line it expects.
`test_cli_follow_engine` waits on real children's conditions under `setpoint up`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from cli_kit import CLI, KINDS

from setpoint.cli.load import load_kinds
from setpoint.engine import builtin_kinds
from setpoint.model import set_condition
from setpoint.store import open_store


def set_status(cli: CLI, name: str, ready: bool | None, *, observed: int = 1) -> None:
    """Give Greeting `name` a Ready condition (None: none) observed at generation `observed`."""

    async def write() -> None:
        registry = builtin_kinds()
        load_kinds([str(KINDS)], registry)
        store = await open_store(cli.store, registry=registry)
        try:
            obj = await store.get("example.com/v1", "Greeting", name, "default")
            status: dict[str, Any] = {}
            if ready is not None:
                set_condition(status, "Ready", ready, reason="Test", now=time.time(),
                              observed_generation=observed)  # fmt: skip
            await store.update_status({**obj, "status": status})
        finally:
            await store.close()

    asyncio.run(write())


def test_a_condition_already_met_is_reported_at_once(applied: CLI) -> None:
    set_status(applied, "hello", True)
    set_status(applied, "bonjour", False)
    met = applied.ok("wait", "--for=condition=Ready", "greeting/hello")
    assert met.lines == ["greeting.example.com/hello condition met"]
    met = applied.ok("wait", "--for", "condition=Ready=false", "greeting", "bonjour")
    assert met.lines == ["greeting.example.com/bonjour condition met"]
    set_status(applied, "bonjour", True)
    met = applied.ok("wait", "--for=condition=Ready", "greeting", "--all", "--timeout", "0")
    assert met.lines == [
        "greeting.example.com/bonjour condition met",
        "greeting.example.com/hello condition met",
    ]


def test_wait_follows_the_store_until_every_object_meets_the_condition(applied: CLI) -> None:
    waiting = applied.start("wait", "--for=condition=Ready", "greeting", "-l", "app=hello")
    set_status(applied, "hello", True)
    waiting.expect(lambda line: line == "greeting.example.com/hello condition met", "hello met")
    set_status(applied, "bonjour", True, observed=0)  # about an older spec: not yet
    set_status(applied, "bonjour", True)
    waiting.expect(lambda line: line == "greeting.example.com/bonjour condition met", "bonjour")
    assert waiting.ended() == (0, "")


def test_a_timeout_names_each_object_not_there_yet(applied: CLI) -> None:
    set_status(applied, "hello", True)
    result = applied("wait", "--for=condition=Ready", "greeting/hello", "greeting/bonjour",
                     "--timeout", "0")  # fmt: skip
    assert (result.code, result.lines) == (1, ["greeting.example.com/hello condition met"])
    assert result.err_lines == [
        "error: timed out waiting for the condition on greeting.example.com/bonjour"
    ]
    # A condition about an older spec (observedGeneration behind) is not met yet.
    set_status(applied, "bonjour", True, observed=0)
    result = applied("wait", "--for=condition=Ready", "greeting/bonjour", "--timeout", "0")
    assert result.code == 1, result
    # A short timeout in kubectl's form ends a wait that nothing will end.
    result = applied("wait", "--for=condition=Ready", "greeting/bonjour", "--timeout", "0m0.5s")
    assert (result.code, result.err_lines) == (
        1,
        ["error: timed out waiting for the condition on greeting.example.com/bonjour"],
    )


def test_wait_for_delete(applied: CLI) -> None:
    waiting = applied.start("wait", "--for=delete", "greeting/hello", "greeting/bonjour")
    applied.ok("delete", "greeting", "hello")
    waiting.expect(lambda line: line == "greeting.example.com/hello deleted", "hello deleted")
    applied.ok("delete", "greeting", "bonjour")
    waiting.expect(lambda line: line == "greeting.example.com/bonjour deleted", "bonjour")
    assert waiting.ended() == (0, "")
    # Already gone counts as deleted.
    assert applied.ok("wait", "--for=delete", "greeting/hello").lines == [
        "greeting.example.com/hello deleted"
    ]


def test_errors(applied: CLI) -> None:
    def error(*args: str) -> str:
        result = applied("wait", *args)
        assert (result.code, result.out) == (1, ""), result
        return result.err

    assert error("--for=condition=Ready", "greeting/nope") == (
        'error: Greeting "nope" not found in namespace "default"\n'
    )  # as `get` says it
    assert error("--for=condition=Ready", "greeting", "-l", "app=none") == (
        "error: no matching resources found\n"
    )
    assert error("--for=ready", "greeting/hello") == (
        "error: --for: 'ready': want delete, condition=TYPE or condition=TYPE=STATUS\n"
    )
    assert error("--for=delete", "greeting/hello", "--timeout", "soon") == (
        "error: --timeout: 'soon': want a duration like 90s, 1m30s, 2h or 500ms\n"
    )
    assert error("--for=delete", "greeting") == (
        "error: name the objects (KIND/NAME...), or select them with -l or --all\n"
    )
