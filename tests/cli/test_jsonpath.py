"""kubectl's JSONPath dialect (`setpoint.cli.jsonpath`), property by property: any text is
a template or one `Invalid` (never another exception); a path reads what a dict lookup
reads; `[*]`, slices and indexes read what Python's slicing reads; `range` repeats its body
per value; a filter keeps what its comparison keeps; numbers print as Go prints them.
(tests/api/test_jsonpath_kubectl.py compares whole outputs with the real kubectl.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.cli.jsonpath import Template, custom_columns, text_of
from setpoint.errors import Invalid

keys = st.text(alphabet="abcxyz_", min_size=1, max_size=4)
scalars = st.one_of(
    st.text(alphabet="abc -", max_size=5),
    st.integers(-1000, 1000),
    st.booleans(),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=10,
)


@given(st.text(alphabet="{}[]()?@$.*:,'\"=<>!ab01 -\\rangeend", max_size=30))
def test_any_text_is_a_template_or_refused_in_one_line(text: str) -> None:
    problem = ""
    try:
        Template(text).render({"a": [1, {"b": "x"}], "b": {"a": 0}})
    except Invalid as exc:
        problem = str(exc)
    assert "\n" not in problem


@given(st.lists(keys, min_size=1, max_size=4), values)
def test_a_path_reads_what_a_lookup_reads(path: list[str], leaf: Any) -> None:
    data: Any = leaf
    for key in reversed(path):
        data = {key: data}
    assert Template("{." + ".".join(path) + "}").render(data) == text_of(leaf)
    assert Template("{.nothere}").render(data) == ""  # missing: nothing, as kubectl


@given(
    st.lists(st.integers(0, 9), max_size=6),
    st.integers(-6, 6),
    st.integers(-6, 6),
)
def test_slices_and_indexes_read_what_python_slicing_reads(
    items: list[int], start: int, end: int
) -> None:
    data = {"items": items}
    assert Template("{.items[*]}").render(data) == " ".join(map(str, items))
    assert Template("{.items[:]}").render(data) == " ".join(map(str, items))
    length = len(items)
    lo, hi = start + length if start < 0 else start, end + length if end < 0 else end
    if lo == hi:
        assert Template(f"{{.items[{start}:{end}]}}").render(data) == ""
    elif 0 <= lo < length and 0 <= hi <= length and lo <= hi:
        want = " ".join(map(str, items[lo:hi]))
        assert Template(f"{{.items[{start}:{end}]}}").render(data) == want
        assert Template(f"{{.items[{start}]}}").render(data) == str(items[lo])
    else:
        with pytest.raises(Invalid):
            Template(f"{{.items[{start}:{end}]}}").render(data)


@given(st.lists(st.fixed_dictionaries({"name": keys, "n": st.integers(0, 5)}), max_size=5))
def test_range_repeats_its_body_and_a_filter_keeps_what_compares(
    items: list[dict[str, Any]],
) -> None:
    data = {"items": items}
    body = '{range .items[*]}{.name}={.n}{"\\n"}{end}'
    assert Template(body).render(data) == "".join(f"{i['name']}={i['n']}\n" for i in items)
    for op, keep in (("==", lambda n: n == 2), ("!=", lambda n: n != 2), (">", lambda n: n > 2),
                     ("<=", lambda n: n <= 2)):  # fmt: skip
        got = Template(f"{{.items[?(@.n{op}2)].name}}").render(data)
        assert got == " ".join(i["name"] for i in items if keep(i["n"]))
    strings = Template('{.items[?(@.name=="a")].n}').render(data)
    assert strings == " ".join(str(i["n"]) for i in items if i["name"] == "a")


def test_values_print_as_kubectl_prints_them() -> None:
    data = {"f": [1.0, 1.5, 1e6, 123456.0, 0.0001, 1e-5], "m": {"b": "<&>", "a": [True, None]}}
    assert Template("{.f[*]}").render(data) == "1 1.5 1e+06 123456 0.0001 1e-05"
    assert Template("{.m}").render(data) == '{"a":[true,null],"b":"\\u003c\\u0026\\u003e"}'
    assert Template("{..a}").render(data) == "[true,null]"
    assert Template("{['m']['b']} {.m.a[0]}").render(data) == "<&> true"
    assert Template('{"tab\\there"}{.f[0]}').render(data) == "tab\there1"
    assert json.loads(Template("{.m}").render(data)) == data["m"]


def test_custom_columns_lay_out_as_kubectl_s_tab_writer() -> None:
    columns = custom_columns("NAME:.metadata.name,L:{.metadata.labels},ARGS:spec.args")
    rows = [
        {"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"args": ["sleep", "1"]}},
        {"metadata": {"name": "longer-name"}, "spec": {}},
    ]
    assert columns.table(rows) == [
        "NAME          L          ARGS",
        "a             map[x:1]   [sleep 1]",
        "longer-name   <none>     <none>",
    ]
    with pytest.raises(Invalid, match="expected <header>:<json-path-expr>"):
        custom_columns("NAME")
