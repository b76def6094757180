"""Times as status and metadata text: RFC 3339 to and from epoch seconds. Pure: no clock.

`rfc3339` (whole seconds, as Kubernetes metadata has them) and `parse_rfc3339` live here,
below every layer, so that pure code (conditions, plans) can stamp and read times without
importing `setpoint.clock` (and with it `time` and `asyncio`); `setpoint.clock` re-exports
them.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime

__all__ = ["parse_rfc3339", "rfc3339"]


@functools.lru_cache(maxsize=64)
def _rfc3339(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339(ts: float) -> str:
    """`2026-11-29T22:02:27Z`: the timestamp format of Kubernetes metadata (whole seconds)."""
    return _rfc3339(int(ts))


def parse_rfc3339(text: str) -> float:
    """Inverse of `rfc3339` (accepts fractional seconds and offsets too)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
