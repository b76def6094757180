"""examples/webapp end to end under `setpoint up`, with a real PostgreSQL: the chain comes
up (db-init -> db -> migrate -> web behind its Service), a rolling update under a steady
request loop fails no request, stopping `db` turns `web` NotReady naming `db`, starting it
again heals the chain, a bad change to `db` is what `setpoint explain deployment/web`
ranks first, and SIGTERM leaves no process behind."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from webapp_engine import Engine, Staged, ready_line, stage_webapp
from webapp_support import (
    postgres_scratch_dir,
    processes_under,
    require_postgresql,
    wait_until,
)

pytestmark = pytest.mark.timeout(600)


def setpoint(base: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI, in the engine's directory (so it reaches its store with no flags)."""
    return subprocess.run(
        [sys.executable, "-m", "setpoint", *args],
        cwd=base, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read().decode()


def with_version(staged: Staged, version: str) -> list[dict[str, Any]]:
    objects = copy.deepcopy(staged.objects)
    for obj in objects:
        if obj["kind"] == "Deployment":
            obj["spec"]["template"]["spec"]["env"]["APP_VERSION"] = version
    return objects


def recorded_not_ready(base: Path, *, after: float) -> bool:
    """Whether the engine's timeline has web's Ready turning False after `after`."""
    out = setpoint(base, "timeline", "deployment/web", "--type", "condition", "-o", "jsonl")
    assert out.returncode == 0, out.stderr
    entries = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return any(
        e["ts"] > after
        and e["condition"]["type"] == "Ready"
        and e["condition"]["status"] == "False"
        for e in entries
    )


def with_db_args(objects: list[dict[str, Any]], *extra: str) -> list[dict[str, Any]]:
    objects = copy.deepcopy(objects)
    for obj in objects:
        if obj["kind"] == "Process" and obj["metadata"]["name"] == "db":
            obj["spec"]["args"] = [*obj["spec"]["args"], *extra]
    return objects


def test_webapp_up_rolls_without_failures_and_heals_after_db_stops() -> None:
    require_postgresql()
    with postgres_scratch_dir() as base:
        staged = stage_webapp(base)
        engine = Engine(base, staged.manifest)
        try:
            engine.expect(ready_line("Deployment/web"), "web Ready", within=180)
            url = f"http://127.0.0.1:{staged.service_port}/"
            status, body = get(url)
            assert status == 200
            assert "(version 1)" in body

            # a rolling update under a steady request loop
            stop = base / "stop-load"
            load = subprocess.Popen(
                [sys.executable, str(base / "examples/webapp/load.py"), "--url", url,
                 "--until", str(stop), "--seconds", "240"],
                stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            version_2 = with_version(staged, "2")
            staged.write(version_2)
            applied = setpoint(base, "apply", "-f", str(staged.manifest))
            assert applied.returncode == 0, applied.stderr
            assert "deployment.setpoint.dev/web configured" in applied.stdout
            rolled = setpoint(base, "rollout", "status", "deployment/web", "--timeout", "150s")
            assert rolled.returncode == 0, rolled.stdout + rolled.stderr
            stop.touch()
            out, _ = load.communicate(timeout=60)
            summary = json.loads(out.splitlines()[-1])
            assert summary["failures"] == 0, summary
            assert summary["requests"] > 20, summary
            assert summary["versions"].get("2", 0) > 0, summary
            assert "(version 2)" in get(url)[1]

            # stopping db: web is NotReady and says why; starting it again heals it
            deleted = setpoint(base, "delete", "process", "db")
            assert deleted.returncode == 0, deleted.stderr
            line = engine.expect(
                lambda line: line.startswith("Deployment/web ready=False ") and "db" in line,
                "web NotReady naming db",
            )
            assert "Process/db" in line
            # db stops within its grace period; apply onto it before it is gone is refused
            gone = setpoint(base, "wait", "--for=delete", "process/db", "--timeout", "120s")
            assert gone.returncode == 0, gone.stdout + gone.stderr
            healed = setpoint(base, "apply", "-f", str(staged.manifest))
            assert healed.returncode == 0, healed.stderr
            engine.expect(ready_line("Deployment/web"), "web Ready again", within=180)
            assert get(url)[0] == 200

            # a bad change to db (it stops listening on TCP): explain names it first
            staged.write(with_db_args(version_2, "-c", "listen_addresses="))
            changed_at = time.time()
            broken = setpoint(base, "apply", "-f", str(staged.manifest))
            assert "process.setpoint.dev/db configured" in broken.stdout, broken.stderr
            engine.expect(
                lambda line: line.startswith("Deployment/web ready=False "), "web NotReady"
            )
            wait_until(
                lambda: recorded_not_ready(base, after=changed_at),
                30,
                "the timeline records web going NotReady",
            )
            explained = setpoint(base, "explain", "deployment/web", "-o", "json")
            assert explained.returncode == 0, explained.stderr
            first = json.loads(explained.stdout)[0]
            assert first["entry"]["type"] == "change", first
            assert first["entry"]["object"]["name"] == "db", first
            assert "listen_addresses" in json.dumps(first["entry"]["diff"]), first
            assert "db" in first["reason"], first

            code, err = engine.stop()
            assert code == 0, err
            assert processes_under(base) == []
        finally:
            engine.kill()
            for pid in processes_under(base):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


def test_an_autoscaler_scales_web_on_requests_in_flight() -> None:
    """The Autoscaler reads `webapp_requests_in_flight` from the app's /metrics (through the
    Service, so from one replica at a time: a per-replica value) and scales `web` up while
    slow requests pile up."""
    require_postgresql()
    with postgres_scratch_dir() as base:
        staged = stage_webapp(base)
        engine = Engine(base, staged.manifest)
        stop = threading.Event()
        try:
            engine.expect(ready_line("Deployment/web"), "web Ready", within=180)
            url = f"http://127.0.0.1:{staged.service_port}"
            scaler = {
                "apiVersion": "setpoint.dev/v1alpha1",
                "kind": "Autoscaler",
                "metadata": {"name": "web"},
                "spec": {
                    "scaleTargetRef": {"kind": "Deployment", "name": "web"},
                    "minReplicas": 3,
                    "maxReplicas": 6,
                    "periodSeconds": 1,
                    "metric": {
                        "prometheus": {
                            "url": f"{url}/metrics",
                            "name": "webapp_requests_in_flight",
                        },
                        "target": 1,
                    },
                },
            }
            (base / "scaler.yaml").write_text(json.dumps(scaler))
            applied = setpoint(base, "apply", "-f", str(base / "scaler.yaml"))
            assert applied.returncode == 0, applied.stderr

            def slow_requests() -> None:  # until the test is done (bounded, in case)
                deadline = time.monotonic() + 300
                while not stop.is_set() and time.monotonic() < deadline:
                    with contextlib.suppress(OSError):
                        get(f"{url}/?sleep=2")

            for _ in range(12):
                threading.Thread(target=slow_requests, daemon=True).start()
            # Wait on what the Autoscaler records, not on how fast it gets there: its first
            # decision to scale up, with the metric it was taken on. (`currentMetric` is only
            # the last reading: the Service sends each scrape to one replica, and a new one
            # has no request in flight yet, so it may well be 0 by the time it is read.)
            up: list[dict[str, Any]] = []

            def scaled_up() -> bool:
                got = setpoint(base, "get", "autoscaler", "web", "-o", "json")
                assert got.returncode == 0, got.stderr
                decisions = (json.loads(got.stdout).get("status") or {}).get("decisions", [])
                up[:] = [d for d in decisions if d["final"] > d["current"]][:1]
                return bool(up)

            wait_until(scaled_up, 240, "the autoscaler decided to scale web up")
            assert up[0]["metric"] > 1, up  # above the target: requests piled up
            assert up[0]["final"] > 3, up
            wait_until(lambda: desired_replicas(base) > 3, 240, "web scaled above 3 replicas")
            stop.set()
            code, err = engine.stop()
            assert code == 0, err
            assert processes_under(base) == []
        finally:
            stop.set()
            engine.kill()
            for pid in processes_under(base):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


def desired_replicas(base: Path) -> int:
    got = setpoint(base, "get", "deployment", "web", "-o", "json")
    assert got.returncode == 0, got.stderr
    return int(json.loads(got.stdout)["spec"]["replicas"])
