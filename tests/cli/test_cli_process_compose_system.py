"""process-compose's own system tests (src/app/system_test.go), behaviour by behaviour,
against the real `setpoint up`: each test runs a process-compose file of our own and
drives it with setpoint's verbs (`stop`, `start`, `restart`, `apply -f`), as a
process-compose user drives a project with `process stop`, `process restart` and a
project update. docs/process-compose.md has the table of their tests and ours.

Real `setpoint` processes and real children; every wait is on a line of output or on the
store's state, with a timeout, never a sleep. Nothing is left running.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

from cli_kit import CLI, TIMEOUT, Running, marked_processes
from test_cli_process_compose import reaped
from test_cli_up import alive


def pid_of(line: str) -> int | None:
    pid = line.split(" pid=")[1].split()[0] if " pid=" in line else ""
    return int(pid) if pid.isdigit() else None


def until_each(
    up: Running, want: Mapping[str, Callable[[str], bool]], pids: list[int]
) -> dict[str, str]:
    """Reads `up`'s live view until the latest line of each `Process/NAME` in `want`
    satisfies `want[NAME]`; returns those lines. Every pid seen is noted in `pids`."""
    latest: dict[str, str] = {}

    def note(line: str) -> bool:
        name = line.split()[0].removeprefix("Process/") if line.startswith("Process/") else ""
        if name in want:
            latest[name] = line
            if (pid := pid_of(line)) is not None:
                pids.append(pid)
        return all(name in latest and ok(latest[name]) for name, ok in want.items())

    up.expect(note, f"each of {', '.join(want)} as wanted")
    return latest


def running(line: str) -> bool:
    return " ready=True phase=Running " in line


def phase(name: str) -> Callable[[str], bool]:
    return lambda line: f" phase={name} " in line


def status(cli: CLI, name: str) -> dict[str, Any]:
    got: dict[str, Any] = cli.ok("get", "process", name, "-o", "yaml").yaml()
    return got


NO_RESTART = """
processes:
  restarting:                       # restart: always, and running
    command: exec sleep 600
    availability: {restart: always}
  once:                             # restart: no (the default), and running
    command: exec sleep 600
  flapping:                         # restart: always; it ends at once, so it is in back-off
    command: "true"
    availability: {restart: always, backoff_seconds: 600}
"""


def test_a_stopped_process_is_not_restarted_whatever_its_policy(cli: CLI) -> None:
    """process-compose's ProcShutDownNoRestart and RestartingProcessShutDown: a process
    stopped by hand (`process stop`; here `setpoint stop`) ends and is not restarted,
    with `restart: always` too, and also when it was waiting out its back-off."""
    cli.write("process-compose.yaml", NO_RESTART)
    up = cli.start("up", "process-compose.yaml")
    pids: list[int] = []
    with reaped(pids):
        before = until_each(
            up,
            {"restarting": running, "once": running, "flapping": phase("CrashLoopBackOff")},
            pids,
        )
        flapping_restarts = status(cli, "flapping")["status"]["restarts"]
        assert cli.ok("stop", "restarting", "once", "flapping").lines == [
            "process.setpoint.dev/restarting stopped",
            "process.setpoint.dev/once stopped",
            "process.setpoint.dev/flapping stopped",
        ]
        suspended = phase("Suspended")
        until_each(up, {"restarting": suspended, "once": suspended, "flapping": suspended}, pids)
        for name in ("restarting", "once"):
            old = pid_of(before[name])
            assert old is not None
            assert not alive(old)
            assert status(cli, name)["status"]["lastExit"]["stoppedOnRequest"] is True
        # the one in back-off was not started again to be stopped
        assert status(cli, "flapping")["status"]["restarts"] == flapping_restarts
        code, err = up.stop(signal.SIGTERM)
        assert code == 0, err


TIMEOUTS = """
processes:
  stubborn:                         # ignores SIGTERM: killed once timeout_seconds are up
    command: trap '' TERM; echo up; exec sleep 600
    ready_log_line: up
    shutdown: {timeout_seconds: 1}
  polite:                           # ends on SIGTERM, long before its timeout
    command: echo up; exec sleep 600
    ready_log_line: up
    shutdown: {timeout_seconds: 300}
