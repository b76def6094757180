"""`setpoint rollout` and `setpoint scale` against a running `setpoint up` with a real
Deployment of small HTTP servers; and a `setpoint up` killed with SIGKILL in the middle
of a rollout, then started again, converging with no duplicate and no orphan process.

`up` prints one plain line per status change; the tests read those lines (and the
commands' own output) under timeouts and never sleep.
"""

from __future__ import annotations

import signal
import sys
import textwrap
import time
import urllib.request
from typing import Any

from cli_kit import CLI, Running, marked_processes, start_up

from setpoint.testing import free_port_range

SERVER = """
    import http.server, os, sys
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(os.environ["VERSION"].encode())
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def web(token: str, start: int, version: str, replicas: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "portRange": {"start": start, "end": start + 9},
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "args": [sys.executable, "-c", textwrap.dedent(SERVER), "$(PORT)", token],
                    "env": {"VERSION": version},
                    "readinessProbe": {
                        "httpGet": {"path": "/", "port": "$(PORT)"},
                        "periodSeconds": 1,
                    },
                    "terminationGracePeriodSeconds": 5,
                },
            },
        },
    }


def replicas(token: str) -> dict[str, int]:
    """REPLICA name -> pid of every live replica process of this test."""
    found: dict[str, int] = {}
    for pid, _, environ in marked_processes(token):
        name = next(e[8:].decode() for e in environ if e.startswith(b"REPLICA="))
        assert name not in found, f"two processes for replica {name}"
        found[name] = pid
    return found


def ready(running: Running) -> None:
    running.expect(lambda line: line.startswith("Deployment/web ready=True "), "web Ready")


def served_versions(cli: CLI) -> set[str]:
    got = cli("get", "processes", "-o", "json", store=False, kinds=False)
    assert got.code == 0, got
    live = [p for p in got.json()["items"] if "deletionTimestamp" not in p["metadata"]]
    versions = set()
    for p in live:
        port = p["spec"]["ports"][0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
            versions.add(response.read().decode())
    return versions


def rollout(cli: CLI, *args: str) -> list[str]:
    result = cli("rollout", *args, store=False, kinds=False)
    assert result.code == 0, result
    return result.lines


def test_rollout_status_history_undo_and_scale(cli: CLI, token: str) -> None:
    start = free_port_range(10)
    manifest = cli.write("web.yaml", web(token, start, "v1"))
    up = start_up(cli, manifest)
    ready(up)
    assert rollout(cli, "status", "deployment/web")[-1] == (
        'deployment "web" successfully rolled out'
    )

    cli.write("web.yaml", web(token, start, "v2"))
    applied = cli("apply", "-f", str(manifest), store=False, kinds=False)
    assert applied.lines == ["deployment.setpoint.dev/web configured"], applied
    lines = rollout(cli, "status", "deploy/web", "--timeout", "60s")
    assert lines[-1] == 'deployment "web" successfully rolled out'
    assert served_versions(cli) == {"v2"}

    history = rollout(cli, "history", "deployment/web")
    assert history[:2] == ["deployment.setpoint.dev/web", "REVISION  CHANGE-CAUSE"]
    assert [line.split()[0] for line in history[2:]] == ["1", "2"]
    shown = cli("rollout", "history", "deployment/web", "--revision", "1", store=False)
    assert "VERSION: v1" in shown.out, shown

    assert rollout(cli, "undo", "deployment/web") == ["deployment.setpoint.dev/web rolled back"]
    rollout(cli, "status", "deployment/web", "--timeout", "60s")
    assert served_versions(cli) == {"v1"}
    history = rollout(cli, "history", "deployment/web")
    assert [line.split()[0] for line in history[2:]] == ["2", "3"]

    scaled = cli("scale", "deployment/web", "--replicas", "3", store=False, kinds=False)
    assert scaled.lines == ["deployment.setpoint.dev/web scaled"], scaled
    rollout(cli, "status", "deployment/web", "--timeout", "60s")
    assert len(replicas(token)) == 3
    stale = cli(
        "scale", "deployment/web", "--replicas", "1", "--current-replicas", "2", store=False
    )
    assert stale.code == 1
    assert stale.err.startswith("error: current-replicas: expected 2 replicas, found 3")

    code, err = up.stop(signal.SIGTERM)
    assert code == 0, err
    assert replicas(token) == {}


def test_up_killed_mid_rollout_converges_without_duplicates_or_orphans(
    cli: CLI, token: str
) -> None:
    start = free_port_range(10)
    manifest = cli.write("web.yaml", web(token, start, "v1", replicas=3))
    up = start_up(cli, manifest)
    ready(up)
    cli.write("web.yaml", web(token, start, "v2", replicas=3))
    assert cli("apply", "-f", str(manifest), store=False).code == 0
    # the first new replica has been created: the rollout is under way
    up.expect(lambda line: line.startswith("Process/web-") and "ready=False" in line, "surge")
    up.kill()  # SIGKILL: the engine dies mid-rollout, its children stay

    again = start_up(cli, manifest)
    again.expect(lambda line: line == "deployment.setpoint.dev/web unchanged", "unchanged")
    status = cli("rollout", "status", "deployment/web", "--timeout", "90s", store=False)
    assert status.code == 0, status
    assert served_versions(cli) == {"v2"}
    # `rollout status` is done once the old replicas are scaled down; an old one may still
    # be terminating (its object goes once its child's exit is recorded): wait for that.
    deadline = time.monotonic() + 60
    while True:
        running = replicas(token)
        got = cli("get", "processes", "-o", "json", store=False, kinds=False).json()["items"]
        names = sorted(p["metadata"]["name"] for p in got)
        if sorted(running) == names or time.monotonic() > deadline:
            break
        time.sleep(0.1)  # polling the condition above, bounded by the deadline
    assert sorted(running) == names
    assert len(running) == 3
    assert {p["status"]["pid"] for p in got} == set(running.values())

    code, err = again.stop(signal.SIGTERM)
    assert code == 0, err
    assert replicas(token) == {}
