"""Masking secret values in text that is shown or recorded: exit reasons quoted from a
child's output, timeline entries, log lines.

* `secret_values(obj, fields)`: the values held in an object's secret fields
  (`Kind.secret_fields`, e.g. a Secret's `data`), base64-decoded where they are base64,
  as a child would see them in its environment.
* `Redactor(values)` replaces every occurrence of those values in a text, or in every
  string of a JSON-like value, with `***`; `redact(text, values)` does it once.

A value is masked line by line (a PEM key spans lines; output is quoted a line at a
time), and only lines of at least `MIN_MASKED` characters: masking a one-letter value
would mask that letter everywhere. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from setpoint.model.meta import Object

__all__ = ["MASK", "MIN_MASKED", "Redactor", "redact", "secret_values"]

MASK = "***"
"""What a secret value is replaced with."""
MIN_MASKED = 4
"""Characters a value (or a line of it) must have to be masked."""


def decode_secret(text: str) -> str:
    """A base64 `data` value as the text a child gets in its environment: UTF-8, with
    bytes that are not UTF-8 carried through as `os.fsdecode` carries them."""
    return os.fsdecode(base64.b64decode(text, validate=True))


def secret_values(obj: Object, fields: Iterable[str]) -> set[str]:
    """Every string in `obj`'s top-level `fields`, and its base64 decoding when it has
    one (a Secret's `data` is base64; `stringData` is not)."""
    found: set[str] = set()
    for name in fields:
        for value in _strings(obj.get(name)):
            found.add(value)
            with contextlib.suppress(binascii.Error, ValueError):
                found.add(decode_secret(value))
    return found


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


class Redactor:
    """Masks a fixed set of secret values (see the module docstring)."""

    def __init__(self, values: Iterable[str]) -> None:
        terms = {
            line.strip()
            for value in values
            for line in value.splitlines()
            if len(line.strip()) >= MIN_MASKED
        }
        self.terms = frozenset(terms)
        ordered = sorted(terms, key=lambda t: (-len(t), t))  # the longest match wins
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, text: str) -> str:
        """`text` with every secret value replaced by `MASK`."""
        if self._pattern is None:
            return text
        return self._pattern.sub(MASK, text)

    def value(self, value: Any) -> Any:
        """A copy of a JSON-like `value` with every string (keys too) passed through `text`."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value


def redact(text: str, values: Iterable[str]) -> str:
    """`text` with each of `values` (lines of at least `MIN_MASKED` characters) masked."""
    return Redactor(values).text(text)
