"""A fast start: `--help` and `get` import only what they need (no pydantic, rich, yaml,
prometheus_client, jsonpatch, numpy; no asyncio), `--version`, and the verb table (every
verb's `--help` ends with Examples). What is imported is read from `sys.modules` after the
real command ran in a subprocess; time itself decides nothing."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest
from cli_kit import CLI, KINDS, TIMEOUT, greeting

from setpoint.cli.main import GLOBAL_VALUED, VERBS, _global_options, build_parser, parse, verb_of

HEAVY = ("pydantic", "rich", "yaml", "prometheus_client", "jsonpatch", "numpy", "asyncio")
"""What neither `--help` nor a plain `get` may import."""


RUN_AND_LIST_MODULES = """
import runpy, sys
sys.argv = ["setpoint", *sys.argv[1:]]
status = 0
try:
    runpy.run_module("setpoint", run_name="__main__", alter_sys=True)
except SystemExit as exit:
    status = exit.code
with open(OUT, "w") as out:
    out.write(" ".join(sorted(sys.modules)))
sys.exit(status)
"""
"""Runs `python -m setpoint` as `-m` does, then writes the names of every module imported."""


def imported(cli: CLI, *args: str) -> set[str]:
    """Every module in `sys.modules` once the real command (`python -m setpoint ARGS`) has
    run. (Not `python -X importtime`: it does not see modules imported with
    `importlib.import_module`, as lazy packages and the verb table do.)"""
    out = cli.directory / "modules.txt"
    program = RUN_AND_LIST_MODULES.replace("OUT", repr(str(out)))
    proc = subprocess.run(
        [sys.executable, "-c", program, *args],
        capture_output=True,
        text=True,
        cwd=cli.directory,
        env=cli.env,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(out.read_text().split())


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_help_imports_no_verb_module_and_nothing_heavy(cli: CLI) -> None:
    modules = imported(cli, "--help")
    assert heavy(modules) == []
    verb_modules = {f"setpoint.cli.{v.module}" for v in VERBS}
    assert sorted(modules & verb_modules) == []
    assert "setpoint.model.kinds" not in modules  # not even the kinds


def process(name: str) -> dict[str, object]:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": name, "labels": {"app": "x"}},
        "spec": {"args": ["true"]},
    }


def test_get_processes_imports_neither_pydantic_nor_asyncio(cli: CLI) -> None:
    cli.ok("apply", "-f", str(cli.write("p.yaml", process("a"), process("b"))))
    for args in (
        ("get", "processes"),
        ("get", "process", "a", "-o", "json"),
        ("get", "processes", "-l", "app=x", "-o", "name"),
        ("get", "proc,deploy"),
    ):
        modules = imported(cli, "--store", cli.store, *args)
        assert heavy(modules) == [], args
        assert "setpoint.workloads.process" not in modules, args  # no schema, no controller
        assert "setpoint.store.sqlite_reader" in modules, args  # read without an event loop


def test_get_with_a_users_kinds_module_imports_no_asyncio(cli: CLI) -> None:
    cli.ok("apply", "-f", str(cli.write("g.yaml", greeting("a"))))
    modules = imported(cli, "--store", cli.store, "--kinds", str(KINDS), "get", "greetings")
    # the user's module defines its schemas with pydantic; nothing else is heavy
    assert [m for m in heavy(modules) if m.split(".")[0] != "pydantic"] == []


def test_get_yaml_still_prints_yaml(cli: CLI) -> None:
    cli.ok("apply", "-f", str(cli.write("g.yaml", greeting("a", "hi"))))
    assert cli.ok("get", "greeting", "a", "-o", "yaml").yaml()["spec"]["message"] == "hi"


def test_version_prints_the_installed_version(cli: CLI) -> None:
    result = cli("--version", store=False, kinds=False)
    assert (result.code, result.err) == (0, "")
    assert result.out == f"setpoint {importlib.metadata.version('setpoint')}\n"


def test_every_verb_help_ends_with_examples(cli: CLI) -> None:
    for verb in VERBS:
        result = cli(verb.name, "--help", store=False, kinds=False)
        assert result.code == 0, (verb.name, result.err)
        examples = result.out.rpartition("\nExamples:\n")[2].splitlines()
        assert examples == [f"  {line}" for line in verb.examples], verb.name


def test_help_lists_every_verb_of_the_table_in_order(cli: CLI) -> None:
    out = cli("--help", store=False, kinds=False).out
    listed = [line.split()[0] for line in out.partition("\nverbs:\n")[2].splitlines()[1:]
              if line.startswith("    ") and not line.startswith("     ")]  # fmt: skip
    assert listed == [v.name for v in VERBS]


def test_the_table_names_the_verbs_its_modules_define() -> None:
    for verb in VERBS:
        parser = build_parser([verb.name])
        sub = next(a for a in parser._actions if a.dest == "verb")
        assert verb.name in (sub.choices or {}), f"{verb.module} defines no verb {verb.name}"


@pytest.mark.parametrize(
    "argv",
    [
        ("-n", "other", "get", "greetings"),
        ("get", "greetings", "-n", "other"),
        ("--namespace=other", "get", "greetings"),
        ("get", "-n", "other", "greetings"),
    ],
)
def test_global_options_anywhere_choose_the_same_verb(cli: CLI, argv: tuple[str, ...]) -> None:
    cli.ok("apply", "-f", str(cli.write("g.yaml", greeting("a", namespace="other"))))
    assert cli.ok(*argv).lines[1].split()[0] == "a"


def test_an_unknown_verb_lists_the_verbs(cli: CLI) -> None:
    result = cli("frobnicate", store=False, kinds=False)
    assert result.code == 1
    assert "invalid choice: 'frobnicate'" in result.err
    assert "'completion'" in result.err


def test_the_store_path_for_readers_is_checked_as_before(cli: CLI, tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path / 'nowhere' / 'state.db'}"
    result = cli("--store", missing, "get", "greetings", store=False)
    assert result.code == 1
    assert "no store at" in result.err
    assert "reading never creates one" in result.err
    assert not (tmp_path / "nowhere").exists()


def test_get_on_a_store_without_a_synchronous_reader(cli: CLI) -> None:
    result = cli("--store", "memory://", "get", "greetings", store=False)
    assert (result.code, result.out) == (0, "")
    assert result.err == "No resources found in default namespace.\n"


def test_the_verb_is_found_without_the_whole_table_as_argparse_finds_it() -> None:
    global_valued = {
        option
        for action in _global_options("")._actions
        if action.nargs != 0
        for option in action.option_strings
    }
    assert set(GLOBAL_VALUED) == global_valued
    for argv, verb in [
        (["get", "x"], "get"),
        (["--store", "get", "apply", "-f", "a.yaml"], "apply"),
        (["--store=s.db", "-nprod", "--kin", "k.py", "describe"], "describe"),
        (["--namespace=a", "-n", "b", "logs", "db"], "logs"),
    ]:
        assert verb_of(argv) == verb == parse(argv).verb, argv
    for argv in (["--help"], ["--version"], ["-h", "get"], ["frobnicate"], [], ["--bad", "get"]):
        assert verb_of(argv) is None, argv  # the whole table answers these
