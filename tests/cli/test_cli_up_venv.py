"""`<venv>/bin/setpoint up`, with a PATH that does not name the virtual environment (or from
an activated one): a child whose argv says `python3`, and its exec probe, run this
environment's interpreter, as they would had the user activated it. `./dev setpoint up`
runs that same script, and a SIGINT to its process group reaches the engine once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from cli_kit import REPO, TIMEOUT, Running

PRINT_PREFIX = """
    import sys, time
    print(sys.prefix, flush=True)
    time.sleep(3600)
"""
SAME_PREFIX = "import sys; sys.exit(sys.prefix != {prefix!r})"


def venv_bin() -> Path:
    return Path(sys.prefix) / "bin"


def without_venv(path: str) -> str:
    """`path` without the entries naming this test's virtual environment."""
    bin_dir = os.path.normpath(venv_bin())
    return os.pathsep.join(p for p in path.split(os.pathsep) if os.path.normpath(p) != bin_dir)


@pytest.fixture
def setpoint_script() -> Path:
    """`<venv>/bin/setpoint`, as a user runs it without activating the environment."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("the tests do not run in a virtual environment")
    script = venv_bin() / "setpoint"
    if not script.exists():
        pytest.skip(f"{script} is not installed")
    return script


def write_manifest(directory: Path, token: str) -> Path:
    manifest = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "which-python"},
        "spec": {
            "args": ["python3", "-c", textwrap.dedent(PRINT_PREFIX), token],  # killed after
            "terminationGracePeriodSeconds": 5,
            # Ready only when the probe's python3 is this environment's interpreter.
            "readinessProbe": {
                "exec": {"command": ["python3", "-c", SAME_PREFIX.format(prefix=sys.prefix)]},
                "periodSeconds": 1,
            },
        },
    }
    path = directory / "which.yaml"
    path.write_text(yaml.safe_dump(manifest))
    return path


@pytest.mark.parametrize("activated", [False, True], ids=["not-activated", "activated"])
def test_up_from_a_virtual_environment_runs_python3_from_it(
    setpoint_script: Path, tmp_path: Path, token: str, activated: bool
) -> None:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_") and k != "VIRTUAL_ENV"
    }
    env["PATH"] = without_venv(os.environ.get("PATH", ""))
    if activated:
        env["PATH"] = f"{venv_bin()}{os.pathsep}{env['PATH']}"
        env["VIRTUAL_ENV"] = sys.prefix
    manifest = write_manifest(tmp_path, token)
    engine = subprocess.Popen(
        [setpoint_script, "up", manifest.name],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    up = Running(engine)
    try:
        up.expect(lambda line: line.startswith("Process/which-python ready=True "), "Ready")

        def logged() -> str:
            out = subprocess.run(
                [setpoint_script, "logs", "which-python"],
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT,
            )  # fmt: skip
            assert out.returncode == 0, out.stderr
            return out.stdout.strip()

        deadline = time.monotonic() + TIMEOUT
        while not (seen := logged()) and time.monotonic() < deadline:
            pass  # the child printed before it turned Ready: its line is on its way to the log
        assert seen == sys.prefix
        code, err = up.stop(signal.SIGTERM)
        assert code == 0, err
    finally:
        up.kill()


SLOW_TO_STOP = """
    import pathlib, signal, sys, time
    def stop(signum, frame):
        time.sleep(1)  # a second of clean-up: time for a second signal to arrive, if one does
        pathlib.Path(sys.argv[1]).write_text("stopped cleanly")
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    pathlib.Path(sys.argv[1]).write_text("started")  # Ready from now on
    while True:
        time.sleep(3600)
"""


def test_dev_setpoint_up_stops_once_on_a_sigint_to_its_process_group(
    tmp_path: Path, token: str
) -> None:
    """`./dev setpoint up` from a script: a SIGINT to its process group (`kill -INT -PGID`,
    a service manager) stops the engine as Ctrl-C in a terminal does, gracefully; the
    engine gets it once, not also forwarded by a wrapper (which would kill at once)."""
    manifest, done = tmp_path / "slow.yaml", tmp_path / "done"
    manifest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "setpoint.dev/v1alpha1",
                "kind": "Process",
                "metadata": {"name": "slow-to-stop"},
                "spec": {
                    "args": ["python3", "-c", textwrap.dedent(SLOW_TO_STOP), str(done), token],
                    "terminationGracePeriodSeconds": 30,
                    "readinessProbe": {
                        "exec": {"command": ["grep", "-q", "started", str(done)]},
                        "periodSeconds": 1,
                    },
                },
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    engine = subprocess.Popen(
        [REPO / "dev", "setpoint", "--store", f"sqlite:///{tmp_path / 'state.db'}", "up",
         manifest],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    up = Running(engine)
    try:
        up.expect(lambda line: line.startswith("Process/slow-to-stop ready=True "), "Ready")
        os.killpg(engine.pid, signal.SIGINT)
        _, err = engine.communicate(timeout=TIMEOUT)
        assert engine.returncode == 0, err
        assert done.read_text() == "stopped cleanly"  # not killed in its clean-up
    finally:
        up.kill()
