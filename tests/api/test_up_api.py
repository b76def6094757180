"""`setpoint up` serves the API too: on 127.0.0.1 with a new admin token, and a
`.setpoint/kubeconfig` (mode 0600) with which the real kubectl needs no other flag; Host
names beyond loopback only as `--accept-hosts` says."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import yaml
from api_kit import TIMEOUT, Running, kubectl_binary


def marked(mark: str) -> list[int]:
    """Live processes with `mark` in their argv (what the test started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if mark.encode() in (entry / "cmdline").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def test_up_serves_the_api_with_a_kubeconfig(tmp_path: Path) -> None:
    kubectl = kubectl_binary()
    mark = f"setpoint-api-up-{os.getpid()}-{tmp_path.name}"
    manifest = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "sleeper"},
        "spec": {"args": ["python3", "-c", "import time; time.sleep(1000)", mark]},
    }
    (tmp_path / "app.yaml").write_text(yaml.safe_dump(manifest))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETPOINT_", "KUBE"))}
    up = Running(
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "setpoint",
                "up",
                "app.yaml",
                "--accept-hosts",
                r"setpoint\.test",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=env,
        ),
        timeout=TIMEOUT,
    )
    try:
        line = up.expect(lambda text: text.startswith("serving the API on "), "the API's address")
        assert line.split()[4].startswith("https://127.0.0.1:")
        assert "KUBECONFIG=.setpoint/kubeconfig" in line
        kubeconfig = tmp_path / ".setpoint" / "kubeconfig"
        assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
        assert yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
        with httpx.Client(base_url=line.split()[4], verify=False, timeout=TIMEOUT) as client:
            named = client.get("/api", headers={"Host": "setpoint.test"})
            assert named.status_code == 401  # a served name: on to the token check
            other = client.get("/api", headers={"Host": "other.test"})
            assert other.status_code == 403, other.text

        got = subprocess.run(
            [kubectl, "get", "processes", "-o", "name"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**env, "KUBECONFIG": ".setpoint/kubeconfig", "HOME": str(tmp_path)},
            timeout=TIMEOUT,
        )
        assert (got.returncode, got.stdout) == (
            0,
            "process.setpoint.dev/sleeper\n",
        ), got.stderr
        up.proc.send_signal(signal.SIGTERM)
        assert up.ended()[0] == 0
    finally:
        up.kill()
        for pid in marked(mark):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
