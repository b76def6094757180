"""Kinds as data (`setpoint.model.crd`): a Python kind's CRD, and the kind a CRD defines.

Every built-in kind's generated CRD is valid and structural; what its pydantic models
accept (the manifests of the docs and examples, and hypothesis-built specs), the kind made
of its CRD accepts too. A kind made of a hand-written CRD validates by its schema, fills
its defaults, and refuses naming the field; a CRD that is not a valid one is refused
naming its field.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from crd_kit import widget, widget_crd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.engine import builtin_kinds
from setpoint.errors import Invalid, UnknownKind
from setpoint.model import Kind, Registry
from setpoint.model.crd import CRD, crd_of, kind_of, openapi_schema
from setpoint.model.crd_check import check_crd
from setpoint.model.schema import model_of
from setpoint.workloads.kinds import DEPLOYMENT, PROCESS

ROOT = Path(__file__).resolve().parents[2]
GROUPED = [k for k in builtin_kinds() if k.group and k.validator is None]


# -- Python kinds -> CRDs ----------------------------------------------------------------


@pytest.mark.parametrize("kind", GROUPED, ids=lambda k: k.kind)
def test_every_builtin_kind_publishes_a_valid_structural_crd(kind: Kind) -> None:
    crd = crd_of(kind)
    check_crd(crd)
    assert crd["metadata"]["name"] == f"{kind.plural}.{kind.group}"
    names = crd["spec"]["names"]
    assert (names["kind"], names["plural"], names["singular"]) == (
        kind.kind,
        kind.plural,
        kind.singular,
    )
    assert names.get("shortNames", []) == list(kind.short_names)
    assert names["categories"] == ["all", "setpoint"]
    assert "$ref" not in json.dumps(crd)
    assert "anyOf" not in json.dumps(crd)
    (version,) = crd["spec"]["versions"]
    assert version["served"]
    assert version["storage"]
    assert version["name"] == kind.version
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Ready",
        *(c.name for c in kind.columns),
        "Age",
    ]
    back = kind_of(crd)
    assert (back.api_version, back.kind, back.plural, back.namespaced, back.short_names) == (
        kind.api_version,
        kind.kind,
        kind.plural,
        kind.namespaced,
        kind.short_names,
    )
    assert back.scale == kind.scale
    assert [(c.name, c.path) for c in back.columns] == [(c.name, c.path) for c in kind.columns]
    assert kind_of(crd) == back  # equal by value: defining it again changes nothing


def test_subresources_follow_the_kind() -> None:
    (version,) = crd_of(DEPLOYMENT)["spec"]["versions"]
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }
    (version,) = crd_of(PROCESS)["spec"]["versions"]
    assert version["subresources"] == {"status": {}}


def test_a_crd_kind_has_the_status_subresource_its_crd_declares() -> None:
    crd = widget_crd()
    kind = kind_of(crd)
    assert kind.has_status
    assert crd_of(kind)["spec"]["versions"][0]["subresources"] == {"status": {}}
    del crd["spec"]["versions"][0]["subresources"]
    assert not kind_of(crd).has_status
    assert "subresources" not in crd_of(kind_of(crd))["spec"]["versions"][0]
    assert (PROCESS.has_status, kind_of(crd_of(PROCESS)).has_status) == (True, True)


def test_the_schema_is_structural_with_nullable_and_preserved_fields() -> None:
    spec = openapi_schema(PROCESS)["properties"]["spec"]
    assert spec["properties"]["cwd"] == {"type": "string", "nullable": True}
    probe = spec["properties"]["readinessProbe"]
    assert probe["type"] == "object"
    assert probe["nullable"] is True
    assert probe["properties"]["periodSeconds"]["default"] == 10
    backoff = spec["properties"]["backoff"]["properties"]["initialSeconds"]
    assert backoff["minimum"] == 0
    assert backoff["exclusiveMinimum"] is True
    assert spec["required"] == ["args"]
    secret = next(k for k in builtin_kinds() if k.kind == "Secret")
    data = openapi_schema(secret)["properties"]["data"]
    assert data["type"] == "object"
    assert data["additionalProperties"]["type"] == "string"


def test_field_docstrings_become_descriptions() -> None:
    from setpoint.model import Schema

    class ToySpec(Schema):
        """A toy."""

        size: int = 1
        """How big the toy is."""
        name: str | None = None

    toy = Kind("example.com/v1", "Toy", spec=ToySpec)
    spec = openapi_schema(toy)["properties"]["spec"]
    assert spec["description"] == "A toy."
    assert spec["properties"]["size"] == {
        "type": "integer",
        "default": 1,
        "description": "How big the toy is.",
    }
    assert "description" not in spec["properties"]["name"]


def _manifests() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    texts = [p.read_text() for p in sorted((ROOT / "examples").rglob("*.yaml"))]
    for page in sorted((ROOT / "docs").glob("*.md")):
        texts += re.findall(r"```ya?ml\n(.*?)```", page.read_text(), flags=re.S)
    for text in texts:
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError:
            continue
        found += [d for d in docs if isinstance(d, dict) and isinstance(d.get("kind"), str)]
    return found


def test_what_the_models_accept_the_crd_schema_accepts_too() -> None:
    """Every manifest of the docs and examples of a built-in kind, raw and as stored."""
    registry = builtin_kinds()
    checked = 0
    for manifest in _manifests():
        try:
            kind = registry.for_object(manifest)
        except (Invalid, UnknownKind):
            continue
        if kind not in GROUPED:
            continue
        stored = copy.deepcopy(manifest)
        try:
            kind.validate(stored)
        except Invalid:
            continue  # a manifest the docs show being refused
        data_kind = kind_of(crd_of(kind))
        for obj in (copy.deepcopy(manifest), copy.deepcopy(stored)):
            data_kind.validate(obj)
        checked += 1
    assert checked >= 10


def test_default_statuses_validate_by_the_crd_schema() -> None:
    for kind in GROUPED:
        if kind.status is None:
            continue
        status = model_of(kind.status)().model_dump(mode="json", by_alias=True, exclude_none=True)
        assert kind_of(crd_of(kind)).validate_status(status) is not None


_PROCESS_SPECS = st.fixed_dictionaries(
    {"args": st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=3)},
    optional={
        "restartPolicy": st.sampled_from(["Always", "OnFailure", "Never"]),
        "ports": st.lists(st.integers(1, 65535), max_size=3),
        "env": st.dictionaries(
            st.from_regex(r"[A-Z_][A-Z0-9_]{0,5}", fullmatch=True), st.text(max_size=5)
        ),
        "cwd": st.none() | st.text(min_size=1, max_size=5),
        "terminationGracePeriodSeconds": st.floats(0, 100) | st.integers(0, 100),
        "readinessProbe": st.fixed_dictionaries(
            {"tcpSocket": st.fixed_dictionaries({"port": st.integers(1, 65535)})},
            optional={"periodSeconds": st.integers(1, 60)},
        ),
        "dependsOn": st.lists(
            st.fixed_dictionaries(
                {"kind": st.sampled_from(["Process", "Job"]), "name": st.just("db")},
                optional={"condition": st.sampled_from(["Ready", "Complete"])},
            ),
            max_size=2,
        ),
    },
)


_PROCESS_AS_DATA: list[Kind] = []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_PROCESS_SPECS)
def test_process_specs_the_model_accepts_the_schema_accepts(spec: dict[str, Any]) -> None:
    obj = {
        "apiVersion": PROCESS.api_version,
        "kind": "Process",
        "metadata": {"name": "p"},
        "spec": spec,
    }
    stored = copy.deepcopy(obj)
    try:
        PROCESS.validate(stored)
    except Invalid:
        return
    if not _PROCESS_AS_DATA:
        _PROCESS_AS_DATA.append(kind_of(crd_of(PROCESS)))
    _PROCESS_AS_DATA[0].validate(copy.deepcopy(obj))
    _PROCESS_AS_DATA[0].validate(stored)


# -- CRDs -> kinds ----------------------------------------------------------------------


def test_a_crd_kind_validates_and_fills_defaults() -> None:
    kind = kind_of(widget_crd())
    assert (kind.api_version, kind.kind, kind.plural, kind.namespaced) == (
        "example.com/v1",
        "Widget",
        "widgets",
        True,
    )
    assert [(c.name, c.path) for c in kind.columns] == [("SIZE", "spec.size")]
    obj = widget(
        {
            "size": 3,
            "port": "http",
            "note": None,
            "extra": {"anything": [1, {"goes": True}]},
            "labels": {"a": "b"},
            "parts": [{"name": "x"}],
        }
    )
    kind.validate(obj)
    assert obj["spec"]["colour"] == "red"
    assert obj["spec"]["parts"] == [{"name": "x", "count": 1}]
    assert obj["metadata"]["namespace"] == "default"
    assert kind.validate_status({"ready": True}) == {"ready": True}


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"size": 0}, "spec.size", "minimum"),
        ({"size": "3"}, "spec.size", "want integer"),
        ({}, "spec.size", "required"),
        ({"size": 1, "colour": "green"}, "spec.colour", "not one of"),
        ({"size": 1, "szie": 2}, "spec.szie", 'did you mean "size"'),
        ({"size": 1, "port": 1.5}, "spec.port", "integer or a string"),
        ({"size": 1, "labels": {"a": 1}}, "spec.labels.a", "want string"),
        ({"size": 1, "parts": [{"name": "x", "cnt": 1}]}, "spec.parts[0].cnt", "unknown field"),
    ],
)
def test_a_crd_kind_refuses_naming_the_field(spec: Any, field: str, words: str) -> None:
    kind = kind_of(widget_crd())
    with pytest.raises(Invalid) as caught:
        kind.validate(widget(spec))
    assert caught.value.field == field
    assert words in str(caught.value)


def test_a_crd_pattern_is_re2_in_linear_time() -> None:
    # Backtracking (Python's re, jsonschema's default) takes about 2**64 steps on "a"*64+"b".
    kind = kind_of(
        widget_crd(properties={"code": {"type": "string", "pattern": "^(a+)+$"}}, required=[])
    )
    kind.validate(widget({"code": "a" * 64}))
    with pytest.raises(Invalid, match="does not match") as caught:
        kind.validate(widget({"code": "a" * 64 + "b"}))
    assert caught.value.field == "spec.code"


def test_a_crd_with_a_pattern_re2_cannot_compile_is_refused_naming_it() -> None:
    crd = widget_crd(properties={"code": {"type": "string", "pattern": "(?<=x)y"}})
    with pytest.raises(Invalid, match="not an RE2 regular expression") as caught:
        CRD.validate(crd)
    assert caught.value.field == (
        "spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.code.pattern"
    )


def test_a_crd_kind_refuses_unknown_top_level_fields_and_bad_status() -> None:
    kind = kind_of(widget_crd())
    obj = widget({"size": 1})
    obj["sepc"] = {}
    with pytest.raises(Invalid, match='did you mean "spec"') as caught:
        kind.validate(obj)
    assert caught.value.field == "sepc"
    with pytest.raises(Invalid) as caught:
        kind.validate_status({"ready": "yes"})
    assert caught.value.field == "status.ready"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda c: c["metadata"].update(name="widgets.example.org"), "metadata.name"),
        (lambda c: c["spec"].update(group="example"), "spec.group"),
        (lambda c: c["spec"]["names"].update(kind="wid get"), "spec.names.kind"),
        (lambda c: c["spec"]["names"].update(plural="Widgets"), "spec.names.plural"),
        (lambda c: c["spec"]["names"].update(singular="gadget"), "spec.names.singular"),
        (lambda c: c["spec"].update(scope="Galaxy"), "spec.scope"),
        (lambda c: c["spec"].update(versions=[]), "spec.versions"),
        (lambda c: c["spec"]["versions"][0].update(storage=False), "spec.versions"),
        (
            lambda c: c["spec"]["versions"].append(copy.deepcopy(c["spec"]["versions"][0])),
            "spec.versions[1].name",
        ),
        (
            lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
                "spec"
            ].pop("type"),
            "spec.versions[0].schema.openAPIV3Schema.properties.spec.type",
        ),
        (
            lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"].update(
                spec={"$ref": "#/definitions/Spec"}
            ),
            "spec.versions[0].schema.openAPIV3Schema.properties.spec.$ref",
        ),
        (
            lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"].update(
                spec={"type": "object", "properties": {}, "additionalProperties": True}
            ),
            "spec.versions[0].schema.openAPIV3Schema.properties.spec.additionalProperties",
        ),
        (
            lambda c: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"].update(
                spec={"type": "array"}
            ),
            "spec.versions[0].schema.openAPIV3Schema.properties.spec.items",
        ),
        (
            lambda c: c["spec"]["versions"][0]["subresources"].update(
                scale={"specReplicasPath": "spec"}
            ),
            "spec.versions[0].subresources.scale.specReplicasPath",
        ),
    ],
)
def test_an_invalid_crd_is_refused_naming_the_field(change: Any, field: str) -> None:
    crd = widget_crd()
    change(crd)
    with pytest.raises(Invalid) as caught:
        CRD.validate(crd)
    assert caught.value.field == field


def test_the_crd_kind_is_cluster_scoped_and_validates_crds() -> None:
    assert (CRD.plural, CRD.namespaced, CRD.short_names) == (
        "customresourcedefinitions",
        False,
        ("crd", "crds"),
    )
    crd = widget_crd()
    CRD.validate(crd)
    assert "namespace" not in crd["metadata"]
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert crd["status"]["acceptedNames"]["listKind"] == "WidgetList"
    assert crd["status"]["storedVersions"] == ["v1"]


# -- the registry -----------------------------------------------------------------------


def test_a_python_kind_wins_over_a_definition_and_definitions_come_and_go() -> None:
    registry = Registry()
    registry.register(PROCESS)
    assert not registry.define(kind_of(crd_of(PROCESS)))
    assert registry.get(PROCESS.api_version, "Process") is PROCESS
    widget_kind = kind_of(widget_crd())
    assert registry.define(widget_kind)
    assert registry.resolve("widgets") is widget_kind
    assert registry.defined() == [widget_kind]
    registry.forget("example.com/v1", "Widget")
    registry.forget(PROCESS.api_version, "Process")  # a Python kind stays
    assert registry.get(PROCESS.api_version, "Process") is PROCESS
    with pytest.raises(UnknownKind):
        registry.resolve("widgets")
    registry.define(widget_kind)
    registry.register(widget_kind)  # registering in Python takes a definition's place
    assert registry.defined() == []


def test_a_missed_lookup_refreshes_once_before_refusing() -> None:
    registry = Registry()
    calls: list[int] = []

    def refresh() -> None:
        calls.append(1)
        if len(calls) == 2:
            registry.define(kind_of(widget_crd()))

    registry.refresh = refresh
    with pytest.raises(UnknownKind):
        registry.get("example.com/v1", "Widget")
    assert registry.resolve("widget").kind == "Widget"
    assert registry.get("example.com/v1", "Widget").kind == "Widget"
    assert len(calls) == 2  # a hit reads nothing


def _from_schema(
    schema: dict[str, Any], depth: int = 0, path: tuple[str, ...] = ()
) -> st.SearchStrategy[Any]:
    """Values shaped by a structural schema (mostly valid ones: required fields, enums,
    bounds), for hypothesis to try on a kind's models. A field a model checks by another
    model (a Deployment's template spec: a Process spec) is shaped by that one's schema."""
    if path == ("template", "spec"):
        return _from_schema(openapi_schema(PROCESS)["properties"]["spec"], depth)
    if path == ("template", "metadata"):
        return st.just({"labels": {"app": "web"}})
    if "enum" in schema:
        return st.sampled_from([v for v in schema["enum"] if v is not None])
    kind = schema.get("type")
    if kind == "object" and "properties" in schema and depth < 4:
        required = set(schema.get("required", []))
        fields = {
            n: _from_schema(s, depth + 1, (*path, n)) for n, s in schema["properties"].items()
        }
        return st.fixed_dictionaries(
            {n: s for n, s in fields.items() if n in required},
            optional={n: s for n, s in fields.items() if n not in required},
        )
    if kind == "object":
        return st.dictionaries(st.from_regex(r"[A-Z][A-Z0-9_]{0,4}", fullmatch=True),
                               st.text("abc", max_size=3), max_size=2)  # fmt: skip
    if kind == "array":
        low = schema.get("minItems", 0)
        return st.lists(_from_schema(schema.get("items", {}), depth + 1), min_size=low,
                        max_size=low + 2)  # fmt: skip
    above = 1 if schema.get("exclusiveMinimum") else 0
    if kind == "integer":
        low = schema.get("minimum", 0) + above
        return st.integers(low, max(low, schema.get("maximum", 10)))
    if kind == "number":
        low = schema.get("minimum", 0) + above / 2
        return st.floats(low, max(low, schema.get("maximum", 100)))
    if kind == "boolean":
        return st.booleans()
    if kind == "string":
        return st.text("abc-", min_size=max(1, schema.get("minLength", 0)), max_size=6)
    return st.dictionaries(st.sampled_from(["A", "B"]), st.text("ab", max_size=2), max_size=2)


@pytest.mark.parametrize("kind", [k for k in GROUPED if k.spec], ids=lambda k: k.kind)
def test_every_builtin_spec_the_model_accepts_the_crd_schema_accepts(kind: Kind) -> None:
    data_kind = kind_of(crd_of(kind))
    spec_schema = openapi_schema(kind)["properties"]["spec"]

    @settings(
        max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )
    @given(_from_schema(spec_schema))
    def check(spec: Any) -> None:
        obj = {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"name": "x"},
               "spec": spec}  # fmt: skip
        stored = copy.deepcopy(obj)
        try:
            kind.validate(stored)
        except Invalid:
            return
        data_kind.validate(copy.deepcopy(obj))
        data_kind.validate(stored)

    check()  # derandomized: the same examples every run
    # How many the model accepted is not asserted (for Deployment and Autoscaler, whose
    # models check across fields, it may be none): the docs' and examples' manifests
    # (`test_what_the_models_accept_the_crd_schema_accepts`) cover every kind for certain.
