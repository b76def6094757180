"""process-compose files through the real command line: `setpoint up` runs
examples/process-compose/process-compose.yaml as it is, `convert` prints manifests that
`apply -f` reads back, a directory's override is merged, `.env` fills `${VAR}`, what is
not honoured is warned about once, and a docker compose file or a circle is refused in
one line.

Real `setpoint` processes and real children; every wait is on a line of output with a
timeout, never a sleep. Nothing is left running.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest
import yaml
from cli_kit import CLI, REPO, marked_processes
from test_cli_up import alive

EXAMPLE = REPO / "examples" / "process-compose"


def environ_of(pid: int) -> dict[str, str]:
    """The environment a live process was started with, from /proc."""
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().partition("=")[::2] for item in raw if b"=" in item)


@contextlib.contextmanager
def reaped(pids: Iterable[int]) -> Iterator[None]:
    """Kill what is left of the children `pids` (each in a session of its own) when the
    test fails: a failed test leaves nothing running."""
    try:
        yield
    except BaseException:  # pytest's failures too
        for pid in list(pids):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        raise


def noting_pids(pids: list[int], until: str) -> Callable[[str], bool]:
    """A line test for `Running.expect`: notes in `pids` each `pid=N` that `up` prints, and
    holds for the first line that starts with `until`."""

    def note(line: str) -> bool:
        pid = line.split(" pid=")[1].split()[0] if " pid=" in line else ""
        if pid.isdigit():
            pids.append(int(pid))
        return line.startswith(until)

    return note


def test_up_runs_the_process_compose_example_as_it_is(cli: CLI) -> None:
    shutil.copytree(EXAMPLE, cli.directory / "examples" / "process-compose")
    up = cli.start("up", "examples/process-compose")
    pids: dict[str, int] = {}

    def note(line: str) -> bool:
        name = line.split()[0] if line else ""
        if " pid=" in line:
            pid = line.split(" pid=")[1].split()[0]
            if pid.isdigit():
                pids[name] = int(pid)
        return name == "Process/client" and " ready=True " in line

    with reaped(pids.values()):
        up.expect(note, "client Ready")
        text = "\n".join(up.seen)
        assert "Process/seed ready=False phase=Failed" in text  # it exits 3, on purpose
        assert "matched: server listening on port 8099" in text  # ready_log_line
        client = environ_of(pids["Process/client"])
        assert client["GREETING"] == "hello from app.env"  # env_file
        assert client["TARGET"] == "client"  # environment wins over env_file
        assert client["PC_PROC_NAME"] == "client"
        code, err = up.stop(signal.SIGTERM)
        assert code == 0, err
        assert not [pid for pid in pids.values() if alive(pid)]


ORDERED = """
processes:
  setup:                          # a Job: others wait for it to complete successfully
    command: echo setup >> order.txt
  worker:
    command: >-
      echo "worker {{.PC_REPLICA_NUM}}" >> order.txt &&
      echo "worker $$PC_REPLICA_NUM up" && exec sleep 600
    replicas: 2
    ready_log_line: up
    depends_on:
      setup: {condition: process_completed_successfully}
  final:
    command: echo final >> order.txt && exec sleep 600
    depends_on:
      worker: {condition: process_log_ready}   # every replica
"""


def test_up_starts_in_dependency_order_with_replicas_as_process_compose(cli: CLI) -> None:
    cli.write("process-compose.yaml", ORDERED)
    up = cli.start("up", "process-compose.yaml")
    pids: list[int] = []

    note = noting_pids(pids, "Process/final ready=True ")

    with reaped(pids):
        up.expect(note, "final Ready")
        text = "\n".join(up.seen)
        assert "Job/setup ready=True" in text
        assert "Process/worker-0 ready=True" in text
        assert "Process/worker-1 ready=True" in text
        order = (cli.directory / "order.txt").read_text().splitlines()
        assert order[0] == "setup"
        assert sorted(order[1:3]) == ["worker 0", "worker 1"]
        assert order[3:] == ["final"]
        code, err = up.stop(signal.SIGTERM)
        assert code == 0, err
        assert not [pid for pid in pids if alive(pid)]


STOPPER = """
import signal, sys, time
name, signame = sys.argv[1], sys.argv[2]
def stop(*_):
    with open("stops.txt", "a") as f:
        f.write(name + "\\n")
    sys.exit(0)
