"""`setpoint serve` and `setpoint kubeconfig` on the command line: a bind beyond loopback
without tokens is refused, token files are checked line by line, and the kubeconfig
printed names the server and the most capable token."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from setpoint.api.auth import check_bind, parse_token_file
from setpoint.errors import Invalid

TIMEOUT = 60.0


def setpoint(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    return subprocess.run(
        [sys.executable, "-m", "setpoint", *args],
        capture_output=True,
        text=True,
        cwd=directory,
        env=env,
        timeout=TIMEOUT,
    )


def test_serve_refuses_a_public_address_without_tokens(tmp_path: Path) -> None:
    refused = setpoint(tmp_path, "serve", "--address", "0.0.0.0", "--port", "0")
    assert refused.returncode == 1
    assert "refusing to listen on 0.0.0.0 without tokens" in refused.stderr
    assert "--token-file" in refused.stderr


def test_bind_rules() -> None:
    check_bind("127.0.0.1", token_file=False)
    check_bind("::1", token_file=False)
    check_bind("localhost", token_file=False)
    with pytest.raises(Invalid, match="without tokens"):
        check_bind("0.0.0.0", token_file=False)
    check_bind("0.0.0.0", token_file=True)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("t,alice", "tokens:1: want token,name,role"),
        (
            "# comment\n\nt,alice,root",
            "tokens:3: role 'root': want one of admin, edit, view",
        ),
        ("t,alice,view\nt,bob,edit", "tokens:2: this token is already on an earlier line"),
    ],
)
def test_token_files_are_checked_line_by_line(text: str, message: str) -> None:
    with pytest.raises(Invalid) as refused:
        parse_token_file(text, "tokens")
    assert str(refused.value) == message


def test_kubeconfig_names_the_server_and_the_most_capable_token(tmp_path: Path) -> None:
    (tmp_path / "tokens.csv").write_text("v,viewer,view\ne,editor,edit\n")
    printed = setpoint(
        tmp_path, "kubeconfig", "--server", "https://127.0.0.1:1234", "--token-file", "tokens.csv"
    )
    assert printed.returncode == 0, printed.stderr
    config = yaml.safe_load(printed.stdout)
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:1234"
    assert config["users"][0]["user"]["token"] == "e"
    assert config["current-context"] == "setpoint"

    written = setpoint(
        tmp_path, "kubeconfig", "--server", "https://h:1", "--token", "x", "-o", "kc"
    )
    assert written.returncode == 0, written.stderr
    assert stat.S_IMODE((tmp_path / "kc").stat().st_mode) == 0o600
    assert yaml.safe_load((tmp_path / "kc").read_text())["users"][0]["user"]["token"] == "x"
