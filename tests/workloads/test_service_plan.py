"""The Service's pure parts: the schema (bad specs refused, naming the field), which
Processes are endpoints, the round-robin order and the status it writes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from service_support import service

from setpoint.engine import builtin_kinds
from setpoint.errors import Invalid
from setpoint.model import Object
from setpoint.store import open_store
from setpoint.workloads.process import PROCESS
from setpoint.workloads.service import (
    SERVICE,
    Endpoint,
    ServiceDesired,
    ServiceObserved,
    Target,
    endpoints_of,
    plan,
    rotation,
    selects,
    service_status,
    target_of,
)

NOW = 1_000.0
WEB = Target("default", (("app", "web"),), "127.0.0.1", 18080)


def proc(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    ready: bool = True,
    ports: list[int] | None = None,
    namespace: str = "default",
    deleting: bool = False,
) -> Object:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": labels or {"app": "web"},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "apiVersion": PROCESS.api_version,
        "kind": PROCESS.kind,
        "metadata": meta,
        "spec": {"args": ["x"], "ports": [8000 + len(name)] if ports is None else ports},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


# -- the schema ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"port": 0}, "spec.port"),
        ({"port": 70000}, "spec.port"),
        ({"selector": {}}, "spec.selector"),
        ({"selector": {"app": "no spaces"}}, "spec.selector"),
        ({"targetPort": 0}, "spec.targetPort"),
        ({"host": ""}, "spec.host"),
        ({"bogus": 1}, "spec.bogus"),
    ],
)
async def test_bad_specs_are_refused_naming_the_field(spec: dict[str, Any], field: str) -> None:
    store = await open_store("memory://", builtin_kinds())
    try:
        obj = service("web", 18080, {"app": "web"})
        obj["spec"].update(spec)
        with pytest.raises(Invalid) as refused:
            await store.create(obj)
        assert refused.value.field == field
        assert str(refused.value).startswith(field)
        items, _ = await store.list(SERVICE.api_version, SERVICE.kind)
        assert items == []
    finally:
        await store.close()


async def test_selector_and_port_are_required() -> None:
    store = await open_store("memory://", builtin_kinds())
    try:
        for missing in ("selector", "port"):
            obj = service("web", 18080, {"app": "web"})
            del obj["spec"][missing]
            with pytest.raises(Invalid) as refused:
                await store.create(obj)
            assert refused.value.field == f"spec.{missing}"
    finally:
        await store.close()


async def test_defaults_are_filled_in() -> None:
    store = await open_store("memory://", builtin_kinds())
    try:
        created = await store.create(service("web", 18080, {"app": "web"}))
        assert created["spec"] == {"selector": {"app": "web"}, "port": 18080, "host": "127.0.0.1"}
        assert target_of(created) == WEB
    finally:
        await store.close()


# -- endpoints -----------------------------------------------------------------------


def test_endpoints_are_the_ready_selected_processes_by_name() -> None:
    processes = [
        proc("web-b"),
        proc("web-a"),
        proc("other", labels={"app": "db"}),
        proc("web-unready", ready=False),
        proc("web-going", deleting=True),
        proc("web-elsewhere", namespace="prod"),
        proc("web-portless", ports=[]),
    ]
    assert endpoints_of(processes, WEB) == [Endpoint("web-a", 8005), Endpoint("web-b", 8005)]


def test_target_port_overrides_the_process_ports() -> None:
    target = Target("default", (("app", "web"),), "127.0.0.1", 18080, target_port=9000)
    assert endpoints_of([proc("web-a"), proc("web-portless", ports=[])], target) == [
        Endpoint("web-a", 9000),
        Endpoint("web-portless", 9000),
    ]


def test_a_selector_needs_every_label() -> None:
    assert selects([("app", "web"), ("tier", "front")], {"app": "web", "tier": "front", "x": "y"})
    assert not selects([("app", "web"), ("tier", "front")], {"app": "web"})
    assert not selects([], {"app": "web"})


@given(n=st.integers(min_value=1, max_value=8), turns=st.integers(min_value=1, max_value=40))
def test_round_robin_tries_each_once_and_spreads_first_choices(n: int, turns: int) -> None:
    endpoints = [Endpoint(f"e{i}", i) for i in range(n)]
    firsts = []
    for turn in range(turns):
        order = rotation(endpoints, turn)
        assert sorted(order, key=lambda e: e.port) == endpoints
        firsts.append(order[0])
    counts = [firsts.count(e) for e in endpoints]
    assert max(counts) - min(counts) <= 1


def test_no_endpoints_no_rotation() -> None:
    assert rotation([], 3) == []


# -- status --------------------------------------------------------------------------


def cond(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in status["conditions"] if c["type"] == type_), {})


def test_status_with_endpoints_is_ready() -> None:
    status = service_status(
        None, WEB, [Endpoint("web-a", 1), Endpoint("web-b", 2)], generation=3,
        listen_error=None, now=NOW,
    )  # fmt: skip
    assert status["endpoints"] == [{"name": "web-a", "port": 1}, {"name": "web-b", "port": 2}]
    assert status["readyEndpoints"] == 2
    assert status["observedGeneration"] == 3
    assert cond(status, "Ready")["status"] == "True"
    assert "127.0.0.1:18080" in cond(status, "Ready")["message"]
    assert cond(status, "Stalled") == {}


def test_status_without_endpoints_names_the_selector() -> None:
    status = service_status(None, WEB, [], generation=1, listen_error=None, now=NOW)
    ready = cond(status, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "NoReadyEndpoints")
    assert "app=web" in ready["message"]


def test_a_failed_listen_stalls_then_a_success_clears_it() -> None:
    error = "cannot listen on 127.0.0.1:18080: Address already in use"
    failed = service_status(
        None, WEB, [Endpoint("web-a", 1)], generation=1, listen_error=error, now=NOW
    )
    assert failed["endpoints"] == []
    for type_, value in (("Ready", "False"), ("Stalled", "True")):
        assert cond(failed, type_)["status"] == value
        assert cond(failed, type_)["reason"] == "ListenFailed"
        assert cond(failed, type_)["message"] == error
    healed = service_status(
        failed, WEB, [Endpoint("web-a", 1)], generation=2, listen_error=None, now=NOW + 5
    )
    assert cond(healed, "Stalled") == {}
    assert cond(healed, "Ready")["status"] == "True"
    assert (
        cond(healed, "Ready")["lastTransitionTime"] != cond(failed, "Ready")["lastTransitionTime"]
    )


def test_the_plan_listens_only_where_it_does_not_yet() -> None:
    endpoints = [Endpoint("web-a", 1)]
    desired = ServiceDesired(WEB, 1)
    assert plan(desired, ServiceObserved(None, endpoints), NOW).listen
    assert plan(desired, ServiceObserved(("127.0.0.1", 9999), endpoints), NOW).listen  # moved
    stay = plan(desired, ServiceObserved(("127.0.0.1", 18080), endpoints), NOW)
    assert not stay.listen
    assert stay.status == service_status(None, WEB, endpoints, generation=1, listen_error=None,
                                         now=NOW)  # fmt: skip
    again = plan(desired, ServiceObserved(("127.0.0.1", 18080), endpoints, stay.status), NOW)
    assert again.status == stay.status, "a look that finds nothing new changes nothing"
