"""Registers setpoint's fixture `setpoint_api` (a real API server for each test that asks)."""

from setpoint.testing.fixtures import setpoint_api  # noqa: F401
