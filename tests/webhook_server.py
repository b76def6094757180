"""A real admission webhook server for the tests: HTTPS on a loopback port, its certificate
signed by a CA made for the test, answering AdmissionReview v1 requests as a webhook does.

Each path is a behaviour: `/allow`; `/deny` (message "no thanks", code 403); `/deny-418`;
`/warn` (allowed, with a warning); `/label` (a JSON patch adding the label
`webhook: was-here`); `/depend-on-a` (one making the object depend on the Process `a`);
`/hang` (answers only when the server stops: for timeouts, no sleep); `/not-json`. Every
review received is kept in `reviews` (path, request), in order.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Authority:
    """A CA made for one test: its certificate (PEM) and what it signs with."""

    certificate_pem: bytes
    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @property
    def bundle(self) -> str:
        """The certificate as a webhook configuration's `caBundle` (base64 of PEM)."""
        return base64.b64encode(self.certificate_pem).decode()


def new_authority(name: str = "webhook test CA") -> Authority:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return Authority(certificate.public_bytes(serialization.Encoding.PEM), key, certificate)


def server_files(authority: Authority, directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(authority.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(authority.key, hashes.SHA256())
    )
    cert_path, key_path = directory / "webhook.crt", directory / "webhook.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@dataclass
class WebhookServer:
    url: str
    authority: Authority
    reviews: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    before_answer: Callable[[str, dict[str, Any]], None] | None = None
    """Called (in the server's thread) with each review's path and request, before the answer."""

    def client_config(self, path: str, *, bundle: str | None = None) -> dict[str, Any]:
        return {"url": f"{self.url}/{path}", "caBundle": bundle or self.authority.bundle}

    def requests(self, path: str) -> list[dict[str, Any]]:
        return [request for at, request in self.reviews if at == path]


def answer(request: dict[str, Any], path: str) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    if path == "deny":
        response = {**response, "allowed": False, "status": {"message": "no thanks"}}
    elif path == "deny-418":
        response = {**response, "allowed": False, "status": {"message": "teapot", "code": 418}}
    elif path == "warn":
        response = {**response, "warnings": ['mind the "gap"']}
    elif path == "depend-on-a" and request["object"] is not None:
        patch = [
            {"op": "add", "path": "/spec/dependsOn", "value": [{"kind": "Process", "name": "a"}]}
        ]
        response = {
            **response,
            "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
        }
    elif path == "label" and request["object"] is not None:
        labels = (request["object"].get("metadata") or {}).get("labels")
        patch: list[dict[str, Any]] = (
            [{"op": "add", "path": "/metadata/labels/webhook", "value": "was-here"}]
            if labels
            else [{"op": "add", "path": "/metadata/labels", "value": {"webhook": "was-here"}}]
        )
        response = {
            **response,
            "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
        }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


@contextmanager
def webhook_server(directory: Path) -> Iterator[WebhookServer]:
    """The server, serving in a thread until the block ends."""
    authority = new_authority()
    cert, key = server_files(authority, directory)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    state: list[WebhookServer] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            hook = state[0]
            path = self.path.strip("/")
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            hook.reviews.append((path, review["request"]))
            if hook.before_answer is not None:
                hook.before_answer(path, review["request"])
            if path == "hang":
                hook.stopping.wait()
                return
            body = (
                b"not json"
                if path == "not-json"
                else json.dumps(answer(review["request"], path)).encode()
            )
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    hook = WebhookServer(f"https://127.0.0.1:{httpd.server_address[1]}", authority)
    state.append(hook)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        hook.stopping.set()
        httpd.shutdown()
        httpd.server_close()


def configuration(
    kind: str, name: str, client_config: dict[str, Any], **webhook: Any
) -> dict[str, Any]:
    """A `Validating`/`MutatingWebhookConfiguration` (`kind`) of one webhook named `name`
    for Processes (CREATE and UPDATE unless `rules` says otherwise)."""
    rules = webhook.pop(
        "rules",
        [
            {
                "apiGroups": ["setpoint.dev"],
                "apiVersions": ["v1alpha1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["processes"],
            }
        ],
    )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": f"{name}.webhooks.test",
                "clientConfig": client_config,
                "rules": rules,
                "sideEffects": webhook.pop("sideEffects", "None"),
                "admissionReviewVersions": ["v1"],
                **webhook,
            }
        ],
    }
