"""examples/chain end to end: `setpoint up` brings db, then migrate, then web to Ready, the web
server's /healthz answers 200, and SIGTERM stops every child and exits 0."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHAIN = ROOT / "examples" / "chain"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_up_brings_the_chain_to_ready(tmp_path: Path) -> None:
    db_port, web_port = free_port(), free_port()
    manifest = (CHAIN / "chain.yaml").read_text()
    manifest = (
        manifest.replace("examples/chain/", f"{CHAIN}/")
        .replace(".setpoint/chain-data", str(tmp_path / "data"))
        .replace("15432", str(db_port))
        .replace("18080", str(web_port))
        .replace("python3", sys.executable)
    )
    (tmp_path / "chain.yaml").write_text(manifest)
    up = subprocess.Popen(
        [sys.executable, "-m", "setpoint", "up", "chain.yaml"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    ready: set[str] = set()
    pids: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        assert up.stdout is not None
        for line in up.stdout:  # one line per status change; ends if `up` dies
            if "ready=True" in line:
                ready.add(line.split()[0])
            if " pid=" in line and (pid := line.split(" pid=")[1].split()[0]).isdigit():
                pids.add(int(pid))
            if {"Process/db", "Job/migrate", "Process/web"} <= ready or time.monotonic() > deadline:
                break
        assert {"Process/db", "Job/migrate", "Process/web"} <= ready
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/healthz", timeout=5) as r:
            assert (r.status, r.read()) == (200, b"ok\n")
        assert (tmp_path / "data" / "schema").read_text() == "1"
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=30) == 0
        for pid in pids:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                continue
            raise AssertionError(f"pid {pid} outlived setpoint up")
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait()
            for pid in pids:  # children run in sessions of their own
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
