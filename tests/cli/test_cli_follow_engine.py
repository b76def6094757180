"""`logs` and `wait` against a real `setpoint up` and its children: `wait` returns once the
children are Ready (and once a deleted one is gone), `logs` with no name interleaves
every child's output behind its name, with the times the log holder recorded, and `-f`
follows a child started later. Lines are read with a timeout; nothing sleeps.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import datetime

from cli_kit import CLI, Running
from test_cli_up import Up, free_port, process, write_manifests


def test_wait_and_logs_on_real_children(cli: CLI, token: str) -> None:
    started = time.time()
    app = write_manifests(cli, token)  # a, then b once a is Ready
    up = Up(cli, app)
    up.running.expect(lambda line: line == "process.setpoint.dev/b created", "the store made")

    def setpoint(*args: str) -> list[str]:
        result = cli(*args, store=False, kinds=False)
        assert (result.code, result.err) == (0, ""), result
        return result.lines

    met = setpoint("wait", "--for=condition=Ready", "process/a", "process/b", "--timeout", "1m")
    assert sorted(met) == [
        "process.setpoint.dev/a condition met",
        "process.setpoint.dev/b condition met",
    ]
    # Each child printed one line once listening; both logs, each line behind its name.
    lines = setpoint("logs")
    assert sorted(line.split(" listening")[0] for line in lines) == ["a | a", "b | b"]
    assert setpoint("logs", "--since", "1h") == lines
    stamped = setpoint("logs", "--timestamps", "--no-prefix", "process/a")
    [(at, text)] = [line.split(" ", 1) for line in stamped]
    assert text.startswith("a listening on ")
    assert started <= datetime.fromisoformat(at[:26] + "+00:00").timestamp() <= time.time()

    follow = Running(
        subprocess.Popen(
            [sys.executable, "-m", "setpoint", "logs", "-f"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cli.directory,
            env=cli.env,
        )
    )
    try:
        follow.expect(lambda line: line.startswith("b | b listening on "), "b's line")
        c = process("c", free_port(), token)
        setpoint("apply", "-f", str(cli.write("c.yaml", c)))
        follow.expect(lambda line: line.startswith("c | c listening on "), "c, started later")
        assert follow.stop(signal.SIGTERM) == (0, "")
    finally:
        follow.kill()

    setpoint("delete", "process", "c")  # marked: the engine stops it, then it goes
    assert setpoint("wait", "--for=delete", "process/c", "--timeout", "1m") == [
        "process.setpoint.dev/c deleted"
    ]
    code, err = up.running.stop(signal.SIGTERM)
    assert code == 0, err
