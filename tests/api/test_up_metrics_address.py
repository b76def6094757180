"""`setpoint up --metrics-address` beyond loopback serves /metrics, /healthz and /readyz to
whoever can reach it, with no token: a warning line on stderr says so; on loopback, none."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from api_kit import TIMEOUT, Running


@pytest.mark.parametrize(
    ("address", "warned"),
    [(":0", True), ("0.0.0.0:0", True), ("127.0.0.1:0", False), ("0", False)],
)
def test_metrics_beyond_loopback_are_warned_about(
    tmp_path: Path, address: str, warned: bool
) -> None:
    manifest = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "sleeper"},
        "spec": {"args": ["sleep", "1000"]},
    }
    (tmp_path / "app.yaml").write_text(yaml.safe_dump(manifest))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETPOINT_", "KUBE"))}
    up = Running(
        subprocess.Popen(
            [sys.executable, "-m", "setpoint", "up", "app.yaml", "--metrics-address", address],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=tmp_path,
            env=env,
        ),
        timeout=TIMEOUT,
    )
    try:
        serving = up.expect(lambda text: text.startswith("serving /metrics"), "where /metrics is")
        warnings = [line for line in up.seen if line.startswith("warning: --metrics-address")]
        if warned:
            assert serving.split()[-1].startswith(("http://0.0.0.0:", "http://[::]:"))
            assert len(warnings) == 1
            assert "with no token" in warnings[0]
            assert "127.0.0.1:PORT" in warnings[0]
        else:
            assert serving.split()[-1].startswith("http://127.0.0.1:")
            assert warnings == []
    finally:
        up.stop(signal.SIGINT)
