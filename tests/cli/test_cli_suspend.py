"""`setpoint stop NAME` / `setpoint start NAME` against a running `setpoint up`: the child
is stopped and stays stopped (`spec.suspend`, phase Suspended, `Ready=False` reason
`Suspended`, as `setpoint ps` shows) whatever its restart policy, and starts again on
`start`.

Real `setpoint` processes and real children; every wait is on a line of output with a
timeout, never a sleep.
"""

from __future__ import annotations

import signal

from cli_kit import CLI
from test_cli_process_compose import reaped
from test_cli_up import alive

FILE = """
processes:
  web:
    command: echo web up && exec sleep 600
    ready_log_line: web up
    availability: {restart: always}
"""


def pid_of(line: str) -> int | None:
    pid = line.split(" pid=")[1].split()[0] if " pid=" in line else ""
    return int(pid) if pid.isdigit() else None


def test_stop_keeps_a_process_stopped_and_start_runs_it_again(cli: CLI) -> None:
    cli.write("process-compose.yaml", FILE)
    up = cli.start("up", "process-compose.yaml")
    pids: list[int] = []

    def ready(line: str) -> bool:
        if (pid := pid_of(line)) is not None:
            pids.append(pid)
        return line.startswith("Process/web ready=True ")

    with reaped(pids):
        first = pid_of(up.expect(ready, "web Ready"))
        assert cli.ok("stop", "web").lines == ["process.setpoint.dev/web stopped"]
        line = up.expect(lambda line: "phase=Suspended" in line, "web Suspended")
        assert line.startswith("Process/web ready=False phase=Suspended ")
        assert " Suspended: suspended (spec.suspend; setpoint start resumes it)" in line
        assert first is not None
        assert not alive(first)  # stopped, and not restarted (restart: always)
        table = cli.ok("ps").lines  # the live view's table, once
        assert table[0].split()[:3] == ["KIND/NAME", "READY", "PHASE"]
        assert table[1].split()[:4] == ["Process/web", "False", "Suspended", "Suspended:"]
        got = cli.ok("get", "process", "web", "-o", "yaml")
        assert got.yaml()["spec"]["suspend"] is True

        assert cli.ok("start", "process/web").lines == ["process.setpoint.dev/web started"]
        second = pid_of(up.expect(ready, "web Ready again"))
        assert second not in (None, first)
        assert cli.ok("get", "process", "web", "-o", "yaml").yaml()["spec"]["suspend"] is False
        code, err = up.stop(signal.SIGTERM)
        assert code == 0, err


def test_stop_names_what_it_cannot_stop_in_one_line(cli: CLI) -> None:
    cli.write("process-compose.yaml", FILE)
    assert cli("apply", "-f", "process-compose.yaml").code == 0
    result = cli("stop", "deployment/web")
    assert (result.code, result.err_lines) == (
        1,
        ["error: deployment/web: stop and start take Processes: NAME or process/NAME"],
    )
    missing = cli("stop", "nothere")
    assert missing.code == 1
    assert len(missing.err_lines) == 1
    assert "nothere" in missing.err
