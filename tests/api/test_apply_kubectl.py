"""Server-side apply with the real kubectl against `setpoint serve`: lists merged by key
(two field managers own different elements of a keyed list, a CRD's or a built-in
kind's), and plain writes (`kubectl patch`, `edit`, `replace`) recorded as their
manager's, so that a later apply of the old value is a conflict naming the field and the
writer, which `--force-conflicts` overrides."""

from __future__ import annotations

import subprocess
from typing import Any

from api_kit import TIMEOUT, Server, kubectl_binary

TOOLS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "tools.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "tools", "singular": "tool", "kind": "Tool"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "image": {"type": "string"},
                                    "env": {
                                        "type": "array",
                                        "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["name"],
                                        "items": {
                                            "type": "object",
                                            "required": ["name"],
                                            "properties": {
                                                "name": {"type": "string"},
                                                "value": {"type": "string"},
                                            },
                                        },
                                    },
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}


def tool(spec: dict[str, Any] | None) -> dict[str, Any]:
    obj = {"apiVersion": "example.com/v1", "kind": "Tool", "metadata": {"name": "t"}}
    return obj if spec is None else {**obj, "spec": spec}


def apply(server: Server, manager: str, file: str, obj: dict[str, Any], *flags: str) -> Any:
    path = server.write(file, obj)
    return server.kubectl(
        "apply", "--server-side", f"--field-manager={manager}", "-f", str(path), *flags
    )


def get(server: Server, resource: str) -> Any:
    return server.ok("get", resource, "-o", "json", "--show-managed-fields").json()


def owners(obj: dict[str, Any]) -> dict[str, Any]:
    return {e["manager"]: e["fieldsV1"] for e in obj["metadata"].get("managedFields", [])}


def test_two_managers_own_different_env_entries_by_name(server: Server) -> None:
    server.ok("apply", "-f", str(server.write("tools-crd.yaml", TOOLS_CRD)))
    server.ok("wait", "--for", "condition=established", "crd/tools.example.com", "--timeout=30s")
    a = tool({"image": "web:1", "env": [{"name": "A", "value": "1"}]})
    assert apply(server, "team-a", "a.yaml", a).code == 0
    b = tool({"env": [{"name": "B", "value": "2"}]})
    both = apply(server, "team-b", "b.yaml", b)
    assert both.code == 0, both.err  # no conflict: each owns its own entry
    stored = get(server, "tool/t")
    assert stored["spec"]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert owners(stored)["team-b"] == {
        "f:spec": {"f:env": {'k:{"name":"B"}': {".": {}, "f:name": {}, "f:value": {}}}}
    }

    # team-a changes its entry and drops nothing of team-b's
    a["spec"]["env"][0]["value"] = "10"
    assert apply(server, "team-a", "a.yaml", a).code == 0
    # team-b removes its element (it applies nothing now): team-a's stays
    assert apply(server, "team-b", "b.yaml", tool(None)).code == 0
    assert get(server, "tool/t")["spec"] == {
        "image": "web:1",
        "env": [{"name": "A", "value": "10"}],
    }

    # an entry of team-a's with another value: a conflict naming the element's field
    taken = tool({"env": [{"name": "A", "value": "99"}]})
    refused = apply(server, "team-b", "b.yaml", taken)
    assert refused.code != 0
    assert '.spec.env[name="A"].value' in refused.err
    assert 'conflict with "team-a"' in refused.err


def test_managers_own_different_dependencies_of_a_process(server: Server) -> None:
    def proc(spec: dict[str, Any]) -> dict[str, Any]:
        meta = {"name": "deps", "namespace": "default"}
        return {"apiVersion": "setpoint.dev/v1alpha1", "kind": "Process", "metadata": meta,
                "spec": spec}  # fmt: skip

    mine = proc(
        {
            "args": ["sleep", "60"],
            "dependsOn": [{"kind": "Process", "name": "db"}],
            "env": {"A": "1"},  # env is a map: each variable is its own field
        }
    )
    assert apply(server, "app", "deps-app.yaml", mine).code == 0
    extra = proc(
        {"dependsOn": [{"kind": "Process", "name": "cache"}], "ports": [8080], "env": {"B": "2"}}
    )
    added = apply(server, "platform", "deps-platform.yaml", extra)
    assert added.code == 0, added.err
    spec = server.stored("Process", "deps")["spec"]
    assert [d["name"] for d in spec["dependsOn"]] == ["db", "cache"]
    assert spec["ports"] == [8080]
    assert spec["env"] == {"A": "1", "B": "2"}
    assert apply(server, "app", "deps-app.yaml", proc({"args": ["sleep", "60"]})).code == 0
    spec = server.stored("Process", "deps")["spec"]
    assert [d["name"] for d in spec["dependsOn"]] == ["cache"]
    assert spec["env"] == {"B": "2"}


