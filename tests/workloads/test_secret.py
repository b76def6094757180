"""Secrets: the `Secret` kind's admission, `env` / `envFrom` references in Process and Job
specs, their resolution (pure), and the Process and Job controllers starting real children
with a Secret's values, waiting for a missing Secret, and masking the values in exit
reasons and events."""

from __future__ import annotations

import asyncio
import base64
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from process_support import (
    SLEEP_FOREVER,
    condition,
    job_controller,
    process,
    process_controller,
    python,
    wait_for,
)

from setpoint import testing
from setpoint.errors import Invalid
from setpoint.model import Object, get_condition
from setpoint.model.redaction import MASK
from setpoint.model.wellknown import RESTARTED_AT
from setpoint.runtime import EVENT
from setpoint.testing import Harness
from setpoint.workloads import job as jobs
from setpoint.workloads import process as processes
from setpoint.workloads.child_plan import Action, ChildDesired, StartFailure
from setpoint.workloads.deployment import DEPLOYMENT
from setpoint.workloads.job import JOB, JobController, JobSettings
from setpoint.workloads.process import PROCESS, ProcessController, ProcessSettings
from setpoint.workloads.secret import SECRET, SecretUnavailable, resolve_env

PASSWORD = "hunter2-correct-horse"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(name: str, namespace: str = "default", **body: Any) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        **body,
    }


def job(name: str, args: list[str], **spec: Any) -> Object:
    return {
        "apiVersion": JOB.api_version,
        "kind": JOB.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"args": args, **spec},
    }


def admitted(obj: Object) -> Object:
    SECRET.validate(obj)
    return obj


# -- the kind -------------------------------------------------------------------------


def test_string_data_is_merged_into_data_base64_and_dropped() -> None:
    obj = admitted(
        secret(
            "db",
            data={"user": b64("admin"), "password": b64("old")},
            stringData={"password": PASSWORD},
        )
    )
    assert obj["data"] == {"user": b64("admin"), "password": b64(PASSWORD)}
    assert "stringData" not in obj
    assert obj["type"] == "Opaque"


def test_a_kubernetes_v1_secret_manifest_is_accepted_as_it_is() -> None:
    obj = admitted(secret("tls", type="kubernetes.io/tls", data={"tls.crt": b64("x" * 8)}))
    assert (obj["apiVersion"], obj["kind"], obj["type"]) == ("v1", "Secret", "kubernetes.io/tls")


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"data": {"password": "not base64!"}}, "not base64"),
        ({"data": {"bad/key": b64("x")}}, "not a valid key"),
        ({"stringData": {"": "x"}}, "not a valid key"),
        ({"stringData": {"big": "x" * (1024 * 1024 + 1)}}, "at most 1 MiB"),
        ({"datta": {}}, "datta"),
    ],
)
def test_bad_secrets_are_refused_naming_the_problem(body: dict[str, Any], words: str) -> None:
    with pytest.raises(Invalid, match=words):
        admitted(secret("db", **body))


# -- references in a spec ----------------------------------------------------------------


def ref(name: str, key: str, **more: Any) -> dict[str, Any]:
    return {"valueFrom": {"secretKeyRef": {"name": name, "key": key, **more}}}


def test_a_process_spec_takes_secret_references_in_env_and_env_from() -> None:
    env = {"PLAIN": "1", "PGPASSWORD": ref("db", "password")}
    env_from = [{"secretRef": {"name": "api"}, "prefix": "API_"}]
    obj = process("web", ["true"], env=env, envFrom=env_from)
    PROCESS.validate(obj)
    spec = obj["spec"]
    assert spec["env"]["PGPASSWORD"] == {
        "valueFrom": {"secretKeyRef": {"name": "db", "key": "password", "optional": False}}
    }
    assert spec["envFrom"] == [{"secretRef": {"name": "api", "optional": False}, "prefix": "API_"}]


