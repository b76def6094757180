"""The byte quantity parser: Kubernetes' forms, rounded up, refusals in one line."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.model.quantities import format_bytes, parse_bytes


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("64Mi", 64 << 20),
        ("1Gi", 1 << 30),
        ("1.5Gi", 3 << 29),
        ("500M", 500_000_000),
        ("1k", 1000),
        ("1e6", 1_000_000),
        ("134217728", 134217728),
        (" 2Ki ", 2048),
        (".5Ki", 512),
        ("0.1", 1),
        (4096, 4096),
    ],
)
def test_quantities_are_read_as_kubernetes_writes_them(text: str | int, amount: int) -> None:
    assert parse_bytes(text) == amount


@pytest.mark.parametrize("text", ["", "0", "0Mi", "-1Mi", "64MB", "1m", "Mi", "1 Mi", "x" * 40])
def test_what_is_no_quantity_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(ValueError, match="must be") as caught:
        parse_bytes(text)
    assert "\n" not in str(caught.value)


@given(st.integers(min_value=1, max_value=2**62))
def test_the_printed_form_reads_back(amount: int) -> None:
    assert parse_bytes(format_bytes(amount)) == amount


def test_the_printed_form_is_the_shortest_binary_one() -> None:
    assert format_bytes(64 << 20) == "64Mi"
    assert format_bytes(1536 << 10) == "1536Ki"
    assert format_bytes(100) == "100"
