"""Label selectors: the string form round-trips, matching agrees with a plain reference
evaluation, and anything malformed is refused with `Invalid`."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.errors import Invalid
from setpoint.model import Requirement, Selector, parse_selector

KEYS = ["app", "tier", "a", "example.com/role", "x_y.z", "in"]
VALUES = ["", "web", "db", "v1.2", "a-b_c"]
SET_VALUES = [v for v in VALUES if v]  # see test_set_with_the_empty_value_round_trips

# A requirement as plain data: (key, operator, values); the reference evaluation and the
# string rendering below are written from the Kubernetes documentation, not from the parser.
single = st.tuples(
    st.sampled_from(KEYS), st.sampled_from(["=", "==", "!="]), st.sampled_from(VALUES)
)
multi = st.tuples(
    st.sampled_from(KEYS),
    st.sampled_from(["in", "notin"]),
    st.lists(st.sampled_from(SET_VALUES), min_size=1, max_size=3),
)
bare = st.tuples(st.sampled_from(KEYS), st.sampled_from(["exists", "!"]), st.just([]))
requirement_specs = st.one_of(
    single.map(lambda t: (t[0], t[1], [t[2]])),
    multi,
    bare,
)
label_maps = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=len(KEYS))
spaces = st.sampled_from(["", " ", "  "])


def reference_match(spec: tuple[str, str, list[str]], labels: Mapping[str, str]) -> bool:
    key, op, values = spec
    if op in ("=", "==", "in"):
        return key in labels and labels[key] in values
    if op in ("!=", "notin"):
        return key not in labels or labels[key] not in values
    if op == "exists":
        return key in labels
    return key not in labels


@st.composite
def rendered(draw: st.DrawFn, specs: list[tuple[str, str, list[str]]]) -> str:
    """The string form of `specs`, with whitespace wherever Kubernetes allows it."""
    parts = []
    for key, op, values in specs:
        if op == "exists":
            part = key
        elif op == "!":
            part = f"!{draw(spaces)}{key}"
        elif op in ("in", "notin"):
            inner = f"{draw(spaces)},{draw(spaces)}".join(values)
            part = f"{key} {op}{draw(spaces)}({draw(spaces)}{inner}{draw(spaces)})"
        else:
            part = f"{key}{draw(spaces)}{op}{draw(spaces)}{values[0]}"
        parts.append(draw(spaces) + part + draw(spaces))
    return ",".join(parts)


@st.composite
def selectors(draw: st.DrawFn) -> Selector:
    specs = draw(st.lists(requirement_specs, max_size=4))
    reqs = []
    for key, op, values in specs:
        operator = "=" if op == "==" else op
        reqs.append(Requirement(key, operator, frozenset(values)))  # type: ignore[arg-type]
    return Selector(tuple(reqs))


@given(selectors())
def test_string_form_round_trips(selector: Selector) -> None:
    assert parse_selector(str(selector)) == selector


@settings(max_examples=300)
@given(
    st.lists(requirement_specs, max_size=4).flatmap(lambda s: st.tuples(st.just(s), rendered(s))),
    st.lists(label_maps, min_size=1, max_size=5),
)
def test_matching_agrees_with_the_reference(case, label_sets) -> None:
    specs, text = case
    selector = parse_selector(text)
    assert len(selector.requirements) == len(specs)
    for labels in label_sets:
        want = all(reference_match(spec, labels) for spec in specs)
        assert selector.matches(labels) == want, (text, labels)


@given(st.text(alphabet="ab=!,() innotx.-/_", max_size=25))
def test_any_text_parses_or_is_invalid(text: str) -> None:
    try:
        selector = parse_selector(text)
    except Invalid as exc:
        refused: Invalid | None = exc
    else:
        refused = None
    if refused is not None:
        assert refused.field == "labelSelector"
    else:
        assert parse_selector(str(selector)) == selector


def test_empty_selector_matches_everything() -> None:
    for text in (None, "", "   "):
        selector = parse_selector(text)
        assert selector == Selector()
        assert selector.matches({"any": "thing"})
        assert selector.matches({})
        assert selector.matches(None)
    assert str(Selector()) == ""


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app=web", {"app": "db"}, False),
        ("app=web", {}, False),
        ("app!=web", {}, True),
        ("app!=web", {"app": "db"}, True),
        ("app notin (web)", {}, True),
        ("app in (web,db)", {"app": "db"}, True),
        ("app=", {"app": ""}, True),
        ("app=", {}, False),
        ("app,!tier", {"app": "x"}, True),
        ("app,!tier", {"app": "x", "tier": ""}, False),
        ("example.com/role==lead", {"example.com/role": "lead"}, True),
    ],
)
def test_matching_examples(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_selector(text).matches(labels) is expected


@pytest.mark.parametrize(
    "text",
    [
        "a in (x",
        "a in x",
        "a in (x))",
        "a notin (x y)",
        "=a",
        "==",
        "a=b=c",
        "a=b c",
        "a b",
        "a,,b",
        ",a",
        "a,",
        "!",
        "a!",
        "!a=b",
        "(a)",
        "a=(b)",
        "-a",
        "a$b",
        "a=-b",
        "a=" + "x" * 64,
        "x" * 64,
        "Bad_Prefix/k",
    ],
)
def test_syntax_errors_are_invalid(text: str) -> None:
    with pytest.raises(Invalid) as info:
        parse_selector(text)
    assert info.value.field == "labelSelector"


def test_from_dict() -> None:
    selector = Selector.from_dict(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "back"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "Exists"},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
            ],
        }
    )
    assert selector.matches({"app": "web", "tier": "front", "zone": "z1"})
    assert not selector.matches({"app": "web", "tier": "front", "zone": "z1", "canary": "1"})
    assert not selector.matches({"app": "web", "tier": "front", "zone": "z1", "env": "dev"})
    assert not selector.matches({"app": "web", "tier": "mid", "zone": "z1"})
    assert parse_selector(str(selector)) == selector


def test_from_dict_refuses_unknown_operators_naming_the_field() -> None:
    with pytest.raises(Invalid) as info:
        Selector.from_dict(
            {"matchExpressions": [{"key": "a", "operator": "Like", "values": ["x"]}]}
        )
    assert info.value.field == "matchExpressions[0].operator"
    with pytest.raises(Invalid):
        Selector.from_dict({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})
    with pytest.raises(Invalid):
        Selector.from_dict({"matchLabels": {"bad key": "x"}})


def test_set_with_the_empty_value_round_trips() -> None:
    """`values: [""]` is a valid label value set (Kubernetes writes it `a in ()`, and
    parses `a in ()` and `a in (x,)` back to sets holding the empty value)."""
    selector = Selector.from_dict(
        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["", "x"]}]}
    )
    assert selector.matches({"a": ""})
    assert parse_selector(str(selector)) == selector
