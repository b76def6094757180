"""Testing the kr8s operator (greeter_kr8s.py) against a real API server, without a cluster."""

import asyncio
import contextlib

import greeter_kr8s
import kr8s.asyncio
import pytest
from greetings import Greeting, greeting_of, install_crd

from setpoint.testing import ApiServer


@pytest.mark.asyncio
async def test_the_operator_greets(setpoint_api: ApiServer) -> None:
    api = await kr8s.asyncio.api(kubeconfig=str(setpoint_api.kubeconfig))
    await install_crd(api)
    operator = asyncio.create_task(greeter_kr8s.run(api))
    try:
        world = {"metadata": {"name": "world", "namespace": "default"}, "spec": {"name": "world"}}
        await Greeting(world, api=api).create()
        assert await greeting_of(api, "world") == "Hello, world!"
    finally:
        operator.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await operator
