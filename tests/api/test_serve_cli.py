"""`setpoint serve` and `setpoint kubeconfig` on the command line: `serve` makes a token and
serves HTTPS unless told loudly not to, a bind beyond loopback without a token file is
refused, token files are checked line by line, and the kubeconfig printed names the server
and the most capable token."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from running import Running
from setpoint.api.auth import check_bind, parse_token_file
from setpoint.api.server import ServerLimits
from setpoint.cli.serve import MAX_CONNECTIONS, server_limits
from setpoint.errors import Invalid

TIMEOUT = 60.0
SECRETS = "/api/v1/namespaces/default/secrets"
PROCESSES = "/apis/setpoint.dev/v1alpha1/namespaces/default/processes"
PROCESS = {
    "apiVersion": "setpoint.dev/v1alpha1",
    "kind": "Process",
    "metadata": {"name": "p"},
    "spec": {"args": ["sleep", "1000"]},
}


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


def start_serve(directory: Path, *args: str) -> tuple[Running, str, Path]:
    """`setpoint serve --port 0 ARGS` on a store in `directory`: (it, its URL, its kubeconfig)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    store = f"sqlite:///{directory / 'state.db'}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "setpoint", "--store", store, "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=directory,
        env=env,
    )
    running = Running(proc, timeout=TIMEOUT)
    line = running.expect(lambda text: "serving the API on" in text, "where it serves")
    url = line.split("serving the API on ", 1)[1].split()[0]
    return running, url, Path(line.split("KUBECONFIG=", 1)[1].split()[0])


def test_serve_without_a_token_file_makes_a_token_and_serves_https(tmp_path: Path) -> None:
    running, url, kubeconfig = start_serve(tmp_path)
    try:
        assert url.startswith("https://127.0.0.1:")
        config = yaml.safe_load(kubeconfig.read_text())
        token = config["users"][0]["user"]["token"]
        assert len(token) >= 40
        assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
        with httpx.Client(base_url=url, verify=False, timeout=TIMEOUT) as client:
            assert client.get(SECRETS).status_code == 401
            created = client.post(
                PROCESSES, json=PROCESS, headers={"Authorization": "Bearer not-it"}
            )
            assert created.status_code == 401
            read = client.get(SECRETS, headers={"Authorization": f"Bearer {token}"})
            assert read.status_code == 200, read.text
    finally:
        code, err = running.stop(signal.SIGTERM)
    assert "warning" not in err
    assert code == 0, err


def test_anonymous_admin_is_explicit_loud_and_loopback_only(tmp_path: Path) -> None:
    running, url, _ = start_serve(tmp_path, "--insecure-allow-anonymous-admin")
    try:
        assert url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=url, timeout=TIMEOUT) as client:
            assert client.post(PROCESSES, json=PROCESS).status_code == 201
    finally:
        code, err = running.stop(signal.SIGTERM)
    assert code == 0, err
    warning = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warning == [
        "warning: --insecure-allow-anonymous-admin: no tokens, plain HTTP; every program and "
        "user on this machine may read and change everything, and run commands as you"
    ]
    public = setpoint(
        tmp_path, "serve", "--insecure-allow-anonymous-admin", "--address", "0.0.0.0", "--port", "0"
    )
    assert public.returncode == 1
    assert "refusing to listen on 0.0.0.0 without tokens" in public.stderr
    both = setpoint(tmp_path, "serve", "--insecure-allow-anonymous-admin", "--token-file", "t.csv")
    assert both.returncode == 1
    assert "error: anonymous admin access takes no token or roles file" in both.stderr


def test_max_connections_sets_how_many_watches_the_server_holds(tmp_path: Path) -> None:
    """Over HTTP/1.1 each watch holds a connection: a client watching every kind of a
    store with hundreds of them needs more than the default 1024 (the scale run's 2,600
    streams were refused with 503). `--max-connections N` serves N at once, no more."""
    running, url, kubeconfig = start_serve(tmp_path, "--max-connections", "4")
    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    auth = {"Authorization": f"Bearer {token}"}
    with contextlib.ExitStack() as held:
        try:
            for _ in range(3):
                client = held.enter_context(httpx.Client(verify=False, timeout=TIMEOUT))
                watch = held.enter_context(
                    client.stream("GET", f"{url}{PROCESSES}?watch=true", headers=auth)
                )
                assert watch.status_code == 200
            with httpx.Client(verify=False, timeout=TIMEOUT) as fourth:
                assert fourth.get(f"{url}{PROCESSES}", headers=auth).status_code == 503
        finally:
            held.close()
            running.proc.send_signal(signal.SIGTERM)
            running.proc.wait(TIMEOUT)


def test_max_connections_default_is_the_servers_and_one_is_refused(tmp_path: Path) -> None:
    assert ServerLimits().max_connections == MAX_CONNECTIONS
    assert server_limits(MAX_CONNECTIONS) == ServerLimits()
    refused = setpoint(tmp_path, "serve", "--port", "0", "--max-connections", "1")
    assert refused.returncode == 1
    assert refused.stderr.strip() == "error: --max-connections 1: want at least 2"
