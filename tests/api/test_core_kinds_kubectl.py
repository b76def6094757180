"""Kubernetes' core kinds that operators create and watch (Namespace, ConfigMap, Pod), through
the real kubectl against `setpoint serve`: stored and validated as the Kubernetes API server
does (a refused one names its field and writes nothing), with no controller behind them, as
in envtest: a Pod is never run and keeps what was written."""

from __future__ import annotations

from typing import Any

from api_kit import Server


def pod(name: str, containers: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "core"}},
        "spec": {"containers": containers, "restartPolicy": "Never"},
    }


def test_namespaces_configmaps_and_pods_are_served_as_kubernetes_serves_them(
    server: Server,
) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "team-a"},
        "data": {"mode": "fast", "app.properties": "a=b\n"},
    }
    sleeper = pod("sleeper", [{"name": "main", "image": "busybox", "command": ["sleep", "9"]}])
    sleeper["metadata"]["namespace"] = "team-a"
    path = server.write("core.yaml", namespace, config, sleeper)
    applied = server.ok("apply", "-f", str(path)).out
    assert "namespace/team-a created" in applied
    assert "configmap/settings created" in applied
    assert "pod/sleeper created" in applied

    assert "namespace/team-a" in server.ok("get", "namespaces", "-o", "name").out.split()
    got = server.ok("get", "configmap", "settings", "-n", "team-a", "-o", "json").json()
    assert got["data"] == {"mode": "fast", "app.properties": "a=b\n"}
    stored = server.ok("get", "pods", "-n", "team-a", "-l", "app=core", "-o", "json").json()
    (item,) = stored["items"]
    assert item["spec"]["containers"] == [
        {"name": "main", "image": "busybox", "command": ["sleep", "9"]}
    ]  # the fields setpoint does not check are kept as written
    assert item["spec"]["restartPolicy"] == "Never"
    assert item["status"] == {"phase": "Pending"}  # as kube-apiserver creates it; nothing runs it

    server.ok(
        "patch", "pod", "sleeper", "-n", "team-a", "--subresource=status", "--type=merge",
        "-p", '{"status": {"phase": "Running"}}',
    )  # fmt: skip
    status = server.ok("get", "pod", "sleeper", "-n", "team-a", "-o", "json").json()["status"]
    assert status == {"phase": "Running"}


def test_a_pod_or_configmap_kubernetes_refuses_is_refused_naming_its_field(
    server: Server,
) -> None:
    cases = [
        (pod("empty", []), "spec.containers"),
        (pod("no-image", [{"name": "main"}]), "spec.containers[0].image"),
        (pod("bad-name", [{"name": "Main_1", "image": "x"}]), "spec.containers[0].name"),
        (
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "bad-key"},
                "data": {"a/b": "x"},
            },
            "'a/b' is not a valid key",
        ),
    ]
    for manifest, named in cases:
        refused = server.kubectl("apply", "-f", str(server.write("refused.yaml", manifest)))
        assert refused.code != 0, manifest
        assert named in refused.err, refused
    assert server.ok("get", "pods,configmaps", "-o", "name").out.split() == []
