"""`setpoint up -d` and `setpoint down`, as docker compose users expect them: the engine runs
in the background (output in engine.log), `down` stops it and every child, dependents before
their dependencies, and says what it stopped; a second engine on the store is refused
before anything is applied.

Real `setpoint` processes and real children; every wait is on a condition (the store's
watch, a process's end) with a generous timeout, never a sleep. Nothing is left running.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import stat
import sys
import textwrap
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_kit import CLI, TIMEOUT, marked_processes
from test_cli_up import alive, free_port

from setpoint import open_store
from setpoint.engine import builtin_kinds
from setpoint.engine.claim import running_engine
from setpoint.model import READY, get_condition
from setpoint.store import Store
from setpoint.testing import wait_for
from setpoint.workloads.deployment import DEPLOYMENT
from setpoint.workloads.job import JOB
from setpoint.workloads.process import PROCESS

pytestmark = pytest.mark.timeout(600)  # several engines and rollouts each, on a loaded machine

WAIT = 4 * TIMEOUT
"""Seconds a test waits for an object to reach a state (a rollout included)."""

RECORDS_STOP = """
    import signal, sys, time
    name, record, ready = sys.argv[1], sys.argv[2], sys.argv[3]
    def stop(*_):
        with open(record, "a") as f:
            f.write(name + "\\n")
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    open(ready, "w").close()  # its readiness probe passes only once SIGTERM is handled
    while True:
        time.sleep(3600)
"""

STARTED = re.compile(
    r"engine running in the background \(pid (\d+), log (\S+)\): follow it with "
    r"`setpoint logs -f`, stop it with `setpoint down`"
)


def records_stop(directory: Path, name: str, token: str) -> dict[str, Any]:
    """The spec of a child that appends `name` to `stops.txt` when it gets SIGTERM."""
    ready = directory / f"{name}.ready"
    return {
        "args": [
            sys.executable, "-c", textwrap.dedent(RECORDS_STOP),
            name, str(directory / "stops.txt"), str(ready), token,
        ],
        "readinessProbe": {"exec": {"command": ["test", "-f", str(ready)]}, "periodSeconds": 1},
    }  # fmt: skip


def process(name: str, spec: dict[str, Any], *needs: str) -> dict[str, Any]:
    deps = [{"kind": n.split("/")[0], "name": n.split("/")[1]} for n in needs]
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": name},
        "spec": {**spec, "dependsOn": deps},
    }


@pytest.fixture
def engines(token: str) -> Iterator[list[int]]:
    """Pids of engines a test started in the background: killed after it if still running
    (the `token` fixture then kills their children)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@contextlib.asynccontextmanager
async def store_of(cli: CLI) -> AsyncIterator[Store]:
    store = await open_store(cli.store, registry=builtin_kinds())
    try:
        yield store
    finally:
        await store.close()


def up_detached(cli: CLI, engines: list[int], *args: Path | str) -> tuple[int, list[str]]:
    """`setpoint up -d ARGS`: the engine's pid and the lines printed before the last."""
    result = cli("up", "-d", *map(str, args))
    assert (result.code, result.err) == (0, ""), result
    *applied, last = result.lines
    started = STARTED.fullmatch(last)
    assert started, last
    engines.append(int(started[1]))
    return int(started[1]), applied


def ready(obj: dict[str, Any] | None) -> bool:
    condition = get_condition((obj or {}).get("status"), READY)
    return condition is not None and condition.get("status") == "True"


async def test_up_d_runs_in_the_background_and_down_stops_dependents_first(
    cli: CLI, token: str, engines: list[int]
) -> None:
    d = cli.directory
    web_template = {"metadata": {"labels": {"app": "web"}}, "spec": records_stop(d, "web", token)}
    web = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "template": web_template,
            "dependsOn": [{"kind": "Process", "name": "db"}],
        },
    }
    manifests = cli.write(
        "app.yaml",
        process("db", records_stop(d, "db", token)),
        web,
        process("client", records_stop(d, "client", token), "Deployment/web"),
        process("alone", records_stop(d, "alone", token)),
    )
    pid, applied = up_detached(cli, engines, manifests)
    assert applied == [
        "process.setpoint.dev/db created",
        "deployment.setpoint.dev/web created",
        "process.setpoint.dev/client created",
        "process.setpoint.dev/alone created",
    ]
    log = d / "engine.log"  # beside the store's file
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    async with store_of(cli) as store:
        holder = await running_engine(store, now=0.0)
        assert holder is not None  # `up -d` returned once the engine held the store
        assert holder.pid == pid
        await wait_for(store, PROCESS, "client", ready, within=WAIT)
        await wait_for(store, PROCESS, "alone", ready, within=WAIT)
        await wait_for(store, DEPLOYMENT, "web", ready, within=WAIT)
    children = marked_processes(token)
    assert len(children) == 4
    assert "process.setpoint.dev/db created" in log.read_text()

    down = cli("down")
    assert down.code == 0, down
    *stopped, last = down.lines
    assert last == f"stopped the engine (pid {pid})"
    replica = next(line for line in stopped if line.startswith("stopped Process/web-"))
    assert sorted(stopped) == sorted(
        ["stopped Process/db", "stopped Process/client", "stopped Process/alone", replica]
    )
    order = (d / "stops.txt").read_text().split()
    assert sorted(order) == ["alone", "client", "db", "web"]
    assert order.index("client") < order.index("web") < order.index("db")
    assert not alive(pid)
    assert marked_processes(token) == []

    # The objects stay: `up -d` with no manifests runs them again.
    got = cli("get", "processes", "-o", "name")
    assert sorted(got.lines)[:3] == [
        "process.setpoint.dev/alone",
        "process.setpoint.dev/client",
        "process.setpoint.dev/db",
    ]
    again, applied = up_detached(cli, engines)
    assert applied == []
    async with store_of(cli) as store:
        await wait_for(store, PROCESS, "client", ready, within=WAIT)
    assert cli("down").code == 0
    assert not alive(again)
    assert marked_processes(token) == []
    assert cli("down").lines == [f"no engine runs on {cli.store}: nothing to stop"]


