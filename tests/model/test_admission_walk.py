"""`check_values` takes a quick look (orjson's encoding) and the full walk only when the
quick look is not sure: whatever the value, it refuses exactly what the full walk
refuses, naming the same field (hypothesis against `_refuse_values`)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.errors import Invalid
from setpoint.model.admission import INT64_MAX, _refuse_values, check_values

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=INT64_MAX - 2, max_value=INT64_MAX + 2)
    | st.integers(min_value=-(2**64), max_value=-(2**63) + 1)
    | st.integers(min_value=2**53 - 2, max_value=2**53 + 2)
    | st.integers(min_value=2**64 - 2, max_value=2**64 + 2)
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=4)
    | st.builds(lambda: (1, 2))  # not JSON: the full walk decides
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
        | st.dictionaries(st.text(max_size=2), inner, max_size=2).map(OrderedDict)
    ),
    max_leaves=20,
)


def outcome(check: Any, value: Any, depth: int) -> tuple[str, str | None] | None:
    try:
        check(value, "spec", depth)
    except Invalid as exc:
        return str(exc), exc.field
    return None


@settings(max_examples=300, deadline=None)
@given(VALUES, st.integers(min_value=1, max_value=4))
def test_the_quick_look_refuses_what_the_full_walk_refuses(value: Any, depth: int) -> None:
    def quick(v: Any, root: str, max_depth: int) -> None:
        check_values(v, root, max_depth=max_depth)

    assert outcome(quick, value, depth) == outcome(_refuse_values, value, depth)


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"a": [1, {"b": 2**63}]}, "spec.a[1].b"),
        ({"a": [[[["deep"]]]]}, "spec.a[0][0][0]"),
    ],
)
def test_what_is_refused_names_its_field(value: Any, field: str) -> None:
    with pytest.raises(Invalid) as info:
        check_values(value, "spec", max_depth=4)
    assert info.value.field == field
