"""`setpoint up` owns its store: a second `up` on the same store is refused at once, naming
the running one, and touches none of its children; a second Ctrl-C during a graceful stop
kills what is left at once, as docker compose does.

Real `setpoint up` processes, real children; lines are read with a timeout, no sleeps.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import textwrap
from typing import Any

import yaml
from cli_kit import CLI, TIMEOUT, marked_processes, start_up
from test_cli_up import Up, alive, children, free_port, process, write_manifests

STUBBORN = """
    import signal, socket, sys
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    s = socket.socket()
    s.bind(("127.0.0.1", int(sys.argv[2])))
    s.listen()  # ready (its probe connects) only once SIGTERM is ignored
    while True:
        s.accept()[0].close()
"""


def stubborn(name: str, port: int, token: str) -> dict[str, Any]:
    """A Process that ignores SIGTERM, with ten minutes to stop gracefully."""
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": name},
        "spec": {
            "args": [sys.executable, "-c", textwrap.dedent(STUBBORN), name, str(port), token],
            "terminationGracePeriodSeconds": 600,
            "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1},
        },
    }


def test_a_second_up_on_the_same_store_is_refused_and_leaves_the_first_alone(
    cli: CLI, token: str
) -> None:
    app = write_manifests(cli, token)
    first = Up(cli, app)
    pids = first.wait_ready("a", "b")

    second = start_up(cli, app)
    try:
        out, err = second.proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        second.kill()
        raise AssertionError("a second `up` on the same store was not refused") from None
    assert second.proc.returncode == 1
    holder = f"pid {first.running.proc.pid} on host {socket.gethostname()}"
    [line] = err.splitlines()
    assert re.fullmatch(
        rf"error: an engine \({re.escape(holder)}\) already runs on sqlite:///\S*state\.db; "
        r"follow it with `setpoint logs -f` \(or `setpoint get -w`\), stop it with `setpoint down`",
        line,
    ), line
    assert out == ""  # nothing applied

    # The first engine and its children are untouched, and it still works.
    assert first.running.proc.poll() is None
    assert children(token) == pids
    got = cli("get", "processes", "-o", "json", store=False, kinds=False)
    assert {o["metadata"]["name"]: o["status"]["pid"] for o in got.json()["items"]} == pids
    c = process("c", free_port(), token)
    applied = cli("apply", "-f", str(cli.write("c.yaml", c)), store=False, kinds=False)
    assert applied.code == 0, applied
    pids |= first.wait_ready("c")

    code, err = first.running.stop(signal.SIGTERM)
    assert code == 0, err
    assert not any(alive(pid) for pid in pids.values())


def test_a_second_signal_kills_children_that_would_take_long_to_stop(cli: CLI, token: str) -> None:
    app = cli.directory / "app"
    app.mkdir()
    (app / "stubborn.yaml").write_text(yaml.safe_dump(stubborn("stubborn", free_port(), token)))
    up = Up(cli, app)
    up.running.expect(lambda line: line.startswith("Process/stubborn ready=True "), "running")
    [(pid, _, _)] = marked_processes(token)

    up.running.proc.send_signal(signal.SIGTERM)  # graceful: the child ignores it, 600 s grace
    code, err = up.running.stop(signal.SIGINT)  # the second: no more grace
    assert code == 0, err
    assert "stopping the rest at once (SIGKILL)" in err
    assert not alive(pid)
    assert marked_processes(token) == []
