"""`spec.suspend` through the API: the real `kubectl patch` against a running `setpoint up`
stops a Process's child (or a Job's attempt) and keeps it stopped, as `setpoint stop` does,
and clearing it starts it again (what is written is the object; the engine acts on it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml
from api_kit import TIMEOUT, Running, kubectl_binary


def start_up(tmp_path: Path, manifest: dict[str, object]) -> tuple[Running, dict[str, str]]:
    """`setpoint up` of `manifest` in `tmp_path`, and the environment to run kubectl in."""
    (tmp_path / "app.yaml").write_text(yaml.safe_dump(manifest))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETPOINT_", "KUBE"))}
    up = Running(
        subprocess.Popen(
            [sys.executable, "-m", "setpoint", "up", "app.yaml"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=env,
        ),
        timeout=TIMEOUT,
    )
    return up, {**env, "KUBECONFIG": ".setpoint/kubeconfig", "HOME": str(tmp_path)}


def kubectl(tmp_path: Path, env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [kubectl_binary(), *args],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=TIMEOUT,
    )
    return result.stdout


def test_kubectl_patch_suspend_stops_a_process_and_clearing_it_starts_it(tmp_path: Path) -> None:
    manifest = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "sleeper"},
        "spec": {"args": ["sleep", "1000"], "restartPolicy": "Always"},
    }
    up, env = start_up(tmp_path, manifest)

    def kubectl_patch(suspend: bool) -> None:
        patch = '{"spec":{"suspend":%s}}' % ("true" if suspend else "false")
        kubectl(tmp_path, env, "patch", "process", "sleeper", "--type", "merge", "-p", patch)

    try:
        up.expect(lambda line: line.startswith("Process/sleeper ready=True "), "sleeper Ready")
        kubectl_patch(True)
        line = up.expect(lambda line: "phase=Suspended" in line, "sleeper Suspended")
        assert line.startswith("Process/sleeper ready=False phase=Suspended ")
        kubectl_patch(False)
        up.expect(lambda line: line.startswith("Process/sleeper ready=True "), "sleeper again")
    finally:
        code, err = up.stop(signal.SIGTERM)
    assert code == 0, err


def test_kubectl_patch_suspend_stops_a_job_and_clearing_it_lets_it_complete(
    tmp_path: Path,
) -> None:
    """Its attempt is stopped without a failure counted (backoffLimit 0 would fail it),
    `kubectl wait` sees the `Suspended` condition, and resumed the Job completes."""
    once = "if [ -e started ]; then exit 0; fi; touch started; exec sleep 1000"
    manifest = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "migrate"},
        "spec": {"args": ["sh", "-c", once], "backoffLimit": 0},
    }
    up, env = start_up(tmp_path, manifest)

    def kubectl_patch(suspend: bool) -> None:
        patch = '{"spec":{"suspend":%s}}' % ("true" if suspend else "false")
        kubectl(tmp_path, env, "patch", "job.setpoint.dev", "migrate", "--type", "merge",
                "-p", patch)  # fmt: skip

    try:
        up.expect(lambda line: line.startswith("Job/migrate ") and " pid=" in line, "running")
        kubectl_patch(True)
        up.expect(lambda line: "phase=Suspended" in line, "migrate Suspended")
        wait = ("wait", "job.setpoint.dev/migrate", "--for=condition=Suspended", "--timeout=10s")
        kubectl(tmp_path, env, *wait)
        failed = kubectl(tmp_path, env, "get", "job.setpoint.dev", "migrate",
                         "-o", "jsonpath={.status.failed}")  # fmt: skip
        assert failed == "0"
        kubectl_patch(False)
        up.expect(lambda line: line.startswith("Job/migrate ready=True "), "migrate Complete")
    finally:
        code, err = up.stop(signal.SIGTERM)
    assert code == 0, err
