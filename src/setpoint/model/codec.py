"""The encoded form of objects: compact JSON as UTF-8 bytes (orjson). Pure, no I/O.

One place decides how objects become bytes and back, for the store, the
watch fan-out and informer caches alike. Keys keep their order; text is UTF-8,
not escaped.
"""

from __future__ import annotations

from typing import Any

import orjson

from setpoint.errors import Invalid


def encode(obj: Any) -> bytes:
    """`obj` as compact JSON; `Invalid` if it holds something JSON cannot (a set, NaN...)."""
    try:
        # A copy: orjson's own bytes keep an 8 KiB allocation for a 1 KiB object, which
        # caches and the memory store would hold for as long as the object lives.
        return bytes(memoryview(orjson.dumps(obj)))
    except orjson.JSONEncodeError as exc:
        raise Invalid(f"not representable as JSON: {exc}") from None


def decode(data: bytes | str) -> Any:
    """The value `data` encodes."""
    return orjson.loads(data)
