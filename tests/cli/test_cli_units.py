"""The CLI's pure parts and `apply_object`, in process: durations, tables, manifests, apply."""

from __future__ import annotations

import pytest

from setpoint.cli.apply import apply_object
from setpoint.cli.load import parse_manifests
from setpoint.cli.render import cut, fit_table, format_table, human_duration, table_for, text_width
from setpoint.clock import parse_rfc3339
from setpoint.errors import Conflict, Invalid
from setpoint.model import Kind, Object, PrinterColumn, Registry, Schema
from setpoint.store import Store, open_store
from setpoint.store.base import NO_OPTIONS, WriteOptions


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-0.5, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (330, "5m30s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (7 * 3600 + 59 * 60, "7h59m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (7 * 86400 + 3600, "7d1h"),
        (8 * 86400, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (800 * 86400, "2y70d"),
        (3000 * 86400, "8y"),
    ],
)
def test_human_duration_as_kubectl(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_format_table_pads_every_column_but_the_last() -> None:
    assert format_table([["NAME", "AGE"], ["a-long-name", "1s"]]) == [
        "NAME          AGE",
        "a-long-name   1s",
    ]


def test_manifest_lines_point_at_documents_and_fields() -> None:
    text = "# comment\napiVersion: v1\nkind: A\nmetadata:\n  name: a\nspec:\n  x:\n  - 1\n  - 2\n"
    text += "---\napiVersion: v1\nkind: B\nmetadata: {name: b}\n"
    first, second = parse_manifests(text, "m.yaml")
    assert (first.where(), second.where()) == ("m.yaml:2", "m.yaml:11")
    assert first.where("spec.x[1]") == "m.yaml:9"
    assert first.where("spec.missing") == "m.yaml:6"  # the deepest part that is there
    assert first.where("metadata.labels['app']") == "m.yaml:4"


def test_manifest_timestamps_stay_strings() -> None:
    (m,) = parse_manifests("a: 2024-01-01T00:00:00Z\nb: 2024-01-01\n", "t.yaml")
    assert m.obj == {"a": "2024-01-01T00:00:00Z", "b": "2024-01-01"}


class Spec(Schema):
    size: int = 1


class Status(Schema):
    phase: str = ""


def registry() -> Registry:
    reg = Registry()
    reg.register(Kind("test.dev/v1", "Thing", "things", spec=Spec, status=Status))
    return reg


def thing(size: int = 1, **labels: str) -> Object:
    meta: dict[str, object] = {"name": "t"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "test.dev/v1", "kind": "Thing", "metadata": meta, "spec": {"size": size}}


async def test_apply_object_keeps_status_and_what_it_does_not_own() -> None:
    store = await open_store("memory://", registry=registry())
    try:
        assert await apply_object(store, thing()) == "created"
        current = await store.get("test.dev/v1", "Thing", "t")
        current["status"] = {"phase": "Running"}
        await store.update_status(current)
        await store.patch("test.dev/v1", "Thing", "t", {"metadata": {"finalizers": ["x.dev/f"]}})

        assert await apply_object(store, thing()) == "unchanged"
        assert await apply_object(store, thing(size=2, app="a")) == "configured"
        after = await store.get("test.dev/v1", "Thing", "t")
        assert after["spec"] == {"size": 2}
        assert after["status"] == {"phase": "Running"}
        assert after["metadata"]["finalizers"] == ["x.dev/f"]
        assert after["metadata"]["labels"] == {"app": "a"}
    finally:
        await store.close()


async def test_apply_object_refuses_an_invalid_object_before_writing() -> None:
    store = await open_store("memory://", registry=registry())
    try:
        bad = thing()
        bad["spec"]["size"] = "big"
        with pytest.raises(Invalid, match=r"spec\.size"):
            await apply_object(store, bad)
        assert (await store.list("test.dev/v1", "Thing"))[0] == []
    finally:
        await store.close()


class Racing:
    """A store where someone else writes the object just before each of our first `n` updates."""

    def __init__(self, store: Store, n: int) -> None:
        self.store = store
        self.registry = store.registry
        self.races = n

    async def get(self, *args: object, **kwargs: object) -> Object:
        return await self.store.get(*args, **kwargs)  # type: ignore[arg-type]

    async def create(self, obj: Object, *, options: WriteOptions = NO_OPTIONS) -> Object:
        return await self.store.create(obj, options=options)

    async def update(self, obj: Object, *, options: WriteOptions = NO_OPTIONS) -> Object:
        if self.races:
            self.races -= 1
            other = await self.store.get("test.dev/v1", "Thing", "t")
            other["metadata"].setdefault("annotations", {})["other"] = str(self.races)
            await self.store.update(other)
        return await self.store.update(obj, options=options)


async def test_apply_object_retries_on_conflict_and_gives_up_eventually() -> None:
    store = await open_store("memory://", registry=registry())
    try:
        await apply_object(store, thing())
        assert await apply_object(Racing(store, 2), thing(size=3)) == "configured"  # type: ignore[arg-type]
        assert (await store.get("test.dev/v1", "Thing", "t"))["spec"] == {"size": 3}
        with pytest.raises(Conflict, match="try again"):
            await apply_object(Racing(store, 100), thing(size=4))  # type: ignore[arg-type]
    finally:
        await store.close()


def test_a_kinds_printer_columns_come_between_ready_and_age() -> None:
    kind = Kind(
        "test.setpoint.dev/v1", "Oven", "ovens",
        columns=(PrinterColumn("TEMP", "status.temp", ".1f"), PrinterColumn("MODE", "spec.mode")),
    )  # fmt: skip
    table = table_for(kind)
    obj: Object = {
        "metadata": {"name": "o", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {},
        "status": {"temp": 180.04, "conditions": [{"type": "Ready", "status": "True"}]},
    }
    assert table.header() == ["NAME", "READY", "TEMP", "MODE", "AGE"]
    assert table.row(obj, parse_rfc3339("2026-01-01T00:01:00Z"))[:4] == ["o", "True", "180.0", "-"]


def test_cut_counts_terminal_columns_and_ends_in_an_ellipsis() -> None:
    assert cut("abcdef", 6) == "abcdef"
    assert cut("abcdef", 4) == "abc…"
    assert cut("日本語です", 5) == "日本…"  # two columns a character
    assert text_width("e\u0301") == 1  # a combining mark takes none


def test_fit_table_narrows_the_columns_that_give_way_in_turn() -> None:
    rows = [["A", "LONG", "REASON"], ["1", "x" * 30, "y" * 40]]
    assert format_table(fit_table(rows, 200, [(2, 10)])) == format_table(rows)
    fitted = format_table(fit_table(rows, 50, [(2, 10), (1, 20)]))
    assert [len(line) for line in fitted] == [len("A   " + "LONG".ljust(30) + "   REASON"), 50]
    assert fitted[1].endswith("y" * 9 + "…")
    narrow = format_table(fit_table(rows, 40, [(2, 10), (1, 20)]))
    assert narrow[1] == "1   " + "x" * 22 + "…   " + "y" * 9 + "…"
    assert len(narrow[1]) == 40
