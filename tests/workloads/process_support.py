"""Helpers for the Process controller tests: manifests, child scripts, and waiting for a
Process's stored state through the store's watch (never by sleeping)."""

from __future__ import annotations

import socket
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from setpoint import testing
from setpoint.model import READY, Kind, Object, get_condition
from setpoint.runtime.manager import Manager
from setpoint.store import Store
from setpoint.workloads.job import JobController, JobSettings
from setpoint.workloads.job import setup as job_setup
from setpoint.workloads.process import PROCESS, ProcessController, ProcessSettings
from setpoint.workloads.process import setup as process_setup

TIMEOUT = 10.0

SLEEP_FOREVER = "import time\nwhile True: time.sleep(3600)"


def assert_stopping_status(
    kind: Kind,
    status: Object,
    *,
    deleting: bool,
    pid: Any,
    observed_generation: Any,
    phases: tuple[str, ...],
) -> None:
    """A Process's or Job's planned status while its child stops: valid, not Ready (why:
    Terminating when deleted, else Restarting or Stopping), the pid and observed generation
    as they were (the exit is the next look's to record), a phase still running."""
    kind.validate_status(dict(status))
    ready = get_condition(status, READY)
    assert ready is not None
    assert ready["status"] == "False"
    assert ready["reason"] == ("Terminating" if deleting else ready["reason"])
    assert ready["reason"] in ("Terminating", "Restarting", "Stopping")
    assert status["pid"] == pid
    assert status.get("observedGeneration") == observed_generation
    assert status["phase"] in phases


def python(code: str, *extra: str) -> list[str]:
    """argv running `code` in this interpreter (`extra` become sys.argv[1:])."""
    return [sys.executable, "-c", textwrap.dedent(code), *extra]


def serve_after(fifo: Path, port: int) -> list[str]:
    """argv of a child that waits for a line on `fifo`, then accepts TCP on `port`."""
    code = f"""
        import socket, time
        with open({str(fifo)!r}) as f:
            f.readline()
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", {port}))
        s.listen()
        while True:
            c, _ = s.accept()
            c.close()
    """
    return python(code)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def process(name: str, args: list[str], **spec: Any) -> Object:
    return {
        "apiVersion": PROCESS.api_version,
        "kind": PROCESS.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"args": args, **spec},
    }


def condition(obj: Object | None, type_: str) -> dict[str, Any]:
    found = get_condition((obj or {}).get("status"), type_)
    return found or {}


async def wait_for(
    store: Store,
    name: str,
    predicate: Callable[[Object | None], bool],
    *,
    within: float = TIMEOUT,
) -> Object | None:
    """Return the Process `name` (None once deleted) as soon as `predicate` holds for it."""
    return await testing.wait_for(store, PROCESS, name, predicate, within=within)


def open_gate(fifo: Path) -> None:
    """Write the line a `serve_after` child waits for."""
    with open(fifo, "w") as f:
        f.write("go\n")


def argv_of(pid: int) -> list[str]:
    """The command line of `pid`, from /proc."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def process_controller(manager: Manager, settings: ProcessSettings) -> ProcessController:
    """The Process controller `process.setup` adds to `manager` (to reach its table)."""
    reconciler = process_setup(manager, settings).reconciler
    assert isinstance(reconciler, ProcessController)
    return reconciler


def job_controller(manager: Manager, settings: JobSettings) -> JobController:
    """The Job controller `job.setup` adds to `manager` (to reach its table)."""
    reconciler = job_setup(manager, settings).reconciler
    assert isinstance(reconciler, JobController)
    return reconciler