signal.signal(getattr(signal, signame), stop)
print(name, "up", flush=True)
time.sleep(600)
"""

SHUTDOWN = """
processes:
  db:
    command: python3 stopper.py db SIGINT
    ready_log_line: db up
    shutdown: {signal: 2, timeout_seconds: 20}
  web:
    command: python3 stopper.py web SIGTERM
    ready_log_line: web up
    depends_on:
      db: {condition: process_log_ready}
"""


def test_up_stops_dependents_first_each_with_its_shutdown_signal(cli: CLI) -> None:
    (cli.directory / "stopper.py").write_text(STOPPER)
    cli.write("process-compose.yaml", SHUTDOWN)
    up = cli.start("up", "process-compose.yaml")
    pids: list[int] = []

    note = noting_pids(pids, "Process/web ready=True ")

    with reaped(pids):
        up.expect(note, "web Ready")
        code, err = up.stop(signal.SIGTERM)
        assert code == 0, err
        # db caught SIGINT (its shutdown.signal), after web had stopped
        assert (cli.directory / "stops.txt").read_text().splitlines() == ["web", "db"]


def test_convert_prints_manifests_that_apply_reads_back(cli: CLI) -> None:
    shutil.copytree(EXAMPLE, cli.directory / "pc")
    result = cli("convert", "pc")
    assert result.code == 0, result
    docs = list(yaml.safe_load_all(result.out))
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("Process", "client"), ("Process", "seed"), ("Process", "server"),
    ]  # fmt: skip
    assert docs[2]["spec"]["readinessProbe"] == {"logLine": {"pattern": "listening on port"}}
    converted = cli.write("converted.yaml", result.out)
    cli.ok("apply", "-f", str(converted))
    assert cli.ok("get", "processes", "-o", "name").lines == [
        "process.setpoint.dev/client", "process.setpoint.dev/seed", "process.setpoint.dev/server",
    ]  # fmt: skip
    cli.ok("delete", "-f", "pc")  # the file itself names the same objects
    assert cli.ok("get", "processes", "-o", "name").lines == []


def test_an_override_beside_the_default_file_is_merged_and_warnings_come_once(cli: CLI) -> None:
    (cli.directory / "app").mkdir()
    (cli.directory / "app" / "process-compose.yaml").write_text(
        "processes:\n"
        "  web:\n"
        "    command: serve\n"
        "    environment: [A=1, B=1]\n"
        "    availability: {restart: always, max_restarts: 3}\n"
    )
    (cli.directory / "app" / "process-compose.override.yaml").write_text(
        "processes:\n  web:\n    command: serve --debug\n    environment: [B=2]\n"
    )
    result = cli("convert", "app")
    assert result.code == 0, result
    (web,) = yaml.safe_load_all(result.out)
    assert web["spec"]["args"] == ["bash", "-c", "serve --debug"]
    assert web["spec"]["env"]["A"] == "1"
    assert web["spec"]["env"]["B"] == "2"
    assert result.err_lines == [
        "warning: app/process-compose.yaml: processes.web.availability.max_restarts: ignored: "
        "a setpoint Process restarts without limit, with back-off"
    ]
    # -f several files: merged in order, the later overriding
    apply = cli(
        "apply", "-f", "app/process-compose.override.yaml", "-f", "app/process-compose.yaml"
    )
    assert apply.code == 0, apply
    web = cli.ok("get", "process", "web", "-o", "yaml").yaml()
    assert web["spec"]["args"] == ["bash", "-c", "serve"]


def test_dotenv_fills_variables_of_the_file_and_every_process_reads_it(cli: CLI) -> None:
    (cli.directory / ".env").write_text("PORT=9000\n")
    cli.write("process-compose.yaml", "processes:\n  web: {command: 'serve ${PORT} $${HOME}'}\n")
    result = cli("convert", "process-compose.yaml", env={"PORT": "1"})
    assert result.code == 0, result
    (web,) = yaml.safe_load_all(result.out)
    assert web["spec"]["args"][-1] == "serve 9000 ${HOME}"  # .env wins, $$ is one $
    assert web["spec"]["envFile"] == [".env"]


def test_a_project_extends_another_file_whose_processes_run_in_its_directory(cli: CLI) -> None:
    (cli.directory / "base").mkdir()
    cli.write("base/common.yaml", "processes:\n  db: {command: db}\n  cache: {command: c}\n")
    cli.write(
        "pc.yaml",
        "extends: base/common.yaml\n"
        "disable_env_expansion: true\n"
        "processes:\n"
        "  cache: {command: 'cache $$HOME', working_dir: /tmp}\n"
        "  web: {command: web, depends_on: {db: {condition: process_started}}}\n",
    )
    result = cli("convert", "pc.yaml")
    assert result.code == 0, result
    docs = {d["metadata"]["name"]: d["spec"] for d in yaml.safe_load_all(result.out)}
    assert docs["db"]["cwd"] == "base"
    assert docs["cache"]["cwd"] == "/tmp"
    assert docs["cache"]["args"][-1] == "cache $$HOME"  # not expanded: the file says so
    assert "cwd" not in docs["web"]
    cli.write("loop.yaml", "extends: loop.yaml\nprocesses: {a: {command: x}}\n")
    assert cli("convert", "loop.yaml").err_lines == [
        "error: loop.yaml: extends: loop.yaml: extends itself in a circle"
    ]


def test_a_docker_compose_file_or_a_circle_is_refused_in_one_line(cli: CLI) -> None:
    cli.write("docker-compose.yml", "services:\n  web: {image: nginx}\n")
    result = cli("up", "docker-compose.yml")
    assert result.code == 1
    assert result.err_lines == [
        "error: docker-compose.yml: a docker compose file (services:): setpoint runs "
        "process-compose files (processes:) and its own manifests (apiVersion, kind), "
        "not containers"
    ]
    cli.write(
        "pc.yaml",
        "processes:\n"
        "  a: {command: x, depends_on: {b: {condition: process_started}}}\n"
        "  b: {command: x, depends_on: {a: {condition: process_started}}}\n",
    )
    result = cli("apply", "-f", "pc.yaml")
    assert result.code == 1
    assert result.err_lines == [
        "error: pc.yaml: processes.a.depends_on: circular dependency: a -> b -> a"
    ]


CHAIN_EXIT = """
processes:
  server:
    command: echo server up && exec sleep 600
    ready_log_line: server up
  check:                          # succeeds: exit_on_failure does not end the run
    command: "true"
    availability: {restart: exit_on_failure}
    depends_on:
      server: {condition: process_log_ready}
  migrate:
    command: exit 42
    availability: {restart: exit_on_failure}
    depends_on:
      check: {condition: process_completed}
