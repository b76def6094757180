"""The timeline on a PostgreSQL store is the store's, not an engine's: an engine on one host
records a failure and its cause; after that engine stops, `setpoint explain` run beside a
second engine on another host (another working directory, and another host name where
this machine lets a test have one) gives the same answer from the same database.

Real engines (`setpoint up`), real children, a real PostgreSQL server; waits are on the
engines' output lines and the store's objects, bounded by timeouts.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

TIMEOUT = 60.0
"""Seconds any awaited condition may take before the test fails (never waited out)."""


def manifest(args: list[str]) -> str:
    cache = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "cache"},
        "spec": {"args": args, "restartPolicy": "Always"},
    }
    return yaml.safe_dump(cache)


def other_host_prefix() -> list[str]:
    """`unshare` into a UTS namespace named `host-b` when this machine allows it (root with
    the capability), else nothing: the second engine is then on this host name, in another
    directory with a workspace of its own."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return []
    probe = subprocess.run(["unshare", "--uts", "true"], capture_output=True, timeout=10)
    if probe.returncode != 0:
        return []
    return ["unshare", "--uts", "sh", "-c", 'hostname host-b && exec "$@"', "sh"]


class Engine:
    """`setpoint up` in the foreground in `cwd`, its output read line by line."""

    def __init__(self, store: str, cwd: Path, prefix: list[str], env: dict[str, str]) -> None:
        argv = [*prefix, sys.executable, "-m", "setpoint", "--store", store, "up"]
        self.process = subprocess.Popen(
            [*argv, "cache.yaml"],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )

    def expect(self, *words: str) -> str:
        """The next line of the output that has every one of `words`."""
        deadline = time.monotonic() + TIMEOUT
        assert self.process.stdout is not None
        for line in self.process.stdout:  # ends if the engine dies
            if all(word in line for word in words):
                return line
            if time.monotonic() > deadline:
                break
        raise AssertionError(f"no line with {words} from setpoint up")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            assert self.process.wait(timeout=TIMEOUT) == 0
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@pytest.fixture
def store(postgresql_server: Any) -> str:
    return str(postgresql_server.new_url("hosts"))


def test_explain_from_a_second_hosts_engine_gives_the_same_answer(
    tmp_path: Path, store: str
) -> None:
    host_a, host_b = tmp_path / "a", tmp_path / "b"
    host_a.mkdir()
    host_b.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    (host_a / "cache.yaml").write_text(manifest(["sleep", "600"]))

    def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "setpoint", "--store", store, *args]
        return subprocess.run(
            argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=TIMEOUT
        )

    def explain_at(cwd: Path, at: str) -> list[dict[str, Any]]:
        got = cli(cwd, "explain", "process/cache", "--at", at, "-o", "json")
        assert got.returncode == 0, got.stderr
        answer: list[dict[str, Any]] = json.loads(got.stdout)
        return answer

    first = Engine(store, host_a, [], env)
    try:
        first.expect("Process/cache", "ready=True")
        # The change that breaks it: the cache now exits at once, over and over.
        (host_a / "broken.yaml").write_text(manifest(["sh", "-c", "exit 3"]))
        assert cli(host_a, "apply", "-f", "broken.yaml").returncode == 0
        first.expect("Process/cache", "ready=False")
        deadline = time.monotonic() + TIMEOUT
        while True:  # the recorder writes on its own: read until it did
            at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))
            answer = explain_at(host_a, at)
            if answer and answer[0]["entry"]["type"] == "change":
                break
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)
    finally:
        first.stop()
    top = answer[0]["entry"]
    assert top["object"]["name"] == "cache"
    assert top["diff"]["spec.args[0]"] == ["sleep", "sh"]

    (host_b / "cache.yaml").write_text(manifest(["sh", "-c", "exit 3"]))
    second = Engine(store, host_b, other_host_prefix(), env)
    try:
        second.expect("Process/cache")
        assert explain_at(host_b, at) == answer
        assert not (host_b / ".setpoint" / "state.db").exists()  # nothing read from a file
    finally:
        with contextlib.suppress(AssertionError):
            second.stop()
