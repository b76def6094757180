"""Admission webhooks, decided purely: the two kinds that configure them
(admissionregistration.k8s.io/v1 `ValidatingWebhookConfiguration` and
`MutatingWebhookConfiguration`, cluster-scoped), which webhooks a write calls (`matches`),
the AdmissionReview v1 request it sends (`review_request`), and what its answer means
(`read_review`: allowed, or denied with a message and code, and a JSON patch).

As kube-apiserver: a webhook matches a write when one of its `rules` names the write's
group, version, resource (`processes`, `processes/status`, `*`, `*/status`, `*/*`),
operation (CREATE, UPDATE, DELETE) and scope, and its `objectSelector` matches the labels of
the object (or, for a delete, of the object as it was) and its `namespaceSelector` the labels
of the namespace (for a namespaced object: its `Namespace` object's labels, when the store
has one, and always `kubernetes.io/metadata.name: NAME`, as Kubernetes labels every
namespace).

The calls and their order (mutating first, then validating; `failurePolicy`, timeouts, dry
runs) are `setpoint.store.webhooks`'s; the schemas are
`setpoint.model.webhook_configuration`'s. Pure: no I/O, no clock.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from setpoint.errors import WebhookFailed
from setpoint.model.kinds import Kind
from setpoint.model.meta import Object
from setpoint.model.selectors import Selector

GROUP_VERSION = "admissionregistration.k8s.io/v1"
_SCHEMAS = "setpoint.model.webhook_configuration"

VALIDATING = Kind(
    GROUP_VERSION,
    "ValidatingWebhookConfiguration",
    plural="validatingwebhookconfigurations",
    namespaced=False,
    body=f"{_SCHEMAS}:ValidatingWebhookConfigurationBody",
)
"""Webhooks that may refuse a write, called after every mutating one."""

MUTATING = Kind(
    GROUP_VERSION,
    "MutatingWebhookConfiguration",
    plural="mutatingwebhookconfigurations",
    namespaced=False,
    body=f"{_SCHEMAS}:MutatingWebhookConfigurationBody",
)
"""Webhooks that may change (with a JSON patch) or refuse a write, called first."""

KINDS = (MUTATING, VALIDATING)

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label every namespace carries, its own name (as Kubernetes sets it)."""

Operation = Literal["CREATE", "UPDATE", "DELETE"]


def is_configuration(api_version: str, kind: str) -> bool:
    """Whether objects of this kind configure webhooks."""
    return api_version == GROUP_VERSION and kind in (MUTATING.kind, VALIDATING.kind)


@dataclass(frozen=True, slots=True)
class Attributes:
    """One write as admission sees it: `object` is the object as the write would leave it
    (None for a delete), `old_object` as it is (None for a create); `user` who writes."""

    operation: Operation
    kind: Kind
    subresource: str
    namespace: str | None
    name: str
    object: Object | None
    old_object: Object | None
    dry_run: bool
    user: str | None
    field_manager: str | None = None


def matches(
    webhook: Mapping[str, Any],
    attrs: Attributes,
    namespace_labels: Mapping[str, str] | None = None,
) -> bool:
    """Whether `webhook` (validated, wire form) is called for the write `attrs`.
    `namespace_labels`: the labels of the write's namespace (default: only its name label)."""
    if not rules_match(webhook, attrs):
        return False
    object_selector = webhook.get("objectSelector")
    if object_selector:
        selector = Selector.from_dict(object_selector)
        objects = [obj for obj in (attrs.object, attrs.old_object) if obj is not None]
        if not any(selector.matches(_labels(obj)) for obj in objects):
            return False
    namespace_selector = webhook.get("namespaceSelector")
    if namespace_selector and attrs.kind.namespaced and attrs.namespace:
        labels = {**(namespace_labels or {}), NAMESPACE_NAME_LABEL: attrs.namespace}
        if not Selector.from_dict(namespace_selector).matches(labels):
            return False
    return True


def _labels(obj: Object) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, dict) else {}


def rules_match(webhook: Mapping[str, Any], attrs: Attributes) -> bool:
    """Whether one of `webhook`'s rules names the write `attrs` (its selectors aside)."""
    return any(_rule_matches(rule, attrs) for rule in webhook.get("rules", []))


def _rule_matches(rule: Mapping[str, Any], attrs: Attributes) -> bool:
    kind = attrs.kind
    scope = rule.get("scope", "*")
    if scope != "*" and scope != ("Namespaced" if kind.namespaced else "Cluster"):
        return False
    operations = rule.get("operations", [])
    if "*" not in operations and attrs.operation not in operations:
        return False
    if not _named(rule.get("apiGroups", []), kind.group):
        return False
    if not _named(rule.get("apiVersions", []), kind.version):
        return False
    return any(
        _resource_matches(pattern, kind.plural, attrs.subresource)
        for pattern in rule.get("resources", [])
    )