"""


def test_stop_kills_a_process_that_outlives_its_timeout_seconds(cli: CLI) -> None:
    """process-compose's ProcShutDownWithConfiguredTimeOut: a process that ignores its
    shutdown signal is terminating until `shutdown.timeout_seconds` are up, then killed;
    one that honours the signal ends by it."""
    cli.write("process-compose.yaml", TIMEOUTS)
    up = cli.start("up", "process-compose.yaml")
    pids: list[int] = []
    with reaped(pids):
        until_each(up, {"stubborn": running, "polite": running}, pids)
        cli.ok("stop", "stubborn", "polite")
        stopping: list[str] = []

        def suspended(line: str) -> bool:
            if " Stopping: " in line:
                stopping.append(line.split()[0])
            return " phase=Suspended " in line

        until_each(up, {"stubborn": suspended, "polite": suspended}, pids)
        assert "Process/stubborn" in stopping  # terminating for its grace period first
        stubborn = status(cli, "stubborn")["status"]["lastExit"]
        assert (stubborn["signal"], stubborn["stoppedOnRequest"]) == (9, True)
        polite = status(cli, "polite")["status"]["lastExit"]
        assert (polite["signal"], polite["stoppedOnRequest"]) == (15, True)
        code, err = up.stop(signal.SIGTERM)
        assert code == 0, err
        assert not [pid for pid in pids if alive(pid)]


WAITING = """
processes:
  first:                            # never completes
    command: exec sleep 600
  second:
    command: echo second
    depends_on:
      first: {condition: process_completed}
  third:
    command: echo third
    depends_on:
      second: {condition: process_started}
  fourth:
    command: echo fourth
    depends_on:
      second: {condition: process_started}
"""


def test_up_stops_at_once_while_processes_wait_for_their_dependencies(cli: CLI) -> None:
    """process-compose's WaitForStartShutDown (its issue 280): shutting the project down
    while processes still wait for their dependencies ends it, without hanging on them."""
    cli.write("process-compose.yaml", WAITING)
    up = cli.start("up", "process-compose.yaml")
    pids: list[int] = []
    with reaped(pids):
        waiting = phase("Waiting")
        until_each(
            up,
            {"first": running, "second": waiting, "third": waiting, "fourth": waiting},
            pids,
        )
        code, err = up.stop(signal.SIGTERM)
        assert code == 0, err
        assert len(pids) == 1  # first's: none of those waiting was started
        assert not alive(pids[0])


def test_restarts_at_the_same_time_leave_one_child_running(cli: CLI, token: str) -> None:
    """process-compose's ConcurrentRestartRaceCondition: many restarts of one process at
    once all succeed, and exactly one child runs afterwards."""
    cli.write(
        "process-compose.yaml", f"processes:\n  web: {{command: exec -a {token} sleep 600}}\n"
    )
    up = cli.start("up", "process-compose.yaml")
    pids: list[int] = []
    with reaped(pids):
        until_each(up, {"web": running}, pids)
        restarts = [
            subprocess.Popen(
                cli.argv(("restart", "process/web"), store=True, kinds=True),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=cli.directory,
                env=cli.env,
            )
            for _ in range(6)
        ]
        for restart in restarts:
            out, err = restart.communicate(timeout=TIMEOUT)
            assert (restart.returncode, out, err) == (0, "process.setpoint.dev/web restarted\n", "")
        requested = status(cli, "web")["metadata"]["annotations"]["setpoint.dev/restartedAt"]
        while True:  # each restart the engine honours shows web running again: up to the last
            until_each(up, {"web": running}, pids)
            web = status(cli, "web")["status"]
            if web.get("restartedAt") == requested and web["phase"] == "Running":
                break
        assert [pid for pid, _, _ in marked_processes(token)] == [web["pid"]]
        code, err = up.stop(signal.SIGTERM)
        assert code == 0, err
        assert marked_processes(token) == []


def test_start_while_a_stop_is_still_under_way_runs_the_process_again(cli: CLI) -> None:
    """process-compose's StartProcessResetsStaleTerminatingState: a process asked to start
    while it is still terminating is not left stuck: once the old child has ended (here
    killed at the end of its timeout), a new one runs."""
    cli.write("process-compose.yaml", TIMEOUTS.replace("timeout_seconds: 1", "timeout_seconds: 5"))
    up = cli.start("up", "process-compose.yaml")
    pids: list[int] = []
    with reaped(pids):
        first = pid_of(until_each(up, {"stubborn": running}, pids)["stubborn"])
        cli.ok("stop", "stubborn")
        until_each(up, {"stubborn": lambda line: " Stopping: " in line}, pids)
        cli.ok("start", "stubborn")
        again = until_each(
            up, {"stubborn": lambda line: running(line) and pid_of(line) != first}, pids
        )
        assert first is not None
        assert not alive(first)
        assert pid_of(again["stubborn"]) != first
        stubborn = status(cli, "stubborn")
        assert stubborn["spec"]["suspend"] is False
        assert stubborn["status"]["lastExit"]["signal"] == 9  # the old child, at its timeout
        code, err = up.stop(signal.SIGTERM)
        assert code == 0, err
        assert not [pid for pid in pids if alive(pid)]


UPDATE_BEFORE = """
processes:
  changed:                          # the only process that keeps running
    command: echo v1 && exec sleep 600
    environment: [VAR1=value1]
    ready_log_line: v1
  same:                             # runs once and ends
    command: echo same >> runs.txt
"""

UPDATE_AFTER = """
processes:
  changed:
    command: echo v2 && exec sleep 600
    environment: [VAR1=value1]
    ready_log_line: v2
  same:
    command: echo same >> runs.txt
  added:
    command: echo added >> runs.txt && echo added up && exec sleep 600
    ready_log_line: added up
