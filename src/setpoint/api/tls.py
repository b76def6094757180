"""The server's TLS certificate: kubectl and client-go send a bearer token only over
HTTPS, so a server with tokens serves HTTPS. `ensure_certificate(directory, hosts)`
makes (once) a self-signed certificate for the hosts and a private key, keeps them in
`directory` (a private directory: key mode 0600, written by rename, never through a
symbolic link: `setpoint.files`), and reuses them while they are valid for those hosts; the
kubeconfig carries the certificate as its `certificate-authority-data`, so clients
verify the server without a flag. Bring your own with `TlsFiles(cert, key)`.

No decisions about where files go (the caller gives the directory).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from setpoint.files import ensure_private_dir, write_private

VALIDITY = datetime.timedelta(days=365)
"""How long a certificate made here is valid; it is made again when it is near its end."""

_RENEW_BEFORE = datetime.timedelta(days=7)


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """A certificate (PEM) and its private key (PEM), as files."""

    cert: Path
    key: Path

    def certificate_pem(self) -> bytes:
        return self.cert.read_bytes()


def ensure_certificate(directory: Path, hosts: list[str]) -> TlsFiles:
    """`server.crt` and `server.key` in `directory`, valid for `hosts` (addresses or
    names; loopback's are always added): made if missing, expiring or not for them."""
    wanted = sorted({"127.0.0.1", "::1", "localhost", *hosts})
    ensure_private_dir(directory)
    files = TlsFiles(directory / "server.crt", directory / "server.key")
    if files.cert.exists() and files.key.exists() and _still_good(files.cert, wanted):
        return files
    cert, key = _self_signed(wanted)
    write_private(files.key, key)
    write_private(files.cert, cert)
    return files


def _still_good(path: Path, hosts: list[str]) -> bool:
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return False
    have = {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    have |= set(names.get_values_for_type(x509.DNSName))
    now = datetime.datetime.now(datetime.UTC)
    return set(hosts) <= have and cert.not_valid_after_utc - now > _RENEW_BEFORE


def _self_signed(hosts: list[str]) -> tuple[bytes, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "setpoint")])
    alternatives: list[x509.GeneralName] = []
    for host in hosts:
        try:
            alternatives.append(x509.IPAddress(ipaddress.ip_address(host.strip("[]"))))
        except ValueError:
            alternatives.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem
