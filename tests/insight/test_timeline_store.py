"""The timeline's storage: appending, querying by object, time and type, retention,
checkpoints, JSON Lines, and where `setpoint up` keeps it."""

from __future__ import annotations

import io
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from setpoint.errors import Invalid
from setpoint.insight.entries import parse_timeline, read_timeline
from setpoint.insight.timeline import (
    Checkpoint,
    CheckpointMoved,
    Timeline,
    dump_jsonl,
    timeline_path_for,
    timeline_url_of,
)
from setpoint.store import open_store
from setpoint.testing import ManualClock

T0 = 1_700_000_000.0


def ref(name: str, kind: str = "Process", namespace: str | None = "default") -> dict[str, Any]:
    return {"kind": kind, "name": name, "namespace": namespace}


def sample() -> list[dict[str, Any]]:
    return [
        {
            "ts": T0 + 1,
            "type": "change",
            "object": ref("db"),
            "diff": {"spec.args[2]": ["--max-conn=100", "--max-conn=5"]},
            "actor": "alice",
        },
        {
            "ts": T0 + 2,
            "type": "condition",
            "object": ref("db"),
            "condition": {"type": "Ready", "status": "False", "reason": "ProbeFailed"},
        },
        {"ts": T0 + 3, "type": "log", "object": ref("web"), "line": "FATAL: too many connections"},
        {"ts": T0 + 4, "type": "exit", "object": ref("db"), "exitCode": 1, "signal": None},
        {
            "ts": T0 + 5,
            "type": "edge",
            "from": ref("web"),
            "to": ref("db"),
            "relation": "dependsOn",
        },
        {"ts": T0 + 6, "type": "probe", "object": ref("db"), "role": "readiness", "result": "x"},
    ]


@pytest.fixture(params=["memory", "file", "postgresql", "etcd"])
def timeline(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Timeline]:
    with Timeline.open(where(request.param, request, tmp_path)) as timeline:
        yield timeline


