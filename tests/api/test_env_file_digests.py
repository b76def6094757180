"""What a `view` token reads of a Process whose env file holds a short secret (a 4-digit PIN)
lets nobody recover it: the object, its list, its events, its timeline and `explain` carry
neither the value, nor a SHA-256 of the value, of its line or of the file (the old
`status.envFiles` digest was such a hash: 10,000 guesses undid it). The edit is still on the
record: `changedKeys`, `changedAt`, the event, the timeline's input change.

A real `setpoint serve` (HTTPS, tokens) on a SQLite file, the real Process controller and
recorder on the same store, a real child and a real env file. Waits are on conditions under
timeouts, never on the clock.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_kit import TIMEOUT, TOKENS, Server, start_server

from setpoint.engine import builtin_kinds
from setpoint.insight.recorder import setup as recorder_setup
from setpoint.runtime.manager import Manager, ManagerOptions
from setpoint.store import open_store
from setpoint.testing import wait_for
from setpoint.workloads.process import PROCESS, ProcessController, ProcessSettings
from setpoint.workloads.process import setup as process_setup

SLEEP = "import time\nwhile True: time.sleep(3600)"
BEFORE = b"PIN=4821\nNAME=door\n"
AFTER = b"PIN=4822\nNAME=door\n"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = start_server(tmp_path / "served")
    try:
        yield running
    finally:
        running.stop()


def env_files(obj: Any) -> list[dict[str, Any]]:
    return list(((obj or {}).get("status") or {}).get("envFiles") or [])


def guessable(*contents: bytes) -> set[str]:
    """Every SHA-256 (whole, and the 16 and 32 hex digits a status or a fingerprint may cut
    it to) of the files, of each line and of each value: what a reader could match guesses
    against."""
    texts: set[bytes] = set()
    for content in contents:
        texts |= {content, content.rstrip(b"\n")}
        for line in content.splitlines():
            texts |= {line, line + b"\n", line.split(b"=", 1)[1]}
    out: set[str] = set()
    for text in texts:
        digest = hashlib.sha256(text).hexdigest()
        out |= {digest, digest[:16], digest[:32]}
    return out


async def test_a_view_token_reads_no_digest_that_gives_back_a_pin(
    server: Server, tmp_path: Path
) -> None:
    env = tmp_path / "door.env"
    env.write_bytes(BEFORE)
    store = await open_store(server.store, builtin_kinds())
    manager = Manager(store, options=ManagerOptions(grace_period=1.0))
    settings = ProcessSettings(tmp_path / "run", tmp_path / "logs")
    processes = process_setup(manager, settings).reconciler
    assert isinstance(processes, ProcessController)
    recorder_setup(manager, store_url=server.store, log_dir=tmp_path / "logs")
    running = asyncio.create_task(manager.run())
    obj = {
        "apiVersion": PROCESS.api_version,
        "kind": PROCESS.kind,
        "metadata": {"name": "door", "namespace": "default"},
        "spec": {"args": [sys.executable, "-c", SLEEP], "envFile": [str(env)]},
    }
    try:
        await manager.wait_started()
        await store.create(obj)
        first = await wait_for(store, PROCESS, "door", lambda o: bool(env_files(o)), within=TIMEOUT)
        [seen] = env_files(first)
        env.write_bytes(AFTER)
        await wait_for(
            store,
            PROCESS,
            "door",
            lambda o: bool(env_files(o)) and env_files(o)[0] != seen,
            within=TIMEOUT,
        )
        served = await asyncio.to_thread(read_as_view, server)
        insight = "/apis/insight.setpoint.dev/v1alpha1/namespaces/default/processes/door"
        async with asyncio.timeout(TIMEOUT):
            while "envFile[" not in served[f"{insight}/timeline"] or (  # the recorder batches
                "EnvFileChanged" not in served["/api/v1/namespaces/default/events"]
            ):
                await asyncio.sleep(0.1)
                served = await asyncio.to_thread(read_as_view, server)
    finally:
        manager.stop()
        await running
        await processes.stop_all(grace=0)
        await store.close()

    [item] = env_files(httpx.Response(200, text=served[f"{api_path()}/door"]).json())
    assert item["changedKeys"] == ["PIN"]  # the edit is on the record: which key, when
    assert item["changedAt"]
    assert "EnvFileChanged" in served["/api/v1/namespaces/default/events"]
    assert "envFile[" in served[f"{insight}/timeline"]
    everything = "\n".join(served.values())
    assert "4821" not in everything
    assert "4822" not in everything
    leaked = [digest for digest in guessable(BEFORE, AFTER) if digest in everything]
    assert leaked == [], f"a reversible digest of the env file is served: {leaked}"


def api_path() -> str:
    return "/apis/setpoint.dev/v1alpha1/namespaces/default/processes"


def read_as_view(server: Server) -> dict[str, str]:
    """What a `view` token gets from every door that shows the Process: path -> body."""
    insight = "/apis/insight.setpoint.dev/v1alpha1"
    obj = f"{insight}/namespaces/default/processes/door"
    paths = [
        f"{api_path()}/door",
        api_path(),
        "/api/v1/namespaces/default/events",
        f"{obj}/timeline",
        f"{obj}/explain",
        f"{obj}/why",
        f"{insight}/timeline",
        f"{insight}/objects",
    ]
    headers = {"Authorization": f"Bearer {TOKENS['view']}"}
    out: dict[str, str] = {}
    with httpx.Client(base_url=server.url, verify=False, timeout=TIMEOUT) as client:
        for path in paths:
            response = client.get(path, headers=headers)
            assert response.status_code == 200, (path, response.text)
            out[path] = response.text
    return out
