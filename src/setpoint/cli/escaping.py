"""`escape`, the one function that makes any text safe for a terminal, and `EscapedOutput`,
the stream `main` wraps stdout and stderr in for the whole command (see
`setpoint.cli.render`, which re-exports both).

Kept apart from the renderers so that `setpoint --help` imports only this. Pure: no I/O
(`EscapedOutput` writes only where it is told).
"""

from __future__ import annotations

import io
import re

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:
    from typing import Any, TextIO

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""Control characters (C0 but tab and newline, DEL, C1) and the bidirectional overrides
that can make text read differently from what it is."""


def escape(text: str) -> str:
    """`text` with every control character written as an escape (`\\x1b`, `\\u202e`);
    tabs and newlines are kept."""
    return _CONTROL.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class EscapedOutput(io.TextIOBase):
    """A text stream that writes `escape(text)` to `raw`: what the CLI's stdout and stderr
    are while a command runs. `raw` and its `buffer` stay reachable for raw bytes."""

    def __init__(self, raw: TextIO) -> None:
        super().__init__()
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(escape(text))
        return len(text)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    def writable(self) -> bool:
        return True

    @property
    def buffer(self) -> Any:
        return self.raw.buffer

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.raw.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self.raw.errors
