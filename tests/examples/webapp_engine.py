"""`setpoint up` on a copy of examples/webapp with free ports: the engine as a subprocess
whose status lines the test reads under deadlines.

`stage_webapp(base)` copies the example under `base/examples/webapp/` (so its relative
paths hold with `base` as the working directory), moves its ports to free ones and runs
its scripts with this interpreter (or, `python=None`, with the `python3` the manifest
names, as in a clone). `Engine` runs `setpoint up` there (this interpreter's, unless told
which command, environment and OS user); `expect` returns the next status line that
matches, or fails after a deadline.
"""

from __future__ import annotations

import pwd
import queue
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml
from webapp_support import WEBAPP, free_port

from setpoint.testing import free_port_range


@dataclass(frozen=True)
class Staged:
    base: Path
    manifest: Path
    db_port: int
    service_port: int
    objects: list[dict[str, Any]]

    def write(self, objects: list[dict[str, Any]]) -> None:
        self.manifest.write_text(yaml.safe_dump_all(objects, sort_keys=False))


def stage_webapp(base: Path, python: str | None = sys.executable) -> Staged:
    target = base / "examples" / "webapp"
    shutil.copytree(WEBAPP, target, ignore=shutil.ignore_patterns("__pycache__", ".setpoint"))
    db_port, service_port, first = free_port(), free_port(), free_port_range(19)
    text = (target / "webapp.yaml").read_text().replace("15433", str(db_port))
    if python is not None:
        text = text.replace("python3", python)
    objects = list(yaml.safe_load_all(text))
    for obj in objects:
        if obj["kind"] == "Deployment":
            obj["spec"]["portRange"] = {"start": first, "end": first + 18}
        if obj["kind"] == "Service":
            obj["spec"]["port"] = service_port
    staged = Staged(base, target / "webapp.yaml", db_port, service_port, objects)
    staged.write(objects)
    return staged


class Engine:
    """`setpoint up MANIFEST` in `cwd`; stdout lines are read by a thread.

    `command` is how setpoint is started (this interpreter's by default), `env` its whole
    environment (this process's by default), `user` the OS user it runs as (only as root)."""

    def __init__(
        self,
        cwd: Path,
        manifest: Path,
        *,
        command: Sequence[str | Path] = (sys.executable, "-m", "setpoint"),
        env: Mapping[str, str] | None = None,
        user: pwd.struct_passwd | None = None,
    ) -> None:
        identity: dict[str, Any] = {}
        if user is not None:
            identity = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        self.proc = subprocess.Popen(
            [*command, "up", str(manifest)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env=env,
            **identity,
        )
        self.seen: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        assert self.proc.stdout is not None
        threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def expect(self, match: Callable[[str], bool], what: str, within: float = 60.0) -> str:
        """The next line for which `match` holds; AssertionError after `within` seconds."""
        while True:
            try:
                line = self._lines.get(timeout=within)
            except queue.Empty:
                raise AssertionError(
                    f"no line with {what} within {within}s; last lines: {self.seen[-15:]}"
                ) from None
            if line is None:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise AssertionError(f"up ended before {what}: {self.seen[-15:]}; {err}")
            self.seen.append(line)
            if match(line):
                return line

    def stop(self, within: float = 60.0) -> tuple[int, str]:
        """SIGTERM; the exit status and stderr once it has ended."""
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=within)
        return self.proc.returncode, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def ready_line(ref: str) -> Callable[[str], bool]:
    """Matches `up`'s line reporting `ref` (e.g. `Deployment/web`) Ready."""
    return lambda line: line.startswith(f"{ref} ready=True ")