async def test_up_on_a_running_engine_says_so_and_applies_nothing(
    cli: CLI, token: str, engines: list[int]
) -> None:
    d = cli.directory
    db = cli.write("db.yaml", process("db", records_stop(d, "db", token)))
    port = free_port()
    pid, _ = up_detached(cli, engines, "--metrics-address", f"127.0.0.1:{port}", db)
    async with store_of(cli) as store:
        await wait_for(store, PROCESS, "db", ready, within=WAIT)
    assert fetch(f"http://127.0.0.1:{port}/readyz")[::2] == (200, "ok")  # the option goes along
    other = cli.write("other.yaml", process("other", records_stop(d, "other", token)))
    refusal = (
        rf"error: an engine \(pid {pid} on host \S+\) already runs on {re.escape(cli.store)}; "
        r"follow it with `setpoint logs -f` \(or `setpoint get -w`\), stop it with `setpoint down`"
    )
    for args in (("up", "-d", str(other)), ("up", str(other))):
        result = cli(*args)
        assert result.code == 1, result
        assert result.out == ""
        [line] = result.err_lines
        assert re.fullmatch(refusal, line), line
    got = cli("get", "processes", "-o", "name")
    assert got.lines == ["process.setpoint.dev/db"]  # nothing of other.yaml applied
    assert alive(pid)
    assert cli("down").code == 0
    assert marked_processes(token) == []


def test_up_d_shows_the_log_when_the_engine_stops_before_it_is_up(cli: CLI, token: str) -> None:
    app = cli.write("p.yaml", process("p", records_stop(cli.directory, "p", token)))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("up", "-d", "--metrics-address", str(port), str(app))
    assert result.code == 1, result
    assert result.out == ""
    assert result.err_lines[0] == "error: the engine did not start; from engine.log:"
    assert "address already in use" in result.err.lower(), result.err
    assert cli("down").lines == [f"no engine runs on {cli.store}: nothing to stop"]
    assert marked_processes(token) == []


