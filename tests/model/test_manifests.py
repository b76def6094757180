"""Admission below every front end: `parse_manifests` (what the CLI and the HTTP API call
with what a user sent) and `Kind.validate` refuse hostile or mistaken input with one
`Invalid` naming the source, line or field, and accept what Kubernetes users write."""

from __future__ import annotations

import json
import time
from typing import Any

import orjson
import pytest
from pydantic import Field

from setpoint.errors import Invalid
from setpoint.model import Registry, Schema
from setpoint.model.admission import check_values, refuse_duplicates
from setpoint.model.fields import EnvName, OsString
from setpoint.model.kinds import Kind
from setpoint.model.manifests import Limits, parse_manifests


class Spec(Schema):
    args: list[OsString] = Field(default_factory=list)
    env: dict[EnvName, OsString] = Field(default_factory=dict)
    count: int = 1


KIND = Kind("example.com/v1", "Thing", "things", spec=Spec)


def thing(**fields: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "t"},
    }
    obj.update(fields)
    return obj


def refused(text: str | bytes, **kwargs: Any) -> str:
    with pytest.raises(Invalid) as info:
        parse_manifests(text, "m.yaml", **kwargs)
    return str(info.value)


# -- parsing -----------------------------------------------------------------------------


def test_aliases_within_the_budget_are_read() -> None:
    text = "base: &b {x: 1, y: [1, 2]}\none: *b\ntwo: {<<: *b, y: 3}\n"
    (m,) = parse_manifests(text, "m.yaml")
    assert m.obj == {
        "base": {"x": 1, "y": [1, 2]},
        "one": {"x": 1, "y": [1, 2]},
        "two": {"x": 1, "y": 3},
    }


def test_an_alias_bomb_is_refused_quickly() -> None:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 12)]
    started = time.monotonic()
    message = refused("\n".join(lines))
    assert "m.yaml:1: YAML aliases expand this document by" in message
    assert "the limit is 10000" in message
    assert time.monotonic() - started < 5  # 9**12 nodes if expanded: never


def test_a_chain_of_aliases_cannot_nest_deeper_than_the_limit() -> None:
    lines = ["a0: &a0 [x]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, 150)]
    text = "\n".join(lines)
    assert "levels deep (with its aliases expanded)" in refused(
        text, limits=Limits(alias_budget=10**6)
    )


def test_size_is_checked_before_parsing() -> None:
    assert "over the limit of 10 bytes" in refused("a: [1, 2, 3]\n", limits=Limits(max_bytes=10))
    assert "over the limit" in refused(b"\xff" * 11, limits=Limits(max_bytes=10))


def test_text_that_is_not_utf8() -> None:
    assert "not a text file" in refused(b"a: \xff\n")


@pytest.mark.parametrize(
    ("text", "line"),
    [("a: 1\nb: 2\na: 3\n", 3), ("x:\n  - {k: 1, k: 2}\n", 2)],
)
def test_a_repeated_key_names_its_line(text: str, line: int) -> None:
    assert f"m.yaml:{line}: duplicate key" in refused(text)


def test_a_merge_key_may_be_overridden() -> None:
    (m,) = parse_manifests("b: &b {x: 1}\nc:\n  <<: *b\n  x: 2\n", "m.yaml")
    assert m.obj["c"] == {"x": 2}


def test_values_json_cannot_hold_are_refused() -> None:
    assert "only JSON values" in refused("a: !!binary aGk=\n")
    assert "only JSON values" in refused("a: .nan\n")
    assert "a.b: 1" in refused("a: {b: 123456789012345678901234567890}\n").replace(
        "123456789012345678901234567890 is out of range", "1"
    )


def test_timestamps_stay_strings_and_lists_are_unpacked() -> None:
    text = "kind: List\nitems:\n- {a: 2024-01-01}\n- {b: 2}\n"
    first, second = parse_manifests(text, "m.yaml")
    assert (first.obj, first.line, second.line) == ({"a": "2024-01-01"}, 3, 4)


def test_json_depth_and_duplicates() -> None:
    assert "nested more than 100 levels deep" in refused("[" * 101 + "]" * 101, as_json=True)
    assert "[[" in '"[[[["'  # brackets inside strings do not count:
    (m,) = parse_manifests(
        '{"a": "[[[[[[[[[[[[[[[[[[[[[["}', "m.json", as_json=True, limits=Limits(max_depth=2)
    )
    assert m.obj == {"a": "[" * 22}
    assert "duplicate key 'a'" in refused('{"a": 1, "a": 2}', as_json=True)


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ('{"a":1,"a":2}', "duplicate key 'a'"),
        ('{"b":{"a":1,"a":1}}', "duplicate key 'a'"),
        ('{"a":1e999}', "out of range for a float"),
        ('{"a":NaN}', "NaN is not a JSON number"),
        ('{"a":99999999999999999999}', "out of range: integers must fit in 64 bits"),
        ('{"a":18446744073709551615}', "out of range: integers must fit in 64 bits"),
        ("[[[[]]]]", "nested more than 2 levels deep"),
    ],
)
def test_compact_json_is_refused_as_any_json(text: str, refusal: str) -> None:
    """Compact JSON, as programs send it (read the quick way), is held to every rule."""
    with pytest.raises(Invalid, match=refusal):
        parse_manifests(text, "m.json", as_json=True, limits=Limits(max_depth=2))


