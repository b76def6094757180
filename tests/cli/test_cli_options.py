"""Global options: --store, --kinds, -n before or after the verb, their environment variables and
defaults, and `python -m setpoint --help`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_kit import CLI, GREETINGS, KINDS, TIMEOUT, greeting


def test_global_options_may_follow_the_verb(cli: CLI) -> None:
    path = cli.write("a.yaml", greeting("a"))
    args = ("--store", cli.store, "--kinds", str(KINDS), "-n", "late")
    result = cli("apply", "-f", str(path), *args, store=False, kinds=False)
    assert (result.code, result.lines) == (0, ["greeting.example.com/a created"])
    listed = cli("get", "greetings", "-A", *args[:4], store=False, kinds=False)
    assert listed.lines[1].split()[:2] == ["late", "a"]


def test_store_and_kinds_from_the_environment(cli: CLI) -> None:
    env = {"SETPOINT_STORE": cli.store, "SETPOINT_KINDS": f" {KINDS} ,"}
    result = cli("apply", "-f", str(GREETINGS), store=False, kinds=False, env=env)
    assert (result.code, len(result.lines)) == (0, 2), result
    assert cli.ok("get", "greetings", "-o", "name").lines == [
        "greeting.example.com/bonjour",
        "greeting.example.com/hello",
    ]


def test_kinds_by_module_name_importable_from_the_working_directory(cli: CLI) -> None:
    (cli.directory / "mykinds.py").write_text(KINDS.read_text())
    result = cli("--kinds", "mykinds", "apply", "-f", str(GREETINGS), kinds=False)
    assert (result.code, len(result.lines)) == (0, 2), result


def test_default_store_is_dot_setpoint_state_db_in_the_working_directory(cli: CLI) -> None:
    result = cli("apply", "-f", str(GREETINGS), store=False)
    assert result.code == 0, result
    assert (cli.directory / ".setpoint" / "state.db").is_file()
    assert len(cli("get", "greetings", store=False).lines) == 3


def test_help_exits_zero(cli: CLI) -> None:
    result = cli("--help", store=False, kinds=False)
    assert result.code == 0
    for verb in ("apply", "get", "delete"):
        assert verb in result.out
    assert cli("get", "--help").code == 0


def test_the_console_script_is_the_same_command(cli: CLI) -> None:
    script = Path(sys.executable).parent / "setpoint"
    if not script.exists():
        pytest.skip("the setpoint console script is not installed next to this interpreter")
    proc = subprocess.run(
        [str(script), "--store", cli.store, "--kinds", str(KINDS), "apply", "-f", str(GREETINGS)],
        capture_output=True,
        text=True,
        cwd=cli.directory,
        env=cli.env,
        timeout=TIMEOUT,
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.splitlines()[0] == "greeting.example.com/hello created"