def fetch(url: str) -> tuple[int, str, str]:
    """(status, content type, body) of a GET, errors included."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_up_serves_metrics_health_and_readiness_on_the_metrics_address(
    cli: CLI, token: str
) -> None:
    d = cli.directory
    app = cli.write("db.yaml", process("db", records_stop(d, "db", token)))
    port = free_port()
    up = cli.start("up", "--metrics-address", str(port), str(app))  # a bare port: loopback
    base = f"http://127.0.0.1:{port}"
    up.expect(lambda line: line == f"serving /metrics, /healthz and /readyz on {base}", "serving")
    up.expect(lambda line: line.startswith("Process/db ready=True "), "db ready")

    assert fetch(f"{base}/healthz")[::2] == (200, "ok")
    assert fetch(f"{base}/readyz")[::2] == (200, "ok")
    status, content_type, body = fetch(f"{base}/metrics")
    assert status == 200
    assert content_type.startswith("text/plain; version=0.0.4")
    reconciles = re.search(
        r'^controller_runtime_reconcile_total\{controller="process",result="success"\} (\S+)$',
        body,
        re.MULTILINE,
    )
    assert reconciles is not None, body
    assert float(reconciles[1]) >= 1
    assert fetch(f"{base}/nothing")[0] == 404

    code, err = up.stop(signal.SIGTERM)
    assert code == 0, err
    assert marked_processes(token) == []
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{base}/healthz", timeout=TIMEOUT)


def test_a_metrics_address_that_is_not_host_port_is_refused(cli: CLI) -> None:
    app = cli.write("p.yaml", process("p", {"args": ["true"]}))
    result = cli("up", "--metrics-address", "localhost:http", str(app))
    assert result.code == 1
    assert result.err_lines == [
        "error: --metrics-address: address 'localhost:http' must be HOST:PORT with PORT in 0-65535"
    ]
    assert cli("get", "processes").code == 1  # refused before the store was made


APPENDS_A_RUN = "import sys\nwith open(sys.argv[1], 'a') as f: f.write('ran\\n')"


async def test_restart_replaces_a_process_reruns_a_job_and_rolls_a_deployment(
    cli: CLI, token: str
) -> None:
    d = cli.directory
    runs = d / "runs.txt"
    migrate = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "migrate"},
        "spec": {"args": [sys.executable, "-c", APPENDS_A_RUN, str(runs), token]},
    }
    web = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": records_stop(d, "web", token),
            },
        },
    }
    app = cli.write("app.yaml", process("db", records_stop(d, "db", token)), migrate, web)
    up = cli.start("up", str(app))

    def complete(obj: dict[str, Any] | None) -> bool:
        condition = get_condition((obj or {}).get("status"), "Complete")
        return condition is not None and condition.get("status") == "True"

    async with store_of(cli) as store:
        db = await wait_for(store, PROCESS, "db", ready, within=WAIT)
        assert db is not None
        await wait_for(store, JOB, "migrate", complete, within=WAIT)
        await wait_for(store, DEPLOYMENT, "web", ready, within=WAIT)

        result = cli("restart", "process/db", "job/migrate", kinds=False)
        assert result.code == 1  # one kind at a time, as kubectl
        result = cli("restart", "process/db")
        assert (result.code, result.lines) == (0, ["process.setpoint.dev/db restarted"]), result
        pid = db["status"]["pid"]

        def restarted(obj: dict[str, Any] | None) -> bool:
            status = (obj or {}).get("status") or {}
            return ready(obj) and status.get("pid") not in (None, pid)

        db = await wait_for(store, PROCESS, "db", restarted, within=WAIT)
        assert db is not None
        assert db["status"]["restarts"] == 0
        assert not alive(pid)
        assert (d / "stops.txt").read_text() == "db\n"  # stopped once, gracefully

        assert cli("restart", "job", "migrate").lines == ["job.setpoint.dev/migrate restarted"]

        def ran_again(obj: dict[str, Any] | None) -> bool:
            return complete(obj) and "restartedAt" in ((obj or {}).get("status") or {})

        await wait_for(store, JOB, "migrate", ran_again, within=WAIT)
        assert runs.read_text() == "ran\nran\n"

        processes, _ = await store.list(PROCESS.api_version, PROCESS.kind, "default")
        [replica] = [p for p in processes if p["metadata"]["name"].startswith("web-")]
        assert cli("restart", "deployment/web").lines == ["deployment.setpoint.dev/web restarted"]
        generation = (await store.get(DEPLOYMENT.api_version, DEPLOYMENT.kind, "web", "default"))[
            "metadata"
        ]["generation"]

        def rolled(obj: dict[str, Any] | None) -> bool:
            status = (obj or {}).get("status") or {}
            return (
                ready(obj)
                and status.get("observedGeneration") == generation
                and status.get("updatedReplicas") == 1
            )

        await wait_for(store, DEPLOYMENT, "web", rolled, within=WAIT)
        old = replica["metadata"]["name"]
        await wait_for(store, PROCESS, old, lambda o: o is None, within=WAIT)

        # Applying the manifests again keeps the requests: nothing restarts twice.
        applied = cli("apply", "-f", str(app))
        assert applied.lines[:2] == [
            "process.setpoint.dev/db unchanged",
            "job.setpoint.dev/migrate unchanged",
        ], applied
        web_now = await store.get(DEPLOYMENT.api_version, DEPLOYMENT.kind, "web", "default")
        assert web_now["metadata"]["generation"] == generation
    assert not alive(replica["status"]["pid"])

    refused = cli("restart", "secret/x")
    assert refused.code == 1
    assert refused.err_lines == [
        "error: Secret cannot be restarted: restart takes a Process, Job or Deployment"
    ]
    code, err = up.stop(signal.SIGTERM)
    assert code == 0, err
    assert marked_processes(token) == []


def wait_gone(pid: int) -> None:
    """Return once process `pid` (not a child of ours) has ended."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        readable, _, _ = select.select([fd], [], [], TIMEOUT)
        assert readable, f"pid {pid} still runs after {TIMEOUT}s"
    finally:
        os.close(fd)


async def test_down_stops_what_a_killed_engine_left_running(
    cli: CLI, token: str, engines: list[int]
) -> None:
    d = cli.directory
    app = cli.write(
        "app.yaml",
        process("db", records_stop(d, "db", token)),
        process("web", records_stop(d, "web", token), "Process/db"),
    )
    pid, _ = up_detached(cli, engines, app)
    async with store_of(cli) as store:
        await wait_for(store, PROCESS, "web", ready, within=WAIT)
    os.kill(pid, signal.SIGKILL)  # the children keep running, for the next engine
    wait_gone(pid)
    assert len(marked_processes(token)) == 2

    down = cli("down")
    assert down.code == 0, down
    assert down.lines == [
        f"no engine runs on {cli.store}; stopping what an earlier one left running",
        "stopped Process/web",
        "stopped Process/db",
    ]
    assert (d / "stops.txt").read_text() == "web\ndb\n"
    assert marked_processes(token) == []
    assert cli("down").lines == [f"no engine runs on {cli.store}: nothing to stop"]
