"""Client certificates, as Kubernetes has them: `setpoint serve --client-ca-file` authenticates
a certificate that CA signed (user = CN, groups = O), and a kubeconfig's
`client-certificate`/`client-key` (or `-data`) is what the CLI and `setpoint run` present.
`setpoint run` of a controller file works against the server over HTTPS with one; a
certificate of another CA, or none, is refused. Certificates are made here with
`cryptography`; the server and the controller are real processes."""

from __future__ import annotations

import base64
import datetime
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from running import Running
from setpoint.api.auth import (
    BUILTIN_ROLES,
    MASTERS,
    Authenticator,
    Role,
    User,
    authorize,
    certificate_user,
)
from setpoint.cli.store_location import read_kubeconfig
from setpoint.errors import Forbidden, Invalid, Unauthorized

TIMEOUT = 60.0
REPO = Path(__file__).resolve().parents[2]
KINDS = REPO / "examples" / "hello" / "kinds.py"
GREETING = {
    "apiVersion": "example.com/v1",
    "kind": "Greeting",
    "metadata": {"name": "hello"},
    "spec": {"message": "hi", "repeat": 3},
}
CONTROLLER = """
from setpoint.runtime import Manager, Request


def setup(manager: Manager) -> None:
    store = manager.store

    async def show(request: Request) -> None:
        greeting = await store.get("example.com/v1", "Greeting", request.name, "default")
        if (greeting.get("status") or {}).get("shown") != greeting["spec"]["repeat"]:
            greeting["status"] = {"shown": greeting["spec"]["repeat"]}
            await store.update_status(greeting)
            print("shown", request.name, flush=True)

    manager.controller("greeter").for_("Greeting").complete(show)
"""

# -- certificates -----------------------------------------------------------------------


class Authority:
    """A certificate authority that signs client certificates."""

    def __init__(self, name: str) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (
            self._builder(self.name, self.key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    def _builder(self, subject: x509.Name, public_key: Any) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.UTC)
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )

    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def client(self, user: str, *groups: str) -> tuple[bytes, bytes]:
        """A client certificate (PEM) for `user` in `groups`, and its key (PEM)."""
        key = ec.generate_private_key(ec.SECP256R1())
        names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        subject = x509.Name([*names, x509.NameAttribute(NameOID.COMMON_NAME, user)])
        cert = (
            self._builder(subject, key.public_key())
            .add_extension(
                x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return cert.public_bytes(serialization.Encoding.PEM), key_pem


# -- the processes ----------------------------------------------------------------------


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("SETPOINT_", "KUBECONFIG"))}


def setpoint(directory: Path, *args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "setpoint", *args],
        capture_output=True,
        text=True,
        cwd=directory,
        env={**env(), "KUBECONFIG": str(kubeconfig)},
        timeout=TIMEOUT,
    )


def user_kubeconfig(
    path: Path, served: dict[str, Any], user: dict[str, str], *, mode: int = 0o600
) -> Path:
    """A kubeconfig for the server `served` (the one `setpoint serve` wrote) with `user`."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": served["clusters"],
        "users": [{"name": "me", "user": user}],
        "contexts": [
            {"name": "me", "context": {"cluster": served["clusters"][0]["name"], "user": "me"}}
        ],
        "current-context": "me",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(mode)
    return path


@pytest.fixture
def server(tmp_path: Path) -> Any:
    """`setpoint serve --client-ca-file ca.pem` on a fresh store; yields (CA, its
    kubeconfig's data, the work directory)."""
    ca = Authority("setpoint-test-ca")
    served_dir = tmp_path / "server"
    served_dir.mkdir()
    ca_file = served_dir / "ca.pem"
    ca_file.write_bytes(ca.pem())
    ca_file.chmod(0o600)
    kubeconfig = served_dir / "kubeconfig"
    argv = [sys.executable, "-m", "setpoint", "--store", f"sqlite:///{served_dir / 'state.db'}"]
    argv += ["--kinds", str(KINDS), "serve", "--port", "0", "--kubeconfig", str(kubeconfig)]
    argv += ["--client-ca-file", str(ca_file)]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=served_dir,
        env=env(),
    )
    running = Running(proc, timeout=TIMEOUT)
    try:
        running.expect(lambda line: line.startswith("serving the API on https://"), "serving")
        work = tmp_path / "work"
        work.mkdir()
        yield ca, yaml.safe_load(kubeconfig.read_text()), work
    finally:
        running.kill()


