"""The pytest fixture `setpoint_api`: a real API server on a temporary store for one test
(`setpoint.testing.ApiServer`, in a thread of its own, so sync and async tests alike can use
it), stopped and removed after the test.

    # conftest.py
    from setpoint.testing.fixtures import setpoint_api  # noqa: F401

    # test_operator.py
    def test_it(setpoint_api):
        api = kr8s.api(kubeconfig=str(setpoint_api.kubeconfig))

It is registered by that import (or `pytest_plugins = ["setpoint.testing.fixtures"]` in the
root conftest.py), not by a `pytest11` entry point: a plugin entry point would load into the
pytest run of every project that has setpoint installed, wanted or not, and a fixture name
would appear from nowhere; an import says where it comes from. This is the one module of
setpoint that imports pytest (`pip install 'setpoint[testing]'`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from setpoint.testing.api_server import ApiServer

__all__ = ["setpoint_api"]


@pytest.fixture
def setpoint_api() -> Iterator[ApiServer]:
    """A running `ApiServer` for this test: `.kubeconfig`, `.url`, `.token`, `.certificate`,
    `.connect()`."""
    with ApiServer() as api:
        yield api
