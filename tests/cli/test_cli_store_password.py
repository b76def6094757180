"""A PostgreSQL password in a store URL is never printed, and never put on a command line
(`/proc/PID/cmdline` is readable by every user of the machine): messages show the URL as
`postgresql://user:***@host/db`, and `up -d` hands the store to its background engine in
the environment (readable by its own user only)."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
from pathlib import Path

import pytest
from cli_kit import CLI, GREETINGS

PASSWORD = "s3cret-pw-0123"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://app:{PASSWORD}@127.0.0.1:1/db",  # nothing listens there
        f"postgresql://app@127.0.0.1:1/db?password={PASSWORD}",
        f"postgresq://app:{PASSWORD}@127.0.0.1/db",  # a typo in the scheme
        f"postgresql://app:{PASSWORD}@[127.0.0.1/db",  # libpq cannot parse it (and echoes it)
    ],
)
@pytest.mark.parametrize("verb", [("get", "processes"), ("up",)])
def test_a_store_that_cannot_be_opened_never_shows_its_password(
    cli: CLI, url: str, verb: tuple[str, ...]
) -> None:
    result = cli("--store", url, *verb, store=False)
    assert result.code == 1
    [line] = result.err_lines
    assert line.startswith("error: ")
    assert PASSWORD not in result.out + result.err


def command_lines_with(text: str) -> list[str]:
    """The command lines of every process now running that hold `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and text.encode() in (entry / "cmdline").read_bytes():
                found.append((entry / "cmdline").read_bytes().decode(errors="replace"))
    return found


def test_an_engine_in_the_background_carries_no_password_on_its_command_line(
    cli: CLI, postgresql_server: object
) -> None:
    # A password of this test's own: other tests (on other workers) type theirs on their
    # own command lines, which a look at every process would find.
    password = f"{PASSWORD}-{secrets.token_hex(8)}"
    url = postgresql_server.new_url("password")  # type: ignore[attr-defined]
    url = url.replace("postgresql://postgres@", f"postgresql://postgres:{password}@")
    shown = url.replace(password, "***")
    assert cli("--store", url, "apply", "-f", str(GREETINGS), store=False).code == 0
    result = cli("--store", url, "up", "-d", store=False)
    assert result.code == 0, result
    started = re.search(r"\(pid (\d+),", result.out)
    assert started, result.out
    pid = int(started[1])
    try:
        assert command_lines_with(password) == []
        assert password in (Path(f"/proc/{pid}/environ").read_bytes()).decode(errors="replace")
        again = cli("--store", url, "up", store=False)
        assert again.code == 1
        assert f"already runs on {shown};" in again.err
        assert password not in again.out + again.err
    finally:
        down = cli("--store", url, "down", store=False)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert down.code == 0, down
    assert password not in down.out + down.err
