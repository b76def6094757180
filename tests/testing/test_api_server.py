"""`setpoint.testing.ApiServer` and its pytest fixture `setpoint_api`: a real server that
the Kubernetes clients reach through its kubeconfig as they are (kr8s, lightkube, the
official client, pykube-ng: its TLS accepted, its token sent), sync or async, that leaves no
thread, socket, file or directory behind, nor on a failed start."""

from __future__ import annotations

import os
import ssl
import tempfile
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from setpoint.errors import Invalid
from setpoint.testing import ApiServer
from setpoint.testing.fixtures import setpoint_api

PROCESSES = "/apis/setpoint.dev/v1alpha1/namespaces/default/processes"

__all__ = ["setpoint_api"]  # the fixture, registered by importing it as users do


def process(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"args": ["sleep", "1000"]},
    }


def trusting(api: ApiServer) -> ssl.SSLContext:
    """A client's TLS context that trusts the server's certificate (and nothing else)."""
    return ssl.create_default_context(cafile=str(api.certificate))


def stored_names(api: ApiServer) -> list[str]:
    """The Processes the server stores, read over HTTPS trusting only its certificate."""
    with httpx.Client(
        base_url=api.url,
        verify=trusting(api),
        headers={"Authorization": f"Bearer {api.token}"},
    ) as client:
        answer = client.get(PROCESSES)
    assert answer.status_code == 200, answer.text
    return [item["metadata"]["name"] for item in answer.json()["items"]]


@pytest.fixture
def temporary_directories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the servers of the test make their temporary directories."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def open_descriptors() -> set[str]:
    return {
        f"{fd} -> {os.readlink(f'/proc/self/fd/{fd}')}"
        for fd in os.listdir("/proc/self/fd")
        if os.path.exists(f"/proc/self/fd/{fd}")
    }


def test_the_fixture_serves_a_kubeconfig_kr8s_loads_as_it_is(setpoint_api: ApiServer) -> None:
    import kr8s
    from kr8s.objects import new_class

    Process = new_class(
        kind="Process", version="setpoint.dev/v1alpha1", namespaced=True, plural="processes"
    )
    client = kr8s.api(kubeconfig=str(setpoint_api.kubeconfig))
    Process(process("from-kr8s"), api=client).create()
    assert stored_names(setpoint_api) == ["from-kr8s"]
    assert setpoint_api.url.startswith("https://127.0.0.1:")


def test_lightkube_the_official_client_and_pykube_load_the_kubeconfig_as_it_is() -> None:
    import kubernetes
    import pykube
    from lightkube import Client, KubeConfig
    from lightkube.generic_resource import create_namespaced_resource

    with ApiServer() as api:
        kubeconfig = str(api.kubeconfig)
        resource = create_namespaced_resource("setpoint.dev", "v1alpha1", "Process", "processes")
        Client(KubeConfig.from_file(kubeconfig)).create(resource.from_dict(process("lightkube")))

        with kubernetes.config.new_client_from_config(config_file=kubeconfig) as official:
            listed = kubernetes.client.CustomObjectsApi(official).list_namespaced_custom_object(
                "setpoint.dev", "v1alpha1", "default", "processes"
            )
        assert [item["metadata"]["name"] for item in listed["items"]] == ["lightkube"]

        pykube_client = pykube.HTTPClient(pykube.KubeConfig.from_file(kubeconfig))
        answer = pykube_client.session.post(
            url=pykube_client.url + PROCESSES, json=process("pykube")
        )
        assert answer.status_code == 201, answer.text
        pykube_client.session.close()

        assert stored_names(api) == ["lightkube", "pykube"]


async def test_async_it_serves_in_the_callers_loop_and_connect_is_setpoints_client() -> None:
    async with ApiServer() as api:
        assert "setpoint-api-server" not in {thread.name for thread in threading.enumerate()}
        async with api.connect() as store:
            await store.create(process("from-setpoint"))
            got = await store.get("setpoint.dev/v1alpha1", "Process", "from-setpoint")
        assert got["spec"]["args"] == ["sleep", "1000"]
        kubeconfig = api.kubeconfig.read_text()
        assert api.token in kubeconfig
        assert "certificate-authority-data" in kubeconfig


def test_each_server_has_its_own_private_store_and_token() -> None:
    with ApiServer() as first, ApiServer() as second:
        with httpx.Client(verify=trusting(first)) as client:
            client.post(
                first.url + PROCESSES,
                json=process("only-in-first"),
                headers={"Authorization": f"Bearer {first.token}"},
            ).raise_for_status()
        assert stored_names(second) == []
        assert first.token != second.token
        for api in (first, second):
            assert api.directory.stat().st_mode & 0o777 == 0o700
            assert api.kubeconfig.stat().st_mode & 0o777 == 0o600
            with httpx.Client(verify=trusting(api)) as client:
                assert client.get(api.url + PROCESSES).status_code == 401  # no token


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_nothing_is_left_behind(mode: str, temporary_directories: Path) -> None:
    import asyncio

    def use(api: ApiServer) -> None:
        assert stored_names(api) == []
        assert api.directory.parent == temporary_directories

    async def use_async() -> None:
        async with ApiServer() as api:
            async with api.connect() as store:
                await store.create(process("async"))
            use_in_thread = asyncio.to_thread(stored_names, api)
            assert await use_in_thread == ["async"]

    def once() -> None:
        if mode == "sync":
            with ApiServer() as api:
                use(api)
        else:
            asyncio.run(use_async())

    once()  # modules imported, caches filled
    threads, descriptors = set(threading.enumerate()), open_descriptors()
    once()
    assert set(threading.enumerate()) == threads
    # Nothing opened is left open (one the first use left to the collector may have closed
    # since: fewer is fine; a number reused by another file shows as a new entry).
    assert open_descriptors() <= descriptors
    assert list(temporary_directories.iterdir()) == []


def test_a_failed_start_raises_its_error_and_leaves_nothing(temporary_directories: Path) -> None:
    threads = set(threading.enumerate())
    with pytest.raises(Invalid, match="unknown store"), ApiServer(store_url="nowhere://x"):
        pass
    assert set(threading.enumerate()) == threads
    assert list(temporary_directories.iterdir()) == []


async def test_a_failed_async_start_leaves_nothing(temporary_directories: Path) -> None:
    with pytest.raises(Invalid, match="unknown store"):
        async with ApiServer(store_url="nowhere://x"):
            pass
    assert os.listdir(temporary_directories) == []


def test_it_is_entered_once_and_says_when_it_is_not_running() -> None:
    api = ApiServer()
    with pytest.raises(RuntimeError, match="not running"):
        _ = api.url
    with api:
        pass
    with pytest.raises(RuntimeError, match="not running"):
        _ = api.kubeconfig
    with pytest.raises(RuntimeError, match="entered once"), api:
        pass
