"""The one duration parser: kubectl's forms, bare seconds, days; a refusal names the option
and the value; `format_duration` and `parse_duration` round-trip."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.errors import Invalid
from setpoint.model.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90.0),
        ("1m30s", 90.0),
        ("2h", 7200.0),
        ("500ms", 0.5),
        ("1h2m3s", 3723.0),
        ("1.5h", 5400.0),
        ("90", 90.0),
        ("0.25", 0.25),
        ("0", 0.0),
        ("1d", 86400.0),
        ("1us", 1e-6),
        ("1µs", 1e-6),
        ("10ns", 1e-8),
        (" 10m ", 600.0),
    ],
)
def test_kubectl_forms_and_bare_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text, "--since") == seconds


@pytest.mark.parametrize("text", ["", "soon", "1x", "-1s", "1s2", "s", "1 s", "1e3s", "9" * 80])
def test_a_refusal_names_the_option_and_the_value(text: str) -> None:
    with pytest.raises(Invalid) as refused:
        parse_duration(text, "--timeout")
    assert refused.value.field == "--timeout"
    assert str(refused.value).startswith(f"--timeout: {text.strip()[:64]!r}: want a duration like")


def test_format_is_the_shortest_form() -> None:
    assert [format_duration(s) for s in (0, 0.5, 1.5, 90, 3600, 3723, 86400)] == [
        "0s", "500ms", "1.5s", "1m30s", "1h", "1h2m3s", "24h",
    ]  # fmt: skip


@given(st.integers(min_value=0, max_value=10**15))
def test_format_then_parse_gives_the_same_nanoseconds(ns: int) -> None:
    seconds = float(Fraction(ns, 10**9))
    text = format_duration(seconds)
    assert parse_duration(text, "--x") == seconds
    assert format_duration(parse_duration(text, "--x")) == text


@given(
    st.lists(
        st.tuples(st.integers(0, 10**6), st.sampled_from(["h", "m", "s", "ms", "us", "ns"])),
        min_size=1,
        max_size=6,
    )
)
def test_parts_add_up(parts: list[tuple[int, str]]) -> None:
    ns = {"h": 3600 * 10**9, "m": 60 * 10**9, "s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
    text = "".join(f"{n}{unit}" for n, unit in parts)
    expected = float(Fraction(sum(n * ns[unit] for n, unit in parts), 10**9))
    assert parse_duration(text, "--x") == expected
