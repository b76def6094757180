"""A `dependsOn` cycle is refused for every client of the API, not only `setpoint apply`:
the real kubectl (client-side and server-side apply, an edit by patch) and the Kubernetes
Python client. The write that would close the cycle is refused naming it, and nothing of
it is stored."""

from __future__ import annotations

from typing import Any

import pytest
from api_kit import Server, process
from kubernetes import config, dynamic
from kubernetes.client.exceptions import ApiException

from setpoint.errors import NotFound


def depending(name: str, *on: str) -> dict[str, Any]:
    """A Process that depends on the Processes named `on` (being Ready)."""
    obj = process(name)
    obj["spec"]["dependsOn"] = [{"kind": "Process", "name": other} for other in on]
    return obj


def absent(server: Server, name: str) -> bool:
    try:
        server.stored("Process", name)
    except NotFound:
        return True
    return False


def test_kubectl_apply_of_a_two_object_cycle_is_refused(server: Server) -> None:
    path = server.write("two.yaml", depending("two-a", "two-b"), depending("two-b", "two-a"))
    result = server.kubectl("apply", "-f", str(path))
    assert result.code != 0, result
    assert "process.setpoint.dev/two-a created" in result.out
    assert (
        "dependsOn cycle: Process/two-b -> Process/two-a -> Process/two-b; "
        "remove one of these dependencies" in result.err
    ), result.err
    assert "spec.dependsOn" in result.err
    assert absent(server, "two-b")


def test_kubectl_apply_of_a_three_object_cycle_is_refused(server: Server) -> None:
    path = server.write(
        "three.yaml",
        depending("three-a", "three-b"),
        depending("three-b", "three-c"),
        depending("three-c", "three-a"),
    )
    result = server.kubectl("apply", "-f", str(path))
    assert result.code != 0, result
    assert (
        "dependsOn cycle: Process/three-c -> Process/three-a -> Process/three-b -> "
        "Process/three-c" in result.err
    ), result.err
    assert absent(server, "three-c")
    assert server.stored("Process", "three-b")["spec"]["dependsOn"][0]["name"] == "three-c"


def test_an_edit_that_closes_a_cycle_is_refused_and_the_object_kept(server: Server) -> None:
    server.ok("apply", "-f", str(server.write("edit.yaml", depending("edit-a", "edit-b"))))
    server.ok("apply", "-f", str(server.write("edit-b.yaml", depending("edit-b"))))
    before = server.stored("Process", "edit-b")

    result = server.kubectl(
        "apply", "-f", str(server.write("edit-b.yaml", depending("edit-b", "edit-a")))
    )
    assert result.code != 0, result
    assert "dependsOn cycle: Process/edit-b -> Process/edit-a -> Process/edit-b" in result.err
    result = server.kubectl(
        "patch",
        "process",
        "edit-b",
        "--type=merge",
        "-p",
        '{"spec":{"dependsOn":[{"kind":"proc","name":"edit-a"}]}}',
    )
    assert result.code != 0, result
    assert "dependsOn cycle: Process/edit-b -> Process/edit-a -> Process/edit-b" in result.err
    result = server.kubectl(
        "apply",
        "--server-side",
        "-f",
        str(server.write("edit-b.yaml", depending("edit-b", "edit-a"))),
    )
    assert result.code != 0, result
    assert "dependsOn cycle: Process/edit-b -> Process/edit-a -> Process/edit-b" in result.err
    assert server.stored("Process", "edit-b") == before


def test_the_python_client_is_refused_a_cycle(server: Server) -> None:
    client = dynamic.DynamicClient(
        config.new_client_from_config(config_file=str(server.kubeconfig))
    )
    processes = client.resources.get(api_version="setpoint.dev/v1alpha1", kind="Process")
    processes.create(body=depending("py-a", "py-b"), namespace="default")
    with pytest.raises(ApiException) as refused:
        processes.create(body=depending("py-b", "py-a"), namespace="default")
    assert refused.value.status == 422
    assert "dependsOn cycle: Process/py-b -> Process/py-a -> Process/py-b" in str(
        refused.value.body
    )
    assert absent(server, "py-b")


def test_a_server_side_dry_run_of_a_cycle_is_refused_too(server: Server) -> None:
    server.ok("apply", "-f", str(server.write("dry.yaml", depending("dry-a", "dry-b"))))
    path = server.write("dry-b.yaml", depending("dry-b", "dry-a"))

    result = server.kubectl("apply", "--dry-run=server", "-f", str(path))
    assert result.code != 0, result
    assert "dependsOn cycle: Process/dry-b -> Process/dry-a -> Process/dry-b" in result.err
    assert absent(server, "dry-b")

    fine = server.kubectl(
        "apply", "--dry-run=server", "-f", str(server.write("dry-c.yaml", depending("dry-c")))
    )
    assert fine.code == 0, fine
    assert absent(server, "dry-c")
