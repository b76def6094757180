"""`spec.suspend` through the API: the real `kubectl patch` against a running `setpoint up`
stops a Process's child and keeps it stopped, as `setpoint stop` does, and clearing it
starts it again (what is written is the object; the engine acts on it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml
from api_kit import TIMEOUT, Running, kubectl_binary


def test_kubectl_patch_suspend_stops_a_process_and_clearing_it_starts_it(tmp_path: Path) -> None:
    kubectl = kubectl_binary()
    manifest = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "sleeper"},
        "spec": {"args": ["sleep", "1000"], "restartPolicy": "Always"},
    }
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

    def kubectl_patch(suspend: bool) -> None:
        patch = '{"spec":{"suspend":%s}}' % ("true" if suspend else "false")
        subprocess.run(
            [kubectl, "patch", "process", "sleeper", "--type", "merge", "-p", patch],
            check=True,
            capture_output=True,
            cwd=tmp_path,
            env={**env, "KUBECONFIG": ".setpoint/kubeconfig", "HOME": str(tmp_path)},
            timeout=TIMEOUT,
        )

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
