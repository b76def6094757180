"""`setpoint up DIR`: real child processes converge (b waits for a), other verbs reach the
running engine with no flags, SIGTERM stops every child, SIGKILL leaves them for the next
`up` to adopt (no duplicates).

`up` runs as a subprocess with its stdout piped, so it prints one plain line per status
change; the test reads those lines with a timeout and never sleeps.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml
from cli_kit import CLI, Running, marked_processes, start_up

SERVE = """
    import socket, sys, time
    name, port = sys.argv[1], int(sys.argv[2])
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    print(f"{name} listening on {port}", flush=True)
    while True:
        c, _ = s.accept()
        c.close()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def process(name: str, port: int, token: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": name},
        "spec": {
            "args": [sys.executable, "-c", textwrap.dedent(SERVE), name, str(port), token],
            "terminationGracePeriodSeconds": 5,
            # The delay makes an adopted child report Ready=False before Ready=True.
            "readinessProbe": {
                "tcpSocket": {"port": port},
                "initialDelaySeconds": 1,
                "periodSeconds": 1,
            },
            **spec,
        },
    }


def children(token: str) -> dict[str, int]:
    """name -> pid of every live child process started for this test (by its marker)."""
    found: dict[str, int] = {}
    for pid, argv, environ in marked_processes(token):
        assert any(e.startswith(b"SETPOINT_MARKER=") for e in environ)
        name = argv[argv.index(token.encode()) - 2].decode()
        assert name not in found, f"two children for {name}: {found[name]}, {pid}"
        found[name] = pid
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


class Up:
    """`setpoint up` with no flags, in the test's directory."""

    def __init__(self, cli: CLI, path: Path) -> None:
        self.running = start_up(cli, path)

    def wait_ready(self, *names: str, not_pids: frozenset[int] = frozenset()) -> dict[str, int]:
        """Read lines until each of `names` has been reported ready with a pid not in
        `not_pids` (a stale status from an earlier run); return their pids."""
        pids: dict[str, int] = {}
        while set(pids) != set(names):
            line = self.running.expect(lambda line: " ready=True " in line, "ready=True")
            ref, _, rest = line.partition(" ")
            pid = int(dict(w.split("=", 1) for w in rest.split() if "=" in w)["pid"])
            if pid not in not_pids:
                pids[ref.removeprefix("Process/")] = pid
        return pids


def write_manifests(cli: CLI, token: str) -> Path:
    d = cli.directory / "app"
    d.mkdir(exist_ok=True)
    a = process("a", free_port(), token)
    b = process("b", free_port(), token, dependsOn=[{"kind": "Process", "name": "a"}])
    (d / "a.yaml").write_text(yaml.safe_dump(a))
    (d / "b.yaml").write_text(yaml.safe_dump(b))
    return d


def test_up_converges_serves_the_cli_and_stops_children_on_sigterm(cli: CLI, token: str) -> None:
    app = write_manifests(cli, token)
    up = Up(cli, app)
    up.running.expect(lambda line: line == "process.setpoint.dev/a created", "a created")
    waiting = up.running.expect(lambda line: line.startswith("Process/b "), "b's first state")
    pids = up.wait_ready("a", "b")
    assert "WaitingForDependency" in "\n".join(up.running.seen), waiting
    assert children(token) == pids

    # Other verbs, with no flags, reach the store `up` runs on.
    got = cli("get", "processes", "-o", "json", store=False, kinds=False)
    assert got.code == 0, got
    items = {o["metadata"]["name"]: o for o in got.json()["items"]}
    assert {n: o["status"]["pid"] for n, o in items.items()} == pids
    described = cli("describe", "process", "b", store=False, kinds=False)
    assert described.code == 0, described
    assert f"started pid {pids['b']}" in described.out
    events = cli("events", store=False, kinds=False)
    assert events.code == 0, events
    assert "Started" in events.out
    logs = cli("logs", "a", store=False, kinds=False)
    assert logs.code == 0, logs
    assert logs.out.startswith("a listening on ")

    follow = Running(
        subprocess.Popen(
            [sys.executable, "-m", "setpoint", "logs", "b", "-f"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cli.directory,
            env=cli.env,
        )
    )
    try:
        follow.expect(lambda line: line.startswith("b listening on "), "b's output")
        assert follow.stop(signal.SIGTERM) == (0, "")
    finally:
        follow.kill()

    # apply and delete reach it too: a third process starts, then goes.
    c = process("c", free_port(), token)
    applied = cli("apply", "-f", str(cli.write("c.yaml", c)), store=False, kinds=False)
    assert applied.lines == ["process.setpoint.dev/c created"], applied
    c_pid = up.wait_ready("c")["c"]
    deleted = cli("delete", "process", "c", store=False, kinds=False)
    assert deleted.code == 0, deleted
    up.running.expect(lambda line: line == "Process/c deleted", "c deleted")
    assert not alive(c_pid)

    code, err = up.running.stop(signal.SIGTERM)
    assert code == 0, err
    assert not any(alive(pid) for pid in pids.values())
    assert children(token) == {}


def test_up_again_adopts_children_left_by_a_killed_up(cli: CLI, token: str) -> None:
    app = write_manifests(cli, token)
    first = Up(cli, app)
    stopped = first.wait_ready("a", "b")
    assert first.running.stop(signal.SIGTERM)[0] == 0

    second = Up(cli, app)
    second.running.expect(lambda line: line == "process.setpoint.dev/a unchanged", "unchanged")
    pids = second.wait_ready("a", "b", not_pids=frozenset(stopped.values()))
    assert children(token) == pids
    second.running.kill()  # SIGKILL: the children stay, as an engine that dies leaves them
    assert children(token) == pids

    third = Up(cli, app)
    # An adopted child keeps the readiness its status records (no ReadinessProbePending
    # until its first probe: tests/workloads/test_children.py checks every revision).
    assert third.wait_ready("a", "b") == pids
    assert children(token) == pids  # the same processes, and no others

    code, err = third.running.stop(signal.SIGTERM)
    assert code == 0, err
    assert children(token) == {}
