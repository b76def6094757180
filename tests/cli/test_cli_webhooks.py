"""The CLI's own writes to the store file pass the admission webhooks configured there, as
the API's do: `setpoint apply` of an object a webhook denies is one error line in
kube-apiserver's words, nothing written; a mutating webhook's label is stored. A real HTTPS
webhook server of the test's own, the real command line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_kit import CLI, greeting
from test_cli_errors import one_error

from webhook_server import WebhookServer, configuration, webhook_server

RULES = [
    {
        "apiGroups": ["example.com"],
        "apiVersions": ["*"],
        "operations": ["CREATE", "UPDATE"],
        "resources": ["greetings"],
    }
]


@pytest.fixture
def hook(tmp_path: Path) -> Iterator[WebhookServer]:
    with webhook_server(tmp_path) as running:
        yield running


def test_apply_passes_the_webhooks_configured_in_the_store(cli: CLI, hook: WebhookServer) -> None:
    deny = configuration(
        "ValidatingWebhookConfiguration",
        "deny",
        hook.client_config("deny"),
        rules=RULES,
        objectSelector={"matchLabels": {"guarded": "yes"}},
    )
    label = configuration(
        "MutatingWebhookConfiguration", "label", hook.client_config("label"), rules=RULES
    )
    cli.ok("apply", "-f", str(cli.write("hooks.yaml", deny, label)))
    guarded = greeting("guarded", labels={"guarded": "yes"})
    line = one_error(cli("apply", "-f", str(cli.write("g.yaml", guarded))))
    assert 'admission webhook "deny.webhooks.test" denied the request: no thanks' in line
    assert cli("get", "greeting", "guarded").code == 1
    cli.ok("apply", "-f", str(cli.write("h.yaml", greeting("free"))))
    stored = cli.ok("get", "greeting", "free", "-o", "json").json()
    assert stored["metadata"]["labels"] == {"webhook": "was-here"}


def test_delete_passes_them_too(cli: CLI, hook: WebhookServer) -> None:
    deletes = [{**RULES[0], "operations": ["DELETE"]}]
    keep = configuration(
        "ValidatingWebhookConfiguration",
        "keep",
        hook.client_config("deny"),
        rules=deletes,
        objectSelector={"matchLabels": {"protected": "yes"}},
    )
    kept = greeting("kept", labels={"protected": "yes"})
    cli.ok("apply", "-f", str(cli.write("k.yaml", keep, kept)))
    line = one_error(cli("delete", "greeting", "kept"))
    assert 'admission webhook "keep.webhooks.test" denied the request: no thanks' in line
    assert cli.ok("get", "greeting", "kept", "-o", "json").json()["metadata"]["name"] == "kept"
    assert [r["operation"] for r in hook.requests("deny")] == ["DELETE"]
