"""`setpoint logs`: one log (rotated files oldest first, `--tail`, a missing log, `-f`
following appends and rotation until SIGTERM), several interleaved in time order behind
coloured names (no NAME, `-l`, a Deployment's replicas), `--since`, `--timestamps`, and
`-f` taking in new objects. Log files are written by the test where `up` would write
them (`logs/` beside the test's SQLite file); `test_cli_follow_engine` covers real children."""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from cli_kit import CLI, TIMEOUT

from setpoint.cli.logstream import colour_of, rfc3339_nano
from setpoint.model.wellknown import DEPLOYMENT_LABEL
from setpoint.workloads.log_holder import LogFile


def log_dir(cli: CLI) -> Path:
    d = cli.directory / "logs"
    d.mkdir(exist_ok=True)
    return d


def test_logs_prints_rotated_files_oldest_first(cli: CLI) -> None:
    d = log_dir(cli)
    (d / "default_web.log.2").write_text("one\n")
    (d / "default_web.log.1").write_text("two\n")
    (d / "default_web.log").write_text("three\n")
    (d / "default_other.log").write_text("not this\n")
    assert cli.ok("logs", "web").lines == ["one", "two", "three"]
    assert cli.ok("logs", "process/web").lines == ["one", "two", "three"]


def test_logs_tail_spans_files(cli: CLI) -> None:
    d = log_dir(cli)
    (d / "default_web.log.1").write_text("a\nb\nc\n")
    (d / "default_web.log").write_text("d\n")
    assert cli.ok("logs", "web", "--tail", "2").lines == ["c", "d"]
    assert cli.ok("logs", "web", "--tail", "0").out == ""


def test_logs_of_another_namespace(cli: CLI) -> None:
    (log_dir(cli) / "prod_web.log").write_text("prod\n")
    assert cli.ok("logs", "web", "-n", "prod").lines == ["prod"]


def test_logs_without_a_log_is_one_line_error(cli: CLI) -> None:
    result = cli("logs", "nope")
    assert result.code == 1
    assert len(result.err_lines) == 1
    assert result.err.startswith('error: no log for "nope" in namespace "default"')


def test_logs_follow_prints_appends_and_rotations_until_sigterm(cli: CLI) -> None:
    path = log_dir(cli) / "default_web.log"
    path.write_text("first\n")
    follow = cli.start("logs", "web", "-f")
    follow.expect(lambda line: line == "first", "the existing line")
    with path.open("a") as f:
        f.write("second\n")
    follow.expect(lambda line: line == "second", "the appended line")
    os.replace(path, path.with_name("default_web.log.1"))
    path.write_text("third\n")
    follow.expect(lambda line: line == "third", "the line after rotation")
    assert follow.stop(signal.SIGTERM) == (0, "")


# --- several logs: interleaved, coloured, --since, --timestamps, -f on new objects --------
# Log files are written with the log holder's own writer (`LogFile`), which stamps each
# write in the file's time index with the time the test gives: times are chosen, not waited.

NOW = time.time_ns()
MINUTE = 60 * 10**9


def process(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels or {}}
    spec = {"args": ["true"]}
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": meta,
        "spec": spec,
    }


def job(name: str) -> dict[str, Any]:
    spec = {"args": ["true"]}
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": spec,
    }


def write_log(cli: CLI, name: str, *lines: tuple[int, str], namespace: str = "default") -> None:
    """Append `lines` (time in ns, text) to the log of `name` as the holder would."""
    log = LogFile(str(log_dir(cli) / f"{namespace}_{name}.log"), 10**6, 3)
    for at, text in lines:
        log.write(text.encode() + b"\n", at)
    log.close()


def test_logs_with_no_name_interleaves_every_process_and_job_in_time_order(cli: CLI) -> None:
    cli.ok("apply", "-f", str(cli.write("app.yaml", process("db"), process("web"), job("migrate"))))
    write_log(cli, "db", (NOW - 5 * MINUTE, "db starting"), (NOW - 2 * MINUTE, "db ready"))
    write_log(cli, "migrate", (NOW - 4 * MINUTE, "migrating"), (NOW - 3 * MINUTE, "migrated"))
    write_log(cli, "web", (NOW - MINUTE, "serving"))
    write_log(cli, "gone", (NOW, "not an object of the store"))
    write_log(cli, "web", (NOW, "other namespace"), namespace="prod")
    assert cli.ok("logs").lines == [
        "db      | db starting",
        "migrate | migrating",
        "migrate | migrated",
        "db      | db ready",
        "web     | serving",
    ]
    assert cli.ok("logs", "--no-prefix", "--tail", "1").lines == ["migrated", "db ready", "serving"]
    assert cli.ok("logs", "web", "--prefix").lines == ["web | serving"]


