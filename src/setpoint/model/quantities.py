"""Quantities as Kubernetes users write them (`64Mi`, `1Gi`, `500M`, `1e9`, `134217728`):
the one parser and printer of a byte amount in a spec (`spec.resources.limits.memory`).

`parse_bytes` reads Kubernetes' quantity forms for a whole number of bytes: a decimal number
(`1`, `1.5`, `.5`), then at most one suffix: binary `Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei`
(powers of 1024), decimal `k`, `M`, `G`, `T`, `P`, `E` (powers of 1000), or an exponent
(`e6`, `E6`). A bare number is bytes. The amount is rounded up to a whole byte, as
Kubernetes rounds a memory quantity. Zero, a sign, a milli suffix (`m`: a thousandth of a
byte) and anything longer than `MAX_CHARS` are refused with one line that says what is
allowed. `format_bytes` prints the shortest binary form that is exact (`64Mi`, `1536Ki`,
`100`), which `parse_bytes` reads back to the same value.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = ["EXAMPLES", "MAX_CHARS", "format_bytes", "parse_bytes"]

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"k": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
_QUANTITY = re.compile(
    r"(?P<number>\d+(?:\.\d*)?|\.\d+)(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)"
    r"|[eE](?P<exponent>\d{1,2}))?"
)
MAX_CHARS = 32
MAX_BYTES = 2**63 - 1
EXAMPLES = "64Mi, 1Gi, 500M or 134217728"


def parse_bytes(value: str | int) -> int:
    """`value` (a quantity, or an int of bytes) as a whole number of bytes, rounded up;
    `ValueError` with one line saying what is allowed. Pure."""
    if isinstance(value, bool):
        raise ValueError(f"must be a quantity such as {EXAMPLES}, not {value!r}")
    if isinstance(value, int):
        amount = Fraction(value)
    else:
        text = value.strip()
        match = _QUANTITY.fullmatch(text) if len(text) <= MAX_CHARS else None
        if match is None:
            raise ValueError(f"must be a quantity such as {EXAMPLES}, not {value!r}")
        amount = Fraction(match["number"])
        if match["suffix"] in _BINARY:
            amount *= 1024 ** _BINARY[match["suffix"]]
        elif match["suffix"] in _DECIMAL:
            amount *= 1000 ** _DECIMAL[match["suffix"]]
        elif match["exponent"] is not None:
            amount *= 10 ** int(match["exponent"])
    whole = math.ceil(amount)
    if whole <= 0:
        raise ValueError(f"must be more than 0 bytes, not {value!r}")
    if whole > MAX_BYTES:
        raise ValueError(f"must be at most {MAX_BYTES} bytes, not {value!r}")
    return whole


def format_bytes(amount: int) -> str:
    """`amount` bytes in the shortest exact binary form (`64Mi`, `1536Ki`, `100`). Pure."""
    for suffix, power in sorted(_BINARY.items(), key=lambda item: -item[1]):
        unit = 1024**power
        if amount and amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return str(amount)
