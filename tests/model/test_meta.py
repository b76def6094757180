"""Metadata rules (Kubernetes' own): names, namespaces, labels, annotations, finalizers and
owner references; every refusal is `Invalid` naming the field path."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.errors import Invalid
from setpoint.model import object_key
from setpoint.model.meta import (
    MAX_ANNOTATIONS_BYTES,
    check_dns1123_label,
    check_dns1123_subdomain,
    check_label_value,
    check_metadata,
    check_qualified_name,
)


def obj(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "test.setpoint.dev/v1",
        "kind": "Widget",
        "metadata": {"name": "w", **meta},
    }


def refused(o: dict[str, Any], *, namespaced: bool = True) -> str:
    """Check `o`, expect a refusal, and return the field it names."""
    with pytest.raises(Invalid) as info:
        check_metadata(o, namespaced=namespaced)
    assert info.value.field is not None
    assert str(info.value).startswith(info.value.field)
    return info.value.field


@pytest.mark.parametrize(
    "name", ["a", "web-0", "a.b.c", "0", "x" * 253, "a-b.c-d", "1.2.3", ("a" * 63 + ".") * 3 + "a"]
)
def test_valid_names(name: str) -> None:
    assert check_dns1123_subdomain(name, "metadata.name") == name
    o = obj(name=name)
    check_metadata(o, namespaced=True)
    assert o["metadata"]["name"] == name


@pytest.mark.parametrize(
    "name",
    ["", None, 7, "A", "Web", "a_b", "-a", "a-", ".a", "a.", "a..b", "a b", "a/b", "x" * 254, "é"],
)
def test_invalid_names(name: Any) -> None:
    with pytest.raises(Invalid) as info:
        check_dns1123_subdomain(name, "metadata.name")
    assert info.value.field == "metadata.name"
    assert refused(obj(name=name)) == "metadata.name"


def test_missing_name_or_metadata() -> None:
    o = obj()
    del o["metadata"]["name"]
    assert refused(o) == "metadata.name"
    assert refused({"apiVersion": "v1", "kind": "X"}) == "metadata"
    assert refused({"apiVersion": "v1", "kind": "X", "metadata": "w"}) == "metadata"


@pytest.mark.parametrize("value", ["a", "a-b", "0", "x" * 63])
def test_valid_dns1123_labels(value: str) -> None:
    assert check_dns1123_label(value, "f") == value


@pytest.mark.parametrize("value", ["", "a.b", "A", "x" * 64, "-a", "a-", None])
def test_invalid_dns1123_labels(value: Any) -> None:
    with pytest.raises(Invalid, match=r"^f: "):
        check_dns1123_label(value, "f")


def test_namespace_defaults_for_namespaced_kinds() -> None:
    o = obj()
    check_metadata(o, namespaced=True)
    assert o["metadata"]["namespace"] == "default"
    o = obj(namespace="")
    check_metadata(o, namespaced=True)
    assert o["metadata"]["namespace"] == "default"
    o = obj(namespace="team-a")
    check_metadata(o, namespaced=True)
    assert o["metadata"]["namespace"] == "team-a"


@pytest.mark.parametrize("namespace", ["Team", "a.b", "x" * 64, "-a"])
def test_bad_namespaces(namespace: str) -> None:
    assert refused(obj(namespace=namespace)) == "metadata.namespace"


def test_cluster_scoped_kinds_take_no_namespace() -> None:
    assert refused(obj(namespace="default"), namespaced=False) == "metadata.namespace"
    o = obj(namespace="")
    check_metadata(o, namespaced=False)
    assert "namespace" not in o["metadata"]
    o = obj()
    check_metadata(o, namespaced=False)
    assert "namespace" not in o["metadata"]


@pytest.mark.parametrize(
    "key",
    [
        "app",
        "a",
        "app.kubernetes.io/name",
        "example.com/x_y.z",
        "A_b",
        "x" * 63,
        "a" * 253 + "/b",
        "0",
    ],
)
def test_valid_qualified_names(key: str) -> None:
    assert check_qualified_name(key, "f") == key


@pytest.mark.parametrize(
    "key",
    [
        "",
        None,
        "/a",
        "a/",
        "-a",
        "a-",
        "_a",
        "a b",
        "x" * 64,
        "Bad_Prefix/a",
        "a/b/c",
        "a" * 254 + "/b",
        3,
    ],
)
def test_invalid_qualified_names(key: Any) -> None:
    with pytest.raises(Invalid, match=r"^f: "):
        check_qualified_name(key, "f")


@pytest.mark.parametrize("value", ["", "a", "A-b_c.d", "0", "x" * 63])
def test_valid_label_values(value: str) -> None:
    assert check_label_value(value, "f") == value


@pytest.mark.parametrize("value", ["-a", "a-", "a b", "x" * 64, "a/b", None, 1, True])
def test_invalid_label_values(value: Any) -> None:
    with pytest.raises(Invalid, match=r"^f: "):
        check_label_value(value, "f")


def test_labels() -> None:
    check_metadata(obj(labels={"app": "web", "example.com/tier": "", "v": "1.0"}), namespaced=True)
    check_metadata(obj(labels=None), namespaced=True)
    assert refused(obj(labels={"bad key": "v"})) == "metadata.labels['bad key']"
    assert refused(obj(labels={"k": "bad value"})) == "metadata.labels['k']"
    assert refused(obj(labels={"k": 1})) == "metadata.labels['k']"
    assert refused(obj(labels=["k"])) == "metadata.labels"


def test_annotations() -> None:
    check_metadata(obj(annotations={"note": "any text at all, even spaces: ok!"}), namespaced=True)
    assert refused(obj(annotations={"bad key": "v"})) == "metadata.annotations['bad key']"
    assert refused(obj(annotations={"k": 1})) == "metadata.annotations['k']"
    assert refused(obj(annotations="k=v")) == "metadata.annotations"


def test_annotations_total_size_limit() -> None:
    key = "k"
    fits = MAX_ANNOTATIONS_BYTES - len(key)
    check_metadata(obj(annotations={key: "x" * fits}), namespaced=True)
    assert refused(obj(annotations={key: "x" * (fits + 1)})) == "metadata.annotations"
    # Bytes, not characters.
    assert refused(obj(annotations={key: "é" * (fits // 2 + 1)})) == "metadata.annotations"


def test_finalizers() -> None:
    check_metadata(obj(finalizers=["example.com/cleanup", "kubernetes"]), namespaced=True)
    check_metadata(obj(finalizers=[]), namespaced=True)
    assert refused(obj(finalizers=["ok", "not ok"])) == "metadata.finalizers[1]"
    assert refused(obj(finalizers="example.com/cleanup")) == "metadata.finalizers"


def owner(**overrides: Any) -> dict[str, Any]:
    ref = {"apiVersion": "test.setpoint.dev/v1", "kind": "Parent", "name": "p", "uid": "u-1"}
    ref.update(overrides)
    return {k: v for k, v in ref.items() if v is not None}


def test_owner_references() -> None:
    check_metadata(
        obj(ownerReferences=[owner(controller=True, blockOwnerDeletion=True), owner(uid="u-2")]),
        namespaced=True,
    )
    for missing in ("apiVersion", "kind", "name", "uid"):
        field = refused(obj(ownerReferences=[owner(), owner(**{missing: None})]))
        assert field == f"metadata.ownerReferences[1].{missing}"
    assert refused(obj(ownerReferences=[owner(name="")])) == "metadata.ownerReferences[0].name"
    assert refused(obj(ownerReferences=[owner(controller="yes")])) == (
        "metadata.ownerReferences[0].controller"
    )
    assert refused(obj(ownerReferences=[owner(blockOwnerDeletion=1)])) == (
        "metadata.ownerReferences[0].blockOwnerDeletion"
    )
    assert refused(obj(ownerReferences=["p"])) == "metadata.ownerReferences[0]"
    assert refused(obj(ownerReferences={"name": "p"})) == "metadata.ownerReferences"


def test_at_most_one_controller_reference() -> None:
    two = [owner(controller=True), owner(uid="u-2", controller=True)]
    assert refused(obj(ownerReferences=two)) == "metadata.ownerReferences"
    check_metadata(
        obj(ownerReferences=[owner(controller=True), owner(uid="u-2", controller=False)]),
        namespaced=True,
    )


def test_object_key() -> None:
    o = obj(namespace="ns")
    assert object_key(o) == ("test.setpoint.dev/v1", "Widget", "ns", "w")
    assert object_key(obj()) == ("test.setpoint.dev/v1", "Widget", "", "w")
