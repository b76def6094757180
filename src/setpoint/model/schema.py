"""Schemas of spec, status and body (pydantic models): the `Schema` base, how a kind's
schema reference becomes a model class, and validation that names the refused field.

`Schema` is the recommended base for spec and status models: fields are written in
camelCase on the wire (`restartPolicy`) and snake_case in Python, and an unknown field is
an error rather than silently dropped.

This is the only module of the model that imports pydantic; `setpoint.model.kinds`
imports it on the first validation, so that code which only names kinds (the CLI's
`--help`, `get`) never pays for pydantic. `json_schema_of` is a model's JSON schema with each
field described by its docstring (`setpoint.model.crd` makes OpenAPI schemas of it).
`parsed_leniently` and `wire_form` turn an object's spec or status into a model instance
and back (`setpoint.runtime.typed`). Pure:
no I/O (but reading a model's source for its field docstrings).
"""

from __future__ import annotations

import ast
import copy
import functools
import importlib
import inspect
import itertools
import json
import textwrap
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from setpoint.errors import Invalid
from setpoint.model.admission import unknown_field_message


class Schema(BaseModel):
    """Base model for specs and statuses: camelCase on the wire, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=False
    )


@functools.cache
def model_of(ref: type[BaseModel] | str) -> type[BaseModel]:
    """The model class a kind's `spec`, `status` or `body` names: the class itself, or
    the one a `"module:Name"` reference names (imported once, then remembered)."""
    if not isinstance(ref, str):
        return ref
    module, _, name = ref.partition(":")
    model = getattr(importlib.import_module(module), name, None)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"{ref!r}: {module} defines no pydantic model {name}")
    return model


def validated(model: type[BaseModel], value: Any, root: str) -> dict[str, Any]:
    """`value` (None: empty) validated by `model`, in its normalised wire form (defaults
    filled, camelCase keys, no nulls); `Invalid` naming the first refused field under
    `root` (an unknown one with the nearest valid name)."""
    try:
        parsed = model.model_validate({} if value is None else value)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        message = first["msg"]
        if first["type"] == "extra_forbidden":
            names = _field_names(model, first["loc"][:-1])
            if names:
                message = unknown_field_message(str(first["loc"][-1]), names)
        raise Invalid(message, field=_path(root, first["loc"])) from None
    return wire_form(parsed)


def parsed_leniently(model: type[BaseModel], value: Any, root: str) -> BaseModel:
    """`value` (None: empty) as an instance of `model`, fields `model` does not know left
    out (the object may have been written under a newer schema: its writer's fields are
    not this model's to refuse); `Invalid` naming the first field it cannot take."""
    data = copy.deepcopy({} if value is None else value)
    while True:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            unknown = [e["loc"] for e in errors if e["type"] == "extra_forbidden"]
            if not unknown or len(unknown) < len(errors):
                first = next(e for e in errors if e["type"] != "extra_forbidden")
                raise Invalid(first["msg"], field=_path(root, first["loc"])) from None
            for loc in unknown:
                _drop(data, loc)


def _drop(data: Any, loc: tuple[int | str, ...]) -> None:
    """Remove the value at `loc` inside `data` (in place)."""
    for part in loc[:-1]:
        data = data[part]
    del data[loc[-1]]


def wire_form(instance: BaseModel) -> dict[str, Any]:
    """A model instance as it is written in an object: camelCase keys, no nulls."""
    return instance.model_dump(mode="json", by_alias=True, exclude_none=True)


def _field_names(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The wire names of the fields of the model at `loc` inside `model` ([] if not found)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int) or not _is_model(current):
            current = _inner_model(current)
            if isinstance(part, int):
                continue
        if not _is_model(current):
            return []
        field = next(
            (f for n, f in current.model_fields.items() if part in (n, f.alias)),
            None,
        )
        if field is None:
            return []
        current = field.annotation
    current = current if _is_model(current) else _inner_model(current)
    if not _is_model(current):
        return []
    return [f.alias or n for n, f in current.model_fields.items()]


def _is_model(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _inner_model(annotation: Any) -> Any:
    """The model inside `list[M]`, `dict[str, M]` or `M | None`, if there is one."""
    for arg in get_args(annotation):
        if _is_model(arg):
            return arg
    return None


def _path(root: str, loc: tuple[int | str, ...]) -> str:
    """`spec.args[0]`, `spec.env.HOME`; a refused map key as `spec.env["A=B"]`."""
    out = root
    parts = list(loc)
    for i, part in enumerate(parts):
        if part == "[key]":
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        elif i + 1 < len(parts) and parts[i + 1] == "[key]":
            out += f"[{json.dumps(part)}]"
        else:
            out += f".{part}"
    return out.lstrip(".")


def json_schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """pydantic's JSON schema of `model` in wire names (validation mode), every field
    without a description described by its docstring (the string after it in the class).
    A value that a validator sees before its type is checked (a `BeforeValidator`, a
    `field_validator(mode="before")`) may be anything the validator turns into that type:
    its schema is `{}` (any value), so that the schema accepts all the model accepts."""
    return model.model_json_schema(by_alias=True, schema_generator=_DescribedFields)


class _DescribedFields(GenerateJsonSchema):
    def function_before_schema(
        self, schema: core_schema.BeforeValidatorFunctionSchema
    ) -> JsonSchemaValue:
        if schema["schema"]["type"] == "model":
            return super().function_before_schema(schema)
        return {}

    def function_wrap_schema(
        self, schema: core_schema.WrapValidatorFunctionSchema
    ) -> JsonSchemaValue:
        if schema["schema"]["type"] == "model":
            return super().function_wrap_schema(schema)
        return {}

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        out = super().model_schema(schema)
        properties = out.get("properties") or {}
        docs = field_docstrings(schema["cls"])
        for name, field in schema["cls"].model_fields.items():
            wire = properties.get(field.alias or name)
            if isinstance(wire, dict) and name in docs and "description" not in wire:
                wire["description"] = docs[name]
        return out


def field_docstrings(cls: type) -> dict[str, str]:
    """`{field: docstring}` of a class and its bases: the string literal written just
    after an annotated attribute (as pydantic's `use_attribute_docstrings` reads them)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or klass.__module__.startswith("pydantic"):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in itertools.pairwise(body):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs
