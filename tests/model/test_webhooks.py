"""Which webhooks a write calls and what their answers mean, decided purely
(`setpoint.model.webhooks`), and the configurations refused as kube-apiserver refuses them
(or as setpoint cannot serve them)."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from setpoint.errors import Invalid, WebhookFailed
from setpoint.model.webhooks import (
    MUTATING,
    VALIDATING,
    Attributes,
    Operation,
    matches,
    read_review,
    review_request,
)
from setpoint.workloads.kinds import PROCESS

OBJ = {"apiVersion": PROCESS.api_version, "kind": "Process", "metadata": {"name": "web"}}


def attrs(operation: Operation = "CREATE", subresource: str = "", **labels: str) -> Attributes:
    obj = {**OBJ, "metadata": {"name": "web", "namespace": "team-a", "labels": labels}}
    return Attributes(
        operation, PROCESS, subresource, "team-a", "web", obj, None, dry_run=False, user="alice"
    )


def webhook(
    resources: list[str], operations: list[str] | None = None, **more: Any
) -> dict[str, Any]:
    rule = {
        "apiGroups": ["setpoint.dev"],
        "apiVersions": ["*"],
        "operations": operations or ["*"],
        "resources": resources,
        **more.pop("rule", {}),
    }
    return {"name": "w.example.com", "rules": [rule], **more}


@pytest.mark.parametrize(
    ("resources", "subresource", "called"),
    [
        (["processes"], "", True),
        (["processes"], "status", False),
        (["processes/status"], "status", True),
        (["processes/status"], "", False),
        (["*/status"], "status", True),
        (["*"], "status", False),
        (["*/*"], "status", True),
        (["jobs"], "", False),
    ],
)
def test_a_rule_names_the_resource_and_its_subresource(
    resources: list[str], subresource: str, called: bool
) -> None:
    assert matches(webhook(resources), attrs("UPDATE", subresource)) is called


def test_a_rule_names_operations_groups_and_scope() -> None:
    assert not matches(webhook(["processes"], ["DELETE"]), attrs("CREATE"))
    assert matches(webhook(["processes"], ["CREATE", "DELETE"]), attrs("CREATE"))
    assert not matches(webhook(["processes"], rule={"apiGroups": [""]}), attrs())
    assert not matches(webhook(["processes"], rule={"scope": "Cluster"}), attrs())
    assert matches(webhook(["processes"], rule={"scope": "Namespaced"}), attrs())


def test_selectors_read_the_object_and_the_namespace_name_label() -> None:
    picky = webhook(["processes"], objectSelector={"matchLabels": {"tier": "web"}})
    assert matches(picky, attrs(tier="web"))
    assert not matches(picky, attrs(tier="db"))
    in_team = {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}
    assert matches(webhook(["processes"], namespaceSelector=in_team), attrs())
    elsewhere = {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["b"]}
        ]
    }
    assert not matches(webhook(["processes"], namespaceSelector=elsewhere), attrs())


def test_the_review_request_is_admission_review_v1() -> None:
    review = review_request(attrs("UPDATE", "status"), "uid-1")
    assert review["apiVersion"] == "admission.k8s.io/v1"
    request = review["request"]
    assert request["uid"] == "uid-1"
    assert request["resource"] == {
        "group": "setpoint.dev",
        "version": "v1alpha1",
        "resource": "processes",
    }
    assert request["subResource"] == "status"
    assert request["namespace"] == "team-a"
    assert request["userInfo"] == {"username": "alice"}
    assert request["options"] == {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"}


def answer(**response: Any) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def test_answers_are_read_as_kube_apiserver_reads_them() -> None:
    denied = read_review(answer(uid="u", allowed=False), "u", mutating=False)
    assert (denied.allowed, denied.code, denied.message) == (False, 403, "")
    patch = [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
    encoded = base64.b64encode(orjson.dumps(patch)).decode()
    allowed = read_review(
        answer(uid="u", allowed=True, patch=encoded, patchType="JSONPatch"), "u", mutating=True
    )
    assert allowed.patch == patch


PATCH = base64.b64encode(b'[{"op": "remove", "path": "/metadata/labels"}]').decode()


@pytest.mark.parametrize(
    ("body", "mutating"),
    [
        pytest.param(answer(uid="v", allowed=True), True, id="another uid"),
        pytest.param(answer(uid="u"), True, id="no allowed"),
        pytest.param(
            answer(uid="u", allowed=True, patch=PATCH, patchType="JSONPatch"),
            False,
            id="a validating webhook's patch",
        ),
        pytest.param(answer(uid="u", allowed=True, patch=PATCH), True, id="no patchType"),
        pytest.param(
            answer(uid="u", allowed=True, patch="%%", patchType="JSONPatch"), True, id="not base64"
        ),
        pytest.param(
            {**answer(uid="u", allowed=True), "apiVersion": "admission.k8s.io/v1beta1"},
            True,
            id="v1beta1",
        ),
        pytest.param(["not", "a", "review"], True, id="no review"),
    ],
)
def test_an_answer_that_is_not_a_review_of_this_request_is_a_failed_call(
    body: Any, mutating: bool
) -> None:
    with pytest.raises(WebhookFailed):
        read_review(body, "u", mutating=mutating)


def configuration(kind: Any = VALIDATING, **webhook: Any) -> dict[str, Any]:
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {"name": "c"},
        "webhooks": [
            {
                "name": "w.example.com",
                "clientConfig": {"url": "https://127.0.0.1:9443/x"},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1", "v1beta1"],
                **webhook,
            }
        ],
    }


def test_configurations_as_kopf_writes_them_validate_with_defaults() -> None:
    obj = configuration(MUTATING, objectSelector=None, matchPolicy="Equivalent")
    MUTATING.validate(obj)
    (hook,) = obj["webhooks"]
    assert hook["failurePolicy"] == "Fail"
    assert hook["timeoutSeconds"] == 10
    assert hook["reinvocationPolicy"] == "Never"
    assert "objectSelector" not in hook


@pytest.mark.parametrize(
    ("webhook", "refusal"),
    [
        ({"clientConfig": {"service": {"namespace": "d", "name": "s"}}}, "no cluster DNS"),
        ({"clientConfig": {"url": "https://u:p@host/x"}}, "user name or password"),
        ({"clientConfig": {"url": "https://host/x?q=1"}}, "query"),
        ({"timeoutSeconds": 0}, "timeoutSeconds"),
        ({"admissionReviewVersions": ["v1beta1"]}, "AdmissionReview v1"),
        ({"matchConditions": [{"name": "x", "expression": "true"}]}, "CEL"),
        ({"sideEffects": None}, "sideEffects"),
        ({"objectSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}, "Near"),
        ({"reinvocationPolicy": "IfNeeded"}, "reinvocationPolicy"),  # validating: no such field
    ],
)
def test_configurations_are_refused_naming_the_field(webhook: dict[str, Any], refusal: str) -> None:
    with pytest.raises(Invalid, match=refusal):
        VALIDATING.validate(configuration(**webhook))


def test_two_webhooks_of_one_configuration_may_not_share_a_name() -> None:
    obj = configuration()
    obj["webhooks"].append(dict(obj["webhooks"][0]))
    with pytest.raises(Invalid, match="share a name"):
        VALIDATING.validate(obj)
