"""Log template mining (`setpoint.insight.templates.TemplateMiner`) on labelled lines the tests
ship: `templates_labelled.tsv` holds realistic PostgreSQL, nginx, uvicorn, gunicorn and Python
lines, each with the id of the log statement that wrote it."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from setpoint.insight.templates import TemplateMiner

LABELLED = Path(__file__).with_name("templates_labelled.tsv")


def labelled() -> list[tuple[str, str]]:
    rows = []
    for line in LABELLED.read_text().splitlines():
        if line and not line.startswith("#"):
            label, _statement, text = line.split("\t", 2)
            rows.append((label, text))
    return rows


def grouping_accuracy(truth: list[str], predicted: list[int]) -> float:
    """Loghub's grouping accuracy: the share of lines whose predicted group holds exactly the
    lines of their true group."""
    by_truth: dict[str, set[int]] = defaultdict(set)
    by_prediction: dict[int, set[int]] = defaultdict(set)
    for i, (t, p) in enumerate(zip(truth, predicted, strict=True)):
        by_truth[t].add(i)
        by_prediction[p].add(i)
    right = sum(by_truth[t] == by_prediction[p] for t, p in zip(truth, predicted, strict=True))
    return right / len(truth)


def test_the_labelled_set_is_big_and_varied() -> None:
    rows = labelled()
    assert len(rows) >= 200
    assert len({label for label, _ in rows}) >= 30


def test_lines_are_grouped_by_the_statement_that_wrote_them() -> None:
    rows = labelled()
    miner = TemplateMiner()
    predicted = [miner.add(text).template_id for _, text in rows]
    accuracy = grouping_accuracy([label for label, _ in rows], predicted)
    # 0.945 when written: drain's fixed-length tree splits a statement whose argument has
    # a varying number of words ("(timeout)" / "(connection refused)").
    assert accuracy >= 0.9, accuracy
    assert miner.template_count <= len({label for label, _ in rows}) + 3


def test_the_first_line_of_a_template_is_first_seen_and_later_ones_are_not() -> None:
    miner = TemplateMiner()
    first = miner.add(
        "2026-11-30 10:00:01.123 UTC [4242] LOG:  connection received: host=10.0.0.7 port=51234"
    )
    second = miner.add(
        "2026-11-30 10:00:02.999 UTC [4243] LOG:  connection received: host=10.0.0.9 port=40001"
    )
    other = miner.add("2026-11-30 10:00:03.000 UTC [4244] FATAL:  sorry, too many clients already")
    again = miner.add("2026-11-30 10:00:04.000 UTC [4245] FATAL:  sorry, too many clients already")
    assert (first.first_seen, second.first_seen, other.first_seen, again.first_seen) == (
        True,
        False,
        True,
        False,
    )
    assert first.template_id == second.template_id != other.template_id == again.template_id
    assert "<IP>" in second.template
    assert "10.0.0.9" not in second.template


def test_each_miner_keeps_its_own_templates() -> None:
    a, b = TemplateMiner(), TemplateMiner()
    assert a.add("MemoryError").first_seen
    assert b.add("MemoryError").first_seen
    assert not a.add("  MemoryError  ").first_seen
