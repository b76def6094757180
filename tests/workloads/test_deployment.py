"""The Deployment controller with the real Process controller and real children: small
HTTP servers, one per replica, each on a port from the Deployment's range. Tests wait on
the stored state through the store's watch, under timeouts, never on the wall clock."""

from __future__ import annotations

import asyncio
import copy
import urllib.request
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from process_support import argv_of, condition, process_controller, python
from supervisor_support import wait_pid_gone

from setpoint.model import Object
from setpoint.runtime.scale import read_scale, write_scale
from setpoint.store import Store
from setpoint.testing import Harness, free_port_range, wait_for
from setpoint.workloads import deployment
from setpoint.workloads.deployment import CONTROLLER_REVISION, DEPLOYMENT, HASH_LABEL
from setpoint.workloads.process import PROCESS, ProcessController, ProcessSettings

TIMEOUT = 20.0

SERVER = """
    import http.server, os, sys
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = (os.environ["REPLICA"] + " " + os.environ.get("VERSION", "")).encode()
            self.send_response(200 if os.environ.get("HEALTHY", "1") == "1" else 503)
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a): pass
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


@dataclass
class World:
    harness: Harness
    processes: ProcessController
    ports: tuple[int, int]

    @property
    def store(self) -> Store:
        return self.harness.store


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with Harness() as harness:
        processes = process_controller(
            harness.manager, ProcessSettings(tmp_path / "state", tmp_path / "logs")
        )
        deployment.setup(harness.manager)
        await harness.start()
        try:
            start = free_port_range(8)
            yield World(harness, processes, (start, start + 7))
        finally:
            await harness.stop()
            await processes.stop_all(grace=0)


def manifest(world: World, replicas: int = 3, **spec: Any) -> Object:
    env = spec.pop("env", {"VERSION": "v1"})
    return {
        "apiVersion": DEPLOYMENT.api_version,
        "kind": DEPLOYMENT.kind,
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "portRange": {"start": world.ports[0], "end": world.ports[1]},
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "args": [*python(SERVER), "$(PORT)"],
                    "env": env,
                    "readinessProbe": {
                        "httpGet": {"path": "/", "port": "$(PORT)"},
                        "periodSeconds": 1,
                    },
                    "terminationGracePeriodSeconds": 5,
                },
            },
            **spec,
        },
    }


async def wait_deployment(store: Store, predicate: Callable[[Object], bool]) -> Object:
    """The Deployment `web` as soon as `predicate` holds for it."""
    obj = await wait_for(
        store, DEPLOYMENT, "web", lambda o: o is not None and predicate(o), within=TIMEOUT
    )
    assert obj is not None
    return obj


def rolled_out(generation: int) -> Callable[[Object], bool]:
    def check(obj: Object) -> bool:
        status = obj.get("status") or {}
        return (
            status.get("observedGeneration") == generation
            and condition(obj, "Ready").get("status") == "True"
        )

    return check


async def replicas_of(store: Store) -> list[Object]:
    """The replica Processes of `web` that are not being deleted."""
    procs, _ = await store.list(PROCESS.api_version, PROCESS.kind, "default")
    return [
        p
        for p in procs
        if p["metadata"]["name"].startswith("web-") and "deletionTimestamp" not in p["metadata"]
    ]


def get(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
        return str(response.read().decode())


async def test_replicas_run_on_their_own_ports_and_the_deployment_is_ready(world: World) -> None:
    await world.store.create(manifest(world))
    obj = await wait_deployment(world.store, rolled_out(1))
    assert obj["status"]["availableReplicas"] == 3
    assert condition(obj, "Available")["status"] == "True"
    replicas = await replicas_of(world.store)
    ports = sorted(p["spec"]["ports"][0] for p in replicas)
    assert len(set(ports)) == 3
    assert all(world.ports[0] <= p <= world.ports[1] for p in ports)
    answers = {get(p) for p in ports}
    assert answers == {f"{p['metadata']['name']} v1" for p in replicas}
    for p in replicas:
        assert argv_of(p["status"]["pid"])[-1] == str(p["spec"]["ports"][0])


async def test_a_template_change_rolls_every_replica_and_records_revisions(world: World) -> None:
    obj = await world.store.create(manifest(world))
    obj = await wait_deployment(world.store, rolled_out(1))
    first = {p["metadata"]["name"] for p in await replicas_of(world.store)}
    obj["spec"]["template"]["spec"]["env"] = {"VERSION": "v2"}
    await world.store.update(obj)
    obj = await wait_deployment(world.store, rolled_out(2))
    assert obj["status"]["currentRevision"] == 2
    replicas = await replicas_of(world.store)
    assert len(replicas) == 3
    assert not first & {p["metadata"]["name"] for p in replicas}
    assert {get(p["spec"]["ports"][0]).split()[1] for p in replicas} == {"v2"}
    revisions, _ = await world.store.list(
        CONTROLLER_REVISION.api_version, CONTROLLER_REVISION.kind, "default"
    )
    assert sorted(r["revision"] for r in revisions) == [1, 2]

    # going back to v1 reuses its revision under the next number
    obj["spec"]["template"]["spec"]["env"] = {"VERSION": "v1"}
    obj = await world.store.update(obj)
    obj = await wait_deployment(world.store, rolled_out(3))
    revisions, _ = await world.store.list(
        CONTROLLER_REVISION.api_version, CONTROLLER_REVISION.kind, "default"
    )
    numbers = {r["metadata"]["labels"][HASH_LABEL]: r["revision"] for r in revisions}
    assert sorted(numbers.values()) == [2, 3]
    assert obj["status"]["currentRevision"] == 3


async def test_scale_subresource_scales_up_and_down(world: World) -> None:
    await world.store.create(manifest(world, replicas=1))
    await wait_deployment(world.store, rolled_out(1))
    await write_scale(world.store, DEPLOYMENT, "web", "default", 3)
    obj = await wait_deployment(
        world.store, lambda o: rolled_out(2)(o) and o["status"]["availableReplicas"] == 3
    )
    scale = await read_scale(world.store, DEPLOYMENT, "web", "default")
    assert (scale.replicas, scale.status_replicas, scale.selector) == (3, 3, "app=web")
    await write_scale(world.store, DEPLOYMENT, "web", "default", 1)
    obj = await wait_deployment(
        world.store, lambda o: rolled_out(3)(o) and o["status"]["replicas"] == 1
    )
    assert obj["status"]["availableReplicas"] == 1


async def test_a_stuck_rollout_rolls_back_by_itself(world: World) -> None:
    obj = await world.store.create(
        manifest(world, progressDeadlineSeconds=2, remediation="rollback")
    )
    obj = await wait_deployment(world.store, rolled_out(1))
    good = copy.deepcopy(obj["spec"]["template"])
    obj["spec"]["template"]["spec"]["env"] = {"VERSION": "v2", "HEALTHY": "0"}
    await world.store.update(obj)
    obj = await wait_deployment(
        world.store, lambda o: o["spec"]["template"] == good and rolled_out(3)(o)
    )
    assert obj["metadata"]["annotations"]["setpoint.dev/changed-by"] == "controller/deployment"
    replicas = await replicas_of(world.store)
    assert {get(p["spec"]["ports"][0]).split()[1] for p in replicas} == {"v1"}


async def test_a_stuck_rollout_without_remediation_stalls(world: World) -> None:
    obj = await world.store.create(manifest(world, replicas=2, progressDeadlineSeconds=2))
    obj = await wait_deployment(world.store, rolled_out(1))
    obj["spec"]["template"]["spec"]["env"] = {"VERSION": "v2", "HEALTHY": "0"}
    await world.store.update(obj)
    obj = await wait_deployment(
        world.store, lambda o: condition(o, "Stalled").get("status") == "True"
    )
    assert condition(obj, "Progressing")["reason"] == "ProgressDeadlineExceeded"
    assert condition(obj, "Ready")["status"] == "False"
    # the old replicas keep serving: maxUnavailable 0
    assert obj["status"]["availableReplicas"] == 2


async def test_deleting_the_deployment_stops_its_replicas(world: World) -> None:
    await world.store.create(manifest(world, replicas=2))
    await wait_deployment(world.store, rolled_out(1))
    pids = [p["status"]["pid"] for p in await replicas_of(world.store)]
    await world.store.delete(
        DEPLOYMENT.api_version, DEPLOYMENT.kind, "web", "default", propagation_policy="Foreground"
    )
    await wait_for(world.store, DEPLOYMENT, "web", lambda o: o is None, within=TIMEOUT)
    assert await replicas_of(world.store) == []
    for pid in pids:
        await wait_pid_gone(pid)


async def test_a_scale_down_keeps_the_deployment_ready(world: World) -> None:
    """While surplus replicas of the current revision go, the Deployment serves all it is
    asked for: every state recorded after the scale-down is Ready (it blinked NotReady, "2
    of 1 updated replicas available", at each of an Autoscaler's scale-downs)."""
    store = world.store
    await store.create(manifest(world, replicas=2))
    await wait_deployment(store, lambda o: rolled_out(1)(o) and o["status"]["readyReplicas"] == 2)
    since = await store.revision()
    await write_scale(store, DEPLOYMENT, "web", "default", 1)
    seen = []
    async with asyncio.timeout(TIMEOUT):
        async for event in store.watch(DEPLOYMENT.api_version, DEPLOYMENT.kind, since=since):
            ready = condition(event.object, "Ready")
            seen.append((ready.get("status"), ready.get("reason")))
            if event.object["status"].get("replicas") == 1 and rolled_out(2)(event.object):
                break
    assert all(status == "True" for status, _ in seen), seen
