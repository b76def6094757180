"""Fixtures of the kopf test: the real `setpoint serve` of the API tests (`api_kit`, found
beside them in tests/api), with kubectl pointed at it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "api"))
