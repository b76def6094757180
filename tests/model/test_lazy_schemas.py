"""Kinds name their schemas lazily (`"module:Name"`): every built-in reference resolves to a
`Schema`, naming every built-in kind imports no pydantic, and a built-in kind still
validates and refuses as its schema says."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from setpoint.engine import builtin_kinds
from setpoint.errors import Invalid
from setpoint.model import Kind, Registry, Schema
from setpoint.model.schema import model_of
from setpoint.workloads.kinds import PROCESS
from setpoint.workloads.process import ProcessSpecSchema, ProcessStatusSchema


def test_every_builtin_reference_resolves_to_a_schema() -> None:
    references = 0
    for kind in builtin_kinds():
        for ref in (kind.spec, kind.status, kind.body):
            if ref is None:
                continue
            assert isinstance(ref, str), f"{kind.kind}: built-in kinds name their schema lazily"
            assert issubclass(model_of(ref), Schema), ref
            references += 1
    assert references == 23  # spec and status, or body, of the fifteen built-in kinds
    assert model_of(PROCESS.spec or "") is ProcessSpecSchema
    assert model_of(PROCESS.status or "") is ProcessStatusSchema


def test_naming_the_builtin_kinds_imports_no_pydantic_nor_controllers() -> None:
    program = (
        "import sys\n"
        "from setpoint.engine import builtin_kinds\n"
        "kinds = list(builtin_kinds())\n"
        "print(len(kinds), sorted(m for m in sys.modules if m.startswith(('pydantic', "
        "'setpoint.workloads.process', 'setpoint.control.thermostat', 'setpoint.runtime.events',"
        " 'setpoint.runtime.core', 'asyncio'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out == "16 []\n"  # and CustomResourceDefinition, a kind without models


def test_a_builtin_kind_validates_and_refuses_as_its_schema_says() -> None:
    obj: dict[str, Any] = {
        "apiVersion": PROCESS.api_version,
        "kind": "Process",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"args": ["python3", "-m", "http.server"]},
    }
    PROCESS.validate(obj)
    assert obj["spec"]["restartPolicy"] == "Always"  # a default, filled by the schema
    obj["spec"]["restartPolicyy"] = "Never"
    with pytest.raises(Invalid, match="restartPolicy") as refused:
        PROCESS.validate(obj)
    assert refused.value.field == "spec.restartPolicyy"


def test_a_reference_must_be_module_colon_name() -> None:
    with pytest.raises(Invalid) as refused:
        Kind("example.com/v1", "Thing", spec="example.things.ThingSpec")
    assert refused.value.field == "spec"


def test_a_reference_to_something_else_than_a_model_is_a_type_error() -> None:
    thing = Kind("example.com/v1", "Thing", spec="setpoint.model.kinds:Registry")
    obj = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "a"}}
    with pytest.raises(TypeError, match="no pydantic model Registry"):
        thing.validate(obj)


def test_a_class_and_a_reference_work_alike() -> None:
    class ThingSpec(Schema):
        size: int = 1

    sys.modules[__name__].ThingSpec = ThingSpec  # type: ignore[attr-defined]
    by_class = Kind("example.com/v1", "Thing", spec=ThingSpec)
    by_name = Kind("example.com/v1", "Thing", spec=f"{__name__}:ThingSpec")
    for kind in (by_class, by_name):
        obj = {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "a"}}
        kind.validate(obj)
        assert obj["spec"] == {"size": 1}
    registry = Registry()
    registry.register(by_name)
    registry.register(by_name)  # the same definition twice is harmless
