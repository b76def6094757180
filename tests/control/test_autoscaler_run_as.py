"""Whom an Autoscaler's command metric runs as: its target's children's user (a
Deployment's template `user:`), or the engine's without one, if the engine may use it;
with a child's minimal environment, never the engine's. Real commands, a manual clock,
waits through the store's watch. Switching users needs root (skipped otherwise); a
refusal is tested as an engine run by nobody (`os.geteuid` patched)."""

from __future__ import annotations

import os
import pwd
from typing import Any

import pytest
from control_autoscaler_support import autoscaler, condition, kinds, scaled, wait_for

from setpoint.control.autoscaler import AUTOSCALER, setup
from setpoint.model import Object
from setpoint.testing import Harness, ManualClock
from setpoint.workloads.kinds import DEPLOYMENT

API, KIND = AUTOSCALER.api_version, AUTOSCALER.kind
NOBODY = pwd.getpwnam("nobody")


def deployment(name: str, **template_spec: Any) -> Object:
    return {
        "apiVersion": DEPLOYMENT.api_version,
        "kind": DEPLOYMENT.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": 1,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"args": ["sleep", "infinity"], **template_spec},
            },
        },
    }


def on_deployment(name: str, target: str, args: list[str]) -> Object:
    obj = autoscaler(name, target, {"command": {"args": args}, "target": 1})
    obj["spec"]["scaleTargetRef"] = {"kind": "Deployment", "name": target}
    return obj


def has_metric(obj: Object) -> bool:
    return (obj.get("status") or {}).get("currentMetric") is not None


async def test_a_command_metric_does_not_get_the_engines_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A token in the engine's environment is not the command's: it gets what a child
    gets (a few inherited variables such as PATH), as a command in a Process would."""
    monkeypatch.setenv("SETPOINT_TEST_ENGINE_ONLY", "7")
    async with Harness(registry=kinds(), clock=ManualClock()) as harness:
        setup(harness.manager)
        await harness.start()
        await harness.store.create(scaled("queue", 1))  # no `user:`: the engine's user
        args = ["sh", "-c", 'echo "${SETPOINT_TEST_ENGINE_ONLY:-0}"']
        metric = {"command": {"args": args}, "target": 1}
        await harness.store.create(autoscaler("queue", "queue", metric))
        obj = await wait_for(harness.store, API, KIND, "queue", has_metric)
    assert obj["status"]["currentMetric"] == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
async def test_a_command_metric_runs_as_the_targets_user() -> None:
    """As root, scaling a Deployment whose template runs as nobody: the command runs as
    nobody too (its author could have put it in that template, and no more)."""
    async with Harness(clock=ManualClock()) as harness:
        setup(harness.manager)
        await harness.start()
        await harness.store.create(deployment("web", user="nobody"))
        await harness.store.create(on_deployment("web", "web", ["id", "-u"]))
        obj = await wait_for(harness.store, API, KIND, "web", has_metric)
    assert obj["status"]["currentMetric"] == NOBODY.pw_uid


async def test_a_command_metric_as_a_user_the_engine_may_not_use_is_not_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An engine run by nobody cannot switch users: a command whose target runs as root is
    not run, and ScalingActive says why (FailedGetMetric)."""
    monkeypatch.setattr(os, "geteuid", lambda: NOBODY.pw_uid)  # as if the engine were nobody
    async with Harness(clock=ManualClock()) as harness:
        setup(harness.manager)
        await harness.start()
        await harness.store.create(deployment("web", user="root"))
        await harness.store.create(on_deployment("web", "web", ["echo", "3"]))
        obj = await wait_for(
            harness.store,
            API,
            KIND,
            "web",
            lambda o: condition(o, "ScalingActive").get("reason") == "FailedGetMetric",
        )
    message = condition(obj, "ScalingActive")["message"]
    assert "cannot run as 'root': the engine runs as 'nobody', not root" in message
    assert not has_metric(obj)
