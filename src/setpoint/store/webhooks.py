"""Admission webhooks in the store's write path: every writer's write (the API, the CLI, a
controller) that a webhook configuration matches is shown to its webhooks before anything is
written, as kube-apiserver shows it.

The store does no network I/O: the calls go through a `WebhookCaller` (one method, `call`)
that a layer above supplies (`setpoint.runtime.webhooks.HttpsWebhookCaller`, installed by
`setpoint.runtime.webhooks.install_webhooks`, which `setpoint serve` and `setpoint up` run).
A store with no caller installed calls no webhook.

`WebhookAdmission` keeps the configurations in the store (learnt as CRDs are: from this
process's writes and, on backends that share a log, from every process's committed writes)
and admits one write:

1. mutating webhooks first, in the order of their configurations' names and then as listed;
   each JSON patch is applied to the object the next one sees; then, once, each one with
   `reinvocationPolicy: IfNeeded` that a later one changed the object after;
2. then validating webhooks, all of which see the final object;
3. a denial is `Forbidden` (or the webhook's code) with `admission webhook "NAME" denied the
   request: MESSAGE`; a call that fails or times out (`timeoutSeconds`) is `WebhookFailed`
   under `failurePolicy: Fail` and skipped under `Ignore`;
4. writes of the configurations themselves pass no webhook, so a broken one can always be
   removed;
5. the warnings webhooks answer with are collected in `admission_warnings` when the caller
   set it (the API server sends them as `Warning` headers);
6. on a dry run, a webhook whose `sideEffects` is `Some` or `Unknown` is not called and the
   dry run is refused (`BadRequest`), as Kubernetes does.

`Backend._write` then writes what was admitted, pinned to the object's resourceVersion as
read (`Write.admitted`): if the object changed meanwhile, admission runs again (for a patch
or a delete, which name no version; an update's stale version is the writer's `Conflict`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import replace
from typing import Any, Protocol

from setpoint.errors import BadRequest, Forbidden, Invalid, WebhookFailed
from setpoint.model import Object, apply_patch
from setpoint.model.meta import object_key
from setpoint.model.webhooks import (
    MUTATING,
    Attributes,
    Operation,
    Verdict,
    ca_bundle_of,
    denial_message,
    is_configuration,
    matches,
    read_review,
    review_request,
    rules_match,
)
from setpoint.store.rules import Write

log = logging.getLogger("setpoint.webhooks")

admission_warnings: ContextVar[list[str] | None] = ContextVar("admission_warnings", default=None)
"""Where the warnings webhooks answer with are collected for the caller of a write (the API
server sets a list per request and sends them as `Warning` headers, as kube-apiserver does);
None: nobody collects them."""

_OPERATIONS: dict[str, Operation] = {
    "create": "CREATE",
    "update": "UPDATE",
    "patch": "UPDATE",
    "update_status": "UPDATE",
    "delete": "DELETE",
}


NamespaceLabels = Callable[[str], Awaitable[Mapping[str, str]]]
"""Reads the labels of a namespace (none if it has none, or there is no such object)."""


class WebhookCaller(Protocol):
    """Sends one AdmissionReview to a webhook and returns the JSON it answered, decoded."""

    async def call(
        self, url: str, review: dict[str, Any], *, ca_bundle: bytes | None, timeout_seconds: float
    ) -> Any:
        """POST `review` to `url` over HTTPS, trusting only `ca_bundle` (PEM; None: the
        system's roots), within `timeout_seconds`; `WebhookFailed` (a one-line reason) if it
        cannot."""
        ...


class WebhookAdmission:
    """The webhook configurations a store holds and how they admit its writes; see the
    module docstring."""

    def __init__(self, caller: WebhookCaller) -> None:
        self.caller = caller
        self._mutating: dict[str, list[dict[str, Any]]] = {}
        self._validating: dict[str, list[dict[str, Any]]] = {}
        self._revisions: dict[tuple[str, str], int] = {}
        """The revision of what was learnt last of each configuration (deleted ones too), so
        that an older state learnt later (a list read before a change it learns after) is
        ignored."""

    def learn(self, obj: Object, *, deleted: bool) -> None:
        """Keep (or, `deleted`, forget) the configuration `obj` as written, unless a newer
        state of it was learnt already."""
        configurations = self._mutating if obj["kind"] == MUTATING.kind else self._validating
        name = obj["metadata"]["name"]
        revision = int(obj["metadata"].get("resourceVersion") or 0)
        if revision < self._revisions.get((obj["kind"], name), 0):
            return
        self._revisions[obj["kind"], name] = revision
        if deleted:
            configurations.pop(name, None)
        else:
            configurations[name] = list(obj.get("webhooks") or [])

    def learn_entry(self, api_version: str, kind: str, obj: Object, *, deleted: bool) -> None:
        """`learn` an entry of the log if it is a configuration."""
        if is_configuration(api_version, kind):
            self.learn(obj, deleted=deleted)

    def configurations(self) -> list[str]:
        """The names of the configurations known now (mutating, then validating)."""
        return sorted(self._mutating) + sorted(self._validating)

    def concerns(self, write: Write) -> bool:
        """Whether a webhook's rules name `write` (its selectors not yet looked at): the
        one check a write pays when none does. Writes of the configurations themselves
        pass no webhook (as in Kubernetes: a broken webhook cannot lock its own removal)."""
        if not (self._mutating or self._validating):
            return False
        if is_configuration(write.kind.api_version, write.kind.kind):
            return False
        attrs = attributes(write, None, None)
        return any(
            rules_match(webhook, attrs)
            for configurations in (self._mutating, self._validating)
            for webhooks in configurations.values()
            for webhook in webhooks
        )

    async def admit(
        self, attrs: Attributes, namespace_labels: NamespaceLabels | None = None
    ) -> Object | None:
        """The object as the matching webhooks leave it (`attrs.object` when none changes
        it; None for a delete), or raise as the module docstring says. `namespace_labels`
        reads the labels of the write's namespace, for `namespaceSelector`s (read once, only
        if a webhook whose rules match has one)."""
        labels: list[Mapping[str, str]] = []

        async def matching(
            configurations: dict[str, list[dict[str, Any]]],
        ) -> list[tuple[str, dict[str, Any]]]:
            found = []
            for configuration in sorted(configurations):
                for webhook in configurations[configuration]:
                    if not rules_match(webhook, attrs):
                        continue
                    wants_labels = webhook.get("namespaceSelector") and attrs.namespace
                    if wants_labels and namespace_labels and not labels:
                        labels.append(await namespace_labels(attrs.namespace or ""))
                    if matches(webhook, attrs, labels[0] if labels else None):
                        found.append((webhook["name"], webhook))
            return found

        mutating = await matching(self._mutating)
        last_change = -1  # which of them last changed the object
        for index, (name, webhook) in enumerate(mutating):
            attrs, changed = await self._mutate(name, webhook, attrs)
            last_change = index if changed else last_change
        # As kube-apiserver: once more, each `reinvocationPolicy: IfNeeded` webhook that a
        # later one's change has not been shown to yet (at most once more each).
        for name, webhook in mutating[: max(last_change, 0)]:
            if webhook.get("reinvocationPolicy") == "IfNeeded":
                attrs, _ = await self._mutate(name, webhook, attrs)
        obj = attrs.object
        for name, webhook in await matching(self._validating):
            await self._ask(name, webhook, attrs, mutating=False)
        return obj

    async def _mutate(
        self, name: str, webhook: dict[str, Any], attrs: Attributes
    ) -> tuple[Attributes, bool]:
        """`attrs` with the object as the mutating webhook `name` patched it, and whether it
        changed."""
        verdict = await self._ask(name, webhook, attrs, mutating=True)
        if verdict is None or not verdict.patch or attrs.object is None:
            return attrs, False
        patched = _patched(attrs.object, verdict.patch, name)
        return replace(attrs, object=patched), patched != attrs.object

    async def _ask(
        self, name: str, webhook: dict[str, Any], attrs: Attributes, *, mutating: bool
    ) -> Verdict | None:
        """The webhook's verdict, None if its call failed and its failure policy ignores
        that; raises if it denies, or fails under `Fail`."""
        if attrs.dry_run and webhook.get("sideEffects") not in ("None", "NoneOnDryRun"):
            raise BadRequest(
                f'admission webhook "{name}" does not support dry run (its sideEffects is '
                f"{webhook.get('sideEffects')}): the dry run is refused"
            )
        uid = str(uuid.uuid4())
        review = review_request(attrs, uid)
        try:
            body = await self.caller.call(
                webhook["clientConfig"]["url"],
                review,
                ca_bundle=ca_bundle_of(webhook),
                timeout_seconds=float(webhook.get("timeoutSeconds", 10)),
            )
            verdict = read_review(body, uid, mutating=mutating)
        except WebhookFailed as exc:
            message = f'failed calling webhook "{name}": {exc}'
            if webhook.get("failurePolicy", "Fail") == "Ignore":
                log.warning("%s (failurePolicy Ignore: the write goes on)", message)
                return None
            raise WebhookFailed(f"Internal error occurred: {message}") from None
        collected = admission_warnings.get()
        if collected is not None:
            collected.extend(verdict.warnings)
        if not verdict.allowed:
            denied = Forbidden(denial_message(name, verdict))
            denied.code = verdict.code
            raise denied
        return verdict


def _patched(obj: Object, patch: list[Any], name: str) -> Object:
    try:
        patched = apply_patch(obj, patch, "json")
    except Invalid as exc:
        raise WebhookFailed(
            f'Internal error occurred: admission webhook "{name}" answered a patch that does '
            f"not apply: {exc}"
        ) from None
    if object_key(patched) != object_key(obj) or patched.get("apiVersion") != obj.get("apiVersion"):
        raise WebhookFailed(
            f'Internal error occurred: admission webhook "{name}" may not change apiVersion, '
            "kind, name or namespace"
        )
    return patched


def attributes(write: Write, proposed: Object | None, current: Object | None) -> Attributes:
    """The `Attributes` of `write`: `proposed` is the object it would leave, `current` the
    object as it is (None: there is none)."""
    _, _, namespace, name = write.key
    actor = write.options.actor
    return Attributes(
        operation=_OPERATIONS[write.op],
        kind=write.kind,
        subresource="status" if write.op == "update_status" else "",
        namespace=namespace or None,
        name=name,
        object=None if write.op == "delete" else proposed,
        old_object=None if write.op == "create" else current,
        dry_run=write.options.dry_run,
        user=actor.user if actor else None,
        field_manager=actor.manager if actor else None,
    )
