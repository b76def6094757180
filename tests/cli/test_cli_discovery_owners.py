"""Finding `.setpoint/` across owners (the shape of git's CVE-2022-24765): the search
through parent directories never uses another user's `.setpoint/`, nor a kubeconfig or
token file another user could have chosen; naming the store (`--store`, `SETPOINT_STORE`)
still works. A kubeconfig planted in a parent must not make `setpoint get` send a local
secret file to a listener of the attacker's: the listener here is a socket nobody
accepts on, so a connection, if any, waits in its backlog for the test to see."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cli_kit import TIMEOUT

NOBODY = 65534
root_only = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to give a file to another user (os.chown)"
)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP socket listening on loopback that accepts nothing: what connects stays queued."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.setblocking(False)
        yield sock


def connected(listener: socket.socket) -> bool:
    """Whether anything connected to `listener` (its backlog holds the connection)."""
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def plant(parent: Path, listener: socket.socket, secret: Path, owner: int | None) -> Path:
    """A `.setpoint/kubeconfig` in `parent` naming the listener, with `secret` as tokenFile;
    the directory and file given to `owner` (None: left the caller's). Returns the dir."""
    host, port = listener.getsockname()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "x", "cluster": {"server": f"http://{host}:{port}"}}],
        "users": [{"name": "x", "user": {"tokenFile": str(secret)}}],
        "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
        "current-context": "x",
    }
    directory = parent / ".setpoint"
    directory.mkdir(parents=True)
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    kubeconfig.chmod(0o600)
    if owner is not None:
        for path in (directory, kubeconfig):
            os.chown(path, owner, owner)
    return directory


def manifest(directory: Path) -> str:
    """A Process manifest in `directory`, for `apply -f`."""
    path = directory / "web.yaml"
    path.write_text(
        "apiVersion: setpoint.dev/v1alpha1\nkind: Process\nmetadata: {name: web}\n"
        "spec: {args: [sleep, '1000']}\n"
    )
    return str(path)


def secret_file(tmp_path: Path) -> Path:
    secret = tmp_path / "secret"
    secret.write_text("the-local-secret\n")
    secret.chmod(0o600)
    return secret


def setpoint(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, list[str]]:
    """Run `setpoint ARGS` in `cwd` with no SETPOINT_* or KUBECONFIG; (status, stderr lines)."""
    done = run(cwd, *args, env=env)
    return done.returncode, done.stderr.splitlines()


def run(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SETPOINT_", "KUBE"))}
    return subprocess.run(
        [sys.executable, "-m", "setpoint", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**clean, "HOME": str(cwd), **(env or {})},
        timeout=TIMEOUT,
    )


@root_only
def test_another_users_setpoint_dir_in_a_parent_is_not_used(
    tmp_path: Path, listener: socket.socket
) -> None:
    shared = tmp_path / "shared"
    planted = plant(shared, listener, secret_file(tmp_path), NOBODY)
    child = shared / "project" / "src"
    child.mkdir(parents=True)
    code, err = setpoint(child, "get", "processes")
    assert not connected(listener)  # no request at all, so no secret sent
    assert code == 1
    assert err == [
        f"error: {planted} belongs to another user (uid {NOBODY}, not 0): refusing to use a "
        "store or kubeconfig they could have put there; name it with --store or "
        "SETPOINT_STORE if you trust it"
    ]
    # Writers are refused the same: no store is made beside it, or below it.
    assert setpoint(child, "apply", "-f", manifest(child))[0] == 1
    assert not (child / ".setpoint").exists()


@root_only
def test_another_users_kubeconfig_or_token_file_is_not_read(
    tmp_path: Path, listener: socket.socket
) -> None:
    """Our own `.setpoint/`, but a kubeconfig, or the tokenFile it names, of another user."""
    secret = secret_file(tmp_path)
    planted = plant(tmp_path, listener, secret, None)
    os.chown(planted / "kubeconfig", NOBODY, NOBODY)
    code, err = setpoint(tmp_path, "get", "processes")
    assert (code, connected(listener)) == (1, False)
    assert err == [
        f"error: kubeconfig: {planted / 'kubeconfig'}: belongs to another user (uid {NOBODY}, "
        "not 0): refusing to use it; name the server with --server and --token"
    ]
    os.chown(planted / "kubeconfig", 0, 0)
    os.chown(secret, NOBODY, NOBODY)
    code, err = setpoint(tmp_path, "get", "processes")
    assert (code, connected(listener)) == (1, False)
    assert err == [
        f"error: kubeconfig: {planted / 'kubeconfig'}: tokenFile: [Errno 1] this token file "
        f"belongs to another user (uid {NOBODY}, not 0): refusing to read it: '{secret}'"
    ]


def test_a_kubeconfig_or_token_file_others_may_change_is_refused(
    tmp_path: Path, listener: socket.socket
) -> None:
    secret = secret_file(tmp_path)
    kubeconfig = plant(tmp_path, listener, secret, None) / "kubeconfig"
    kubeconfig.chmod(0o666)
    code, err = setpoint(tmp_path, "get", "processes")
    assert (code, connected(listener)) == (1, False)
    assert err == [
        f"error: kubeconfig: {kubeconfig}: other users may write this kubeconfig (mode 0666): "
        f"refusing to use it; chmod go-w {kubeconfig}"
    ]
    kubeconfig.chmod(0o600)
    secret.chmod(0o622)
    code, err = setpoint(tmp_path, "get", "processes")
    assert (code, connected(listener)) == (1, False)
    assert "this token file is writable by other users (mode 0622)" in err[0]


@root_only
def test_a_named_store_of_another_user_is_still_used(tmp_path: Path) -> None:
    """Naming the store is trusting it: `--store` and `SETPOINT_STORE` are not refused."""
    shared = tmp_path / "shared"
    (shared / ".setpoint").mkdir(parents=True)
    store = f"sqlite:///{shared / '.setpoint' / 'state.db'}"
    assert setpoint(shared, "--store", store, "apply", "-f", manifest(shared))[0] == 0
    os.chown(shared / ".setpoint", NOBODY, NOBODY)
    child = shared / "child"
    child.mkdir()
    assert setpoint(child, "get", "processes")[0] == 1
    for args, env in (
        (("--store", store, "get", "processes", "-o", "name"), None),
        (("get", "processes", "-o", "name"), {"SETPOINT_STORE": store}),
    ):
        done = run(child, *args, env=env)
        assert (done.returncode, done.stdout) == (0, "process.setpoint.dev/web\n"), done.stderr
