"""Discovery documents: which groups, versions and resources the API serves, built from a
kind registry as the Kubernetes API server answers `/api`, `/apis`, `/api/v1`,
`/apis/{group}/{version}` and `/version`. Pure: no I/O.

Only the plain (unaggregated) forms are served: kubectl asks for aggregated discovery
(`application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`) first and
falls back to these when the answer is plain JSON.

Each kind is one resource, with its `status` subresource (kinds with a status schema) and
its `scale` subresource (autoscaling/v1 `Scale`, kinds with `Kind.scale`), which is how
`kubectl scale` finds out a kind scales.
"""

from __future__ import annotations

from typing import Any

from setpoint.model import Kind, Registry

KUBERNETES_VERSION = ("1", "32")
"""The Kubernetes minor version whose API conventions the server follows (kubectl warns
about a client more than one minor version away)."""

VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
SUBRESOURCE_VERBS = ["get", "patch", "update"]

_UNCATEGORIZED_GROUPS = ("", "coordination.k8s.io", "apiextensions.k8s.io")
"""Groups of the bookkeeping kinds (Event, Lease, Secret, CustomResourceDefinition), which
`kubectl get all` leaves out, as Kubernetes does."""


def categories(kind: Kind) -> list[str]:
    """The categories `kubectl get CATEGORY` expands: `all` and `setpoint` for workload
    kinds, none for bookkeeping kinds."""
    return [] if kind.group in _UNCATEGORIZED_GROUPS else ["all", "setpoint"]


def version_info(server_version: str) -> dict[str, str]:
    """`/version`: the Kubernetes version followed, and setpoint's own in `gitVersion`."""
    major, minor = KUBERNETES_VERSION
    return {
        "major": major,
        "minor": minor,
        "gitVersion": f"v{major}.{minor}.0+setpoint-{server_version}",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "",
        "platform": "linux/amd64",
    }


def core_versions() -> dict[str, Any]:
    """`/api`: the core group's versions."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [],
    }


def group_versions(registry: Registry) -> dict[str, list[str]]:
    """Each named group served and its versions (sorted; the core group left out)."""
    groups: dict[str, set[str]] = {}
    for kind in registry:
        if kind.group:
            groups.setdefault(kind.group, set()).add(kind.version)
    return {group: sorted(versions) for group, versions in sorted(groups.items())}


def group_list(registry: Registry) -> dict[str, Any]:
    """`/apis`: an APIGroupList of every named group."""
    groups = []
    for group, versions in group_versions(registry).items():
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def group(registry: Registry, name: str) -> dict[str, Any] | None:
    """`/apis/{group}`: one APIGroup, or None if no kind is in it."""
    for entry in group_list(registry)["groups"]:
        if entry["name"] == name:
            return {"kind": "APIGroup", "apiVersion": "v1", **entry}
    return None


def resource_list(registry: Registry, api_version: str) -> dict[str, Any] | None:
    """`/api/v1` or `/apis/{group}/{version}`: an APIResourceList, or None if no kind is in
    that group-version (`v1` is always served)."""
    kinds = [k for k in registry if k.api_version == api_version]
    if not kinds and api_version != "v1":
        return None
    resources: list[dict[str, Any]] = []
    for kind in sorted(kinds, key=lambda k: k.plural):
        resources += resources_of(kind)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": api_version,
        "resources": resources,
    }


def resources_of(kind: Kind) -> list[dict[str, Any]]:
    """The APIResource entries of one kind: itself and its subresources."""
    main: dict[str, Any] = {
        "name": kind.plural,
        "singularName": kind.singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": VERBS,
    }
    if kind.short_names:
        main["shortNames"] = list(kind.short_names)
    if cats := categories(kind):
        main["categories"] = cats
    out = [main]
    if kind.has_status:
        out.append(
            {
                "name": f"{kind.plural}/status",
                "singularName": "",
                "namespaced": kind.namespaced,
                "kind": kind.kind,
                "verbs": SUBRESOURCE_VERBS,
            }
        )
    if kind.scale is not None:
        out.append(
            {
                "name": f"{kind.plural}/scale",
                "singularName": "",
                "namespaced": kind.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": SUBRESOURCE_VERBS,
            }
        )
    return out


WRITE_PARAMETERS = ("dryRun", "fieldManager", "fieldValidation")
"""Query parameters every write takes (kubectl checks the OpenAPI document for
`fieldValidation` before it sends `fieldValidation=Strict`)."""


def openapi_index(registry: Registry) -> dict[str, Any]:
    """`/openapi/v3`: where each group-version's document is."""
    paths = {"api/v1": {"serverRelativeURL": "/openapi/v3/api/v1"}}
    for group, versions in group_versions(registry).items():
        for version in versions:
            where = f"apis/{group}/{version}"
            paths[where] = {"serverRelativeURL": f"/openapi/v3/{where}"}
    return {"paths": paths}


def openapi_paths(registry: Registry, group: str, version: str) -> dict[str, Any]:
    """The OpenAPI v3 path items of one group-version's resources (no schemas): each
    operation with its `x-kubernetes-group-version-kind` and query parameters, which is
    what kubectl reads to learn that a kind takes `fieldValidation` and patches."""
    api_version = f"{group}/{version}" if group else version
    prefix = f"/apis/{api_version}" if group else f"/api/{version}"
    paths: dict[str, Any] = {}
    for kind in registry:
        if kind.api_version != api_version:
            continue
        gvk = {"group": group, "version": version, "kind": kind.kind}
        scope = f"{prefix}/namespaces/{{namespace}}" if kind.namespaced else prefix
        writes = [
            {"name": name, "in": "query", "schema": {"type": "string"}} for name in WRITE_PARAMETERS
        ]
        item_ops = {
            method: _operation(f"{verb}{kind.kind}", gvk, verb, writes)
            for method, verb in (("put", "replace"), ("patch", "patch"), ("delete", "delete"))
        }
        item_ops["get"] = _operation(f"read{kind.kind}", gvk, "get", [])
        paths[f"{scope}/{kind.plural}/{{name}}"] = item_ops
        paths[f"{scope}/{kind.plural}"] = {
            "get": _operation(f"list{kind.kind}", gvk, "list", []),
            "post": _operation(f"create{kind.kind}", gvk, "post", writes),
        }
    return paths


def _operation(
    operation_id: str, gvk: dict[str, str], action: str, parameters: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "operationId": operation_id,
        "parameters": parameters,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
    }
