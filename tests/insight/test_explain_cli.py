"""`setpoint explain --timeline FILE KIND/NAME [--at TS] [-o json]`, run in-process on
hand-written JSONL timelines: the output format, kind matching, and errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from explain_support import CACHE, DB, T0, WEB, by_ts, change, db_breaks, ready, webapp

from setpoint.cli.main import main

REPO = Path(__file__).resolve().parents[2]


def write(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


@pytest.fixture
def timeline(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    broken = db_breaks(600)
    decoys = [
        change(604, WEB, "metadata.annotations.note", None, "friday"),
        change(607, WEB, "spec.replicas", 1, 2),
    ]
    return write(tmp_path / "t.jsonl", by_ts(webapp() + broken + decoys)), broken[0]


def explain_json(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    assert main(["explain", *args, "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert isinstance(doc, list)
    return doc


@pytest.mark.parametrize(
    "name", ["deployment/web", "Deployment/web", "deploy/web", "deployments/web"]
)
def test_json_lists_candidates_best_first_with_the_planted_cause_on_top(
    capsys: pytest.CaptureFixture[str], timeline: tuple[Path, dict[str, Any]], name: str
) -> None:
    path, cause = timeline
    doc = explain_json(capsys, "--timeline", str(path), name, "--at", str(T0 + 610))
    assert doc[0]["entry"] == cause
    for item in doc:
        assert set(item) == {"entry", "score", "reason", "path", "hops", "verified"}
        assert item["path"][:1] in (["Deployment/web"], [])
        assert isinstance(item["score"], float)
        assert isinstance(item["reason"], str)
        assert "\n" not in item["reason"]
        assert item["reason"]
    assert doc[0]["path"] == ["Deployment/web", "Process/db"]
    (hop,) = doc[0]["hops"]  # shown by the dependency edge the timeline recorded
    assert (hop["from"], hop["to"], hop["relation"]) == (
        "Deployment/web",
        "Process/db",
        "dependsOn",
    )
    assert hop["entry"]["type"] == "edge"
    assert hop["entry"]["relation"] == "dependsOn"
    assert doc[0]["verified"] is True
    assert [i["score"] for i in doc] == sorted((i["score"] for i in doc), reverse=True)
    assert "Process/db" in doc[0]["reason"]
    assert "--max-connections=1" in doc[0]["reason"]


def test_without_at_the_latest_failure_is_explained(
    capsys: pytest.CaptureFixture[str], timeline: tuple[Path, dict[str, Any]]
) -> None:
    path, cause = timeline
    assert explain_json(capsys, "--timeline", str(path), "deployment/web")[0]["entry"] == cause


def test_at_takes_an_iso_time_as_well(
    capsys: pytest.CaptureFixture[str], timeline: tuple[Path, dict[str, Any]]
) -> None:
    path, _ = timeline
    iso = datetime.fromtimestamp(T0 + 610, UTC).isoformat().replace("+00:00", "Z")
    by_iso = explain_json(capsys, "--timeline", str(path), "deployment/web", "--at", iso)
    by_epoch = explain_json(
        capsys, "--timeline", str(path), "deployment/web", "--at", str(T0 + 610)
    )
    assert by_iso == by_epoch


def test_a_kind_nobody_registered_matches_the_timeline_case_insensitively(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    widget = {"kind": "Widget", "name": "w1", "namespace": "default"}
    gear = {"kind": "Gear", "name": "g1", "namespace": "default"}
    cause = change(100, gear, "spec.teeth", 12, 13)
    entries = [
        {"ts": T0, "type": "edge", "from": widget, "to": gear, "relation": "dependsOn"},
        cause,
        ready(110, widget, "False", "Jammed"),
    ]
    path = write(tmp_path / "w.jsonl", entries)
    for name in ("widget/w1", "WIDGET/w1", "widgets/w1"):
        assert explain_json(capsys, "--timeline", str(path), name)[0]["entry"] == cause


def test_the_table_shows_rank_score_when_entry_and_reason(
    capsys: pytest.CaptureFixture[str],
    timeline: tuple[Path, dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, _ = timeline
    monkeypatch.setenv("COLUMNS", "200")  # whatever terminal the tests run in
    assert main(["explain", "--timeline", str(path), "deployment/web"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Deployment/web NotReady at ")
    assert lines[1].split()[:6] == ["RANK", "SCORE", "WHEN", "ENTRY", "PATH", "REASON"]
    assert lines[2].split()[0] == "1"
    assert "change spec.args[1] Process/db" in lines[2]
    assert "web > db" in lines[2]
    assert "-10s" in lines[2]


def test_a_bad_line_is_refused_naming_its_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(webapp()[0]) + "\n\n" + '{"ts": "soon", "type": "log"}\n')
    assert main(["explain", "--timeline", str(path), "deployment/web", "-o", "json"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"error: {path} line 3: ts: want a number (seconds since the epoch)"
    path.write_text("{not json\n")
    assert main(["explain", "--timeline", str(path), "deployment/web"]) == 1
    assert f"{path} line 1: not JSON" in capsys.readouterr().err


def test_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], timeline: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    path, _ = timeline
    cases = [
        (["gizmo/web"], "no object of kind 'gizmo' in the timeline"),
        (["web"], "want KIND/NAME"),
        (["deployment/web", "--at", "yesterday"], "--at: 'yesterday': want seconds"),
        (["process/nowhere"], "Process/nowhere does not exist"),
    ]
    for args, message in cases:
        assert main(["explain", "--timeline", str(path), *args]) == 1
        err = capsys.readouterr().err
        assert message in err
        assert err.count("\n") == 1
    assert main(["explain", "--timeline", str(tmp_path / "missing.jsonl"), "deployment/web"]) == 1
    assert "missing.jsonl" in capsys.readouterr().err


def test_a_ready_object_has_nothing_wrong_and_exits_0(
    capsys: pytest.CaptureFixture[str], timeline: tuple[Path, dict[str, Any]]
) -> None:
    path, _ = timeline
    assert main(["explain", "--timeline", str(path), "process/cache"]) == 0
    assert capsys.readouterr().out == "Process/cache is Ready: nothing is wrong\n"
    assert main(["explain", "--timeline", str(path), "process/cache", "-o", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == []
    assert "nothing is wrong" in err


def test_an_object_that_does_not_exist_is_said_so_and_exits_1(
    capsys: pytest.CaptureFixture[str], timeline: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    path, _ = timeline
    assert main(["explain", "--timeline", str(path), "process/ghost", "-o", "json"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "error: Process/ghost does not exist (the timeline does not show it)\n"
    gone = change(700, CACHE, "spec", {"args": ["cache"]}, None) | {"action": "deleted"}
    deleted = write(tmp_path / "d.jsonl", by_ts([*webapp(), gone]))
    assert main(["explain", "--timeline", str(deleted), "process/cache"]) == 1
    assert "Process/cache does not exist" in capsys.readouterr().err


def test_nothing_above_the_floor_is_not_known(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # cache fails with nothing connected to it and only an old label change elsewhere
    entries = [
        *webapp(),
        change(100, DB, "metadata.labels.team", None, "blue"),
        ready(3000, CACHE, "False", "ReadinessProbeFailed"),
    ]
    path = write(tmp_path / "t.jsonl", by_ts(entries))
    assert main(["explain", "--timeline", str(path), "process/cache"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Process/cache NotReady: the cause is not known")
    assert main(["explain", "--timeline", str(path), "process/cache", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_the_documented_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    example = REPO / "docs" / "examples" / "explain_timeline.jsonl"
    doc = explain_json(capsys, "--timeline", str(example), "deployment/web")
    assert doc[0]["entry"]["object"]["name"] == "db"
    assert doc[0]["entry"]["diff"] == {
        "spec.args[3]": ["--max-connections=100", "--max-connections=1"]
    }


def test_without_a_file_the_timeline_recorded_beside_the_store_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from setpoint.insight.timeline import Timeline, timeline_path_for

    store = f"sqlite:///{tmp_path}/state.db"
    path = timeline_path_for(store)
    assert path is not None
    broken = db_breaks(600)
    timeline = Timeline.open(path)
    timeline.append_many(by_ts(webapp(-8 * 86400.0) + broken))  # created 8 days before
    timeline.close()
    doc = explain_json(capsys, "--store", store, "deploy/web")
    assert doc[0]["entry"] == broken[0]
    assert "Deployment/web dependsOn Process/db" in doc[0]["reason"]
    # with --at only the week before is read, and the older edges apart from it
    at = str(T0 + 610)
    doc = explain_json(capsys, "--store", store, "deploy/web", "--at", at)
    assert doc[0]["entry"] == broken[0]
    assert "Deployment/web dependsOn Process/db" in doc[0]["reason"]


def test_a_store_with_no_recorded_timeline_says_how_to_give_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for store in ("memory://", f"sqlite:///{tmp_path}/none.db"):
        assert main(["--store", store, "explain", "deployment/web"]) == 1
        err = capsys.readouterr().err
        assert "no recorded timeline" in err
        assert "--timeline FILE.jsonl" in err
    assert not (tmp_path / "none.db").exists()


def test_a_path_no_entry_shows_is_unknown_never_guessed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cause on an object the timeline does not connect to the target has no path
    (`unknown` in the table, an empty path in JSON): the answer does not make one up."""
    stranger = change(600, CACHE, "spec.args[1]", "--maxmemory=1gb", "--maxmemory=1mb")
    entries = [*webapp(), stranger, ready(610, WEB, "False", "ProbeFailed")]
    path = write(tmp_path / "u.jsonl", by_ts(entries))
    doc = explain_json(capsys, "--timeline", str(path), "deployment/web")
    item = next(i for i in doc if i["entry"] == stranger)
    assert (item["path"], item["hops"], item["verified"]) == ([], [], False)
    assert main(["explain", "--timeline", str(path), "deployment/web", "-o", "wide"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "Process/cache" in line)
    assert " unknown " in row