"""


def test_exit_on_failure_ends_up_with_the_failed_process_s_code(cli: CLI) -> None:
    """process-compose's ComposeChainExit: `restart: exit_on_failure` on a process that
    fails stops everything, and `up` exits with its exit code; one that succeeds does not."""
    cli.write("process-compose.yaml", CHAIN_EXIT)
    up = cli.start("up", "process-compose.yaml")
    pids: list[int] = []

    note = noting_pids(pids, "Process/server ready=True ")

    with reaped(pids):
        up.expect(note, "server Ready")
        code, err = up.ended()
        assert code == 42, err
        assert (
            "Process/migrate exited with code 42 (setpoint.dev/exit-on-failure): "
            "stopping everything"
        ) in err.splitlines()
        assert "Process/check" not in err
        assert not [pid for pid in pids if alive(pid)]


EXIT_ON_END = """
processes:
  server:
    command: exec -a {token} sleep 600
  main:
    command: {command}
    availability: {{exit_on_end: true}}
    success_exit_codes: {codes}
    depends_on:
      server: {{condition: process_started}}
"""


@pytest.mark.parametrize(
    ("command", "codes", "want"),
    [
        ("exit 130", "[130]", 0),  # an allowed code ends the run cleanly
        ("exit 130", "[]", 130),  # the same code, not allowed: up takes it
        ("'true'", "[]", 0),
        ("kill -KILL $$$$", "[]", 255),  # a signal: process-compose's -1, as an exit status
    ],
)
def test_exit_on_end_ends_up_with_the_process_s_code_unless_it_is_a_success(
    cli: CLI, command: str, codes: str, want: int
) -> None:
    """process-compose's SuccessExitCodesExitOnEnd: `exit_on_end` stops everything when the
    process ends, and `up` exits with its code, 0 when `success_exit_codes` lists it."""
    # The server's argv[0], found in /proc: this test's own (its directory's name is not: the
    # same test on another worker has the same one).
    token = f"server-{uuid.uuid4().hex}"
    text = EXIT_ON_END.format(command=command, codes=codes, token=token)
    cli.write("process-compose.yaml", text)
    up = cli.start("up", "process-compose.yaml")
    code, err = up.ended()
    assert code == want, err
    assert "Process/main " in err
    assert "(setpoint.dev/exit-on-end): stopping everything" in err
    assert "error:" not in err
    assert marked_processes(token) == []  # the server was stopped


RETRIED = """
processes:
  flaky:                          # fails once, then succeeds
    command: test -f ran || { touch ran; exit 7; }
    availability: {restart: on_failure, exit_on_end: true}
