"""Secrets end to end, with the real engine (`setpoint up`): a Process gets a Secret's value
in its environment, prints it and fails; the value is in `get secret -o yaml` (as kubectl
shows it) and nowhere else: not in the live view, the exit reason, `describe`, `events` or
`timeline -o json`. Everything `up` keeps on disk is private (0700 / 0600)."""

from __future__ import annotations

import base64
import signal
import stat
import sys
from pathlib import Path

import yaml
from cli_kit import CLI, start_up

PASSWORD = "hunter2-correct-horse"

PRINT_AND_FAIL = """
import os, sys
print("connecting with password", os.environ["PGPASSWORD"], flush=True)
print("ERROR: login failed for", os.environ["API_token"], flush=True)
sys.exit(3)
"""


def manifests(cli: CLI, token: str) -> Path:
    app = cli.directory / "app"
    app.mkdir()
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db"},
        "stringData": {"password": PASSWORD, "token": PASSWORD + "-token"},
    }
    proc = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "web"},
        "spec": {
            "args": [sys.executable, "-c", PRINT_AND_FAIL, token],
            "restartPolicy": "Never",
            "env": [
                {
                    "name": "PGPASSWORD",
                    "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}},
                }
            ],
            "envFrom": [{"secretRef": {"name": "db"}, "prefix": "API_"}],
        },
    }
    (app / "app.yaml").write_text(yaml.safe_dump_all([secret, proc]))
    return app


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_secret_reaches_the_child_and_no_output_but_get_secret(cli: CLI, token: str) -> None:
    up = start_up(cli, manifests(cli, token))
    try:
        failed = up.expect(
            lambda line: line.startswith("Process/web ") and "phase=Failed" in line, "web failed"
        )
        assert "login failed for ***" in failed

        def run(*args: str) -> str:
            result = cli(*args, store=False, kinds=False)
            assert result.code == 0, result
            return result.out

        shown = yaml.safe_load(run("get", "secret", "db", "-o", "yaml"))
        assert base64.b64decode(shown["data"]["password"]).decode() == PASSWORD
        described = run("describe", "secret", "db")
        assert "password:  21 bytes" in described
        proc = yaml.safe_load(run("get", "process", "web", "-o", "yaml"))
        reason = proc["status"]["lastExit"]["reason"]
        assert reason == "exited with code 3: ERROR: login failed for ***"
        logs = run("logs", "web")
        assert PASSWORD in logs  # the child's own output is its own: kept, privately
        shown_elsewhere = {
            "live view": "\n".join(up.seen),
            "describe process": run("describe", "process", "web"),
            "describe secret": described,
            "events": run("events"),
            "timeline": run("timeline", "-o", "json"),
        }
        for where, text in shown_elsewhere.items():
            assert PASSWORD not in text, where
            assert base64.b64encode(PASSWORD.encode()).decode() not in text, where
        assert '"(hidden)"' in shown_elsewhere["timeline"]

        workspace = cli.directory / ".setpoint"
        assert mode(workspace) == 0o700
        for private_dir in ("run", "logs"):
            assert mode(workspace / private_dir) == 0o700, private_dir
        private_files = [p for p in workspace.rglob("*") if p.is_file()]
        assert workspace / "state.db" in private_files
        assert workspace / "logs" / "default_web.log" in private_files
        for path in private_files:
            assert mode(path) == 0o600, path
    finally:
        code, err = up.stop(signal.SIGTERM)
    assert code == 0, err
