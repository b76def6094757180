"""A child's output across a SIGKILLed `setpoint up`: the child never blocks on it, and the
next `up` finds every line in the log.

The child writes 2 MB of numbered lines (far more than a pipe holds) only once `up` is
dead; it says when it is done by creating a file. The test waits on that file and on
`up`'s status lines, with a timeout, never on the wall clock.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from cli_kit import CLI, TIMEOUT, marked_processes, start_up

LINES = 20_000
CHATTY = """
    import os, signal, sys
    side = sys.argv[1]
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    open(side + ".ready", "w").close()
    signal.sigwait({signal.SIGUSR1})
    for i in range(LINES):
        os.write(1, b"line %07d %s\\n" % (i, b"x" * 86))
    open(side + ".done", "w").close()
    signal.sigwait({signal.SIGUSR1})
"""


def wait_for_file(path: Path) -> None:
    """Return once `path` exists; fail after TIMEOUT."""
    deadline = time.monotonic() + TIMEOUT
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"{path} did not appear within {TIMEOUT}s")
        time.sleep(0.01)


def test_a_child_writes_on_while_up_is_killed_and_no_line_is_lost(cli: CLI, token: str) -> None:
    side = cli.directory / "side"
    code = textwrap.dedent(CHATTY).replace("LINES", str(LINES))
    chatty = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "chatty"},
        "spec": {"args": [sys.executable, "-c", code, str(side), token]},
    }
    app = cli.directory / "app"
    app.mkdir()
    (app / "chatty.yaml").write_text(yaml.safe_dump(chatty))

    first = start_up(cli, app)
    first.expect(lambda line: line.startswith("Process/chatty ready=True "), "chatty ready")
    wait_for_file(Path(f"{side}.ready"))
    first.kill()  # SIGKILL: the child stays, as an engine that dies leaves it
    [(pid, _, _)] = marked_processes(token)

    os.kill(pid, signal.SIGUSR1)
    wait_for_file(Path(f"{side}.done"))  # 2 MB written with no engine: never stuck

    second = start_up(cli, app)
    second.expect(lambda line: line.startswith("Process/chatty ready=True "), "chatty adopted")
    assert second.stop(signal.SIGTERM)[0] == 0  # stops the child once its output is all in
    logs = cli("logs", "chatty", store=False, kinds=False)
    assert logs.code == 0, logs
    numbers = [int(line.split()[1]) for line in logs.out.splitlines()]
    assert numbers == list(range(LINES))  # none lost, none twice, in order