def test_kubernetes_list_form_of_env_is_kept_as_the_mapping() -> None:
    listed = [{"name": "A", "value": "1"}, {"name": "B", **ref("db", "b")}]
    obj = process("web", ["true"], env=listed)
    PROCESS.validate(obj)
    assert obj["spec"]["env"]["A"] == "1"
    assert obj["spec"]["env"]["B"]["valueFrom"]["secretKeyRef"]["key"] == "b"
    for bad in ([{"name": "A"}], [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]):
        with pytest.raises(Invalid, match=r"spec\.env"):
            PROCESS.validate(process("web", ["true"], env=bad))


def test_a_deployment_template_and_a_job_take_them_too() -> None:
    JOB.validate(job("m", ["true"], envFrom=[{"secretRef": {"name": "db"}}]))
    DEPLOYMENT.validate(
        {
            "apiVersion": DEPLOYMENT.api_version,
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"args": ["true"], "env": {"P": ref("db", "password")}},
                }
            },
        }
    )
    with pytest.raises(Invalid, match=r"spec\.env"):
        PROCESS.validate(process("web", ["true"], env={"P": {"valueFrom": {}}}))
    with pytest.raises(Invalid, match=r"spec\.envFrom\[0\]\.prefix"):
        PROCESS.validate(
            process("web", ["true"], envFrom=[{"secretRef": {"name": "db"}, "prefix": "A="}])
        )


# -- resolution (pure) ----------------------------------------------------------------------


SECRETS = {
    "db": admitted(secret("db", stringData={"password": PASSWORD, "user": "admin"})),
    "api": admitted(secret("api", stringData={"token": "tok-123456", "user": "api-user"})),
}


