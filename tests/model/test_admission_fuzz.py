"""Fuzzing what users send: the manifest loader (and the kind checks after it), the label
selector parser and the patch functions raise nothing but the project's own errors
(`setpoint.Error` subclasses), whatever the input. A few seconds in all."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.engine import builtin_kinds
from setpoint.errors import Error
from setpoint.model import Selector, apply_patch, merge_patch, parse_selector
from setpoint.model.manifests import Limits, parse_manifests

REGISTRY = builtin_kinds()
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

YAML_PIECES = [
    "apiVersion: setpoint.dev/v1alpha1\n",
    "kind: Process\n",
    "kind: List\n",
    "items:\n",
    "metadata:\n",
    "  name: p\n",
    "  lables: {}\n",
    "spec:\n",
    "  args: [a, b]\n",
    "  env: {A=B: x}\n",
    "sepc: 1\n",
    "&a ",
    "*a",
    "*b",
    "&b ",
    "<<: ",
    "[",
    "]",
    "{",
    "}",
    ": ",
    "- ",
    "\n",
    "  ",
    "a",
    "1",
    "-1",
    "99999999999999999999999",
    ".nan",
    ".inf",
    "!!binary aGk=",
    "!!set {a}",
    "!!python/object:x",
    "? ",
    "'",
    '"',
    ",",
    "---\n",
    "...\n",
    "\t",
    "%YAML 1.1\n",
    "2024-01-01",
    "~",
    "null",
    "true",
    "\\0",
    "\x00",
    "\x1b[31m",
]
"""Fragments that reach the loader's corners: aliases, merges, tags, limits, bad fields."""

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)

LIMITS = Limits(max_bytes=64 * 1024, max_depth=20, alias_budget=200)


def admit(text: str | bytes, *, as_json: bool = False) -> None:
    """Parse, then check every object as the store would."""
    for manifest in parse_manifests(text, "fuzz", as_json=as_json, limits=LIMITS):
        kind = REGISTRY.for_object(manifest.obj)
        kind.validate(manifest.obj)


def only_our_errors(call: Any, *args: Any, **kwargs: Any) -> None:
    """Run `call`; our errors are answers, anything else fails the test."""
    with contextlib.suppress(Error):
        call(*args, **kwargs)


@FUZZ
@given(st.lists(st.sampled_from(YAML_PIECES), max_size=40).map("".join))
def test_yaml_fragments_raise_only_our_errors(text: str) -> None:
    only_our_errors(admit, text)


@FUZZ
@given(st.text(max_size=200) | st.binary(max_size=200))
def test_any_text_raises_only_our_errors(text: str | bytes) -> None:
    only_our_errors(admit, text)
    only_our_errors(admit, text, as_json=True)


@FUZZ
@given(json_values)
def test_any_json_document_raises_only_our_errors(doc: Any) -> None:
    text = json.dumps(doc)
    only_our_errors(admit, text, as_json=True)
    only_our_errors(admit, text)  # JSON is YAML too


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(["apiVersion", "kind", "metadata", "spec", "status", "sepc"]),
        json_values,
    ),
    st.sampled_from(["Process", "Job", "Deployment", "Event", "Lease"]),
)
def test_any_object_of_a_known_kind_raises_only_our_errors(doc: dict[str, Any], kind: str) -> None:
    doc["apiVersion"] = "setpoint.dev/v1alpha1" if kind in ("Process", "Job") else "v1"
    doc["kind"] = kind
    only_our_errors(lambda: REGISTRY.for_object(doc).validate(doc))


SELECTOR_PIECES = ["a", "b.c/d", "=", "==", "!=", " in ", " notin ", "(", ")", ",", "!", " ",
                   "x", "-", "_", "/", "\x00", "é"]  # fmt: skip


@FUZZ
@given(st.text(max_size=60) | st.lists(st.sampled_from(SELECTOR_PIECES), max_size=20).map("".join))
def test_selectors_raise_only_our_errors(text: str) -> None:
    only_our_errors(parse_selector, text)


@FUZZ
@given(json_values)
def test_selector_dicts_raise_only_our_errors(spec: Any) -> None:
    if isinstance(spec, dict):
        only_our_errors(Selector.from_dict, spec)
    only_our_errors(Selector.from_dict, {"matchLabels": spec, "matchExpressions": spec})


ops = st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "bogus"])},
    optional={
        "path": st.sampled_from(["", "/", "/a", "/a/0", "/a/-", "/b/c", "/~2", "x", "/a/99"]),
        "from": st.sampled_from(["", "/a", "/b", "/a/0", "/nope"]),
        "value": json_values,
    },
)


@FUZZ
@given(
    json_values, st.lists(ops, max_size=4) | json_values, st.sampled_from(["merge", "json", "x"])
)
def test_patches_raise_only_our_errors(obj: Any, patch: Any, patch_type: str) -> None:
    target = obj if isinstance(obj, dict) else {"a": [obj], "b": {"c": obj}}
    only_our_errors(apply_patch, target, patch, patch_type)
    merge_patch(target, patch)  # a merge patch of JSON values always applies
