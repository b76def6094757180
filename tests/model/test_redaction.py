"""Masking secret values (`setpoint.model.redaction`): in text, in JSON-like values, line by
line, never values too short to mask without masking everything."""

from __future__ import annotations

import base64

from setpoint.model.redaction import MASK, Redactor, redact, secret_values


def test_every_occurrence_is_masked_longest_first() -> None:
    text = "user=admin password=hunter2 again hunter22"
    assert redact(text, ["hunter2", "hunter22"]) == f"user=admin password={MASK} again {MASK}"


def test_short_values_are_not_masked_and_multi_line_values_are_masked_by_line() -> None:
    key = "-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\n-----END KEY-----\n"
    assert redact("a b c", ["a", "b"]) == "a b c"
    assert redact("got MIIBOgIBAAJBAKj34GkxFhD9 here", [key]) == f"got {MASK} here"


def test_strings_in_a_value_are_masked_keys_included() -> None:
    redactor = Redactor(["s3cr3t"])
    entry = {"ts": 1.5, "lines": ["x s3cr3t"], "s3cr3t": {"n": None, "m": "s3cr3t"}}
    assert redactor.value(entry) == {
        "ts": 1.5,
        "lines": [f"x {MASK}"],
        MASK: {"n": None, "m": MASK},
    }
    assert not Redactor([])
    assert Redactor([]).value(entry) is entry


def test_secret_values_are_the_fields_strings_and_their_base64_decoding() -> None:
    encoded = base64.b64encode(b"hunter2").decode()
    obj = {"data": {"p": encoded}, "type": "Opaque"}
    assert secret_values(obj, ("data",)) == {encoded, "hunter2"}
    assert secret_values(obj, ()) == set()
