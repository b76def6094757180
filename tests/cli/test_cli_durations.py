"""Every option that takes a duration reads it with the one parser: kubectl's forms (`90s`,
`1m30s`, `2h`, `500ms`) and bare seconds, and a refusal names the option and the value,
before anything is read or written. The real CLI, in a subprocess."""

from __future__ import annotations

import pytest
from cli_kit import CLI

BAD = "want a duration like 90s, 1m30s, 2h or 500ms"


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("timeline", "--since"), "--since"),
        (("logs", "web", "--since"), "--since"),
        (("wait", "--for=delete", "greeting/hello", "--timeout"), "--timeout"),
        (("rollout", "status", "deployment/web", "--timeout"), "--timeout"),
        (("tune", "--plant", "sim", "--timeout"), "--timeout"),
        (("down", "--timeout"), "--timeout"),
    ],
)
def test_a_bad_duration_is_refused_naming_the_option(
    cli: CLI, args: tuple[str, ...], option: str
) -> None:
    result = cli(*args, "1m30")
    assert (result.code, result.out, result.err) == (1, "", f"error: {option}: '1m30': {BAD}\n")


def test_kubectl_forms_are_taken(applied: CLI) -> None:
    assert applied("timeline", "--since", "1h2m3s").code == 0
    assert applied("timeline", "--since", "90").code == 0
    deployment = {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"args": ["true"]}}},
    }
    applied.ok("apply", "-f", str(applied.write("web.yaml", deployment)))
    # No engine: the rollout never ends, so the timeout (in milliseconds) does.
    status = applied("rollout", "status", "deployment/web", "--timeout", "500ms")
    assert status.code == 1
    assert status.err.startswith("error: timed out waiting for the rollout"), status
