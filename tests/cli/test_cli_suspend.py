"""`setpoint stop NAME` / `setpoint start NAME` against a running `setpoint up`: the child
is stopped and stays stopped (`spec.suspend`, phase Suspended, `Ready=False` reason
`Suspended`, as `setpoint ps` shows) whatever its restart policy, and starts again on
`start`; a Job (a process others wait for with `process_completed_successfully`) is
stopped without a failure counted, and its dependents wait until `start` lets it complete.
What they cannot stop is refused in one line, before anything is written.

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


JOB_FILE = """
processes:
  migrate:
    command: if [ -e started ]; then echo migrated; exit 0; fi; touch started; exec sleep 600
  web:
    command: echo web up && exec sleep 600
    ready_log_line: web up
    depends_on:
      migrate: {condition: process_completed_successfully}
"""


def test_stop_suspends_a_job_its_dependents_wait_and_start_lets_it_complete(cli: CLI) -> None:
    cli.write("process-compose.yaml", JOB_FILE)
    up = cli.start("up", "process-compose.yaml")
    pids: list[int] = []

    def migrating(line: str) -> bool:
        if (pid := pid_of(line)) is not None:
            pids.append(pid)
        return line.startswith("Job/migrate ") and pid_of(line) is not None

    with reaped(pids):
        first = pid_of(up.expect(migrating, "migrate Running"))
        assert first is not None
        assert cli.ok("stop", "migrate").lines == ["job.setpoint.dev/migrate stopped"]
        line = up.expect(lambda line: line.startswith("Job/migrate ") and "Suspended" in line,
                         "migrate Suspended")  # fmt: skip
        assert line.startswith("Job/migrate ready=False phase=Suspended ")
        assert not alive(first)
        job = cli.ok("get", "job", "migrate", "-o", "yaml").yaml()
        assert job["spec"]["suspend"] is True
        assert (job["status"]["phase"], job["status"]["failed"]) == ("Suspended", 0)
        suspended = [c for c in job["status"]["conditions"] if c["type"] == "Suspended"]
        assert [(c["status"], c["reason"]) for c in suspended] == [("True", "JobSuspended")]
        web = cli.ok("get", "process", "web", "-o", "yaml").yaml()
        assert web["status"]["phase"] == "Waiting"  # for migrate, which cannot complete now

        assert cli.ok("start", "job/migrate").lines == ["job.setpoint.dev/migrate started"]
        up.expect(lambda line: line.startswith("Process/web ready=True "), "web Ready")
        job = cli.ok("get", "job", "migrate", "-o", "yaml").yaml()
        status = job["status"]
        assert (status["phase"], status["attempts"], status["failed"]) == ("Succeeded", 2, 0)
        code, err = up.stop(signal.SIGTERM)
        assert code == 0, err


BOTH = """
apiVersion: setpoint.dev/v1alpha1
kind: Process
metadata: {name: web}
spec: {args: [sleep, "600"]}
---
apiVersion: setpoint.dev/v1alpha1
kind: Job
metadata: {name: web}
spec: {args: ["true"]}
---
apiVersion: setpoint.dev/v1alpha1
kind: Job
metadata: {name: migrate}
spec: {args: ["true"]}
"""


def suspend_of(cli: CLI, kind: str, name: str) -> object:
    return cli.ok("get", kind, name, "-o", "yaml").yaml()["spec"].get("suspend")


def test_stop_names_what_it_cannot_stop_in_one_line_and_writes_nothing(cli: CLI) -> None:
    cli.write("app.yaml", BOTH)
    assert cli("apply", "-f", "app.yaml").code == 0
    result = cli("stop", "deployment/web")
    assert (result.code, result.err_lines) == (
        1,
        [
            "error: deployment/web: a Deployment is not stopped but scaled to 0: "
            "setpoint scale deployment/web --replicas 0"
        ],
    )
    other = cli("stop", "service/web")
    assert (other.code, other.err_lines) == (
        1,
        ["error: service/web: stop and start take Processes and Jobs: "
         "NAME, process/NAME or job/NAME"],
    )  # fmt: skip
    both = cli("stop", "migrate", "web")  # migrate first: it is not written either
    assert (both.code, both.err_lines) == (
        1,
        ["error: web: process/web and job/web both exist: say which"],
    )
    missing = cli("stop", "job/migrate", "nothere")
    assert (missing.code, missing.err_lines) == (
        1,
        ['error: nothere: no Process or Job "nothere" in namespace default'],
    )
    assert suspend_of(cli, "job", "migrate") is False  # nothing half-written

    assert cli.ok("stop", "job/migrate", "process/web", "job/web").lines == [
        "job.setpoint.dev/migrate stopped",
        "process.setpoint.dev/web stopped",
        "job.setpoint.dev/web stopped",
    ]
    assert [suspend_of(cli, k, n) for k, n in (("job", "migrate"), ("process", "web"))] == [
        True,
        True,
    ]
    assert cli.ok("start", "migrate").lines == ["job.setpoint.dev/migrate started"]
    assert suspend_of(cli, "job", "migrate") is False
