"""`setpoint apply` refuses a `dependsOn` cycle, among the manifests or with stored objects,
in one line, writing nothing."""

from __future__ import annotations

from typing import Any

from cli_kit import CLI


def process(name: str, *depends_on: str) -> dict[str, Any]:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": name},
        "spec": {
            "args": ["true"],
            "dependsOn": [{"kind": "Process", "name": d} for d in depends_on],
        },
    }


def test_a_cycle_among_the_manifests_is_refused_and_nothing_is_written(cli: CLI) -> None:
    result = cli("apply", "-f", str(cli.write("ab.yaml", process("a", "b"), process("b", "a"))))
    assert result.code == 1
    assert result.out == ""
    assert len(result.err_lines) == 1
    assert result.err.startswith("error: dependsOn cycle: Process/a -> Process/b -> Process/a")
    assert cli("get", "processes", "-o", "name").out == ""


def test_a_cycle_closed_through_a_stored_object_is_refused(cli: CLI) -> None:
    cli.ok("apply", "-f", str(cli.write("a.yaml", process("a", "b"))))
    cli.ok("apply", "-f", str(cli.write("c.yaml", process("c"))))
    result = cli("apply", "-f", str(cli.write("bc.yaml", process("c", "b"), process("b", "a"))))
    assert (result.code, result.out) == (1, "")
    assert result.err_lines == [
        "error: dependsOn cycle: Process/a -> Process/b -> Process/a; remove one of these "
        "dependencies; nothing was applied"
    ]
    stored = cli.ok("get", "process", "c", "-o", "json").json()
    assert stored["spec"]["dependsOn"] == []
    assert cli.ok("get", "processes", "-o", "name").lines == [
        "process.setpoint.dev/a",
        "process.setpoint.dev/c",
    ]


def test_replacing_a_stored_edge_can_break_a_cycle(cli: CLI) -> None:
    cli.ok("apply", "-f", str(cli.write("a.yaml", process("a", "b"))))
    # b -> a would close a cycle with the stored a -> b, but a is re-applied without it.
    result = cli.ok("apply", "-f", str(cli.write("ab.yaml", process("a"), process("b", "a"))))
    assert result.lines == ["process.setpoint.dev/a configured", "process.setpoint.dev/b created"]


def test_up_refuses_a_cycle_before_starting_anything(cli: CLI) -> None:
    d = cli.directory / "app"
    d.mkdir()
    cli.write("app/ab.yaml", process("a", "b"), process("b", "a"))
    result = cli("up", str(d))
    assert (result.code, result.out) == (1, "")
    assert result.err_lines[0].startswith("error: dependsOn cycle: Process/a -> Process/b")
    assert not (cli.directory / "run").exists()
