"""The CLI against a server (`--server`, `--token`, kubeconfigs): the same output as on the
local store the server serves, writes that land in that store, errors that name the token,
and the verbs that need the store's machine refusing plainly.

Each test works in a namespace of its own on the module's `setpoint serve` (tests/api/
conftest.py), runs the real `python -m setpoint` in a directory with no `.setpoint/`, and
reads the result in the store file itself.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from api_kit import TIMEOUT, TOKENS, Result, Server, process, start_server

REPO = Path(__file__).resolve().parents[2]
AGE = re.compile(r"\b\d+(s|m|h|d)(\d+(s|m))?\b|\(\d+\w* ago\)")
"""Ages (`5s`, `2m3s`, `(4s ago)`): two runs a moment apart may print different ones."""


def setpoint(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SETPOINT_", "KUBE"))}
    proc = subprocess.run(
        [sys.executable, "-m", "setpoint", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**base, **(env or {})},
        timeout=TIMEOUT,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def remote(server: Server, cwd: Path, *args: str) -> Result:
    """`setpoint ARGS` reaching the server through its kubeconfig ($KUBECONFIG)."""
    return setpoint(cwd, *args, env={"KUBECONFIG": str(server.kubeconfig)})


def local(server: Server, cwd: Path, *args: str) -> Result:
    """`setpoint ARGS` on the store file the server serves."""
    return setpoint(cwd, "--store", server.store, *args)


def same(result: Result) -> tuple[int, str, str]:
    """The result with ages masked and runs of spaces made one: an age one character wider
    (`59s`, then `1m0s`) widens its column."""

    def masked(text: str) -> str:
        return re.sub(r" {2,}", " ", AGE.sub("AGE", text))

    return result.code, masked(result.out), masked(result.err)


def test_reading_verbs_print_the_same_through_the_server(server: Server, tmp_path: Path) -> None:
    ns = ["-n", "remote-same"]
    manifest = server.write(
        "same.yaml",
        process("web-1", labels={"app": "web"}),
        process("web-2", labels={"app": "web"}),
        process("db", labels={"app": "db"}),
    )
    applied = remote(server, tmp_path, *ns, "apply", "-f", str(manifest))
    assert applied.code == 0, applied
    for args in (
        ("get", "processes"),
        ("get", "proc", "-l", "app=web", "-o", "json"),
        ("get", "process", "db", "-o", "yaml"),
        ("get", "process", "db", "missing"),
        ("get", "processes", "-A", "-o", "wide"),
        ("describe", "process/web-1"),
        ("events",),
        ("get", "deployments"),
    ):
        there, here = remote(server, tmp_path, *ns, *args), local(server, tmp_path, *ns, *args)
        assert same(there) == same(here), args


def test_writes_through_the_server_land_in_its_store(server: Server, tmp_path: Path) -> None:
    ns = ["-n", "remote-writes"]
    manifest = server.write("writes.yaml", process("w", labels={"app": "w"}))
    assert remote(server, tmp_path, *ns, "apply", "-f", str(manifest)).code == 0
    stored = server.stored("Process", "w", "remote-writes")
    assert stored["metadata"]["labels"] == {"app": "w"}

    restarted = remote(server, tmp_path, *ns, "restart", "process/w")
    assert restarted.code == 0, restarted
    stored = server.stored("Process", "w", "remote-writes")
    assert "setpoint.dev/restartedAt" in stored["metadata"].get("annotations", {})

    deleted = remote(server, tmp_path, *ns, "delete", "process", "w")
    assert deleted.code == 0, deleted
    assert local(server, tmp_path, *ns, "get", "process", "w").code == 1


def test_server_and_token_flags(server: Server, tmp_path: Path) -> None:
    """--server and --token need no kubeconfig; --server naming the kubeconfig's server
    takes its token (and its certificate)."""
    manifest = server.write("flags.yaml", process("f"))
    env = {"KUBECONFIG": str(server.kubeconfig)}
    config = yaml.safe_load(server.kubeconfig.read_text())
    ca = tmp_path / "ca.pem"
    ca.write_bytes(base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]))
    kube = tmp_path / "only-ca.yaml"
    kube.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {"server": server.url, "certificate-authority": str(ca)},
                    }
                ],
                "users": [{"name": "u", "user": {"token": TOKENS["edit"]}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    created = setpoint(
        tmp_path,
        "--server",
        server.url,
        "-n",
        "remote-flags",
        "apply",
        "-f",
        str(manifest),
        env={"KUBECONFIG": str(kube)},
    )
    assert created.code == 0, created
    got = setpoint(
        tmp_path, "--server", server.url, "-n", "remote-flags", "get", "process", "f", env=env
    )
    assert got.code == 0, got
    assert got.out.splitlines()[1].startswith("f ")


def test_auth_failures_name_the_token(server: Server, tmp_path: Path) -> None:
    manifest = server.write("auth.yaml", process("a"))
    refused = setpoint(
        tmp_path,
        "--token",
        TOKENS["view"],
        "apply",
        "-f",
        str(manifest),
        env={"KUBECONFIG": str(server.kubeconfig)},
    )
    assert refused.code == 1
    assert "forbidden" in refused.err
    assert "--token" in refused.err
    assert "role" in refused.err
    unknown = setpoint(
        tmp_path,
        "--token",
        "not-a-token",
        "get",
        "processes",
        env={"KUBECONFIG": str(server.kubeconfig)},
    )
    assert unknown.code == 1
    assert "Unauthorized" in unknown.err
    assert "--token" in unknown.err
    assert local(server, tmp_path, "get", "process", "a").code == 1  # nothing was written


@pytest.mark.parametrize(
    "args", [("logs", "x"), ("timeline",), ("explain", "process/x"), ("down",)]
)
def test_verbs_that_need_the_local_machine_say_so(
    server: Server, tmp_path: Path, args: tuple[str, ...]
) -> None:
    result = remote(server, tmp_path, *args)
    assert result.code == 1
    assert "needs a local store" in result.err
    assert server.url in result.err


def test_a_kubeconfig_in_setpoint_dir_is_found_like_the_store(
    server: Server, tmp_path: Path
) -> None:
    """A `.setpoint/` holding a kubeconfig and no state.db: verbs below it use that server."""
    project = tmp_path / "project"
    (project / ".setpoint").mkdir(parents=True)
    shutil.copy(server.kubeconfig, project / ".setpoint" / "kubeconfig")
    below = project / "src"
    below.mkdir()
    manifest = server.write("found.yaml", process("found"))
    assert setpoint(below, "-n", "remote-found", "apply", "-f", str(manifest)).code == 0
    assert server.stored("Process", "found", "remote-found")["metadata"]["name"] == "found"


def test_kinds_only_the_server_knows_are_learned_by_discovery(tmp_path: Path) -> None:
    """The server has the Greeting kind (--kinds); the CLI, given no --kinds and no store
    of its own to read CRDs from, learns it from the server."""
    served = start_server(tmp_path / "greetings", "--kinds", str(REPO / "examples/hello/kinds.py"))
    try:
        manifest = REPO / "examples" / "hello" / "greeting.yaml"
        applied = remote(served, tmp_path, "apply", "-f", str(manifest))
        assert applied.code == 0, applied
        listed = remote(served, tmp_path, "get", "greetings", "-o", "json")
        assert listed.code == 0, listed
        assert sorted(o["metadata"]["name"] for o in listed.json()["items"]) == ["bonjour", "hello"]
    finally:
        served.stop()
