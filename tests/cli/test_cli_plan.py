"""`setpoint plan` is right against reality: each scenario is planned (`plan -f -o json`),
then applied to a real `setpoint up` (real child processes, the SQLite store and its
timeline), and the steps the plan predicted are the steps the timeline then records, in
the same order (kinds of step per object, not wording): Deployment scenarios compare the replicas
started and stopped, a dependency restart and a deletion with dependents (`delete
--dry-run=plan`) the Ready transitions of the Processes.

The tests wait on `setpoint rollout status` and `setpoint wait` (timeouts, no sleeps).
"""

from __future__ import annotations

import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from cli_kit import CLI, start_up

from setpoint.testing import free_port_range

SLEEPER = "import time; time.sleep(100000)"


def web(token: str, replicas: int, version: str = "v1") -> dict[str, Any]:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "args": [sys.executable, "-c", SLEEPER, token],
                    "env": {"VERSION": version},
                    "terminationGracePeriodSeconds": 5,
                },
            },
        },
    }


def process(token: str, name: str, arg: str = "a", after: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"args": [sys.executable, "-c", SLEEPER, token, arg]}
    if after is not None:
        spec["dependsOn"] = [{"kind": "Process", "name": after}]
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": name},
        "spec": spec,
    }


def planned(cli: CLI, path: str) -> list[dict[str, Any]]:
    result = cli("plan", "-f", path, "-o", "json", store=False, kinds=False)
    assert result.code == 0, result
    doc = result.json()
    assert doc["settled"], doc
    steps: list[dict[str, Any]] = doc["steps"]
    return steps


def timeline(cli: CLI, types: str = "change") -> list[dict[str, Any]]:
    result = cli("timeline", "--type", types, "-o", "json", store=False, kinds=False)
    assert result.code == 0, result
    entries: list[dict[str, Any]] = result.json()
    return entries


def run(cli: CLI, *args: str) -> Any:
    result = cli(*args, store=False, kinds=False)
    assert result.code == 0, result
    return result