def test_setpoint_run_reconciles_over_https_with_a_client_certificate(server: Any) -> None:
    ca, served, work = server
    cert, key = ca.client("controller", MASTERS)
    (work / "client.crt").write_bytes(cert)
    (work / "client.key").write_bytes(key)
    (work / "client.key").chmod(0o600)
    mine = user_kubeconfig(
        work / "kubeconfig",
        served,
        {"client-certificate": "client.crt", "client-key": "client.key"},
    )
    (work / "greeting.yaml").write_text(yaml.safe_dump(GREETING))
    applied = setpoint(work, "apply", "-f", "greeting.yaml", kubeconfig=mine)
    assert applied.returncode == 0, applied.stderr
    (work / "controller.py").write_text(CONTROLLER)
    controller = Running(
        subprocess.Popen(
            [sys.executable, "-m", "setpoint", "run", "controller.py"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=work,
            env={**env(), "KUBECONFIG": str(mine)},
        ),
        timeout=TIMEOUT,
    )
    try:
        controller.expect(lambda line: line == "shown hello", "the Greeting reconciled")
        # The token `serve` wrote reads what the certificate's user wrote.
        admin = served_path(work, served)
        got = setpoint(work, "get", "greeting", "hello", "-o", "yaml", kubeconfig=admin)
        assert got.returncode == 0, got.stderr
        assert yaml.safe_load(got.stdout)["status"]["shown"] == 3
        code, err = controller.stop(signal.SIGTERM)
        assert code == 0, err
    finally:
        controller.kill()


def served_path(work: Path, served: dict[str, Any]) -> Path:
    path = work / "served-kubeconfig"
    path.write_text(yaml.safe_dump(served))
    path.chmod(0o600)
    return path


def test_the_certificate_can_be_inline_data_and_names_the_user(server: Any) -> None:
    ca, served, work = server
    cert, key = ca.client("grafana", "view")
    mine = user_kubeconfig(
        work / "kubeconfig",
        served,
        {
            "client-certificate-data": base64.b64encode(cert).decode(),
            "client-key-data": base64.b64encode(key).decode(),
        },
    )
    listed = setpoint(work, "get", "greetings", kubeconfig=mine)
    assert (listed.returncode, listed.stderr) == (0, "No resources found in default namespace.\n")
    (work / "greeting.yaml").write_text(yaml.safe_dump(GREETING))
    refused = setpoint(work, "apply", "-f", "greeting.yaml", kubeconfig=mine)
    assert refused.returncode == 1
    assert 'User "grafana" (role view) cannot create it' in refused.stderr


def test_a_certificate_of_another_ca_is_refused(server: Any) -> None:
    _, served, work = server
    cert, key = Authority("someone-else").client("mallory", MASTERS)
    (work / "client.crt").write_bytes(cert)
    (work / "client.key").write_bytes(key)
    (work / "client.key").chmod(0o600)
    mine = user_kubeconfig(
        work / "kubeconfig",
        served,
        {"client-certificate": "client.crt", "client-key": "client.key"},
    )
    (work / "controller.py").write_text(CONTROLLER)
    refused = setpoint(work, "run", "controller.py", kubeconfig=mine)
    assert refused.returncode == 1
    assert len(refused.stderr.splitlines()) == 1, refused.stderr
    # TLS 1.3: the server checks the certificate after the client's side of the
    # handshake ended, and closes the connection.
    assert refused.stderr.startswith("error: cannot reach the server at https://"), refused.stderr
    assert f"it may refuse the client certificate from {mine}" in refused.stderr


def test_no_certificate_and_no_token_is_refused(server: Any) -> None:
    _, served, work = server
    mine = user_kubeconfig(work / "kubeconfig", served, {})
    (work / "controller.py").write_text(CONTROLLER)
    refused = setpoint(work, "run", "controller.py", kubeconfig=mine)
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        "error: Unauthorized: a bearer token is required: no token was given (--token, or a "
        "kubeconfig with a user token or client certificate)"
    ]


