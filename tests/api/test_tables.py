"""`setpoint.api.tables`: the meta.k8s.io Table kubectl gets shows what `setpoint get` prints
(the same columns, the same cells), the wide columns at priority 1, kubectl's columns
for Events, and each row's object as kubectl asked for it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from setpoint.api.tables import table
from setpoint.cli import render
from setpoint.errors import Invalid
from setpoint.model.crd import crd_of, kind_of
from setpoint.runtime.kinds import EVENT
from setpoint.workloads.kinds import PROCESS

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def process(name: str, *, ready: str | None = "True", restarts: int = 2) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Running", "restarts": restarts, "pid": 4242}
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": ready, "reason": "Probed"}]
    return {
        "apiVersion": PROCESS.api_version,
        "kind": "Process",
        "metadata": {
            "name": name,
            "namespace": "default",
            "creationTimestamp": "2026-01-01T11:54:30Z",
            "generation": 1,
            "resourceVersion": "7",
            "labels": {"app": "web"},
        },
        "spec": {"args": ["sleep", "1"]},
        "status": status,
    }


EVENT_OBJ = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": {"name": "web.1", "namespace": "default"},
    "involvedObject": {"kind": "Process", "name": "web"},
    "type": "Warning",
    "reason": "BackOff",
    "message": "restarting   in 10s",
    "count": 3,
    "firstTimestamp": "2026-01-01T11:50:00Z",
    "lastTimestamp": "2026-01-01T11:59:55Z",
}


def test_a_process_table_has_the_columns_setpoint_get_prints() -> None:
    answer = table(PROCESS, [process("web"), process("db", ready=None)], now=NOW)
    assert (answer["apiVersion"], answer["kind"]) == ("meta.k8s.io/v1", "Table")
    columns = [(c["name"], c["priority"]) for c in answer["columnDefinitions"]]
    assert columns == [
        ("NAME", 0),
        ("READY", 0),
        ("PHASE", 0),
        ("RESTARTS", 0),
        ("PID", 0),
        ("AGE", 0),
        ("REASON", 1),
        ("GENERATION", 1),
        ("RESOURCEVERSION", 1),
        ("LABELS", 1),
    ]
    assert answer["columnDefinitions"][0]["format"] == "name"
    assert [row["cells"] for row in answer["rows"]] == [
        ["web", "True", "Running", "2", "4242", "5m30s", "Probed", "1", "7", "app=web"],
        ["db", "-", "Running", "2", "4242", "5m30s", "-", "1", "7", "app=web"],
    ]


@pytest.mark.parametrize("wide", [False, True])
def test_the_table_and_the_cli_never_disagree(wide: bool) -> None:
    objects = [process("web"), process("db", ready="False", restarts=9)]
    for kind, items in ((PROCESS, objects), (EVENT, [EVENT_OBJ])):
        answer = table(kind, items, now=NOW)
        shown = [i for i, c in enumerate(answer["columnDefinitions"]) if wide or not c["priority"]]
        cli = render.table_for(kind, wide=wide)
        assert [answer["columnDefinitions"][i]["name"] for i in shown] == cli.header()
        for row, obj in zip(answer["rows"], items, strict=True):
            assert [row["cells"][i] for i in shown] == cli.row(obj, NOW.timestamp())


def test_events_as_kubectl_lists_them() -> None:
    answer = table(EVENT, [EVENT_OBJ], now=NOW)
    names = [c["name"] for c in answer["columnDefinitions"] if not c["priority"]]
    assert names == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    header = [c["name"] for c in answer["columnDefinitions"]]
    cells = dict(zip(header, answer["rows"][0]["cells"], strict=True))
    assert cells["LAST SEEN"] == "5s (x3 over 10m)"
    assert (cells["TYPE"], cells["REASON"], cells["OBJECT"]) == (
        "Warning",
        "BackOff",
        "process/web",
    )
    assert cells["MESSAGE"] == "restarting in 10s"


def test_rows_carry_metadata_the_whole_object_or_nothing() -> None:
    obj = process("web")
    partial = table(PROCESS, [obj], now=NOW)["rows"][0]["object"]
    assert partial == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj["metadata"],
    }
    assert table(PROCESS, [obj], now=NOW, include_object="Object")["rows"][0]["object"] == obj
    assert "object" not in table(PROCESS, [obj], now=NOW, include_object="None")["rows"][0]
    with pytest.raises(Invalid) as caught:
        table(PROCESS, [obj], now=NOW, include_object="Everything")
    assert caught.value.field == "includeObject"


def test_a_crd_defined_kind_shows_its_printer_columns() -> None:
    kind = kind_of(crd_of(PROCESS))
    answer = table(kind, [process("web")], now=NOW)
    names = [c["name"] for c in answer["columnDefinitions"] if not c["priority"]]
    assert names == ["NAME", "READY", "PHASE", "RESTARTS", "PID", "AGE"]
    assert answer["rows"][0]["cells"][:6] == ["web", "True", "Running", "2", "4242", "5m30s"]