def test_a_patch_after_an_apply_is_the_patchers_and_a_reapply_conflicts(server: Server) -> None:
    applied = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "patched", "namespace": "default", "labels": {"tier": "web"}},
        "spec": {"args": ["sleep", "60"]},
    }
    path = str(server.write("patched.yaml", applied))
    server.ok("apply", "--server-side", "-f", path)
    server.ok(
        "patch", "process", "patched", "--type=merge", "-p", '{"spec":{"args":["sleep","5"]}}'
    )
    stored = server.stored("Process", "patched")
    assert stored["spec"]["args"] == ["sleep", "5"]
    assert owners(stored)["kubectl-patch"] == {"f:spec": {"f:args": {}}}
    assert "f:spec" not in owners(stored)["kubectl"]  # the patcher took it

    refused = server.kubectl("apply", "--server-side", "-f", path)
    assert refused.code != 0
    assert 'conflict with "kubectl-patch"' in refused.err
    assert ".spec.args" in refused.err
    assert server.stored("Process", "patched")["spec"]["args"] == ["sleep", "5"]

    server.ok("apply", "--server-side", "--force-conflicts", "-f", path)
    taken = server.stored("Process", "patched")
    assert taken["spec"]["args"] == ["sleep", "60"]
    assert "kubectl-patch" not in owners(taken)  # it owned nothing else


def test_a_replace_after_an_apply_is_recorded_too(server: Server) -> None:
    applied = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "replaced", "namespace": "default"},
        "spec": {"args": ["sleep", "60"], "restartPolicy": "Always"},
    }
    path = str(server.write("replaced.yaml", applied))
    server.ok("apply", "--server-side", "-f", path)
    current = get(server, "process/replaced")
    current["spec"]["restartPolicy"] = "Never"
    server.ok("replace", "-f", "-", input=__import__("json").dumps(current))
    stored = server.stored("Process", "replaced")
    assert owners(stored)["kubectl-replace"] == {"f:spec": {"f:restartPolicy": {}}}
    assert owners(stored)["kubectl"] == {"f:spec": {"f:args": {}}}
    refused = server.kubectl("apply", "--server-side", "-f", path)
    assert refused.code != 0
    assert 'conflict with "kubectl-replace"' in refused.err
    assert ".spec.restartPolicy" in refused.err


def test_kubectl_edit_and_client_side_apply_of_keyed_lists(server: Server) -> None:
    """Keyed lists stay plain lists to kubectl's own patches (it sends no list directives),
    and an edit is recorded as `kubectl-edit`'s."""
    deps = [{"kind": "Process", "name": "db"}, {"kind": "Process", "name": "cache"}]
    manifest = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "edited", "namespace": "default"},
        "spec": {"args": ["sleep", "60"], "dependsOn": deps, "ports": [80, 81]},
    }
    path = str(server.write("edited.yaml", manifest))
    server.ok("apply", "-f", path)
    manifest["spec"] = {"args": ["sleep", "60"], "dependsOn": deps[1:], "ports": [81]}
    server.ok("apply", "-f", str(server.write("edited.yaml", manifest)))
    spec = server.stored("Process", "edited")["spec"]
    assert [d["name"] for d in spec["dependsOn"]] == ["cache"]
    assert spec["ports"] == [81]

    server.ok("delete", "process", "edited")
    server.ok("apply", "--server-side", "-f", path)
    editor = server.directory / "editor.sh"
    editor.write_text(
        '#!/bin/sh\nsed -i -e \'s/name: cache/name: queue/\' -e \'s/"60"/"30"/\' "$1"\n'
    )
    editor.chmod(0o755)
    edited = subprocess.run(
        [kubectl_binary(), "edit", "process", "edited"],
        capture_output=True,
        text=True,
        cwd=server.directory,
        env={**server.env, "KUBE_EDITOR": str(editor)},
        timeout=TIMEOUT,
    )
    assert edited.returncode == 0, edited.stderr
    stored = server.stored("Process", "edited")
    assert [d["name"] for d in stored["spec"]["dependsOn"]] == ["queue"]
    assert owners(stored)["kubectl-edit"]["f:spec"]["f:dependsOn"] == {
        'k:{"kind":"Process","name":"queue"}': {
            ".": {},
            "f:condition": {},
            "f:kind": {},
            "f:name": {},
        }
    }
    assert owners(stored)["kubectl-edit"]["f:spec"]["f:args"] == {}
    # the applier's args, edited: a conflict; its element the edit removed: no conflict
    refused = server.kubectl("apply", "--server-side", "-f", path)
    assert refused.code != 0
    assert 'conflict with "kubectl-edit"' in refused.err
    assert ".spec.args" in refused.err
    assert "dependsOn" not in refused.err
    server.ok("apply", "--server-side", "--force-conflicts", "-f", path)
    spec = server.stored("Process", "edited")["spec"]
    assert spec["args"] == ["sleep", "60"]
    assert [d["name"] for d in spec["dependsOn"]] == ["queue", "cache"]  # queue: the editor's
