"""Shared fixtures for runtime tests: a registry with a test kind, a memory store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from setpoint.model import Kind, Registry, Schema
from setpoint.store import Store, open_store


class WidgetSpec(Schema):
    size: int = 0


class WidgetStatus(Schema):
    seen: int = 0
    conditions: list[dict[str, object]] = []


@pytest.fixture
def registry() -> Registry:
    reg = Registry()
    reg.register(
        Kind("test.setpoint.dev/v1", "Widget", "widgets", spec=WidgetSpec, status=WidgetStatus)
    )
    reg.register(Kind("test.setpoint.dev/v1", "Gadget", "gadgets", spec=WidgetSpec))
    return reg


@pytest.fixture
async def store(registry: Registry) -> AsyncIterator[Store]:
    s = await open_store("memory://", registry)
    yield s
    await s.close()
