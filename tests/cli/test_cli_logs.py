"""`setpoint logs NAME`: rotated files oldest first, `--tail`, a missing log, `-f` following
appends and rotation until SIGTERM. Log files are written by the test where `up` would
write them (`logs/` beside the test's SQLite file); `test_cli_up` covers real children."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from cli_kit import CLI


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
