"""`setpoint completion bash|zsh|fish`: the scripts hold the verbs, options and kinds;
bash's is sourced in a real bash and asked what TAB offers (object names come from the
real `setpoint get`). zsh and fish scripts are checked for syntax where those shells exist."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_kit import CLI, KINDS, TIMEOUT, greeting

from setpoint.cli.main import VERBS


def script(cli: CLI, shell: str, *, kinds: bool = False) -> str:
    result = cli("completion", shell, store=False, kinds=kinds)
    assert (result.code, result.err) == (0, ""), result
    return result.out


def process(name: str) -> dict[str, object]:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": name},
        "spec": {"args": ["true"]},
    }


def path_with_setpoint(cli: CLI) -> dict[str, str]:
    """The test's environment with `setpoint` on PATH: this interpreter's `python -m setpoint`."""
    bin_dir = cli.directory / "bin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "setpoint"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m setpoint "$@"\n')
    wrapper.chmod(0o755)
    return {**cli.env, "PATH": f"{bin_dir}:{cli.env.get('PATH', '')}"}


def run_shell(cli: CLI, argv: list[str], env: dict[str, str]) -> list[str]:
    proc = subprocess.run(
        argv, capture_output=True, text=True, cwd=cli.directory, env=env, timeout=TIMEOUT
    )
    assert proc.returncode == 0, proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


class Bash:
    """Completes command lines with the generated script in a real bash, where `setpoint`
    is this interpreter's `python -m setpoint`."""

    def __init__(self, cli: CLI, text: str) -> None:
        if shutil.which("bash") is None:
            pytest.skip("bash is not installed")
        self.cli = cli
        self.script = cli.directory / "setpoint.bash"
        self.script.write_text(text)
        self.env = path_with_setpoint(cli)

    def __call__(self, line: str) -> list[str]:
        """What TAB offers at the end of `line` (a trailing space starts a new word)."""
        words = line.split()
        if line.endswith(" "):
            words.append("")
        program = (
            f"source {self.script}\n"
            f"COMP_WORDS=({' '.join(repr(w) for w in words)})\n"
            f"COMP_CWORD={len(words) - 1}\n"
            "_setpoint\n"
            'printf "%s\\n" "${COMPREPLY[@]}"\n'
        )
        return run_shell(self.cli, ["bash", "--norc", "--noprofile", "-c", program], self.env)


def test_bash_completes_verbs_options_kinds_and_names(cli: CLI) -> None:
    cli.ok("apply", "-f", str(cli.write("p.yaml", process("db"), process("web"))))
    bash = Bash(cli, script(cli, "bash"))
    store = f"--store {cli.store}"
    assert bash("setpoint ") == [v.name for v in VERBS]
    assert bash("setpoint ro") == ["rollout"]
    assert "--version" in bash("setpoint --")
    assert {"processes", "process", "proc", "deployments", "deploy"} <= set(bash("setpoint get "))
    assert bash("setpoint get proc") == ["processes", "process", "proc"]
    assert bash(f"setpoint {store} get processes ") == ["db", "web"]
    assert bash(f"setpoint {store} describe process d") == ["db"]
    assert bash(f"setpoint {store} logs process/") == ["process/db", "process/web"]
    assert bash("setpoint explain depl") == ["deployment/"]
    assert bash("setpoint get processes -o ") == ["wide", "yaml", "json", "name"]
    assert {"--selector", "--watch", "--store"} <= set(bash("setpoint get processes --"))
    assert bash("setpoint rollout ") == ["status", "history", "undo", "restart"]
    assert "--to-revision" in bash("setpoint rollout undo deployment/web --")
    assert bash("setpoint completion ") == ["bash", "zsh", "fish"]
    assert bash("setpoint timeline -o j") == ["json", "jsonl"]


def test_names_honour_the_namespace_of_the_line(cli: CLI) -> None:
    other = {**process("elsewhere"), "metadata": {"name": "elsewhere", "namespace": "other"}}
    cli.ok("apply", "-f", str(cli.write("p.yaml", process("here"), other)))
    bash = Bash(cli, script(cli, "bash"))
    assert bash(f"setpoint --store {cli.store} -n other get processes ") == ["elsewhere"]
    assert bash(f"setpoint get processes --store {cli.store} ") == ["here"]


def test_kinds_of_a_kinds_module_are_written_into_the_script(cli: CLI) -> None:
    cli.ok("apply", "-f", str(cli.write("g.yaml", greeting("hello"))))
    text = script(cli, "bash", kinds=True)
    assert "greetings" in text
    bash = Bash(cli, text)
    line = f"setpoint --store {cli.store} --kinds {KINDS} get greetings "
    assert bash(line) == ["hello"]


def test_a_path_argument_completes_files(cli: CLI) -> None:
    (cli.directory / "webapp.yaml").write_text("")
    bash = Bash(cli, script(cli, "bash"))
    assert bash("setpoint apply -f web") == ["webapp.yaml"]
    assert bash("setpoint up web") == ["webapp.yaml"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_parse(cli: CLI, shell: str, tmp_path: Path) -> None:
    text = script(cli, shell)
    assert "rollout" in text
    assert "processes" in text
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed: the script's syntax is not checked")
    path = tmp_path / f"setpoint.{shell}"
    path.write_text(text)
    proc = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr


def test_an_unknown_shell_is_refused(cli: CLI) -> None:
    result = cli("completion", "powershell", store=False, kinds=False)
    assert result.code == 1
    assert "invalid choice: 'powershell'" in result.err


def test_fish_completes_verbs_kinds_and_names(cli: CLI) -> None:
    if shutil.which("fish") is None:
        pytest.skip("fish is not installed")
    cli.ok("apply", "-f", str(cli.write("p.yaml", process("db"), process("web"))))
    path = cli.directory / "setpoint.fish"
    path.write_text(script(cli, "fish"))
    env = path_with_setpoint(cli)
    store = f"--store {cli.store}"

    def fish(line: str) -> list[str]:
        program = f"source {path}; complete -C {line!r}"
        return [w.split("\t")[0] for w in run_shell(cli, ["fish", "-c", program], env)]

    assert set(fish("setpoint ")) == {v.name for v in VERBS}
    assert fish("setpoint get proc") == ["proc", "process", "processes"]
    assert fish(f"setpoint {store} get processes ") == ["db", "web"]
    assert fish(f"setpoint {store} logs process/w") == ["process/web"]
    assert fish("setpoint get processes -o ") == ["json", "name", "wide", "yaml"]
    assert fish("setpoint rollout ") == ["history", "restart", "status", "undo"]


def test_zsh_completes_verbs_through_bashcompinit(cli: CLI) -> None:
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed")
    cli.ok("apply", "-f", str(cli.write("p.yaml", process("db"))))
    path = cli.directory / "_setpoint"
    path.write_text(script(cli, "zsh"))
    program = f"""
autoload -U compinit && compinit -u -D
source {path}
complete_line() {{  # as zsh's _bash_complete calls a bash completion function
  emulate -L sh
  setopt kshglob noshglob braceexpand
  COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMPREPLY=()
  _setpoint
  printf '%s\\n' "${{COMPREPLY[@]}}"
}}
complete_line setpoint ''
echo --
complete_line setpoint --store {cli.store} get processes ''
"""
    out = run_shell(cli, ["zsh", "-f", "-c", program], path_with_setpoint(cli))
    assert out == [*(v.name for v in VERBS), "--", "db"]
