"""Admission webhooks in the store's write path, with a real HTTPS webhook server (its own CA)
and the real HTTPS caller, on a real SQLite store: every writer's create, update, patch,
status write and delete is shown to the webhooks its rules match; a denial or a failure under
`failurePolicy: Fail` leaves nothing written; mutations are written; a dry run calls only
webhooks without side effects, and writes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from setpoint.engine.kinds import builtin_kinds
from setpoint.errors import BadRequest, Forbidden, Invalid, NotFound, WebhookFailed
from setpoint.model import Kind
from setpoint.runtime.webhooks import HttpsWebhookCaller, install_webhooks
from setpoint.store import open_store
from setpoint.store.base import Store, WriteOptions
from setpoint.store.sqlite import SqliteStore
from setpoint.store.webhooks import WebhookAdmission
from webhook_server import WebhookServer, configuration, new_authority, webhook_server

API = "setpoint.dev/v1alpha1"
VALIDATING = "ValidatingWebhookConfiguration"
MUTATING = "MutatingWebhookConfiguration"


class CountingStore(SqliteStore):
    """A real SQLite store that counts the gets it serves."""

    gets = 0

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = "default"
    ) -> dict[str, Any]:
        self.gets += 1
        return await super().get(api_version, kind, name, namespace)


@pytest.fixture
def hook(tmp_path: Path) -> Iterator[WebhookServer]:
    with webhook_server(tmp_path) as running:
        yield running


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await open_store(
        f"sqlite:///{tmp_path / 'state.db'}", registry=builtin_kinds(), create=True
    )
    assert await install_webhooks(opened)
    try:
        yield opened
    finally:
        await opened.close()


def process(name: str, **labels: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": API, "kind": "Process", "metadata": metadata, "spec": {"args": ["true"]}}


async def absent(store: Store, name: str) -> bool:
    try:
        await store.get(API, "Process", name)
    except NotFound:
        return True
    return False


async def test_a_denial_refuses_the_write_with_the_webhooks_message(
    store: Store, hook: WebhookServer
) -> None:
    await store.create(configuration(VALIDATING, "no", hook.client_config("deny")))
    with pytest.raises(Forbidden) as refused:
        await store.create(process("web"))
    assert str(refused.value) == (
        'admission webhook "no.webhooks.test" denied the request: no thanks'
    )
    assert refused.value.code == 403
    assert await absent(store, "web")
    request = hook.requests("deny")[0]
    assert request["operation"] == "CREATE"
    assert request["kind"] == {"group": "setpoint.dev", "version": "v1alpha1", "kind": "Process"}
    assert request["resource"]["resource"] == "processes"
    assert request["object"]["metadata"]["name"] == "web"
    assert request["oldObject"] is None
    assert request["dryRun"] is False


async def test_a_denial_keeps_the_webhooks_code(store: Store, hook: WebhookServer) -> None:
    await store.create(configuration(VALIDATING, "teapot", hook.client_config("deny-418")))
    with pytest.raises(Forbidden) as refused:
        await store.create(process("web"))
    assert refused.value.code == 418
    assert "teapot" in str(refused.value)


async def test_a_mutating_webhooks_patch_is_written_and_validating_ones_see_it(
    store: Store, hook: WebhookServer
) -> None:
    await store.create(configuration(MUTATING, "labeller", hook.client_config("label")))
    await store.create(configuration(VALIDATING, "watcher", hook.client_config("allow")))
    written = await store.create(process("web", team="a"))
    assert written["metadata"]["labels"] == {"team": "a", "webhook": "was-here"}
    stored = await store.get(API, "Process", "web")
    assert stored["metadata"]["labels"] == {"team": "a", "webhook": "was-here"}
    seen = hook.requests("allow")[0]["object"]["metadata"]["labels"]
    assert seen == {"team": "a", "webhook": "was-here"}  # validating after mutating


async def test_updates_patches_and_deletes_are_shown_with_the_object_as_it_was(
    store: Store, hook: WebhookServer
) -> None:
    rules = [
        {
            "apiGroups": ["*"],
            "apiVersions": ["*"],
            "operations": ["*"],
            "resources": ["processes"],
        }
    ]
    await store.create(
        configuration(MUTATING, "labeller", hook.client_config("label"), rules=rules)
    )
    created = await store.create(process("web"))
    patch = {"metadata": {"labels": {"b": "2", "webhook": None}}}
    patched = await store.patch(API, "Process", "web", patch)
    assert patched["metadata"]["labels"] == {"b": "2", "webhook": "was-here"}
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    update = hook.requests("label")[1]
    assert update["operation"] == "UPDATE"
    assert update["oldObject"]["metadata"]["labels"] == {"webhook": "was-here"}
    assert update["object"]["metadata"]["labels"] == {"b": "2"}
    await store.delete(API, "Process", "web")
    delete = hook.requests("label")[2]
    assert delete["operation"] == "DELETE"
    assert delete["object"] is None
    assert delete["oldObject"]["metadata"]["name"] == "web"
    assert await absent(store, "web")


async def test_status_writes_pass_only_webhooks_of_the_status_subresource(
    store: Store, hook: WebhookServer
) -> None:
    status_rules = [
        {
            "apiGroups": ["setpoint.dev"],
            "apiVersions": ["v1alpha1"],
            "operations": ["UPDATE"],
            "resources": ["processes/status"],
        }
    ]
    await store.create(
        configuration(VALIDATING, "status", hook.client_config("deny"), rules=status_rules)
    )
    created = await store.create(process("web"))  # the object itself: not matched
    with pytest.raises(Forbidden, match="denied the request: no thanks"):
        await store.update_status({**created, "status": {"phase": "Running"}})
    request = hook.requests("deny")[0]
    assert request["subResource"] == "status"
    stored = await store.get(API, "Process", "web")
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_an_object_selector_chooses_the_objects_shown(
    store: Store, hook: WebhookServer
) -> None:
    await store.create(
        configuration(
            VALIDATING,
            "picky",
            hook.client_config("deny"),
            objectSelector={"matchLabels": {"guarded": "yes"}},
        )
    )
    await store.create(process("free"))
    with pytest.raises(Forbidden):
        await store.create(process("guarded", guarded="yes"))
    assert [r["name"] for r in hook.requests("deny")] == ["guarded"]


async def test_a_timeout_under_fail_refuses_and_under_ignore_lets_the_write_go_on(
    store: Store, hook: WebhookServer
) -> None:
    strict = configuration(VALIDATING, "strict", hook.client_config("hang"), timeoutSeconds=1)
    await store.create(strict)
    with pytest.raises(WebhookFailed) as failed:
        await store.create(process("web"))
    assert str(failed.value).startswith(
        'Internal error occurred: failed calling webhook "strict.webhooks.test": Post "https://'
    )
    assert "timeoutSeconds" in str(failed.value)
    assert await absent(store, "web")
    await store.delete("admissionregistration.k8s.io/v1", VALIDATING, "strict", None)
    lenient = configuration(
        VALIDATING,
        "lenient",
        hook.client_config("hang"),
        timeoutSeconds=1,
        failurePolicy="Ignore",
    )
    await store.create(lenient)
    await store.create(process("web"))
    assert not await absent(store, "web")


async def test_a_server_the_ca_bundle_does_not_vouch_for_is_a_failed_call(
    store: Store, hook: WebhookServer
) -> None:
    other = new_authority("another CA").bundle
    await store.create(
        configuration(VALIDATING, "wrong-ca", hook.client_config("allow", bundle=other))
    )
    with pytest.raises(WebhookFailed, match="certificate verify failed"):
        await store.create(process("web"))
    assert await absent(store, "web")
    assert hook.requests("allow") == []


async def test_an_answer_that_is_no_review_is_a_failed_call(
    store: Store, hook: WebhookServer
) -> None:
    await store.create(configuration(VALIDATING, "garbled", hook.client_config("not-json")))
    with pytest.raises(WebhookFailed, match="not JSON"):
        await store.create(process("web"))


async def test_a_dry_run_calls_webhooks_without_side_effects_and_writes_nothing(
    store: Store, hook: WebhookServer
) -> None:
    await store.create(configuration(MUTATING, "labeller", hook.client_config("label")))
    dry = WriteOptions(dry_run=True)
    shown = await store.create(process("web"), options=dry)
    assert shown["metadata"]["labels"] == {"webhook": "was-here"}
    assert hook.requests("label")[0]["dryRun"] is True
    assert hook.requests("label")[0]["options"]["dryRun"] == ["All"]
    assert await absent(store, "web")
    await store.create(
        configuration(VALIDATING, "effects", hook.client_config("allow"), sideEffects="Some")
    )
    with pytest.raises(BadRequest, match=r'"effects\.webhooks\.test" does not support dry run'):
        await store.create(process("web"), options=dry)
    assert hook.requests("allow") == []
    await store.create(process("web"))  # a real write calls it
    assert len(hook.requests("allow")) == 1


async def test_configurations_are_validated_as_kubernetes_validates_them(store: Store) -> None:
    async def refusal(obj: dict[str, Any]) -> str:
        with pytest.raises(Invalid) as refused:
            await store.create(obj)
        return str(refused.value)

    assert "service: setpoint has no cluster DNS" in await refusal(
        configuration(VALIDATING, "bad", {"service": {"namespace": "d", "name": "s"}})
    )
    assert "want https://" in await refusal(
        configuration(VALIDATING, "bad", {"url": "http://127.0.0.1:1/x"})
    )
    assert "timeoutSeconds" in await refusal(
        configuration(VALIDATING, "bad", {"url": "https://127.0.0.1:1/x"}, timeoutSeconds=31)
    )
    assert "caBundle" in await refusal(
        configuration(VALIDATING, "bad", {"url": "https://127.0.0.1:1/x", "caBundle": "%%"})
    )
    assert "sideEffects" in await refusal(
        configuration(VALIDATING, "bad", {"url": "https://127.0.0.1:1/x"}, sideEffects="Maybe")
    )


async def test_a_configuration_another_process_writes_applies_to_this_ones_writes(
    tmp_path: Path, store: Store, hook: WebhookServer
) -> None:
    other = await open_store(f"sqlite:///{tmp_path / 'state.db'}", registry=builtin_kinds())
    try:
        await other.create(configuration(VALIDATING, "theirs", hook.client_config("deny")))
    finally:
        await other.close()
    assert isinstance(store, SqliteStore)
    admission = store.webhooks
    assert admission is not None
    async with asyncio.timeout(30):  # learnt as the store polls the log: no event to wait on
        while "theirs" not in admission.configurations():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    with pytest.raises(Forbidden, match=r'"theirs\.webhooks\.test" denied'):
        await store.create(process("web"))


async def test_a_store_with_no_configuration_reads_nothing_more_per_write(
    tmp_path: Path, hook: WebhookServer
) -> None:
    counting = await CountingStore(str(tmp_path / "count.db"), builtin_kinds()).open()
    try:
        assert await install_webhooks(counting)
        await counting.create(
            configuration(
                VALIDATING,
                "jobs-only",
                hook.client_config("deny"),
                rules=[
                    {
                        "apiGroups": ["setpoint.dev"],
                        "apiVersions": ["*"],
                        "operations": ["*"],
                        "resources": ["jobs"],
                    }
                ],
            )
        )
        gets = counting.gets
        await counting.create(process("web"))
        await counting.patch(API, "Process", "web", {"metadata": {"labels": {"a": "b"}}})
        assert counting.gets == gets  # no webhook names processes: no read before the write
    finally:
        await counting.close()


async def test_a_broken_webhook_for_everything_can_still_be_removed(
    store: Store, hook: WebhookServer
) -> None:
    everything = [
        {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*/*"]}
    ]
    await store.create(
        configuration(VALIDATING, "all", hook.client_config("deny"), rules=everything)
    )
    with pytest.raises(Forbidden):
        await store.create(process("web"))
    await store.delete("admissionregistration.k8s.io/v1", VALIDATING, "all", None)
    await store.create(process("web"))
    assert [r["name"] for r in hook.requests("deny")] == ["web"]


async def test_a_patch_whose_object_changes_during_admission_is_admitted_again(
    store: Store, hook: WebhookServer
) -> None:
    await store.create(process("web"))
    await store.create(configuration(MUTATING, "labeller", hook.client_config("label")))
    loop = asyncio.get_running_loop()

    def meanwhile(path: str, request: dict[str, Any]) -> None:
        """On the first review only: another writer changes the object under admission."""
        hook.before_answer = None
        other = {"metadata": {"annotations": {"meanwhile": "yes"}}}
        asyncio.run_coroutine_threadsafe(store.patch(API, "Process", "web", other), loop).result()

    hook.before_answer = meanwhile
    patched = await store.patch(API, "Process", "web", {"spec": {"args": ["false"]}})
    assert patched["spec"]["args"] == ["false"]
    assert patched["metadata"]["annotations"] == {"meanwhile": "yes"}  # not overwritten
    assert patched["metadata"]["labels"] == {"webhook": "was-here"}
    reviews = [r["oldObject"]["metadata"].get("annotations") for r in hook.requests("label")]
    assert reviews == [None, None, {"meanwhile": "yes"}]  # ours, the other's, ours again


async def test_a_dependency_a_webhook_adds_is_checked_for_cycles(
    store: Store, hook: WebhookServer
) -> None:
    a = process("a")
    a["spec"]["dependsOn"] = [{"kind": "Process", "name": "b"}]
    await store.create(a)
    await store.create(process("b"))
    selector = {"matchLabels": {"cycle": "yes"}}
    await store.create(
        configuration(
            MUTATING, "depend", hook.client_config("depend-on-a"), objectSelector=selector
        )
    )
    with pytest.raises(Invalid, match="dependsOn cycle"):
        await store.patch(API, "Process", "b", {"metadata": {"labels": {"cycle": "yes"}}})
    assert (await store.get(API, "Process", "b"))["spec"]["dependsOn"] == []


def test_an_older_state_of_a_configuration_learnt_late_is_ignored() -> None:
    admission = WebhookAdmission(HttpsWebhookCaller())

    def at(revision: int) -> dict[str, Any]:
        obj = configuration(VALIDATING, "late", {"url": "https://127.0.0.1:1/x"})
        obj["metadata"]["resourceVersion"] = str(revision)
        return obj

    admission.learn(at(5), deleted=False)
    admission.learn(at(7), deleted=True)  # deleted, learnt from the log...
    admission.learn(at(5), deleted=False)  # ...before a list read earlier returns
    assert admission.configurations() == []
    admission.learn(at(9), deleted=False)  # created again
    assert admission.configurations() == ["late"]


async def test_a_namespace_selector_reads_the_namespaces_labels(
    tmp_path: Path, hook: WebhookServer
) -> None:
    registry = builtin_kinds()
    if not registry.registered("v1", "Namespace"):  # until the core kinds have it
        registry.register(Kind("v1", "Namespace", plural="namespaces", namespaced=False))
    opened = await open_store(f"sqlite:///{tmp_path / 'ns.db'}", registry=registry, create=True)
    try:
        await install_webhooks(opened)
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
        namespace["metadata"]["labels"] = {"env": "prod"}
        await opened.create(namespace)
        prod = {"matchLabels": {"env": "prod"}}
        await opened.create(
            configuration(VALIDATING, "prod", hook.client_config("deny"), namespaceSelector=prod)
        )
        await opened.create(process("web"))  # in default: no such label
        in_prod = process("web")
        in_prod["metadata"]["namespace"] = "team-a"
        with pytest.raises(Forbidden, match="no thanks"):
            await opened.create(in_prod)
        assert [r["namespace"] for r in hook.requests("deny")] == ["team-a"]
    finally:
        await opened.close()


@pytest.mark.parametrize(("policy", "calls"), [("IfNeeded", 2), ("Never", 1)])
async def test_a_webhook_that_asks_is_called_again_once_a_later_one_changed_the_object(
    store: Store, hook: WebhookServer, policy: str, calls: int
) -> None:
    """As Kubernetes: `reinvocationPolicy: IfNeeded` calls a mutating webhook once more when
    one after it changed the object, and shows it the object as changed."""
    early = configuration(MUTATING, "a-early", hook.client_config("allow"))
    early["webhooks"][0]["reinvocationPolicy"] = policy
    await store.create(early)
    late = configuration(MUTATING, "b-labeller", hook.client_config("label"))
    late["webhooks"][0]["reinvocationPolicy"] = "IfNeeded"  # nothing changes after it
    await store.create(late)
    await store.create(process("web"))
    seen = [r["object"]["metadata"].get("labels") for r in hook.requests("allow")]
    assert seen == [None, {"webhook": "was-here"}][:calls]
    assert len(hook.requests("label")) == 1
    stored = await store.get(API, "Process", "web")
    assert stored["metadata"]["labels"] == {"webhook": "was-here"}
