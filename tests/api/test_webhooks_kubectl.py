"""Admission webhooks through the API, as kubectl and the official Python client meet them: a
real `setpoint serve`, a real HTTPS webhook server of the test's own (its own CA), the real
kubectl. A denial is kubectl's error line in kube-apiserver's words; a mutation is stored; a
server-side dry run calls webhooks without side effects only; only admins configure
webhooks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_kit import TOKENS, Server, process
from kubernetes import client, config, dynamic
from kubernetes.client.exceptions import ApiException

from webhook_server import WebhookServer, configuration, webhook_server

VALIDATING = "ValidatingWebhookConfiguration"
MUTATING = "MutatingWebhookConfiguration"


@pytest.fixture(scope="module")
def hook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookServer]:
    with webhook_server(Path(tmp_path_factory.mktemp("webhook"))) as running:
        yield running


def for_test(kind: str, name: str, client_config: dict[str, Any], **webhook: Any) -> dict[str, Any]:
    """A configuration whose webhook sees only Processes labelled `test: NAME`."""
    selector = {"matchLabels": {"test": name}}
    return configuration(kind, name, client_config, objectSelector=selector, **webhook)


def test_kubectl_shows_a_denial_in_kube_apiservers_words(
    server: Server, hook: WebhookServer
) -> None:
    server.ok(
        "apply",
        "-f",
        str(server.write("deny.yaml", for_test(VALIDATING, "deny", hook.client_config("deny")))),
    )
    denied = server.kubectl(
        "apply", "-f", str(server.write("p.yaml", process("denied", labels={"test": "deny"})))
    )
    assert denied.code == 1
    assert 'admission webhook "deny.webhooks.test" denied the request: no thanks' in denied.err
    assert server.kubectl("get", "process", "denied").code == 1
    allowed = server.ok(
        "apply", "-f", str(server.write("q.yaml", process("allowed", labels={"test": "other"})))
    )
    assert "created" in allowed.out


def test_a_mutating_webhooks_label_is_stored(server: Server, hook: WebhookServer) -> None:
    server.ok(
        "apply",
        "-f",
        str(server.write("m.yaml", for_test(MUTATING, "mutate", hook.client_config("label")))),
    )
    server.ok(
        "create", "-f", str(server.write("r.yaml", process("labelled", labels={"test": "mutate"})))
    )
    labels = server.ok("get", "process", "labelled", "-o", "json").json()["metadata"]["labels"]
    assert labels == {"test": "mutate", "webhook": "was-here"}
    assert server.stored("Process", "labelled")["metadata"]["labels"]["webhook"] == "was-here"


def test_a_timeout_under_fail_is_an_internal_error_and_nothing_is_written(
    server: Server, hook: WebhookServer
) -> None:
    strict = for_test(VALIDATING, "slow", hook.client_config("hang"), timeoutSeconds=1)
    server.ok("apply", "-f", str(server.write("s.yaml", strict)))
    failed = server.kubectl(
        "create", "-f", str(server.write("t.yaml", process("slow", labels={"test": "slow"})))
    )
    assert failed.code == 1
    assert 'Internal error occurred: failed calling webhook "slow.webhooks.test"' in failed.err
    assert server.kubectl("get", "process", "slow").code == 1


def test_a_server_side_dry_run_is_refused_by_a_webhook_with_side_effects(
    server: Server, hook: WebhookServer
) -> None:
    effects = for_test(VALIDATING, "effects", hook.client_config("allow"), sideEffects="Unknown")
    server.ok("apply", "-f", str(server.write("e.yaml", effects)))
    path = str(server.write("u.yaml", process("dry", labels={"test": "effects"})))
    refused = server.kubectl("create", "--dry-run=server", "-f", path)
    assert refused.code == 1
    assert 'admission webhook "effects.webhooks.test" does not support dry run' in refused.err
    assert hook.requests("allow") == []
    server.ok("create", "-f", path)
    assert [r["name"] for r in hook.requests("allow")] == ["dry"]


def test_only_admins_configure_webhooks(server: Server, hook: WebhookServer) -> None:
    path = str(server.write("w.yaml", for_test(VALIDATING, "roles", hook.client_config("allow"))))
    for role in ("edit", "view"):
        refused = server.kubectl("create", "-f", path, token=TOKENS[role])
        assert refused.code == 1
        assert "Forbidden" in refused.err or "forbidden" in refused.err
    listed = server.ok("get", "validatingwebhookconfigurations", "-o", "name", token=TOKENS["edit"])
    assert "roles" not in listed.out
    server.ok("create", "-f", path, token=TOKENS["admin"])


def test_the_official_client_gets_the_denial_as_its_api_exception(
    server: Server, hook: WebhookServer
) -> None:
    api = config.new_client_from_config(config_file=str(server.kubeconfig))
    dyn = dynamic.DynamicClient(api)
    configurations = dyn.resources.get(
        api_version="admissionregistration.k8s.io/v1", kind=VALIDATING
    )
    configurations.create(body=for_test(VALIDATING, "client", hook.client_config("deny-418")))
    processes = dyn.resources.get(api_version="setpoint.dev/v1alpha1", kind="Process")
    with pytest.raises(ApiException) as refused:
        processes.create(
            body=process("from-client", labels={"test": "client"}), namespace="default"
        )
    assert refused.value.status == 418
    status = json.loads(refused.value.body)
    assert (
        status["message"] == 'admission webhook "client.webhooks.test" denied the request: teapot'
    )
    typed = client.AdmissionregistrationV1Api(api)
    names = [c.metadata.name for c in typed.list_validating_webhook_configuration().items]
    assert "client" in names


def test_kubectl_prints_a_webhooks_warnings(server: Server, hook: WebhookServer) -> None:
    warn = for_test(VALIDATING, "warn", hook.client_config("warn"))
    server.ok("apply", "-f", str(server.write("v.yaml", warn)))
    path = str(server.write("x.yaml", process("warned", labels={"test": "warn"})))
    created = server.ok("create", "-f", path)
    assert 'Warning: mind the "gap"' in created.err
    assert "created" in created.out
