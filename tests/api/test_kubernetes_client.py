"""The official `kubernetes` Python client's DynamicClient against `setpoint serve`,
through the kubeconfig the server wrote: list, create, watch."""

from __future__ import annotations

import contextlib
import queue
import threading
from typing import Any

from api_kit import TIMEOUT, Server, process
from kubernetes import config, dynamic
from urllib3.exceptions import ProtocolError


def test_dynamic_client_lists_creates_and_watches(server: Server) -> None:
    client = dynamic.DynamicClient(
        config.new_client_from_config(config_file=str(server.kubeconfig))
    )
    processes = client.resources.get(api_version="setpoint.dev/v1alpha1", kind="Process")

    processes.create(body=process("from-python", labels={"by": "client"}), namespace="default")
    assert server.stored("Process", "from-python")["metadata"]["labels"] == {"by": "client"}

    listed = processes.get(namespace="default", label_selector="by=client")
    assert [item.metadata.name for item in listed.items] == ["from-python"]

    events: queue.Queue[tuple[str, str]] = queue.Queue()

    def watch() -> None:
        with contextlib.suppress(ProtocolError):  # the server stops after the test
            for event in processes.watch(
                namespace="default", label_selector="by=client", timeout=int(TIMEOUT)
            ):
                obj: Any = event["object"]
                events.put((event["type"], obj.metadata.name))

    threading.Thread(target=watch, daemon=True).start()
    assert events.get(timeout=TIMEOUT) == ("ADDED", "from-python")  # what exists, first
    processes.create(body=process("second", labels={"by": "client"}), namespace="default")
    assert events.get(timeout=TIMEOUT) == ("ADDED", "second")
    processes.delete(name="second", namespace="default")
    assert events.get(timeout=TIMEOUT) == ("DELETED", "second")