def test_logs_selector_and_deployment_replicas(cli: CLI) -> None:
    owned = {DEPLOYMENT_LABEL: "web"}
    manifests = [
        process("web-abc-0", owned),
        process("web-abc-1", owned),
        process("db", {"tier": "db"}),
    ]
    deployment = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"args": ["true"]}},
        },
    }
    cli.ok("apply", "-f", str(cli.write("app.yaml", deployment, *manifests)))
    write_log(cli, "web-abc-0", (NOW - 2 * MINUTE, "zero"))
    write_log(cli, "web-abc-1", (NOW - MINUTE, "one"))
    write_log(cli, "db", (NOW, "db"))
    replicas = ["web-abc-0 | zero", "web-abc-1 | one"]
    assert cli.ok("logs", "deployment/web").lines == replicas
    assert cli.ok("logs", "web").lines == replicas  # a bare name with no log of its own
    assert cli.ok("logs", "-l", "tier=db").lines == ["db | db"]
    none = cli("logs", "-l", "tier=none")
    assert (none.code, none.out, none.err) == (0, "", "No resources found in default namespace.\n")
    missing = cli("logs", "deployment/nope")
    assert (missing.code, missing.err) == (
        1,
        'error: Deployment "nope" not found in namespace "default"\n',
    )
    refused = cli("logs", "greeting/hello")
    assert (refused.code, refused.err) == (
        1,
        "error: 'greeting/hello': only Processes, Jobs and Deployments have logs\n",
    )


def test_logs_since_and_timestamps(cli: CLI) -> None:
    old, recent = NOW - 2 * 60 * MINUTE, NOW - MINUTE
    write_log(cli, "web", (old, "old"), (recent, "recent"))
    assert cli.ok("logs", "web", "--since", "1h").lines == ["recent"]
    assert cli.ok("logs", "web", "--since", "1h59m30s").lines == ["recent"]
    assert cli.ok("logs", "web", "--since", "3h").lines == ["old", "recent"]
    assert cli.ok("logs", "web", "--timestamps").lines == [
        f"{rfc3339_nano(old)} old",
        f"{rfc3339_nano(recent)} recent",
    ]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z", rfc3339_nano(old))
    bad = cli("logs", "web", "--since", "soon")
    assert (bad.code, bad.err) == (
        1,
        "error: --since: 'soon': want a duration like 90s, 1m30s, 2h or 500ms\n",
    )


def test_logs_since_a_log_without_times_goes_by_its_modification_time(cli: CLI) -> None:
    # An older holder wrote no time index: its lines are no newer than the file.
    old = log_dir(cli) / "default_web.log.1"
    old.write_text("before the upgrade\n")
    os.utime(old, ns=(NOW - 3 * 60 * MINUTE, NOW - 3 * 60 * MINUTE))
    write_log(cli, "web", (NOW - MINUTE, "after"))
    assert cli.ok("logs", "web", "--since", "1h").lines == ["after"]
    assert cli.ok("logs", "web").lines == ["before the upgrade", "after"]


def run_on_a_terminal(cli: CLI, *args: str, env: dict[str, str] | None = None) -> str:
    """The output of `setpoint ARGS` with a pseudo-terminal as its stdout."""
    main, side = pty.openpty()
    proc = subprocess.Popen(
        cli.argv(args, store=True, kinds=True),
        stdout=side,
        stderr=subprocess.PIPE,
        cwd=cli.directory,
        env={**cli.env, **(env or {})},
    )
    os.close(side)
    out = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # EIO: the command ended and closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    assert proc.wait(timeout=TIMEOUT) == 0
    return out.decode().replace("\r\n", "\n")


def test_names_have_the_same_colour_in_every_run_on_a_terminal_only(cli: CLI) -> None:
    cli.ok("apply", "-f", str(cli.write("app.yaml", process("db"), process("web"))))
    write_log(cli, "db", (NOW - MINUTE, "db line"))
    write_log(cli, "web", (NOW, "web line"))
    coloured = run_on_a_terminal(cli, "logs")
    assert coloured.splitlines() == [
        f"\x1b[{colour_of('db')}mdb \x1b[0m | db line",
        f"\x1b[{colour_of('web')}mweb\x1b[0m | web line",
    ]
    assert colour_of("db") != colour_of("web")
    # Another run (another PYTHONHASHSEED) gives each name the same colour.
    assert run_on_a_terminal(cli, "logs", env={"PYTHONHASHSEED": "12345"}) == coloured
    assert run_on_a_terminal(cli, "logs", env={"NO_COLOR": "1"}).splitlines() == [
        "db  | db line",
        "web | web line",
    ]
    assert cli.ok("logs").lines == ["db  | db line", "web | web line"]  # a pipe: no colour


def test_logs_follow_with_no_name_takes_in_new_lines_and_new_objects(cli: CLI) -> None:
    cli.ok("apply", "-f", str(cli.write("a.yaml", process("a"))))
    write_log(cli, "a", (NOW - MINUTE, "a first"))
    follow = cli.start("logs", "-f", "--timestamps")
    follow.expect(lambda line: line == f"a | {rfc3339_nano(NOW - MINUTE)} a first", "a's line")
    write_log(cli, "a", (NOW, "a second"))
    follow.expect(lambda line: line.endswith(" a second"), "a's appended line")
    cli.ok("apply", "-f", str(cli.write("b.yaml", process("b"))))
    # Lines of an object found while following count from when `-f` started: stamp b's now
    # (NOW is when this module was imported, maybe long before this test ran).
    written = time.time_ns()
    write_log(cli, "b", (written, "b first"))
    follow.expect(lambda line: line == f"b | {rfc3339_nano(written)} b first", "new b's line")
    assert follow.stop(signal.SIGTERM) == (0, "")
