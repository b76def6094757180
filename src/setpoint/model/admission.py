"""Checks every object passes before it is written, whatever front end it came through.

The CLI, the store and the HTTP API call these same functions, so each refuses the same
input with the same message: integers beyond 64 bits, nesting deeper than `MAX_DEPTH`,
unknown field names (with the nearest valid name suggested), and two objects of one
name in one set. Each raises `Invalid` naming the field. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from setpoint.errors import Invalid

MAX_DEPTH = 100
"""Objects and lists nested deeper than this are refused (Kubernetes objects stay far below)."""

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
"""Integers are 64-bit, as in Kubernetes (and SQLite, orjson)."""


def check_values(value: Any, root: str = "", *, max_depth: int = MAX_DEPTH) -> None:
    """Refuse integers outside 64 bits and nesting deeper than `max_depth`, naming the
    field. Walks iteratively: any depth is safe to check. (Non-finite floats are refused
    when manifests are parsed; the store encodes them as null, as it always has.)"""
    if not _within_limits(value, max_depth):
        _refuse_values(value, root, max_depth)


def _within_limits(value: Any, max_depth: int) -> bool:
    """Whether `_refuse_values` would pass `value`, sure of it (False: not sure), without
    a walk in Python: orjson encodes what the full walk looks at and more (tuples,
    subclasses), and refuses what it cannot encode and, strictly, integers beyond 53 bits;
    nothing nests deeper than its encoding has brackets."""
    try:
        encoded = orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER)
    except orjson.JSONEncodeError:
        return False
    return encoded.count(b"[") + encoded.count(b"{") <= max_depth


def _refuse_values(value: Any, root: str, max_depth: int) -> None:
    """The full walk of `check_values`, naming the field of what it refuses."""
    stack: list[tuple[Any, str, int]] = [(value, root, 0)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth >= max_depth:
                raise Invalid(f"nested more than {max_depth} levels deep", field=path or None)
            items = node.items() if isinstance(node, dict) else enumerate(node)
            for key, child in items:
                stack.append((child, child_path(path, key), depth + 1))
        elif isinstance(node, bool):
            continue
        elif isinstance(node, int) and not INT64_MIN <= node <= INT64_MAX:
            raise Invalid(
                f"{_short_number(node)} is out of range: integers must fit in 64 bits "
                f"({INT64_MIN} to {INT64_MAX})",
                field=path or None,
            )


def child_path(path: str, key: object) -> str:
    """`spec.args[0]`, `spec.env.HOME`: the dotted path of a child, as messages name fields."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def _short_number(number: int) -> str:
    digits = str(number)
    return digits if len(digits) <= 30 else f"{digits[:12]}...({len(digits)} digits)"


def refuse_unknown_fields(given: Iterable[object], valid: Iterable[str], root: str = "") -> None:
    """Raise `Invalid` for the first name in `given` that is not `valid`, naming the field
    and the nearest valid name when one is close (`sepc`: did you mean "spec"?)."""
    known = list(valid)
    for name in given:
        if name not in known:
            raise Invalid(unknown_field_message(str(name), known), field=child_path(root, name))


def unknown_field_message(name: str, valid: Iterable[str]) -> str:
    """`unknown field; did you mean "spec"?`, or the list of valid names when none is close."""
    known = sorted(valid)
    import difflib  # here: only a refused field pays for it

    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f'unknown field; did you mean "{close[0]}"?'
    return "unknown field; valid fields are " + ", ".join(known)


def refuse_duplicates(keys: Iterable[tuple[str, str]]) -> None:
    """Raise `Invalid` at the second of two objects with one name: `keys` are (where, name)
    pairs, `name` being `Kind/namespace/name` (or `Kind/name` when cluster-scoped)."""
    first: dict[str, str] = {}
    for where, name in keys:
        if name in first:
            raise Invalid(
                f"{where}: {name} is declared twice (first at {first[name]}); "
                "one set may name each object once"
            )
        first[name] = where
