"""What `setpoint serve` writes and reads on disk, against another user of the machine: it
changes the mode of no directory but its own `.setpoint/`, writes its TLS key and
kubeconfig through no symbolic link, and refuses a token file someone else could have
changed (one others may read is used, with a warning line)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from api_kit import TIMEOUT, TOKENS, start_server

from running import Running

NOBODY = 65534
root_only = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to give a file to another user (os.chown)"
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def setpoint(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`setpoint ARGS` in `directory`, run to its end (a `serve` that is refused ends)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETPOINT_", "KUBE"))}
    return subprocess.run(
        [sys.executable, "-m", "setpoint", *args],
        capture_output=True,
        text=True,
        cwd=directory,
        env=env,
        timeout=TIMEOUT,
    )


def token_file(directory: Path, file_mode: int = 0o600) -> Path:
    tokens = directory / "tokens.csv"
    tokens.write_text("".join(f"{token},{role},{role}\n" for role, token in TOKENS.items()))
    tokens.chmod(file_mode)
    return tokens


def test_a_store_elsewhere_does_not_make_its_directory_private(tmp_path: Path) -> None:
    """`serve --store sqlite:////some/dir/x.db` left `/some/dir` 0700 (`/tmp` for everyone)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    server = start_server(shared)
    try:
        assert mode(shared) == 0o755
        assert mode(shared / "tls") == 0o700  # its own directory, made by it
        assert mode(server.kubeconfig) == 0o600
    finally:
        server.stop()


def test_up_on_a_store_elsewhere_does_not_make_its_directory_private(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETPOINT_", "KUBE"))}
    store = f"sqlite:///{shared / 'x.db'}"
    manifest = tmp_path / "secret.yaml"
    manifest.write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n")
    up = Running(
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "setpoint",
                "--store",
                store,
                "up",
                str(manifest),
                "--api-port",
                "0",
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
        up.expect(lambda text: text.startswith("serving the API on "), "the API's address")
        assert mode(shared) == 0o755
        assert {mode(shared / name) for name in ("run", "logs", "tls")} == {0o700}
        assert mode(shared / "kubeconfig") == 0o600
    finally:
        up.stop(signal.SIGINT)


@pytest.mark.parametrize("planted", ["tls/server.key", "tls/server.crt", "kubeconfig"])
def test_serve_writes_nothing_through_a_planted_symbolic_link(tmp_path: Path, planted: str) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / ".setpoint" / "tls").mkdir(parents=True)
    (tmp_path / ".setpoint" / planted).symlink_to(victim)
    store = "sqlite:///.setpoint/state.db"  # named: `.setpoint/kubeconfig` alone names a server
    tokens = token_file(tmp_path)
    done = setpoint(tmp_path, "--store", store, "serve", "--port", "0", "--token-file", str(tokens))
    assert victim.read_text() == "precious\n"
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: .setpoint/{planted}: a symbolic link: refusing to write through it or replace it"
    ]


def test_serve_refuses_a_private_directory_that_is_a_symbolic_link(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / ".setpoint").mkdir()
    (tmp_path / ".setpoint" / "tls").symlink_to(elsewhere)
    done = setpoint(tmp_path, "serve", "--port", "0", "--token-file", str(token_file(tmp_path)))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: {tmp_path / '.setpoint' / 'tls'}: a symbolic link where setpoint keeps "
        "private files: refusing to follow it"
    ]
    assert list(elsewhere.iterdir()) == []


def test_a_token_file_others_may_write_is_refused(tmp_path: Path) -> None:
    tokens = token_file(tmp_path, 0o666)
    done = setpoint(tmp_path, "serve", "--port", "0", "--token-file", str(tokens))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: {tokens}: this token file is writable by other users (mode 0666): "
        f"refusing to read it; chmod 600 {tokens}"
    ]


def test_a_roles_file_others_may_write_is_refused(tmp_path: Path) -> None:
    roles = tmp_path / "roles.yaml"
    roles.write_text("reader:\n- {kinds: [processes], verbs: [get]}\n")
    roles.chmod(0o666)
    tokens = token_file(tmp_path)
    done = setpoint(
        tmp_path, "serve", "--port", "0", "--token-file", str(tokens), "--roles-file", str(roles)
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: {roles}: this roles file is writable by other users (mode 0666): "
        f"refusing to read it; chmod 600 {roles}"
    ]


@root_only
def test_a_token_file_of_another_user_is_refused(tmp_path: Path) -> None:
    tokens = token_file(tmp_path)
    os.chown(tokens, NOBODY, NOBODY)
    done = setpoint(tmp_path, "serve", "--port", "0", "--token-file", str(tokens))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: {tokens}: this token file belongs to another user (uid {NOBODY}, not 0): "
        "refusing to read it"
    ]


def test_a_token_file_others_may_read_is_warned_about(tmp_path: Path) -> None:
    tokens = token_file(tmp_path, 0o644)
    server = "https://127.0.0.1:1"
    done = setpoint(tmp_path, "kubeconfig", "--server", server, "--token-file", str(tokens))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"warning: other users of this machine may read {tokens}, and with it its tokens: "
        f"chmod 600 {tokens}"
    ]