"""


def test_exit_on_end_waits_until_the_process_is_not_restarted(cli: CLI) -> None:
    """As process-compose: `exit_on_end` acts once the process stops restarting (here
    once it succeeded), not at a failure its restart policy restarts."""
    cli.write("process-compose.yaml", RETRIED)
    up = cli.start("up", "process-compose.yaml")
    code, err = up.ended()
    assert code == 0, err
    assert "Process/flaky exited with code 0 (setpoint.dev/exit-on-end): " in err
    assert (cli.directory / "ran").exists()


def test_up_with_no_path_runs_the_directory_s_process_compose_file_and_override(
    cli: CLI,
) -> None:
    """As `process-compose up` with no `-f`: the working directory's process-compose.yaml,
    with process-compose.override.yaml merged over it."""
    cli.write(
        "process-compose.yaml",
        'processes:\n  hello:\n    command: echo "$$GREETING" && exec sleep 600\n'
        "    ready_log_line: from the override\n"
        "    environment: [GREETING=from the base file]\n",
    )
    cli.write(
        "process-compose.override.yaml",
        "processes:\n  hello:\n    environment: [GREETING=from the override]\n",
    )
    up = cli.start("up")
    pids: list[int] = []

    note = noting_pids(pids, "Process/hello ready=True ")

    with reaped(pids):
        assert up.expect(lambda line: "hello" in line, "hello created") == (
            "process.setpoint.dev/hello created"
        )
        up.expect(note, "hello Ready on the override's line")
        code, err = up.stop(signal.SIGTERM)
        assert code == 0, err
        assert not [pid for pid in pids if alive(pid)]


SUBSET = """
processes:
  db:
    command: echo db up && exec sleep 600
    ready_log_line: db up
  web:
    command: exec sleep 600
    depends_on:
      db: {condition: process_log_ready}
  other:
    command: echo other >> other.txt && exec sleep 600
  work_er:
    command: exec sleep 600
    replicas: 2
"""


def test_up_names_start_those_processes_and_what_they_depend_on(cli: CLI) -> None:
    """As `process-compose up web work_er`: web, db (which web depends on) and every
    replica of work_er (named as the file names it) run; other does not."""
    cli.write("process-compose.yaml", SUBSET)
    refused = cli("up", "nothere")
    assert refused.code == 1
    assert refused.err_lines[-1:] == [
        "error: up nothere: no object of that name in the manifests given"
    ]
    up = cli.start("up", "web", "work_er")
    pids: list[int] = []

    note = noting_pids(pids, "Process/web ready=True ")

    with reaped(pids):
        up.expect(note, "web Ready")
        applied = [line for line in up.seen if line.endswith(" created")]
        assert applied == [
            "process.setpoint.dev/db created",
            "process.setpoint.dev/web created",
            "process.setpoint.dev/work-er-0 created",
            "process.setpoint.dev/work-er-1 created",
        ]
        assert cli.ok("get", "processes", "-o", "name").lines == [
            "process.setpoint.dev/db",
            "process.setpoint.dev/web",
            "process.setpoint.dev/work-er-0",
            "process.setpoint.dev/work-er-1",
        ]
        assert not (cli.directory / "other.txt").exists()
        code, err = up.stop(signal.SIGTERM)
        assert code == 0, err


JOB_EXIT = """
processes:
  migrate:                        # a Job: web waits for it to complete successfully
    command: exit 3
    availability: {restart: exit_on_failure}
  web:
    command: exec sleep 600
    depends_on:
      migrate: {condition: process_completed_successfully}
