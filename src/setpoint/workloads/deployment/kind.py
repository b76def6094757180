"""The `Deployment` and `ControllerRevision` kinds: their schemas (every default of a
Deployment's spec is defined here, once), the condition types a Deployment reports, and
the spec arithmetic the schemas and the planner share (`resolve_bound`, `substitute`,
`template_hash`). The kinds themselves (`DEPLOYMENT`, `CONTROLLER_REVISION`) are
declared in `setpoint.workloads.kinds`. Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from typing import Any, Literal

import orjson
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from setpoint.errors import Invalid
from setpoint.model import Object, Schema
from setpoint.workloads.depends_on import DependsOn
from setpoint.workloads.process_plan import ProcessSpecSchema

AVAILABLE = "Available"
PROGRESSING = "Progressing"
REPLICA_FAILURE = "ReplicaFailure"

_PERCENT = re.compile(r"^(\d+)%$")
_PLACEHOLDER = re.compile(r"\$\((PORT|REPLICA)\)")


def resolve_bound(value: int | str, replicas: int, *, up: bool) -> int:
    """`maxSurge` (rounded `up`) or `maxUnavailable` (rounded down) as a replica count."""
    if isinstance(value, int):
        return value
    match = _PERCENT.match(value)
    if match is None:
        raise Invalid(f"{value!r} is not a number or a percentage", field="spec.strategy")
    exact = replicas * int(match.group(1)) / 100
    return math.ceil(exact) if up else math.floor(exact)


def substitute(value: Any, *, port: int | None, replica: str, key: str = "") -> Any:
    """`value` (a template's JSON) with `$(PORT)` and `$(REPLICA)` replaced; a `port`
    field that is exactly `"$(PORT)"` becomes the number."""
    if isinstance(value, str):
        if value == "$(PORT)" and key == "port" and port is not None:
            return port
        return _PLACEHOLDER.sub(lambda m: replica if m.group(1) == "REPLICA" else str(port), value)
    if isinstance(value, list):
        return [substitute(v, port=port, replica=replica) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, port=port, replica=replica, key=k) for k, v in value.items()}
    return value


def template_hash(template: Mapping[str, Any]) -> str:
    """A short stable hash of a template (its canonical JSON)."""
    data = orjson.dumps(template, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(data).hexdigest()[:10]


# -- the schemas ---------------------------------------------------------------------


class PortRangeSchema(Schema):
    """Ports `start` to `end` (inclusive), one per replica."""

    start: int = Field(ge=1, le=65535)
    end: int = Field(ge=1, le=65535)

    @model_validator(mode="after")
    def _ordered(self) -> PortRangeSchema:
        if self.end < self.start:
            raise PydanticCustomError("port_range", "end {end} is below start {start}",
                                      {"end": self.end, "start": self.start})  # fmt: skip
        return self


def _check_bound(value: int | str) -> int | str:
    if isinstance(value, int) and value >= 0:
        return value
    if isinstance(value, str) and _PERCENT.match(value):
        return value
    raise ValueError(f"want a whole number >= 0 or a percentage like '25%', not {value!r}")


class RollingUpdateSchema(Schema):
    """How far a rolling update may go above (`maxSurge`) and below (`maxUnavailable`)
    the desired replicas: a number or a percentage of `replicas`."""

    max_surge: int | str = "25%"
    max_unavailable: int | str = "25%"

    _check = field_validator("max_surge", "max_unavailable")(_check_bound)


class StrategySchema(Schema):
    type: Literal["RollingUpdate", "Recreate"] = "RollingUpdate"
    rolling_update: RollingUpdateSchema = Field(default_factory=RollingUpdateSchema)


class LabelSelectorSchema(Schema):
    match_labels: dict[str, str] = Field(min_length=1)


class TemplateMetaSchema(Schema):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


def _sample(spec: Any) -> Any:
    return substitute(spec, port=65535, replica="replica")


class TemplateSchema(Schema):
    """The replicas' metadata and Process spec (checked as a Process spec would be)."""

    metadata: TemplateMetaSchema = Field(default_factory=TemplateMetaSchema)
    spec: dict[str, Any]

    @field_validator("spec")
    @classmethod
    def _a_process_spec(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            ProcessSpecSchema.model_validate(_sample(value))
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            message = f"{where}: {first['msg']}" if where else first["msg"]
            raise PydanticCustomError("template", message) from None
        return value

    def wire(self) -> dict[str, Any]:
        """The template as stored (camelCase, defaults filled): what its hash is of."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class DeploymentSpecSchema(Schema):
    """What replicas to run, how to roll from one template to the next, what to wait for."""

    replicas: int = Field(default=1, ge=0)
    selector: LabelSelectorSchema | None = None
    port_range: PortRangeSchema | None = None
    template: TemplateSchema
    strategy: StrategySchema = Field(default_factory=StrategySchema)
    min_ready_seconds: int = Field(default=0, ge=0)
    progress_deadline_seconds: int = Field(default=600, ge=1)
    revision_history_limit: int = Field(default=10, ge=0)
    remediation: Literal["none", "rollback", "restart"] = "none"
    depends_on: DependsOn = Field(default_factory=list)

    @classmethod
    def of(cls, obj: Object) -> DeploymentSpecSchema:
        """The spec of a stored (so already validated) Deployment, as its model."""
        return cls.model_validate(obj["spec"])

    @property
    def selector_labels(self) -> dict[str, str]:
        """The labels that select the replicas: the selector's, or the template's."""
        if self.selector is not None:
            return dict(self.selector.match_labels)
        return dict(self.template.metadata.labels)

    @property
    def max_surge(self) -> int:
        """Replicas a rolling update may add above `replicas`."""
        return resolve_bound(self.strategy.rolling_update.max_surge, self.replicas, up=True)

    @property
    def max_unavailable(self) -> int:
        """Replicas a rolling update may take below `replicas` (at least one when
        `max_surge` is zero, as Kubernetes: a rollout must be able to move)."""
        bound = self.strategy.rolling_update.max_unavailable
        unavailable = resolve_bound(bound, self.replicas, up=False)
        return 1 if unavailable == 0 and self.max_surge == 0 else unavailable

    @model_validator(mode="after")
    def _consistent(self) -> DeploymentSpecSchema:
        labels = self.template.metadata.labels
        if self.selector is not None:
            for key, value in self.selector.match_labels.items():
                if labels.get(key) != value:
                    raise PydanticCustomError(
                        "selector",
                        "selector {key}={value} does not match the template's labels",
                        {"key": key, "value": value},
                    )
        elif not labels:
            raise PydanticCustomError(
                "selector", "give template.metadata.labels (or a selector) to select replicas"
            )
        uses_port = "$(PORT)" in orjson.dumps(self.template.spec).decode()
        if uses_port and self.port_range is None:
            raise PydanticCustomError("port_range", "the template uses $(PORT): set portRange")
        if self.port_range is not None and self.strategy.type == "RollingUpdate":
            size = self.port_range.end - self.port_range.start + 1
            need = self.replicas + self.max_surge
            if need > size:
                raise PydanticCustomError(
                    "port_range",
                    "portRange has {size} ports; replicas and maxSurge need {need}",
                    {"size": size, "need": need},
                )
        return self


class DeploymentStatusSchema(Schema):
    model_config = Schema.model_config | {"extra": "allow"}


class RevisionBody(Schema):
    """A ControllerRevision: one template a Deployment has run, and its number."""

    revision: int = Field(ge=1)
    data: dict[str, Any]
