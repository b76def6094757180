"""Testing the kopf operator (greeter_kopf.py) against a real API server, without a cluster:
kopf runs in a thread of its own (`KopfRunner`), as kopf's own docs test operators."""

from pathlib import Path

import kr8s.asyncio
import pytest
from greetings import Greeting, greeting_of, install_crd
from kopf.testing import KopfRunner

from setpoint.testing import ApiServer

OPERATOR = str(Path(__file__).with_name("greeter_kopf.py"))


@pytest.mark.xfail(
    strict=True,
    reason="setpoint's API does not yet serve what kopf 1.45 needs to watch a CRD's kind "
    "(kopf watches the CustomResourceDefinitions, never the Greetings): issue 23, branch "
    "kopf-e2e",
)
@pytest.mark.asyncio
async def test_the_operator_greets(
    setpoint_api: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(setpoint_api.kubeconfig))  # how kopf logs in
    api = await kr8s.asyncio.api(kubeconfig=str(setpoint_api.kubeconfig))
    await install_crd(api)
    with KopfRunner(["run", "--standalone", "--namespace=default", OPERATOR]) as runner:
        world = {"metadata": {"name": "world", "namespace": "default"}, "spec": {"name": "world"}}
        await Greeting(world, api=api).create()
        assert await greeting_of(api, "world") == "Hello, world!"
    assert runner.exception is None
    assert runner.exit_code == 0