"""


def test_exit_on_failure_of_a_process_run_as_a_job_ends_up_too(cli: CLI) -> None:
    cli.write("process-compose.yaml", JOB_EXIT)
    up = cli.start("up", "process-compose.yaml")
    code, err = up.ended()
    assert code == 3, err
    assert "Job/migrate exited with code 3 (setpoint.dev/exit-on-failure): " in err


SKIPPING = """
processes:
  first:
    command: echo first >> ran.txt
  broken:
    command: echo broken >> ran.txt; exit 3
    depends_on:
      first: {condition: process_completed_successfully}
  after:
    command: echo after >> ran.txt
    depends_on:
      broken: {condition: process_completed_successfully}
  last:
    command: echo last >> ran.txt
    depends_on:
      after: {condition: process_completed}
"""


def test_up_ends_once_every_process_has_ended_or_been_skipped(cli: CLI) -> None:
    """process-compose's fixtures and TransitiveDependency: the run ends by itself, with
    exit code 0, once each process has ended or can never start (a dependency failed,
    transitively); and every `up` runs the file's processes again, as process-compose does."""
    cli.write("process-compose.yaml", SKIPPING)
    for run in (1, 2):
        code, err = cli.start("up").ended()
        assert code == 0, err
        assert (
            "every process has ended (2 ended, 2 skipped: Process/after: Job/broken ended "
            "without being Complete; Process/last: Process/after was skipped): stopping"
        ) in err.splitlines()
        ran = (cli.directory / "ran.txt").read_text().splitlines()
        assert ran == ["first", "broken"] * run


def test_keep_project_keeps_up_running_after_every_process_ended(cli: CLI) -> None:
    cli.write("process-compose.yaml", SKIPPING)
    up = cli.start("up", "--keep-project")
    up.expect(lambda line: line.startswith("Job/broken ready=False phase=Failed"), "broken Failed")
    assert "Job/first" in cli.ok("ps").out  # a command later: up has not ended
    assert up.proc.poll() is None
    code, err = up.stop(signal.SIGTERM)
    assert code == 0, err
    assert "every process has ended" not in err


def test_exit_on_skipped_ends_up_with_1(cli: CLI) -> None:
    """process-compose's ReadyLineWithSkipped: a process with `exit_on_skipped` whose
    dependency can no longer be met (it exited without its ready line) ends the run with 1."""
    cli.write(
        "process-compose.yaml",
        """
processes:
  server:
    command: echo I will fail && exit 1
    ready_log_line: ready
  client:
    command: echo client >> ran.txt
    depends_on:
      server: {condition: process_log_ready}
    availability: {exit_on_skipped: true}
""",
    )
    code, err = cli.start("up").ended()
    assert code == 1, err
    assert (
        "Process/client was skipped: Process/server ended without being Ready "
        "(setpoint.dev/exit-on-skipped): stopping everything"
    ) in err.splitlines()
    assert not (cli.directory / "ran.txt").exists()


def test_up_compose_namespace_runs_only_that_namespace(cli: CLI) -> None:
    """process-compose's `up -n NS`: only the processes in NS run (then the run ends)."""
    cli.write(
        "process-compose.yaml",
        """
processes:
  api: {command: echo api >> ran.txt, namespace: backend}
  ui: {command: echo ui >> ran.txt, namespace: frontend}
  tool: {command: echo tool >> ran.txt}
""",
    )
    code, err = cli.start("up", "--compose-namespace", "frontend").ended()
    assert code == 0, err
    assert "every process has ended (1 ended): stopping" in err.splitlines()
    assert (cli.directory / "ran.txt").read_text().splitlines() == ["ui"]
    assert cli.ok("get", "processes", "-o", "name").lines == ["process.setpoint.dev/ui"]