def test_a_client_key_others_may_write_is_refused(server: Any) -> None:
    ca, served, work = server
    cert, key = ca.client("controller", MASTERS)
    (work / "client.crt").write_bytes(cert)
    (work / "client.key").write_bytes(key)
    (work / "client.key").chmod(0o666)
    mine = user_kubeconfig(
        work / "kubeconfig",
        served,
        {"client-certificate": "client.crt", "client-key": "client.key"},
    )
    refused = setpoint(work, "get", "greetings", kubeconfig=mine)
    assert refused.returncode == 1
    assert "client-key" in refused.stderr
    assert "writable by other users" in refused.stderr


# -- who a certificate is, decided purely --------------------------------------------------


def test_a_certificate_is_its_cn_with_the_roles_its_groups_name() -> None:
    reader = Role("reader", BUILTIN_ROLES["view"].rules)
    roles = {**BUILTIN_ROLES, "reader": reader}
    admin = certificate_user((("organizationName", MASTERS), ("commonName", "root")), roles)
    assert (admin.name, admin.role) == ("root", Role.ADMIN)
    named = certificate_user((("commonName", "ci"), ("organizationName", "reader")), roles)
    assert (named.name, named.role) == ("ci", reader)
    both = certificate_user(
        (("commonName", "ci"), ("organizationName", "view"), ("organizationName", "edit")), roles
    )
    assert both.role.name == "view+edit"
    assert both.role.may("create", None)
    assert both.role.may("get", None)
    nobody = certificate_user((("commonName", "stranger"), ("organizationName", "x")), roles)
    with pytest.raises(Forbidden, match="stranger"):
        authorize(nobody, "get", None, "/api")
    with pytest.raises(Unauthorized, match="names no user"):
        certificate_user((("organizationName", MASTERS),), roles)


def test_a_verified_certificate_comes_before_a_token() -> None:
    auth = Authenticator({"t0ken": User("ci", Role.VIEW)})
    root = (("commonName", "root"), ("organizationName", MASTERS))
    user = auth.authenticate("Bearer t0ken", root)
    assert (user.name, user.role) == ("root", Role.ADMIN)
    assert auth.authenticate("Bearer t0ken").name == "ci"


def test_a_kubeconfig_names_both_certificate_and_key_or_neither(tmp_path: Path) -> None:
    served = {"clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}]}
    cert, key = Authority("ca").client("me", MASTERS)
    (tmp_path / "client.crt").write_bytes(cert)
    only_cert = user_kubeconfig(tmp_path / "a", served, {"client-certificate": "client.crt"})
    with pytest.raises(Invalid, match="give both a client certificate and its key"):
        read_kubeconfig(str(only_cert))
    garbled = user_kubeconfig(
        tmp_path / "b",
        served,
        {"client-certificate-data": "not base64!", "client-key-data": "eA=="},
    )
    with pytest.raises(Invalid, match="client-certificate-data: not base64"):
        read_kubeconfig(str(garbled))
    inline = user_kubeconfig(
        tmp_path / "c",
        served,
        {
            "client-certificate-data": base64.b64encode(cert).decode(),
            "client-key-data": base64.b64encode(key).decode(),
        },
    )
    location = read_kubeconfig(str(inline))
    assert (location.client_cert, location.client_key) == (cert.decode(), key.decode())
