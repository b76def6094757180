"""Fixtures the workloads tests share: `notes`, a notification FIFO children write lines
into (`supervisor_support.Notifications`), closed at the end of the test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from supervisor_support import Notifications


@pytest.fixture
async def notes(tmp_path: Path) -> AsyncIterator[Notifications]:
    n = Notifications(tmp_path / "notes")
    yield n
    n.close()
