"""The `Service` kind (setpoint.dev/v1alpha1, namespaced, short name `svc`): its spec and
status schemas (the kind itself, `SERVICE`, is declared in `setpoint.workloads.kinds`).
Every default of a Service's spec is defined here, once. Pure.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from setpoint.errors import Invalid
from setpoint.model import Object, Schema
from setpoint.model.meta import check_label_value, check_qualified_name


class ServiceSpecSchema(Schema):
    """Where to listen, and which Processes to send connections to."""

    selector: dict[str, str]
    port: int = Field(ge=1, le=65535)
    host: str = Field(default="127.0.0.1", min_length=1)
    target_port: int | None = Field(default=None, ge=1, le=65535)

    @field_validator("selector")
    @classmethod
    def _check_selector(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise PydanticCustomError(
                "empty_selector",
                "must name at least one label (an empty selector would select every Process)",
            )
        for key, label in value.items():
            try:
                check_qualified_name(key, "selector")
                check_label_value(label, f"selector.{key}")
            except Invalid as exc:
                raise PydanticCustomError("selector", "{msg}", {"msg": str(exc)}) from None
        return value

    @classmethod
    def of(cls, obj: Object) -> ServiceSpecSchema:
        """The spec of a stored (so already validated) Service, as its model."""
        return cls.model_validate(obj["spec"])

    @field_validator("host")
    @classmethod
    def _check_host(cls, value: str) -> str:
        if any(c.isspace() for c in value):
            raise PydanticCustomError("host", "must not contain spaces")
        return value


class EndpointSchema(Schema):
    """One Ready Process behind the Service, and the port connections go to."""

    name: str
    port: int


class ServiceStatusSchema(Schema):
    """What the controller observed (see the module docstring)."""

    endpoints: list[EndpointSchema] = Field(default_factory=list)
    ready_endpoints: int = 0
    observed_generation: int | None = None
    conditions: list[dict[str, Any]] = Field(default_factory=list)