def where(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a test's timeline lives: the URL of a store, or a file."""
    if backend == "memory":
        return "memory://"
    if backend == "postgresql":
        return str(request.getfixturevalue("postgresql_server").new_url("timeline"))
    if backend == "etcd":
        return str(request.getfixturevalue("etcd_server").new_url())
    return str(tmp_path / "state.db")


def test_query_by_object_time_and_type_oldest_first(timeline: Timeline) -> None:
    timeline.append_many(reversed(sample()))  # stored in any order, read by time
    entries = sample()
    assert timeline.query() == entries
    assert timeline.query(object=ref("db")) == [entries[i] for i in (0, 1, 3, 5)]
    assert timeline.query(object={"kind": "Process", "name": "web"}) == [entries[2], entries[4]]
    assert timeline.query(object=ref("db", namespace="other")) == []
    assert timeline.query(since=T0 + 2, until=T0 + 4) == entries[1:3]
    assert timeline.query(types=["exit", "edge"]) == entries[3:5]
    assert timeline.query(limit=2) == entries[4:]  # the newest two, oldest first
    assert timeline.count() == 6


def test_unknown_types_and_fields_are_kept_as_they_are(timeline: Timeline) -> None:
    entry = {"ts": T0, "type": "novel", "object": ref("db"), "extra": {"x": [1, 2]}}
    timeline.append(entry)
    assert timeline.query(types=["novel"]) == [entry]


def test_bad_entries_are_refused_naming_the_field(timeline: Timeline) -> None:
    with pytest.raises(Invalid, match="ts"):
        timeline.append({"type": "log", "object": ref("db")})
    with pytest.raises(Invalid, match="type"):
        timeline.append({"ts": T0, "object": ref("db")})
    assert timeline.count() == 0  # nothing half-written


def test_prune_by_age_and_by_count_keeps_the_newest() -> None:
    clock = ManualClock(T0 + 100)
    timeline = Timeline.memory(clock=clock)
    timeline.append_many({"ts": T0 + i, "type": "log", "object": ref("db")} for i in range(100))
    assert timeline.prune(max_age_s=60, max_entries=None) == 40  # ts < T0 + 40 go
    assert timeline.query()[0]["ts"] == T0 + 40
    assert timeline.prune(max_age_s=None, max_entries=10) == 50
    assert [e["ts"] for e in timeline.query()] == [T0 + i for i in range(90, 100)]
    with pytest.raises(Invalid, match="max_entries"):
        timeline.prune(None, -1)


def test_prune_deletes_in_chunks_across_many_rows() -> None:
    timeline = Timeline.memory(clock=ManualClock(T0 + 50_000))
    timeline.append_many({"ts": T0 + i, "type": "log", "object": ref("db")} for i in range(45_000))
    assert timeline.prune(max_age_s=None, max_entries=1_000) == 44_000
    assert timeline.count() == 1_000


@pytest.mark.parametrize("backend", ["file", "postgresql", "etcd"])
def test_checkpoint_is_saved_with_entries_and_updates_by_key(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    path = where(backend, request, tmp_path)
    with Timeline.open(path) as timeline:
        assert timeline.checkpoint() is None
        assert timeline.revision() == 0
        timeline.append_many(sample()[:1], Checkpoint(7, {"a": {"x": 1}, "b": {"y": 2}}))
        timeline.append_many([], Checkpoint(9, {"a": None, "c": {"z": 3}}))
    with Timeline.open(path) as reopened:
        assert reopened.checkpoint() == Checkpoint(9, {"b": {"y": 2}, "c": {"z": 3}})
        assert reopened.revision() == 9
        assert reopened.count() == 1


@pytest.mark.parametrize("backend", ["file", "postgresql", "etcd"])
def test_two_recorders_never_record_one_stretch_of_history(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    path = where(backend, request, tmp_path)
    with Timeline.open(path) as first, Timeline.open(path) as second:
        first.append_many(sample()[:1], Checkpoint(5, {"a": {"x": 1}}), after=0)
        with pytest.raises(CheckpointMoved, match="from revision 0 to 5"):
            second.append_many(sample()[1:], Checkpoint(6, {"a": None}), after=0)
        assert second.count() == 1  # nothing of the refused batch
        assert second.checkpoint() == Checkpoint(5, {"a": {"x": 1}})
        second.append_many(sample()[1:2], Checkpoint(6, {"a": None}), after=5)
        assert first.checkpoint() == Checkpoint(6, {})
        assert first.count() == 2


@pytest.mark.parametrize("backend", ["file", "postgresql", "etcd"])
def test_one_live_recorder_at_a_time_until_its_word_runs_out(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    clock = ManualClock(T0)
    path = where(backend, request, tmp_path)
    with Timeline.open(path, clock=clock) as first, Timeline.open(path, clock=clock) as second:
        assert not second.recording()
        assert first.claim_recording(1, T0 + 30)
        assert second.recording()
        assert not second.claim_recording(2, T0 + 30)  # stands by
        clock.advance(10)
        assert first.claim_recording(1, T0 + 40)  # says so again
        clock.advance(25)
        assert not second.claim_recording(2, T0 + 65)
        clock.advance(5)
        assert not second.recording()  # the word ran out
        assert second.claim_recording(2, T0 + 70)
        assert not first.claim_recording(1, T0 + 70)


def test_an_older_file_loses_its_actor_notes_table(tmp_path: Path) -> None:
    """Actors come with the store's writes now; the side table of notes goes."""
    conn = sqlite3.connect(tmp_path / "state.db")
    conn.execute("CREATE TABLE timeline_actors (kind TEXT, digest TEXT, actor TEXT)")
    conn.close()
    Timeline.open(tmp_path / "state.db").close()
    conn = sqlite3.connect(tmp_path / "state.db")
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert "timeline_actors" not in tables
    assert "timeline" in tables


def test_queries_use_the_indexes(tmp_path: Path) -> None:
    Timeline.open(tmp_path / "state.db").close()
    conn = sqlite3.connect(tmp_path / "state.db")
    window = conn.execute(
        "EXPLAIN QUERY PLAN SELECT body FROM timeline WHERE ts >= ? AND ts < ? ORDER BY ts, id",
        (0, 1),
    ).fetchall()
    one = conn.execute(
        "EXPLAIN QUERY PLAN SELECT body FROM timeline WHERE kind = ? AND name = ? "
        "AND namespace = ? AND ts >= ? ORDER BY ts, id",
        ("Process", "db", "default", 0),
    ).fetchall()
    assert "timeline_ts" in str(window)
    assert "timeline_object" in str(one)


def test_jsonl_round_trip_is_what_explain_reads(tmp_path: Path, timeline: Timeline) -> None:
    timeline.append_many(sample())
    out = io.BytesIO()
    assert dump_jsonl(timeline.query(), out) == 6
    path = tmp_path / "timeline.jsonl"
    path.write_bytes(out.getvalue())
    assert read_timeline(path) == sample()  # the explain side's reader
    with pytest.raises(Invalid, match="timeline line 2: not JSON"):
        parse_timeline([orjson.dumps(sample()[0]), b"{oops"])


def test_timeline_path_for_store_urls() -> None:
    assert timeline_path_for("sqlite:///.setpoint/state.db") == Path(".setpoint/state.db")
    assert timeline_path_for("sqlite:////abs/state.db?sync=normal") == Path("/abs/state.db")
    assert timeline_path_for("memory://") is None
    with Timeline.open("memory://") as in_memory:
        assert in_memory.count() == 0


@pytest.mark.parametrize("backend", ["file", "postgresql", "etcd"])
async def test_an_open_store_names_the_timeline_its_url_opens(
    request: pytest.FixtureRequest, tmp_path: Path, backend: str
) -> None:
    """What the API server reads (`timeline_url_of` its open store) is what the CLI reads
    (`Timeline.of_store` of the store's URL)."""
    url = where(backend, request, tmp_path)
    if backend == "file":
        url = f"sqlite:///{url}"
    store = await open_store(url, create=True)
    try:
        served = timeline_url_of(store)
        assert served is not None
        with Timeline.of_store(served) as through_server, Timeline.of_store(url) as through_cli:
            through_server.append_many(sample())
            assert through_cli.query() == sample()
    finally:
        await store.close()
    in_memory = await open_store("memory://")
    assert timeline_url_of(in_memory) is None  # its timeline is the engine's, in memory
    await in_memory.close()