def replica_steps(entries: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The replicas the engine created and deleted, in the timeline's order."""
    actions = {"created": "start", "deleted": "stop"}
    return [
        (actions[e["action"]], e["object"]["name"])
        for e in entries
        if e["object"]["kind"] == "Process"
        and e["object"]["name"].startswith("web-")
        and e.get("action") in actions
    ]


def recorded_until(
    cli: CLI,
    types: str,
    before: int,
    select: Callable[[list[dict[str, Any]]], list[Any]],
    want: list[Any],
) -> list[Any]:
    """What `select` finds in the timeline's entries after the first `before`, once it is
    `want` (the recorder writes a moment after the store) or 30 s have passed."""
    deadline = time.monotonic() + 30
    while True:  # a condition with a timeout, not a sleep
        found = select(timeline(cli, types)[before:])
        if found == want or time.monotonic() > deadline:
            return found


def predicted_replica_steps(steps: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(s["action"], s["target"]) for s in steps if s["action"] in ("start", "stop")]


def check_deployment(cli: CLI, token: str, replicas: int, version: str) -> list[dict[str, Any]]:
    """Plan `web` at `replicas` and `version`, apply it, wait until it is rolled out and
    every stopped replica is gone; the timeline's replica steps are the planned ones."""
    path = str(cli.write("web.yaml", web(token, replicas, version)))
    steps = planned(cli, path)
    before = len(timeline(cli))
    run(cli, "apply", "-f", path)
    run(cli, "rollout", "status", "deploy/web", "--timeout", "60s")
    for action, name in predicted_replica_steps(steps):
        if action == "stop":
            run(cli, "wait", "--for=delete", f"process/{name}", "--timeout", "60s")
    want = predicted_replica_steps(steps)
    recorded = recorded_until(cli, "change", before, replica_steps, want)
    assert recorded == want, (steps, recorded)
    return steps


def test_plan_predicts_what_the_engine_does(cli: CLI, token: str) -> None:
    up = start_up(cli, cli.write("db.yaml", process(token, "db")))
    try:
        up.expect(lambda line: line.startswith("Process/db ready=True"), "db Ready")
        created = check_deployment(cli, token, 2, "v1")  # create
        assert [s["action"] for s in created] == ["start", "start", "ready", "ready"]
        check_deployment(cli, token, 3, "v1")  # scale up
        down = check_deployment(cli, token, 1, "v1")  # scale down
        assert [s["action"] for s in down] == ["stop", "stop"]
        rolled = check_deployment(cli, token, 2, "v2")  # a rolling update
        assert {s["action"] for s in rolled} == {"start", "ready", "stop"}
        same = check_deployment(cli, token, 2, "v2")  # no change
        assert same == []
        nothing = run(cli, "plan", "-f", str(cli.directory / "web.yaml"))
        assert nothing.lines == ["nothing to do"], nothing
    finally:
        code, err = up.stop(signal.SIGTERM)
    assert code == 0, err


def readiness(entries: list[dict[str, Any]], names: set[str]) -> list[tuple[str, str]]:
    """The Ready transitions of the Processes `names`, in the timeline's order: a change
    of status, not of reason only (a stopping Process is `Terminating`, then stopped)."""
    last: dict[str, str] = {}
    found = []
    for e in entries:
        if (
            e["type"] == "condition"
            and e["object"]["kind"] == "Process"
            and e["object"]["name"] in names
            and e["condition"]["type"] == "Ready"
        ):
            name = e["object"]["name"]
            state = "ready" if e["condition"]["status"] == "True" else "down"
            if last.get(name) != state:
                found.append((name, state))
            last[name] = state
    return found


def test_plan_predicts_a_dependency_restart(cli: CLI, token: str) -> None:
    path = cli.write("app.yaml", process(token, "db"), process(token, "api", after="db"))
    up = start_up(cli, path)
    try:
        up.expect(lambda line: line.startswith("Process/api ready=True"), "api Ready")
        cli.write("app.yaml", process(token, "db", "b"), process(token, "api", after="db"))
        steps = planned(cli, str(path))
        assert [(s["name"], s["action"]) for s in steps] == [
            ("db", "restart"),
            ("api", "not-ready"),
            ("db", "ready"),
            ("api", "ready"),
        ], steps
        before = len(timeline(cli, "condition"))
        run(cli, "apply", "-f", str(path))
        up.expect(lambda line: line.startswith("Process/db ready=True"), "db Ready again")
        up.expect(lambda line: line.startswith("Process/api ready=True"), "api Ready again")
        kinds = {"restart": "down", "not-ready": "down", "ready": "ready"}
        want = [(s["name"], kinds[s["action"]]) for s in steps]
        recorded = recorded_until(
            cli, "condition", before, lambda e: readiness(e, {"db", "api"}), want
        )
        assert recorded == want, (steps, recorded)
    finally:
        code, err = up.stop(signal.SIGTERM)
    assert code == 0, err


def test_plan_predicts_the_attempts_of_a_failing_job(cli: CLI, token: str) -> None:
    up = start_up(cli, cli.write("db.yaml", process(token, "db")))
    try:
        up.expect(lambda line: line.startswith("Process/db ready=True"), "db Ready")
        migrate = {
            "apiVersion": "setpoint.dev/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "migrate"},
            "spec": {
                "args": [sys.executable, "-c", "raise SystemExit(3)", token],
                "backoffLimit": 2,
                "backoff": {"initialSeconds": 0.1, "maxSeconds": 0.2},
            },
        }
        path = str(cli.write("migrate.yaml", migrate))
        steps = planned(cli, path)
        assert [(s["kind"], s["action"], s.get("attempts")) for s in steps] == [
            ("Job", "run", 3)
        ], steps
        before = len(timeline(cli, "event"))
        run(cli, "apply", "-f", path)
        run(cli, "wait", "--for=condition=Failed", "job/migrate", "--timeout", "60s")

        def starts(entries: list[dict[str, Any]]) -> list[str]:
            return [
                e["reason"]
                for e in entries
                if e["object"] == {"kind": "Job", "name": "migrate", "namespace": "default"}
                and e["reason"] == "Started"
            ]

        recorded = recorded_until(cli, "event", before, starts, ["Started"] * 3)
        assert recorded == ["Started"] * 3  # the predicted bound, reached: it failed each time
    finally:
        code, err = up.stop(signal.SIGTERM)
    assert code == 0, err


def test_plan_predicts_a_service_change(cli: CLI, token: str) -> None:
    first = free_port_range(3)
    second = first + 2
    backend = process(token, "api")
    backend["metadata"]["labels"] = {"app": "api"}
    backend["spec"]["ports"] = [first + 1]

    def svc(port: int) -> dict[str, Any]:
        return {
            "apiVersion": "setpoint.dev/v1alpha1",
            "kind": "Service",
            "metadata": {"name": "api"},
            "spec": {"selector": {"app": "api"}, "port": port},
        }

    path = cli.write("app.yaml", backend, svc(first))
    up = start_up(cli, path)
    try:
        up.expect(lambda line: line.startswith("Process/api ready=True"), "api Ready")
        run(cli, "wait", "--for=condition=Ready", "service/api", "--timeout", "60s")
        cli.write("app.yaml", backend, svc(second))
        steps = planned(cli, str(path))
        assert [(s["kind"], s["action"], s["reason"]) for s in steps] == [
            ("Service", "listen", f"on 127.0.0.1:{second} (was 127.0.0.1:{first})"),
            ("Service", "ready", "1 ready endpoint(s) among the stored Processes"),
        ], steps
        run(cli, "apply", "-f", str(path))
        deadline = time.monotonic() + 30
        while True:  # a condition with a timeout: the new listener accepts, the old one not
            status = run(cli, "get", "service", "api", "-o", "json").json().get("status") or {}
            moved = _accepts(second) and not _accepts(first)
            ready = any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in status.get("conditions") or []
            )
            if (moved and ready and status.get("observedGeneration") == 2) or (
                time.monotonic() > deadline
            ):
                break
        assert moved, status
        assert ready, status
        assert status.get("readyEndpoints") == 1, status
    finally:
        code, err = up.stop(signal.SIGTERM)
    assert code == 0, err


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_plan_predicts_a_deletion_with_dependents(cli: CLI, token: str) -> None:
    path = cli.write(
        "app.yaml",
        process(token, "db"),
        process(token, "api", after="db"),
        process(token, "web", after="api"),
    )
    up = start_up(cli, path)
    try:
        up.expect(lambda line: line.startswith("Process/web ready=True"), "web Ready")
        result = run(cli, "delete", "process", "db", "--dry-run=plan", "-o", "json")
        steps = result.json()["steps"]
        assert [(s["name"], s["action"]) for s in steps] == [
            ("db", "stop"),
            ("api", "not-ready"),
            ("web", "not-ready"),
        ], steps
        db = str(cli.write("db.yaml", process(token, "db")))
        text = run(cli, "delete", "-f", db, "--dry-run=plan")
        assert (
            text.lines[0] == "  1. Process/db: stop (deleted: its child is stopped, then it goes)"
        )
        assert run(cli, "get", "process", "db", "-o", "json").json()["metadata"]["name"] == "db"
        before = len(timeline(cli, "condition"))
        run(cli, "delete", "process", "db")
        run(cli, "wait", "--for=delete", "process/db", "--timeout", "60s")
        kinds = {"stop": "down", "not-ready": "down"}
        want = [(s["name"], kinds[s["action"]]) for s in steps]
        recorded = recorded_until(
            cli, "condition", before, lambda e: readiness(e, {"db", "api", "web"}), want
        )
        assert recorded == want, (steps, recorded)
        for name in ("api", "web"):  # kept running, as the plan's note says
            status = run(cli, "get", "process", name, "-o", "json").json()["status"]
            assert status["phase"] == "Running", status
    finally:
        code, err = up.stop(signal.SIGTERM)
    assert code == 0, err
