"""kopf's own webhook server (`kopf.WebhookServer`, as kopf's example 17-admission configures
it with a certificate file) and kopf's own AdmissionReview answers (`build_response`, what
its `@kopf.on.validate`/`@kopf.on.mutate` handlers' outcomes become) are understood by the
store's admission, unchanged: the client config kopf yields (its URL and caBundle) is the
configuration's, a kopf `AdmissionError` is the write's refusal with kopf's code, and kopf's
JSON patch is written."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kopf._core.actions.execution import Outcome
from kopf._core.engines.admission import build_response

import kopf
from setpoint.engine.kinds import builtin_kinds
from setpoint.errors import Forbidden
from setpoint.runtime.webhooks import install_webhooks
from setpoint.store import open_store
from setpoint.store.base import Store
from webhook_server import configuration, new_authority, server_files

API = "setpoint.dev/v1alpha1"


async def kopf_answer(request: Any, *, webhook: str | None, **_: Any) -> Any:
    """What kopf answers: `validate1` refuses objects labelled `deny`; `mutate1` patches."""
    labels = request["request"]["object"]["metadata"].get("labels") or {}
    if webhook == "validate1":
        if "deny" not in labels:
            return build_response(request=request, outcomes={}, warnings=[], jsonpatch=[])
        error = kopf.AdmissionError("Meh! I don't like it. Change the field.", code=555)
        outcomes = {kopf.HandlerId("validate1"): Outcome(final=True, exception=error)}
        return build_response(request=request, outcomes=outcomes, warnings=[], jsonpatch=[])
    patch = [{"op": "add", "path": "/spec/env", "value": {"INJECTED": "123"}}]
    return build_response(request=request, outcomes={}, warnings=[], jsonpatch=patch)


@pytest.fixture
async def client_config(tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    authority = new_authority()
    cert, key = server_files(authority, tmp_path)
    ca = tmp_path / "ca.pem"
    ca.write_bytes(authority.certificate_pem)
    server = kopf.WebhookServer(
        addr="127.0.0.1", host="127.0.0.1", certfile=cert, pkeyfile=key, cafile=ca
    )
    configs = server(kopf_answer)
    config = await anext(configs)
    try:
        yield dict(config)
    finally:
        with contextlib.suppress(StopAsyncIteration):
            await configs.aclose()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_store(
        f"sqlite:///{tmp_path / 'state.db'}", registry=builtin_kinds(), create=True
    )
    await install_webhooks(opened)
    try:
        yield opened
    finally:
        await opened.close()


def process(name: str, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": labels}
    return {"apiVersion": API, "kind": "Process", "metadata": meta, "spec": {"args": ["true"]}}


async def test_kopfs_webhook_server_and_answers_work_unchanged(
    store: Store, client_config: dict[str, Any]
) -> None:
    url = client_config["url"].rstrip("/")
    for kind, handler in (("Mutating", "mutate1"), ("Validating", "validate1")):
        config = {**client_config, "url": f"{url}/{handler}"}  # as kopf injects handler ids
        await store.create(configuration(f"{kind}WebhookConfiguration", handler, config))
    with pytest.raises(Forbidden) as refused:
        await store.create(process("wrong", deny="yes"))
    assert refused.value.code == 555
    assert str(refused.value) == (
        'admission webhook "validate1.webhooks.test" denied the request: '
        "Meh! I don't like it. Change the field."
    )
    written = await store.create(process("right"))
    assert written["spec"]["env"] == {"INJECTED": "123"}
