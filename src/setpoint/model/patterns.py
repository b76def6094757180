"""Regular expressions that users give (a `logLine` readiness probe, a CRD schema's
`pattern`), compiled as RE2: matching takes time linear in the text, so no pattern, however
written, can stall the engine or the API server on a long line.

    line = compile_pattern("listening on port [0-9]+")   # Invalid if not RE2
    line.search("web: listening on port 8080")

RE2's syntax is that of Go's `regexp`, which process-compose (`ready_log_line`) and
Kubernetes (CRD `pattern`) use, so patterns written for them mean the same here. What RE2
leaves out is what makes backtracking exponential: backreferences (`\\1`) and lookarounds
(`(?=...)`, `(?<=...)`); a pattern using them is refused with RE2's reason. Pure.
"""

from __future__ import annotations

import functools
from typing import Any

import re2

from setpoint.errors import Invalid

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the reason goes into the Invalid, not to stderr


@functools.lru_cache(maxsize=256)
def compile_pattern(text: str) -> Any:
    """`text` compiled by RE2 (it has `search`, `match`, `fullmatch` as `re` patterns do);
    `Invalid` (no field: the caller names it) saying why when RE2 cannot compile it."""
    try:
        return re2.compile(text, options=_OPTIONS)
    except re2.error as exc:
        why = exc.args[0] if exc.args else "not a regular expression"
        if isinstance(why, bytes):
            why = why.decode(errors="replace")
        raise Invalid(f"not an RE2 regular expression: {why}") from None
