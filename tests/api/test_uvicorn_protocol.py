"""setpoint.http_server subclasses uvicorn's httptools protocol, which is private to uvicorn:
pyproject pins uvicorn below its next minor version, and these tests fail when what the
subclass overrides, calls or reads moves, so that an upgrade is a decision, not a surprise.
"""

from __future__ import annotations

import inspect
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

ROOT = Path(__file__).resolve().parents[2]

OVERRIDDEN = {
    "connection_made": "(self, transport: 'asyncio.Transport') -> 'None'",
    "data_received": "(self, data: 'bytes') -> 'None'",
    "on_headers_complete": "(self) -> 'None'",
    "on_message_complete": "(self) -> 'None'",
    "on_response_complete": "(self) -> 'None'",
    "connection_lost": "(self, exc: 'Exception | None') -> 'None'",
    "shutdown": "(self) -> 'None'",
}
"""The protocol's methods LimitedProtocol overrides (and calls through super()), as uvicorn
0.54 declares them."""


def test_the_pin_is_below_the_next_minor_version_and_holds() -> None:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in dependencies if re.match(r"uvicorn\b", d)]
    low_major, low_minor, high_major, high_minor = map(
        int,
        re.fullmatch(r"uvicorn>=(\d+)\.(\d+),<(\d+)\.(\d+)", pin).groups(),
    )
    assert (high_major, high_minor) == (low_major, low_minor + 1)
    installed = tuple(int(part) for part in version("uvicorn").split(".")[:2])
    assert installed == (low_major, low_minor)


def test_the_overridden_methods_keep_their_signatures() -> None:
    for name, signature in OVERRIDDEN.items():
        method = getattr(HttpToolsProtocol, name)
        assert method.__qualname__ == f"HttpToolsProtocol.{name}", name
        assert str(inspect.signature(method)) == signature, name


def test_the_attributes_the_subclass_reads_are_still_set() -> None:
    # LimitedProtocol reads self.loop, self.transport (and replaces it once connected) and
    # self.cycle.response_complete; uvicorn.Server's capture_signals is overridden.
    protocol = inspect.getsource(HttpToolsProtocol)
    for assignment in ("self.loop = ", "self.transport = ", "self.cycle = "):
        assert assignment in protocol, assignment
    assert "self.response_complete = " in inspect.getsource(RequestResponseCycle)
    # the head is written by a transport.write of its own, before the body (_HeadWithBody)
    assert "self.transport.write(" in inspect.getsource(RequestResponseCycle.send)
    capture = uvicorn.Server.capture_signals
    assert str(inspect.signature(capture)) == "(self) -> 'Generator[None, None, None]'"
    assert str(inspect.signature(uvicorn.Server.serve)).startswith("(self, sockets: ")