def test_env_from_then_env_and_env_wins() -> None:
    spec = {
        "envFrom": [
            {"secretRef": {"name": "api"}, "prefix": "API_"},
            {"secretRef": {"name": "db"}},
        ],
        "env": {"user": "plain-wins", "PGPASSWORD": ref("db", "password")},
    }
    resolved = resolve_env(spec, SECRETS.get)
    assert resolved.env == {
        "API_token": "tok-123456",
        "API_user": "api-user",
        "password": PASSWORD,
        "user": "plain-wins",
        "PGPASSWORD": PASSWORD,
    }
    assert resolved.secret_values == {"tok-123456", "api-user", PASSWORD, "admin"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"env": {"P": ref("nope", "password")}}, r'env P: secret "nope" not found'),
        (
            {"env": {"P": ref("db", "nope")}},
            r"env P: couldn't find key nope of Secret default/db",
        ),
        ({"envFrom": [{"secretRef": {"name": "nope"}}]}, r'envFrom: secret "nope" not found'),
    ],
)
def test_a_missing_secret_or_key_is_unavailable(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(SecretUnavailable, match=re.escape(message)) as caught:
        resolve_env(spec, SECRETS.get)
    assert caught.value.condition_reason == "SecretMissing"


def test_optional_references_that_are_missing_are_left_out() -> None:
    spec = {
        "env": {"A": ref("nope", "x", optional=True), "B": ref("db", "nope", optional=True)},
        "envFrom": [{"secretRef": {"name": "nope", "optional": True}}],
    }
    assert resolve_env(spec, SECRETS.get).env == {}


def test_a_nul_byte_in_a_value_is_unavailable_and_best_effort_leaves_it_out() -> None:
    nul = {"bin": admitted(secret("bin", data={"k": b64("a\0b")}))}
    spec = {"env": {"K": ref("bin", "k"), "PLAIN": "p"}}
    with pytest.raises(SecretUnavailable, match="NUL") as caught:
        resolve_env(spec, nul.get)
    assert caught.value.condition_reason == "SecretInvalid"
    assert resolve_env(spec, nul.get, best_effort=True).env == {"PLAIN": "p"}


# -- the plans (pure) ------------------------------------------------------------------------


MISSING = StartFailure('env P: secret "db" not found', False, 1, secret_reason="SecretMissing")


def test_a_start_that_wants_a_secret_stalls_pending_with_its_reason() -> None:
    steps = [
        processes.plan(
            ChildDesired(1, processes.ProcessSpecSchema(args=["x"])),
            processes.Observed(start_failure=MISSING),
            1000.0,
        ),
        jobs.plan(
            ChildDesired(1, jobs.JobSpecSchema(args=["x"])),
            jobs.JobObserved(start_failure=MISSING),
            1000.0,
        ),
    ]
    for step in steps:
        assert step.action is Action.NOTHING
        assert step.phase == "Pending"
        assert step.stall == ("SecretMissing", MISSING.message)
        assert step.status is not None
        ready = get_condition(step.status, "Ready")
        assert ready is not None
        assert (ready["status"], ready["reason"]) == ("False", "SecretMissing")


def test_a_new_spec_starts_again_after_a_secret_failure() -> None:
    step = processes.plan(
        ChildDesired(2, processes.ProcessSpecSchema(args=["x"])),
        processes.Observed(generation=1, start_failure=MISSING),
        1000.0,
    )
    assert step.action is Action.START


# -- the controllers, with real children ---------------------------------------------------


@dataclass
class World:
    harness: Harness
    processes: ProcessController
    jobs: JobController


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with Harness() as harness:
        run, logs = tmp_path / "run", tmp_path / "logs"
        processes = process_controller(harness.manager, ProcessSettings(run, logs))
        jobs = job_controller(harness.manager, JobSettings(run / "jobs", logs))
        await harness.start()
        try:
            yield World(harness, processes, jobs)
        finally:
            await harness.stop()
            await processes.stop_all(grace=0)
            await jobs.stop_all(grace=0)


PRINT_AND_FAIL = """
    import os, sys
    print("password is", os.environ["PGPASSWORD"], flush=True)
    sys.exit(3)
"""


async def test_a_missing_secret_stalls_the_process_until_it_is_created(world: World) -> None:
    store = world.harness.store
    await store.create(
        process("web", python(SLEEP_FOREVER), env={"PGPASSWORD": ref("db", "password")})
    )
    obj = await wait_for(store, "web", lambda o: condition(o, "Stalled").get("status") == "True")
    assert obj is not None
    assert condition(obj, "Stalled")["reason"] == "SecretMissing"
    assert condition(obj, "Stalled")["message"] == 'env PGPASSWORD: secret "db" not found'
    assert obj["status"]["phase"] == "Pending"
    await store.create(secret("db", stringData={"password": PASSWORD}))

    def started(o: Object | None) -> bool:
        return bool(((o or {}).get("status") or {}).get("pid")) and not condition(o, "Stalled")

    obj = await wait_for(store, "web", started)
    assert obj is not None
    environ = Path(f"/proc/{obj['status']['pid']}/environ").read_bytes().split(b"\0")  # noqa: ASYNC240
    assert f"PGPASSWORD={PASSWORD}".encode() in environ


async def test_the_secret_value_is_masked_in_the_exit_reason_and_events(world: World) -> None:
    store = world.harness.store
    await store.create(secret("db", stringData={"password": PASSWORD}))
    await store.create(
        process(
            "web",
            python(PRINT_AND_FAIL),
            restartPolicy="Never",
            env={"PGPASSWORD": ref("db", "password")},
        )
    )
    obj = await wait_for(store, "web", lambda o: ((o or {}).get("status") or {}).get("lastExit"))
    assert obj is not None
    assert obj["status"]["lastExit"]["reason"] == f"exited with code 3: password is {MASK}"
    events, _ = await store.list(EVENT.api_version, EVENT.kind)
    assert any(e["reason"] == "Exited" for e in events)
    assert PASSWORD not in repr(events) + repr(obj)


async def test_a_job_starts_with_env_from_a_secret_once_it_exists(world: World) -> None:
    store = world.harness.store
    check = 'import os, sys; sys.exit(0 if os.environ["DB_password"] == sys.argv[1] else 1)'
    env_from = [{"secretRef": {"name": "db"}, "prefix": "DB_"}]
    await store.create(job("migrate", python(check, PASSWORD), backoffLimit=0, envFrom=env_from))

    def reason(o: Object | None) -> str | None:
        return condition(o, "Stalled").get("reason")

    await testing.wait_for(store, JOB, "migrate", lambda o: reason(o) == "SecretMissing")
    await store.create(secret("db", stringData={"password": PASSWORD}))
    done = await testing.wait_for(
        store, JOB, "migrate", lambda o: condition(o, "Complete").get("status") == "True"
    )
    assert done is not None
    assert done["status"]["phase"] == "Succeeded"


async def test_an_exec_probe_gets_the_secret_and_its_output_is_masked(world: World) -> None:
    store = world.harness.store
    await store.create(secret("db", stringData={"password": PASSWORD}))
    probe = {"exec": {"command": ["sh", "-c", 'echo "refused $PGPASSWORD"; exit 1']},
             "periodSeconds": 1, "failureThreshold": 1}  # fmt: skip
    await store.create(
        process(
            "web",
            python(SLEEP_FOREVER),
            readinessProbe=probe,
            env={"PGPASSWORD": ref("db", "password")},
        )
    )

    def probe_failed(o: Object | None) -> bool:
        return condition(o, "Ready").get("reason") == "ReadinessProbeFailed"

    obj = await wait_for(store, "web", probe_failed)
    assert obj is not None
    assert f"refused {MASK}" in condition(obj, "Ready")["message"]
    events, _ = await store.list(EVENT.api_version, EVENT.kind)
    assert PASSWORD not in repr(events) + repr(obj)


RECORD_START = """
    import os, sys, time
    with open(sys.argv[1], "a") as f:
        f.write(os.environ["MAX_KEYS"] + "\\n")
    while True: time.sleep(3600)
"""


async def test_a_secret_changed_under_a_running_child_reaches_it_at_its_next_start(
    world: World, tmp_path: Path
) -> None:
    """The child is not restarted for a changed Secret (as a Kubernetes pod's environment
    is not); the next start, here one a person asks for, gets the new value, and only that
    start happened: the child records each start's value."""
    store = world.harness.store
    starts = tmp_path / "starts"
    await store.create(secret("cache", stringData={"maxKeys": "1000"}))
    await store.create(
        process(
            "cache", python(RECORD_START, str(starts)), env={"MAX_KEYS": ref("cache", "maxKeys")}
        )
    )
    first = await wait_for(
        store, "cache", lambda o: bool(((o or {}).get("status") or {}).get("pid"))
    )
    assert first is not None
    await _lines(starts, 1)
    changed = await store.get(SECRET.api_version, SECRET.kind, "cache", "default")
    changed.pop("data")
    await store.update({**changed, "stringData": {"maxKeys": "lots"}})
    current = await store.get(PROCESS.api_version, PROCESS.kind, "cache", "default")
    current["metadata"].setdefault("annotations", {})[RESTARTED_AT] = "2026-12-07T00:00:00Z"
    await store.update(current)

    def restarted(o: Object | None) -> bool:
        pid = ((o or {}).get("status") or {}).get("pid")
        return bool(pid) and pid != first["status"]["pid"]

    again = await wait_for(store, "cache", restarted)
    assert again is not None
    await _lines(starts, 2)
    assert _read_lines(starts) == ["1000", "lots"]


async def _lines(path: Path, count: int) -> None:
    """Once `path` has `count` lines (a child writes one as it starts)."""
    async with asyncio.timeout(10):
        while len(_read_lines(path)) < count:  # noqa: ASYNC110 - a child's file, no event to wait on
            await asyncio.sleep(0.02)


def _read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
