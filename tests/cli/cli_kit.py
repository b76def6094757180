"""Helpers of the CLI tests: run the real `python -m setpoint` as a subprocess, read its output.

Every command runs in the test's own directory against its own SQLite file, with
the example `Greeting` kind loaded and no SETPOINT_* variables inherited.
Long-running commands (`get -w`) are read line by line with a timeout: no sleeps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from running import Running

REPO = Path(__file__).resolve().parents[2]
HELLO = REPO / "examples" / "hello"
KINDS = HELLO / "kinds.py"
GREETINGS = HELLO / "greeting.yaml"
TIMEOUT = 30.0
"""Seconds any one command or expected line may take before the test fails (never waited out)."""


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    @property
    def err_lines(self) -> list[str]:
        return self.err.splitlines()

    def json(self) -> Any:
        return json.loads(self.out)

    def yaml(self) -> Any:
        return yaml.safe_load(self.out)


def greeting(
    name: str,
    message: str = "hi",
    *,
    repeat: int | None = None,
    labels: dict[str, str] | None = None,
    namespace: str | None = None,
    **spec_extra: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    if namespace:
        meta["namespace"] = namespace
    spec: dict[str, Any] = {"message": message, **spec_extra}
    if repeat is not None:
        spec["repeat"] = repeat
    return {"apiVersion": "example.com/v1", "kind": "Greeting", "metadata": meta, "spec": spec}


class CLI:
    """`cli("get", "greetings")` runs `python -m setpoint --store ... --kinds ... get greetings`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.store = f"sqlite:///{directory / 'state.db'}"  # tmp paths are absolute: 4 slashes
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}

    def argv(self, args: tuple[str, ...], *, store: bool, kinds: bool) -> list[str]:
        argv = [sys.executable, "-m", "setpoint"]
        if store:
            argv += ["--store", self.store]
        if kinds:
            argv += ["--kinds", str(KINDS)]
        return argv + list(args)

    def __call__(
        self,
        *args: str,
        input: str | None = None,
        store: bool = True,
        kinds: bool = True,
        env: dict[str, str] | None = None,
    ) -> Result:
        proc = subprocess.run(
            self.argv(args, store=store, kinds=kinds),
            input=input,
            capture_output=True,
            text=True,
            cwd=self.directory,
            env={**self.env, **(env or {})},
            timeout=TIMEOUT,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def ok(self, *args: str, input: str | None = None) -> Result:
        """Run and insist on success with nothing on stderr."""
        result = self(*args, input=input)
        assert (result.code, result.err) == (0, ""), result
        return result

    def write(self, name: str, *docs: dict[str, Any] | str) -> Path:
        """A manifest file in the test's directory holding `docs` (dicts or raw YAML text)."""
        path = self.directory / name
        texts = [d if isinstance(d, str) else yaml.safe_dump(d, sort_keys=False) for d in docs]
        path.write_text("---\n".join(texts))
        return path

    def start(self, *args: str) -> Running:
        proc = subprocess.Popen(
            self.argv(args, store=True, kinds=True),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.directory,
            env=self.env,
        )
        return Running(proc)


def columns(line: str) -> list[str]:
    return line.split()


def marked_processes(token: str) -> list[tuple[int, list[bytes], list[bytes]]]:
    """(pid, argv, environment) of every live process with `token` in its argv: the
    children a test started, found in /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_bytes().rpartition(b")")[2].split()[0]
        except OSError:
            continue
        if token.encode() in argv and state not in (b"Z", b"X"):
            found.append((int(entry.name), argv, environ))
    return found


def start_up(cli: CLI, path: Path) -> Running:
    """`setpoint up PATH` with no flags, in the test's directory."""
    return Running(
        subprocess.Popen(
            [sys.executable, "-m", "setpoint", "up", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cli.directory,
            env=cli.env,
        )
    )
