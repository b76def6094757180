"""Roles by kind and verb: the built-in `view` reads everything but Secrets, `edit` also
writes (and reads Secrets) but defines no kinds, `admin` may do everything; a roles file
adds roles of its own. Through the real kubectl against a real `setpoint serve`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from api_kit import TOKENS, Server, kubectl_binary, process, start_server

from setpoint.api.auth import Role, parse_roles, parse_token_file
from setpoint.engine.kinds import builtin_kinds
from setpoint.errors import Invalid

RUNNER = "runner-token-0123456789"
ROLES = """\
process-reader:
  - kinds: [processes]
    verbs: [get, list, watch]
  - kinds: [Job]
    verbs: [create]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    kubectl_binary()
    directory = Path(tmp_path_factory.mktemp("roles"))
    (directory / "roles.yaml").write_text(ROLES)
    running = start_server(
        directory, "--roles-file", "roles.yaml", roles={RUNNER: "process-reader"}
    )
    try:
        yield running
    finally:
        running.stop()


def secret(name: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "stringData": {"password": "hunter2"},
    }


def job(name: str) -> dict[str, object]:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"args": ["true"]},
    }


def test_view_cannot_read_secrets_and_edit_can(server: Server) -> None:
    server.ok("apply", "-f", str(server.write("secret.yaml", secret("db-password"))))
    refused = server.kubectl("get", "secrets", token=TOKENS["view"])
    assert refused.code == 1
    assert "Forbidden" in refused.err, refused
    assert "hunter2" not in refused.out + refused.err
    one = server.kubectl("get", "secret", "db-password", "-o", "yaml", token=TOKENS["view"])
    assert one.code == 1
    assert "Forbidden" in one.err, one
    assert "db-password" in server.ok("get", "secrets", token=TOKENS["edit"]).out
    assert server.ok("get", "processes", token=TOKENS["view"]).code == 0


def test_a_written_role_reads_processes_creates_jobs_and_nothing_else(server: Server) -> None:
    server.ok("apply", "-f", str(server.write("p.yaml", process("runner-sees"))))
    assert "runner-sees" in server.ok("get", "processes", token=RUNNER).out
    server.ok("create", "-f", str(server.write("job.yaml", job("nightly"))), token=RUNNER)
    assert server.stored("Job", "nightly")["spec"]["args"] == ["true"]

    refused = [
        server.kubectl("create", "-f", str(server.write("p2.yaml", process("x"))), token=RUNNER),
        server.kubectl("delete", "process", "runner-sees", token=RUNNER),
        server.kubectl("get", "jobs", token=RUNNER),
        server.kubectl("get", "secrets", token=RUNNER),
        server.kubectl("label", "process", "runner-sees", "a=b", token=RUNNER),
    ]
    for result in refused:
        assert result.code == 1, result
        assert "Forbidden" in result.err, result
    stored = server.stored("Process", "runner-sees")
    assert stored["metadata"].get("deletionTimestamp") is None
    assert "a" not in (stored["metadata"].get("labels") or {})
    with server.reader() as reader:
        names = [p["metadata"]["name"] for p in reader.list("setpoint.dev/v1alpha1", "Process")[0]]
    assert "x" not in names


def test_builtin_roles_by_kind() -> None:
    kinds = builtin_kinds()
    secret_kind = kinds.resolve("secrets")
    crd = kinds.resolve("crd")
    process_kind = kinds.resolve("processes")
    assert Role.VIEW.may("list", process_kind)
    assert not Role.VIEW.may("get", secret_kind)
    assert not Role.VIEW.may("watch", secret_kind)
    assert not Role.VIEW.may("create", process_kind)
    assert Role.EDIT.may("get", secret_kind)
    assert Role.EDIT.may("create", process_kind)
    assert Role.EDIT.may("list", crd)
    assert not Role.EDIT.may("create", crd)
    assert Role.ADMIN.may("create", crd)
    assert Role.ADMIN.may("deletecollection", secret_kind)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("view: [{kinds: ['*'], verbs: ['*']}]", "a built-in role has this name"),
        (
            "r: [{kinds: [gadgets], verbs: [get]}]",
            'kinds: the server doesn\'t have a resource type "gadgets"',
        ),
        ("r: [{kinds: [processes], verbs: [run]}]", "verbs: 'run' is not one of get"),
        ("r: [{kinds: [processes]}]", "want exactly kinds and verbs"),
        ("r: []", "want a list of rules"),
        ("[a, b]", "want a mapping of role names"),
    ],
)
def test_a_roles_file_is_checked(text: str, message: str) -> None:
    import yaml

    with pytest.raises(Invalid) as refused:
        parse_roles(yaml.safe_load(text), "roles.yaml", builtin_kinds())
    assert message in str(refused.value)
    assert str(refused.value).startswith("roles.yaml")


def test_a_token_file_names_written_roles() -> None:
    import yaml

    roles = parse_roles(yaml.safe_load(ROLES), "roles.yaml", builtin_kinds())
    tokens = parse_token_file("t,runner,process-reader\nu,ann,view", "tokens", roles)
    assert tokens["t"].role is roles["process-reader"]
    assert tokens["u"].role is Role.VIEW
    with pytest.raises(Invalid, match="tokens:1: role 'nobody'"):
        parse_token_file("t,runner,nobody", "tokens", roles)


async def test_server_side_apply_needs_create_too() -> None:
    """An apply creates the object when it is missing: `patch` alone does not allow it."""
    import httpx
    import yaml

    from setpoint.api.app import create_app
    from setpoint.api.auth import Authenticator, User
    from setpoint.store import open_store

    roles = parse_roles(
        yaml.safe_load("patcher: [{kinds: [processes], verbs: [get, patch]}]"),
        "roles.yaml",
        builtin_kinds(),
    )
    store = await open_store("memory://", builtin_kinds())
    try:
        auth = Authenticator({"p": User("patcher", roles["patcher"])})
        transport = httpx.ASGITransport(app=create_app(store, auth=auth))
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", headers={"Authorization": "Bearer p"}
        ) as client:
            applied = await client.patch(
                "/apis/setpoint.dev/v1alpha1/namespaces/default/processes/new?fieldManager=me",
                content=yaml.safe_dump(process("new")).encode(),
                headers={"Content-Type": "application/apply-patch+yaml"},
            )
        assert applied.status_code == 403, applied.text
        assert "cannot create" in applied.json()["message"]
        assert (await store.list("setpoint.dev/v1alpha1", "Process", None))[0] == []
    finally:
        await store.close()