def test_compact_and_spaced_json_read_the_same() -> None:
    value = {"kind": "Thing", "metadata": {"name": "\u00e9\n"}, "spec": {"n": 1.5, "x": None}}
    compact = orjson.dumps(value).decode()  # read the quick way
    spaced = json.dumps(value, indent=1)  # read the careful way
    escaped = json.dumps(value, separators=(",", ":"))  # compact, but "\\u00e9": careful
    assert [
        m.obj for t in (compact, spaced, escaped) for m in parse_manifests(t, "m", as_json=True)
    ] == [value] * 3


# -- kinds -------------------------------------------------------------------------------


def invalid(obj: dict[str, Any]) -> Invalid:
    with pytest.raises(Invalid) as info:
        KIND.validate(obj)
    return info.value


def test_unknown_fields_name_the_nearest_valid_one() -> None:
    assert (invalid(thing(sepc={})).field, str(invalid(thing(sepc={})))) == (
        "sepc",
        'sepc: unknown field; did you mean "spec"?',
    )
    error = invalid(thing(metadata={"name": "t", "anotations": {}}))
    assert error.field == "metadata.anotations"
    assert 'did you mean "annotations"' in str(error)
    assert "valid fields are" in str(invalid(thing(zzz=1)))
    assert 'did you mean "count"' in str(invalid(thing(spec={"cout": 2})))


def test_integers_are_64_bit() -> None:
    KIND.validate(thing(spec={"count": 2**63 - 1}))
    assert invalid(thing(spec={"count": 2**63})).field == "spec.count"
    assert invalid(thing(status={"n": -(2**63) - 1})).field == "status.n"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"env": {"A=B": "x"}}, 'spec.env["A=B"]'),
        ({"env": {"": "x"}}, 'spec.env[""]'),
        ({"env": {"A": "x\0"}}, "spec.env.A"),
        ({"args": ["ok", "\0"]}, "spec.args[1]"),
    ],
)
def test_values_a_process_cannot_use(spec: dict[str, Any], field: str) -> None:
    assert invalid(thing(spec=spec)).field == field


def test_deep_objects_are_refused_by_the_kind_too() -> None:
    deep: Any = "x"
    for _ in range(2000):  # deeper than Python's recursion limit: checked iteratively
        deep = [deep]
    assert "nested more than 100 levels deep" in str(invalid(thing(spec={"args": deep})))
    with pytest.raises(Invalid):
        check_values({"a": deep})


def test_duplicates_name_both_places() -> None:
    with pytest.raises(
        Invalid, match=r"b.yaml:3: Thing/default/t is declared twice \(first at a.yaml:1\)"
    ):
        refuse_duplicates([("a.yaml:1", "Thing/default/t"), ("b.yaml:3", "Thing/default/t")])


def test_a_registry_refuses_through_its_kinds() -> None:
    registry = Registry()
    registry.register(KIND)
    obj = thing(spec={}, sepc={})
    with pytest.raises(Invalid, match="sepc"):
        registry.for_object(obj).validate(obj)