"""


def test_applying_the_file_again_updates_what_changed_and_up_keeps_running(cli: CLI) -> None:
    """process-compose's UpdateProject and UpdateKeepsProjectAlive: a project update
    (here `setpoint apply -f` of the edited file while `up` runs) restarts a changed
    process with its new command, leaves an unchanged one alone and starts an added one;
    restarting the only running process does not end the run."""
    cli.write("process-compose.yaml", UPDATE_BEFORE)
    up = cli.start("up", "process-compose.yaml")
    pids: list[int] = []
    with reaped(pids):
        before = until_each(up, {"changed": running, "same": phase("Succeeded")}, pids)
        cli.write("process-compose.yaml", UPDATE_AFTER)
        assert cli.ok("apply", "-f", "process-compose.yaml").lines == [
            "process.setpoint.dev/added created",
            "process.setpoint.dev/changed configured",
            "process.setpoint.dev/same unchanged",
        ]
        old = pid_of(before["changed"])
        after = until_each(
            up,
            {
                "changed": lambda line: running(line) and pid_of(line) != old,
                "added": running,
            },
            pids,
        )
        assert "matched: v2" in after["changed"]  # the new command runs
        assert old is not None
        assert not alive(old)
        assert up.proc.poll() is None  # the run goes on
        assert (cli.directory / "runs.txt").read_text().splitlines() == ["same", "added"]
        code, err = up.stop(signal.SIGTERM)
        assert code == 0, err
        assert not [pid for pid in pids if alive(pid)]


PROFILES = """
processes:
  shared-db:
    command: echo db >> runs.txt
    namespace: infra
  customer-api:
    command: echo customer up && exec sleep 600
    ready_log_line: customer up
    namespace: customer
  admin-api:
    command: echo admin-api >> runs.txt
    namespace: admin
    depends_on:
      shared-db: {condition: process_completed_successfully}
  admin-ui:
    command: echo admin-ui >> runs.txt && echo admin up && exec sleep 600
    ready_log_line: admin up
    namespace: admin
    depends_on:
      admin-api: {condition: process_completed_successfully}
"""


def test_a_namespace_is_started_later_beside_a_subset_and_a_reapply_keeps_it(cli: CLI) -> None:
    """process-compose's fixtures-code namespace-profiles, as its namespace tests and
    ProcListToRunSurvivesReload run it: `up customer-api` runs that process alone; then
    the `admin` namespace is started (`apply -f FILE --compose-namespace admin`, their
    `namespace start admin`) with its own order but not the dependency it has in another
    namespace; applying the file again for the same namespace changes nothing and starts
    none of the processes left out."""
    cli.write("process-compose.yaml", PROFILES)
    up = cli.start("up", "customer-api")
    pids: list[int] = []
    with reaped(pids):
        until_each(up, {"customer-api": running}, pids)
        names = ["process.setpoint.dev/customer-api"]
        assert cli.ok("get", "processes", "-o", "name").lines == names
        admin = cli("apply", "-f", "process-compose.yaml", "--compose-namespace", "admin")
        assert admin.code == 0, admin
        assert admin.lines == [
            "job.setpoint.dev/admin-api created",
            "process.setpoint.dev/admin-ui created",
        ]
        assert admin.err_lines == [
            "warning: process-compose.yaml: processes.admin-api.depends_on.shared-db: "
            "shared-db is in none of the namespaces selected (admin): not waited for",
        ]
        until_each(up, {"admin-ui": running}, pids)
        assert (cli.directory / "runs.txt").read_text().splitlines() == ["admin-api", "admin-ui"]
        again = cli("apply", "-f", "process-compose.yaml", "--compose-namespace", "customer")
        assert again.lines == ["process.setpoint.dev/customer-api unchanged"]
        assert cli.ok("get", "processes", "-o", "name").lines == [
            "process.setpoint.dev/admin-ui",
            "process.setpoint.dev/customer-api",
        ]
        assert cli.ok("get", "jobs", "-o", "name").lines == ["job.setpoint.dev/admin-api"]
        code, err = up.stop(signal.SIGTERM)
        assert code == 0, err
        assert not [pid for pid in pids if alive(pid)]


def test_a_selection_of_namespaces_converts_only_their_processes(cli: CLI) -> None:
    cli.write("process-compose.yaml", PROFILES)
    result = cli("convert", "process-compose.yaml", "--compose-namespace", "infra")
    assert result.code == 0, result
    assert [line for line in result.lines if line.startswith("  name: ")] == ["  name: shared-db"]
    assert cli("convert", "process-compose.yaml", "--compose-namespace", "nope").err_lines == [
        "error: process-compose.yaml: processes: no process is in the namespaces selected (nope)"
    ]
    cli.write("web.yaml", "apiVersion: setpoint.dev/v1alpha1\nkind: Process\n"
              "metadata: {name: web}\nspec: {args: [sleep, '1']}\n")  # fmt: skip
    assert cli("apply", "-f", "web.yaml", "--compose-namespace", "infra").err_lines == [
        "error: --compose-namespace: no process-compose file given"
    ]
