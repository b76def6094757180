"""The schemas of admissionregistration.k8s.io/v1 `ValidatingWebhookConfiguration` and
`MutatingWebhookConfiguration` (their top-level `webhooks`), checked as kube-apiserver checks
them, with what setpoint cannot do refused by name: a `clientConfig.service` (setpoint has no
cluster DNS to resolve it; give `clientConfig.url`) and `matchConditions` (CEL).

Only the shapes: which webhook a write calls, and how, is `setpoint.model.webhooks`. The one
module of this pair that imports pydantic, named lazily by the kinds. No I/O.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from setpoint.errors import Invalid
from setpoint.model.schema import Schema
from setpoint.model.selectors import Selector


class ServiceReference(Schema):
    """A Service in the cluster: refused (see the module docstring), kept to name it."""

    namespace: str
    name: str
    path: str | None = None
    port: int = 443


class WebhookClientConfig(Schema):
    """Where the webhook listens: an `https://` URL, and the PEM certificates (base64) that
    its server's certificate must chain to (none: the system's trusted roots)."""

    url: str | None = None
    service: ServiceReference | None = None
    ca_bundle: str | None = None

    @model_validator(mode="after")
    def _one_place(self) -> WebhookClientConfig:
        if self.service is not None:
            raise ValueError(
                "service: setpoint has no cluster DNS to find a Service by; give url "
                "(https://host:port/path) instead"
            )
        if not self.url:
            raise ValueError("url: required (https://host:port/path)")
        return self

    @field_validator("url")
    @classmethod
    def _https(cls, url: str | None) -> str | None:
        if url is None:
            return url
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"{url!r}: want https://host[:port]/path")
        if parts.username is not None or parts.password is not None:
            raise ValueError("a webhook URL may not hold a user name or password")
        if parts.query or parts.fragment:
            raise ValueError("a webhook URL may not have a query or a fragment")
        return url

    @field_validator("ca_bundle")
    @classmethod
    def _pem(cls, bundle: str | None) -> str | None:
        if bundle is None:
            return bundle
        try:
            pem = base64.b64decode(bundle, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("want base64 of PEM certificates") from None
        if b"-----BEGIN CERTIFICATE-----" not in pem:
            raise ValueError("want base64 of PEM certificates (no certificate found)")
        return bundle


Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT", "*"]


class RuleWithOperations(Schema):
    """Which writes a webhook is called for: every list matches all with `*`."""

    api_groups: list[str] = Field(default_factory=list)
    api_versions: list[str] = Field(default_factory=list)
    resources: list[str] = Field(default_factory=list)
    operations: list[Operation] = Field(default_factory=list)
    scope: Literal["Cluster", "Namespaced", "*"] = "*"


def _label_selector(value: Any) -> Any:
    if value is not None:
        try:
            Selector.from_dict(value)
        except Invalid as exc:
            raise ValueError(str(exc)) from None
    return value


class ValidatingWebhook(Schema):
    """One webhook of a `ValidatingWebhookConfiguration`."""

    name: str = Field(min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    client_config: WebhookClientConfig
    rules: list[RuleWithOperations] = Field(default_factory=list)
    failure_policy: Literal["Ignore", "Fail"] = "Fail"
    match_policy: Literal["Exact", "Equivalent"] = "Equivalent"
    namespace_selector: dict[str, Any] | None = None
    object_selector: dict[str, Any] | None = None
    side_effects: Literal["None", "NoneOnDryRun", "Some", "Unknown"]
    timeout_seconds: int = Field(default=10, ge=1, le=30)
    admission_review_versions: list[str]
    match_conditions: list[Any] | None = None

    _selectors = field_validator("namespace_selector", "object_selector")(_label_selector)

    @field_validator("admission_review_versions")
    @classmethod
    def _speaks_v1(cls, versions: list[str]) -> list[str]:
        if "v1" not in versions:
            raise ValueError("setpoint speaks AdmissionReview v1 only: include v1")
        return versions

    @field_validator("match_conditions")
    @classmethod
    def _no_cel(cls, conditions: list[Any] | None) -> list[Any] | None:
        if conditions:
            raise ValueError("matchConditions (CEL expressions) are not supported by setpoint")
        return conditions


class MutatingWebhook(ValidatingWebhook):
    """One webhook of a `MutatingWebhookConfiguration`: it may answer with a JSON patch."""

    reinvocation_policy: Literal["Never", "IfNeeded"] = "Never"


def _unique_names(webhooks: list[Any]) -> list[Any]:
    seen: set[str] = set()
    for webhook in webhooks:
        if webhook.name in seen:
            raise ValueError(f"{webhook.name!r}: two webhooks of one configuration share a name")
        seen.add(webhook.name)
    return webhooks


class ValidatingWebhookConfigurationBody(Schema):
    """The top-level fields of a `ValidatingWebhookConfiguration`."""

    webhooks: list[ValidatingWebhook] = Field(default_factory=list)

    _unique = field_validator("webhooks")(_unique_names)


class MutatingWebhookConfigurationBody(Schema):
    """The top-level fields of a `MutatingWebhookConfiguration`."""

    webhooks: list[MutatingWebhook] = Field(default_factory=list)

    _unique = field_validator("webhooks")(_unique_names)
