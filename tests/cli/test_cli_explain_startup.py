"""`setpoint explain` on a real start-up failure (the webapp's db-init case, issue 13): a Job
`db-init` exits 1 at once, so `db`, `migrate` and `web` wait for ever. The real `setpoint
up` runs real children and records the timeline; the real `setpoint explain` must name
db-init's exit line first, with the chain it travelled; `describe` of the failed Job ends
with it, and of the waiting web with its root blocker; `explain` of a healthy object says
nothing is wrong, of a missing one that it does not exist.

Waits on conditions (`setpoint wait`, the timeline), never sleeps."""

from __future__ import annotations

import json
import signal
import sys
import textwrap
import time
from typing import Any

import yaml
from cli_kit import CLI, TIMEOUT, Result
from test_cli_up import Up, free_port

LINE = "pg.py: the postgres user cannot reach /root/x: /root is not searchable by it"
FAILS = f"""
    import sys
    print("initialising the database", flush=True)
    print({LINE!r}, file=sys.stderr, flush=True)
    sys.exit(1)
"""
SERVES = """
    import socket, sys
    s = socket.socket()
    s.bind(("127.0.0.1", int(sys.argv[1])))
    s.listen()
    while True:
        s.accept()[0].close()
"""


def workload(kind: str, name: str, args: list[str], token: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"args": [*args, token], **spec},
    }


def python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code), *args]


def manifests(token: str) -> list[dict[str, Any]]:
    """db-init (fails) <- db <- migrate <- web, as in examples/webapp; and a healthy cache."""
    quick = {"initialSeconds": 0.2, "maxSeconds": 0.2}
    return [
        workload("Job", "db-init", python(FAILS), token, backoffLimit=1, backoff=quick),
        workload(
            "Process",
            "db",
            python(SERVES, str(free_port())),
            token,
            dependsOn=[{"kind": "Job", "name": "db-init", "condition": "Complete"}],
        ),
        workload(
            "Job",
            "migrate",
            python("print('migrated')"),
            token,
            dependsOn=[{"kind": "Process", "name": "db", "condition": "Ready"}],
        ),
        {
            "apiVersion": "setpoint.dev/v1alpha1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "dependsOn": [{"kind": "Job", "name": "migrate", "condition": "Complete"}],
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"args": [*python(SERVES, "0"), token]},
                },
            },
        },
        workload("Process", "cache", python(SERVES, str(free_port())), token),
    ]


def explain(cli: CLI, *args: str) -> Result:
    return cli("explain", *args, store=False, kinds=False)


def wait_recorded_failure(cli: CLI) -> None:
    """Until the recorder has written that db-init Failed (the store says so first): each
    call reads the timeline anew; no sleep, a deadline."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        got = cli("timeline", "job/db-init", "-o", "jsonl", store=False, kinds=False)
        assert got.code == 0, got
        entries = [json.loads(line) for line in got.lines]
        if any((e.get("condition") or {}).get("type") == "Failed" for e in entries):
            return
    raise AssertionError(f"the timeline did not show db-init failing within {TIMEOUT}s")


def test_a_start_up_failure_is_explained_by_the_root_blockers_exit_with_its_chain(
    cli: CLI, token: str
) -> None:
    app = cli.directory / "app"
    app.mkdir()
    (app / "app.yaml").write_text(yaml.safe_dump_all(manifests(token), sort_keys=False))
    up = Up(cli, app)
    try:
        up.wait_ready("cache")
        waited = cli(
            "wait", "job/db-init", "--for=condition=Failed", "--timeout", f"{TIMEOUT:.0f}s",
            store=False, kinds=False,
        )  # fmt: skip
        assert waited.code == 0, waited
        wait_recorded_failure(cli)

        web = explain(cli, "deployment/web", "-o", "json").json()
        first = web[0]
        assert first["entry"]["type"] == "exit", web[:3]
        assert first["entry"]["object"]["name"] == "db-init"
        assert LINE in first["reason"]
        assert first["path"] == ["Deployment/web", "Job/migrate", "Process/db", "Job/db-init"]
        assert "Deployment/web <- Job/migrate <- Process/db <- Job/db-init" in first["reason"]
        assert all(c["entry"].get("action") != "created" for c in web[:1])

        job = explain(cli, "job/db-init", "-o", "json").json()
        assert job[0]["entry"]["type"] == "exit"
        assert LINE in job[0]["reason"]
        assert job[0]["path"] == ["Job/db-init"]
        created = [c for c in job if c["entry"].get("action") == "created"]
        assert all(LINE in c["reason"] for c in created), [c["reason"] for c in created]

        described = cli("describe", "job/db-init", store=False, kinds=False)
        assert described.code == 0, described
        assert "Probable Cause:" in described.lines, described.out
        tail = described.lines[described.lines.index("Probable Cause:") :]
        assert 3 <= len(tail) <= 4  # the title, one or two lines, the command
        assert "Job/db-init exited with code 1" in " ".join(tail)
        assert tail[-1] == "  (more: setpoint explain job/db-init)"

        waiting = cli("describe", "deployment/web", store=False, kinds=False)
        assert waiting.code == 0, waiting
        tail = waiting.lines[waiting.lines.index("Root Blocker:") :]
        assert tail[1].startswith("  Job/db-init: "), tail
        chain = "Deployment/web <- Job/migrate <- Process/db <- Job/db-init"
        assert tail[-2:] == [
            f"  (waits along dependsOn: {chain})",
            "  (more: setpoint explain job/db-init)",
        ]

        healthy = explain(cli, "process/cache")
        assert (healthy.code, healthy.out) == (0, "Process/cache is Ready: nothing is wrong\n")
        missing = explain(cli, "process/nowhere")
        assert missing.code == 1
        assert "Process/nowhere does not exist" in missing.err
    finally:
        code, err = up.running.stop(signal.SIGTERM)
    assert code == 0, err
