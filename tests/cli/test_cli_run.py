"""`setpoint run FILE...`: a file's `register` and `setup` run against the CLI's store; SIGTERM
and SIGINT stop it with exit status 0; a broken file is one line naming the file and line."""

from __future__ import annotations

import signal
import textwrap
from pathlib import Path

import pytest
from cli_kit import CLI, greeting

GREETER = """
from setpoint import Kind, Registry, Schema
from setpoint.runtime import Manager, Request


class FarewellSpec(Schema):
    message: str


FAREWELL = Kind("example.com/v1", "Farewell", spec=FarewellSpec)


def register(registry: Registry) -> None:
    registry.register(FAREWELL)


def setup(manager: Manager) -> None:
    async def greet(request: Request) -> None:
        print("greeted", request.name, flush=True)

    async def bid_farewell(request: Request) -> None:
        print("farewell", request.name, flush=True)

    manager.controller("greeter").for_("Greeting").complete(greet)
    manager.controller("farewell").for_(FAREWELL).complete(bid_farewell)
"""


def controller_file(cli: CLI, text: str, name: str = "controllers.py") -> Path:
    path = cli.directory / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_run_reconciles_the_files_kinds_until_a_signal_then_exits_0(
    cli: CLI, sig: signal.Signals
) -> None:
    path = controller_file(cli, GREETER)
    cli.ok("apply", "-f", str(cli.write("hello.yaml", greeting("hello"))))
    running = cli.start("run", str(path))
    running.expect(lambda line: line == "greeted hello", "the Greeting reconciled")
    farewell = {
        "apiVersion": "example.com/v1",
        "kind": "Farewell",
        "metadata": {"name": "bye"},
        "spec": {"message": "so long"},
    }
    cli.ok("--kinds", str(path), "apply", "-f", str(cli.write("bye.yaml", farewell)))
    running.expect(lambda line: line == "farewell bye", "the file's own kind reconciled")
    code, err = running.stop(sig)
    assert code == 0, err
    assert "manager stopped" in err
    assert "Traceback" not in err


def test_a_file_that_raises_on_import_is_one_line_naming_file_and_line(cli: CLI) -> None:
    path = controller_file(cli, "def setup(manager):\n    pass\n\n\nsettings = {}['missing']\n")
    result = cli("run", str(path))
    assert result.code == 1
    assert result.err_lines == [f"error: {path}: KeyError at {path}:5: 'missing'"]


def test_a_file_without_setup_is_refused(cli: CLI) -> None:
    path = controller_file(cli, "def register(registry):\n    pass\n")
    result = cli("run", str(path))
    assert (result.code, result.err_lines) == (
        1,
        [f"error: {path}: defines no setup(manager) function to add its controllers"],
    )


def test_an_error_in_setup_names_the_line_of_the_file_that_called(cli: CLI) -> None:
    path = controller_file(
        cli, 'def setup(manager):\n    manager.controller("c").for_("nosuchkind")\n'
    )
    result = cli("run", str(path))
    assert result.code == 1
    assert len(result.err_lines) == 1
    assert result.err_lines[0].startswith(f"error: {path}: setup: at {path}:2: ")
    assert "nosuchkind" in result.err_lines[0]


def test_a_missing_file_is_refused(cli: CLI) -> None:
    result = cli("run", "nowhere.py")
    assert (result.code, result.err_lines) == (1, ["error: nowhere.py: no such file"])
