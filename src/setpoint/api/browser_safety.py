"""What keeps a web page in the user's browser out of the API, checked on every request
before authentication: the `Host` it names, the `Origin` it comes from, and the content type
of a write. Pure: no I/O; the app (`setpoint.api.app`) answers a refusal with its Status.

* **Host.** Only loopback names are served (`localhost`, `127.0.0.0/8`, `[::1]`, any
  port), plus `HostRules.accepted` patterns (`--accept-hosts`, regular expressions matched
  against the whole host name without its port, as `kubectl proxy --accept-hosts`; RE2,
  `setpoint.model.patterns`). A page on `evil.example` that rebinds its name to
  127.0.0.1 sends `Host: evil.example`: refused (403), so it cannot read what the server
  holds.
* **Origin.** A request that carries an `Origin` other than the server's own (the scheme
  it came over and the `Host` it named) is refused (403), whatever its method: a browser
  names the page's origin on every cross-origin request. The dashboard, served by the API
  itself, is same-origin. No CORS headers are ever sent.
* **Content type.** A write (POST, PUT, PATCH, or a DELETE with a body) must say its body
  is JSON, YAML, Kubernetes' protobuf or a patch type (`WRITE_TYPES`); otherwise 415. A page
  can send a body without a preflight only as `text/plain`, a form or nothing named: all
  refused. One
  exception, as the Kubernetes API server reads it: a POST, PUT or DELETE that names no
  content type *and carries no Origin* is read as JSON (pykube-ng, which kopf's examples
  use, sends none). A browser names the page's origin on every request but GET and HEAD,
  so no page can send such a write; a PATCH must still name its patch type.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from setpoint.api import protobuf
from setpoint.api.auth import is_loopback
from setpoint.api.query import PATCH_TYPES, media_type
from setpoint.errors import Error, Forbidden, Invalid, UnsupportedMediaType
from setpoint.model.patterns import compile_pattern

BODY_TYPES = frozenset(
    {"application/json", "application/yaml", "application/x-yaml", "text/yaml", protobuf.MEDIA_TYPE}
)
"""What a POST or PUT body may be (what `setpoint.api.resources` parses; protobuf for the
kinds `setpoint.api.protobuf` reads). A page cannot send protobuf without a preflight."""
WRITE_TYPES = BODY_TYPES | frozenset(PATCH_TYPES)
WRITES = frozenset({"POST", "PUT", "PATCH"})
DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class HostRules:
    """Which `Host` values are served: loopback names, and `names` (exact host names, such
    as the server's own bind address and the machine's name) and `patterns` (the user's
    `--accept-hosts`, compiled with `compile_pattern`)."""

    names: frozenset[str] = frozenset()
    patterns: tuple[Any, ...] = ()

    @classmethod
    def of(cls, names: Iterable[str] = (), patterns: Iterable[str] = ()) -> HostRules:
        """Rules accepting `names` and hosts matching `patterns`; `Invalid` (naming the
        pattern) for one that is not a regular expression."""
        compiled = []
        for pattern in patterns:
            try:
                compiled.append(compile_pattern(pattern))
            except Invalid as exc:
                raise Invalid(f"{pattern!r}: {exc}", field="--accept-hosts") from None
        return cls(frozenset(n.lower().strip("[]") for n in names), tuple(compiled))

    def accepts(self, host: str) -> bool:
        """Whether a request naming `host` (no port, lowercased, no brackets) is served."""
        if is_loopback(host) or host in self.names:
            return True
        return any(pattern.fullmatch(host) for pattern in self.patterns)


LOOPBACK_ONLY = HostRules()


def refusal(
    method: str, scheme: str, headers: dict[str, str], rules: HostRules = LOOPBACK_ONLY
) -> Error | None:
    """Why a request must not be served (see the module docstring), or None. `headers`
    are the request's, by lowercase name; `scheme` is `http` or `https`."""
    named = headers.get("host", "")
    host, port = _split_host(named, scheme)
    if not host or not rules.accepts(host):
        shown = named[:100] or "none"
        return Forbidden(
            f"the Host {shown!r} is not a name this server answers to; a name of yours "
            "can be allowed with --accept-hosts"
        )
    origin = headers.get("origin")
    if origin is not None and _origin(origin) != (scheme, host, port):
        return Forbidden(
            f"requests from the origin {origin[:100]!r} are refused: only pages this "
            "server serves may call it from a browser"
        )
    if method in WRITES or (method == "DELETE" and _has_body(headers)):
        content = media_type(headers.get("content-type"))
        unnamed_by_a_program = content == "" and origin is None and method != "PATCH"
        if content not in WRITE_TYPES and not unnamed_by_a_program:
            return UnsupportedMediaType(
                f"the body of a {method} must be application/json (or YAML, or a patch "
                f"type for PATCH), not {content or 'unnamed'!r}"
            )
    return None


def _split_host(value: str, scheme: str) -> tuple[str, int]:
    """A Host header's name (lowercased, without brackets) and port (the scheme's default
    when it names none); ("", 0) when it is not one."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else rest
    else:
        name, _, port_text = value.partition(":")
        if ":" in port_text:
            return "", 0
    if port_text == "":
        return name, DEFAULT_PORTS.get(scheme, 0)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return "", 0
    return name, int(port_text)


def _origin(value: str) -> tuple[str, str, int] | None:
    """An Origin header as (scheme, host, port); None for `null` or anything else."""
    try:
        parts = urlsplit(value.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        return None
    return parts.scheme, parts.hostname, port or DEFAULT_PORTS[parts.scheme]


def _has_body(headers: dict[str, str]) -> bool:
    length = headers.get("content-length")
    if length is not None:
        return length.strip() not in ("", "0")
    return "transfer-encoding" in headers