def _named(names: list[str], name: str) -> bool:
    return "*" in names or name in names


def _resource_matches(pattern: str, resource: str, subresource: str) -> bool:
    if pattern == "*/*":
        return True
    wanted, _, wanted_sub = pattern.partition("/")
    if wanted not in ("*", resource):
        return False
    return wanted_sub in ("*", subresource) if wanted_sub else not subresource


def review_request(attrs: Attributes, uid: str) -> dict[str, Any]:
    """The AdmissionReview v1 that asks a webhook about `attrs`, as kube-apiserver sends it."""
    kind = attrs.kind
    group_version_kind = {"group": kind.group, "version": kind.version, "kind": kind.kind}
    resource = {"group": kind.group, "version": kind.version, "resource": kind.plural}
    options_kind = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions"}.get(
        attrs.operation, "DeleteOptions"
    )
    options: dict[str, Any] = {"apiVersion": "meta.k8s.io/v1", "kind": options_kind}
    if attrs.dry_run:
        options["dryRun"] = ["All"]
    if attrs.field_manager and attrs.operation != "DELETE":
        options["fieldManager"] = attrs.field_manager
    request: dict[str, Any] = {
        "uid": uid,
        "kind": group_version_kind,
        "resource": resource,
        "requestKind": group_version_kind,
        "requestResource": resource,
        "name": attrs.name,
        "operation": attrs.operation,
        "userInfo": {"username": attrs.user or "system:anonymous"},
        "object": attrs.object,
        "oldObject": attrs.old_object,
        "dryRun": attrs.dry_run,
        "options": options,
    }
    if attrs.subresource:
        request["subResource"] = attrs.subresource
        request["requestSubResource"] = attrs.subresource
    if attrs.namespace:
        request["namespace"] = attrs.namespace
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


@dataclass(frozen=True, slots=True)
class Verdict:
    """A webhook's answer: `allowed`; when not, its `message` and HTTP `code`; `patch`, the
    JSON patch a mutating webhook gave (None: none)."""

    allowed: bool
    message: str = ""
    code: int = 403
    patch: list[Any] | None = None
    warnings: tuple[str, ...] = ()


def read_review(body: Any, uid: str, *, mutating: bool) -> Verdict:
    """What the AdmissionReview `body` a webhook answered means; `WebhookFailed` if it is none
    (not an AdmissionReview v1, another uid, a patch from a validating webhook, a patch that
    is not a base64 JSON patch)."""
    if not isinstance(body, dict) or body.get("kind") != "AdmissionReview":
        raise WebhookFailed("the answer is not an AdmissionReview")
    if body.get("apiVersion") != "admission.k8s.io/v1":
        raise WebhookFailed(f"the answer is AdmissionReview {body.get('apiVersion')!r}, not v1")
    response = body.get("response")
    if not isinstance(response, dict):
        raise WebhookFailed("the AdmissionReview has no response")
    if response.get("uid") != uid:
        raise WebhookFailed(f"the response's uid {response.get('uid')!r} is not the request's")
    allowed = response.get("allowed")
    if not isinstance(allowed, bool):
        raise WebhookFailed("the response says neither allowed: true nor false")
    warnings = tuple(str(w) for w in response.get("warnings") or [] if isinstance(w, str))
    if not allowed:
        status = response.get("status")
        status = status if isinstance(status, dict) else {}
        code = status.get("code")
        message = status.get("message") or status.get("reason") or ""
        return Verdict(
            False,
            str(message),
            code if isinstance(code, int) and 400 <= code <= 599 else 403,
            warnings=warnings,
        )
    patch = _patch_of(response, mutating)
    return Verdict(True, patch=patch, warnings=warnings)


def _patch_of(response: dict[str, Any], mutating: bool) -> list[Any] | None:
    encoded = response.get("patch")
    if encoded is None:
        return None
    if not mutating:
        raise WebhookFailed("a validating webhook may not answer with a patch")
    if response.get("patchType") != "JSONPatch":
        raise WebhookFailed(f"patchType {response.get('patchType')!r}: want JSONPatch")
    try:
        patch = orjson.loads(base64.b64decode(encoded, validate=True))
    except (binascii.Error, ValueError, TypeError):
        raise WebhookFailed("the patch is not base64 of a JSON patch") from None
    if not isinstance(patch, list):
        raise WebhookFailed("the patch is not a list of JSON patch operations")
    return patch


def denial_message(webhook_name: str, verdict: Verdict) -> str:
    """The error of a denied write, in kube-apiserver's words."""
    message = f'admission webhook "{webhook_name}" denied the request'
    return f"{message}: {verdict.message}" if verdict.message else f"{message} without explanation"


def ca_bundle_of(webhook: Mapping[str, Any]) -> bytes | None:
    """The PEM certificates the webhook's server must chain to (None: the system's roots)."""
    bundle = webhook["clientConfig"].get("caBundle")
    return base64.b64decode(bundle) if bundle else None
