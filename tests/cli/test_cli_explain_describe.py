"""`setpoint describe` of an object that waits for a dependency ends with its root blocker:
the end of its chain of unmet `dependsOn` entries, that object's own reason, the chain and
the command that tells more (issue 13). A failed object does not get that section (it gets
"Probable Cause:" from the timeline, when there is one), nor does a Ready one.

The objects are written to a real SQLite store with their statuses, as the controllers
would have left them: web waits for db, which waits for db-init, which failed."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from cli_kit import CLI

from setpoint.engine import builtin_kinds
from setpoint.model import set_condition
from setpoint.store import open_store

LINE = "pg.py: the postgres user cannot reach /root/x"


def manifests() -> list[dict[str, Any]]:
    """db-init <- db <- web, and a cache nothing waits for."""
    args = [sys.executable, "-c", "pass"]
    api = "setpoint.dev/v1alpha1"
    return [
        {"apiVersion": api, "kind": "Job", "metadata": {"name": "db-init"},
         "spec": {"args": args}},
        {"apiVersion": api, "kind": "Process", "metadata": {"name": "db"},
         "spec": {"args": args,
                  "dependsOn": [{"kind": "Job", "name": "db-init", "condition": "Complete"}]}},
        {"apiVersion": api, "kind": "Deployment", "metadata": {"name": "web"},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                  "dependsOn": [{"kind": "process", "name": "db", "condition": "Ready"}],
                  "template": {"metadata": {"labels": {"app": "web"}},
                               "spec": {"args": args}}}},
        {"apiVersion": api, "kind": "Process", "metadata": {"name": "cache"},
         "spec": {"args": args}},
    ]  # fmt: skip


def set_statuses(cli: CLI) -> None:
    """As the controllers leave them: db-init Failed, db and web waiting, cache Ready."""
    conditions: dict[tuple[str, str], list[tuple[str, bool, str, str]]] = {
        ("Job", "db-init"): [
            ("Ready", False, "BackoffLimitExceeded", LINE),
            ("Failed", True, "BackoffLimitExceeded", LINE),
        ],
        ("Process", "db"): [("Ready", False, "WaitingForDependency", "waiting for Job/db-init")],
        ("Deployment", "web"): [("Ready", False, "WaitingForDependency", "waiting for Process/db")],
        ("Process", "cache"): [("Ready", True, "ProbeSucceeded", "")],
    }

    async def write() -> None:
        store = await open_store(cli.store, registry=builtin_kinds())
        try:
            for (kind, name), conds in conditions.items():
                obj = await store.get("setpoint.dev/v1alpha1", kind, name, "default")
                status: dict[str, Any] = {"observedGeneration": 1}
                for type_, value, reason, message in conds:
                    set_condition(status, type_, value, reason=reason, message=message, now=0.0)
                await store.update_status({**obj, "status": status})
        finally:
            await store.close()

    asyncio.run(write())


def test_describe_of_a_waiting_object_ends_with_its_root_blocker_and_the_chain(
    cli: CLI,
) -> None:
    cli.ok("apply", "-f", str(cli.write("app.yaml", *manifests())))
    set_statuses(cli)

    web = cli.ok("describe", "deployment/web").lines
    tail = web[web.index("Root Blocker:") :]
    assert tail[1].startswith("  Job/db-init: BackoffLimitExceeded: pg.py"), tail
    assert LINE in tail[1]
    assert tail[-2] == "  (waits along dependsOn: Deployment/web <- Process/db <- Job/db-init)"
    assert tail[-1] == "  (more: setpoint explain job/db-init)"

    db = cli.ok("describe", "process/db").lines
    assert db[-2] == "  (waits along dependsOn: Process/db <- Job/db-init)"

    for ready_or_failed in ("job/db-init", "process/cache"):
        assert "Root Blocker:" not in cli.ok("describe", ready_or_failed).lines
