"""Durations as users type them: the one parser (and printer) of every duration option.

`parse_duration` reads kubectl's (Go's `time.ParseDuration`) forms: one or more decimal
numbers, each with a unit, summed: `90s`, `1m30s`, `2h`, `500ms`, `1h2m3s`, `1.5h`;
units `ns`, `us` (or `µs`), `ms`, `s`, `m`, `h`, and `d` (a day, which `setpoint
timeline --since` always took). A bare number is seconds (`90`), as the options that
took one before this parser did. No sign: a duration here is never negative.
`format_duration` prints the shortest such form (`1h2m3s`, `1.5s`, `500ms`, `0s`), which
`parse_duration` reads back to the same value.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from fractions import Fraction

from setpoint.errors import Invalid

__all__ = ["format_duration", "parse_duration"]

_NS_PER_UNIT = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
    "d": 86_400_000_000_000,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d)")
_BARE = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_MAX_CHARS = 64
EXAMPLES = "90s, 1m30s, 2h or 500ms"


def parse_duration(text: str, option: str) -> float:
    """`text` in seconds; `Invalid` naming `option` (e.g. `--since`) and the value if it
    is not a duration."""
    ns = _parse_ns(text.strip()) if len(text) <= _MAX_CHARS else None
    if ns is None:
        raise Invalid(f"{text[:_MAX_CHARS]!r}: want a duration like {EXAMPLES}", field=option)
    return float(Fraction(ns, 1_000_000_000))


def _parse_ns(text: str) -> int | None:
    if _BARE.fullmatch(text):
        return round(Fraction(text) * 1_000_000_000)
    total = Fraction(0)
    at = 0
    while at < len(text):
        match = _PART.match(text, at)
        if match is None:
            return None
        total += Fraction(match.group(1)) * _NS_PER_UNIT[match.group(2)]
        at = match.end()
    return round(total) if text else None


def format_duration(seconds: float) -> str:
    """The shortest form of `seconds` (to the nanosecond) that `parse_duration` reads:
    `1h2m3s`, `1.5s`, `250ms`, `0s`. Negative values are not durations: `ValueError`."""
    ns = round(Fraction(seconds) * 1_000_000_000)
    if ns < 0:
        raise ValueError(f"a duration is never negative: {seconds}")
    if ns == 0:
        return "0s"
    if ns < _NS_PER_UNIT["s"]:
        for unit in ("ms", "us", "ns"):
            if ns >= _NS_PER_UNIT[unit]:
                return _decimal(ns, _NS_PER_UNIT[unit]) + unit
    hours, rest = divmod(ns, _NS_PER_UNIT["h"])
    minutes, rest = divmod(rest, _NS_PER_UNIT["m"])
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else ""]
    parts.append(_decimal(rest, _NS_PER_UNIT["s"]) + "s" if rest else "")
    return "".join(parts)


def _decimal(ns: int, unit: int) -> str:
    """`ns / unit` written exactly, without trailing zeros (`1.5`, `250`)."""
    whole, fraction = divmod(ns, unit)
    if not fraction:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{fraction:0{digits}d}".rstrip("0")
