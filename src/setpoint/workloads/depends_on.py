"""`dependsOn`, pure: the schema of a dependency, whether one holds for the object it
names, the first that does not (`unmet`, given a lookup) and the index keys of an
object's dependencies. No I/O (`setpoint.workloads.dependencies` reads the store).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from setpoint.model import Object, Schema, get_condition
from setpoint.model.crd import list_map
from setpoint.model.wellknown import RESTARTED_AT

DEPENDS_ON_INDEX = "dependsOn"
"""Name of the cache index that `dependency_keys` computes."""

DependencyCondition = Literal["Ready", "Complete", "Started", "Completed"]
CONDITIONS: tuple[DependencyCondition, ...] = ("Ready", "Complete", "Started", "Completed")
"""What a `dependsOn` entry may wait for (see the module docstring)."""
CHILD_CONDITIONS = ("Started", "Completed")
"""The conditions read from a Process's or Job's child, not from a status condition."""
CHILD_KINDS = frozenset({"process", "processes", "proc", "job", "jobs"})
"""How a Process or a Job may be named in `dependsOn[].kind` (lower case)."""
PROCESS_COMPOSE_NAMES = {
    "process_started": "Started",
    "process_completed": "Completed",
    "process_completed_successfully": "Complete",
    "process_healthy": "Ready",
    "process_log_ready": "Ready",
}
"""process-compose's condition names, and the one to write instead."""
FINISHED_PHASES = ("Succeeded", "Failed")
"""The phases of a Process or Job whose child will not be started again for its spec."""


class Dependency(Schema):
    """One entry of `spec.dependsOn`: `kind/name` must meet `condition` (one of
    `CONDITIONS`)."""

    kind: str = Field(min_length=1)
    name: str = Field(min_length=1)
    namespace: str | None = None
    condition: DependencyCondition = "Ready"

    @field_validator("condition", mode="before")
    @classmethod
    def _known_condition(cls, value: Any) -> Any:
        if value in CONDITIONS:
            return value
        hint = PROCESS_COMPOSE_NAMES.get(value) if isinstance(value, str) else None
        instead = f"; for process-compose's {value}, write {hint}" if hint else ""
        raise PydanticCustomError(
            "dependency_condition",
            "{value} is not a condition: want one of {valid}{instead}",
            {"value": repr(value), "valid": ", ".join(CONDITIONS), "instead": instead},
        )

    @model_validator(mode="after")
    def _child_condition_of_a_child_kind(self) -> Dependency:
        if self.condition in CHILD_CONDITIONS and not _is_child_kind(self.kind):
            raise PydanticCustomError(
                "dependency_condition",
                "condition {condition} is for a Process or a Job, not a {kind}",
                {"condition": self.condition, "kind": self.kind},
            )
        return self

    def describe(self) -> str:
        """`Process/db` (with the namespace only when one is given: `Process/other/db`)."""
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"


DependsOn = Annotated[list[Dependency], Field(json_schema_extra=list_map("kind", "name"))]
"""A spec's `dependsOn`: entries told apart by kind and name, so that server-side apply
merges them one by one (two managers may each own their own)."""


def _is_child_kind(kind: str) -> bool:
    """Whether `dependsOn[].kind` names a Process or a Job."""
    return kind.partition(".")[0].lower() in CHILD_KINDS


Lookup = Callable[[str, str, str], Object | None]
"""(kind, name, namespace) -> the object, or None if there is none."""


def holds(dep: Dependency, obj: Object | None) -> str | None:
    """None when `dep` holds for `obj` (the dependency as last read; None: there is none),
    else a message saying why not. Pure.

    Messages: `waiting for Process/db to be Ready` (absent, or the condition not yet
    reported), `Process/db is not Ready: <its reason>: <its message>` (reported False or
    Unknown), `waiting for Job/seed to be Completed (phase Running)`."""
    if obj is None:
        return f"waiting for {dep.describe()} to be {dep.condition}: it does not exist"
    status: Mapping[str, Any] = obj.get("status") or {}
    requested = (obj["metadata"].get("annotations") or {}).get(RESTARTED_AT)
    if _is_child_kind(dep.kind) and requested not in (None, status.get("restartedAt")):
        return f"waiting for {dep.describe()} to run again (setpoint restart)"
    if dep.condition in CHILD_CONDITIONS:
        if _child_condition(dep.condition, obj):
            return None
        phase = status.get("phase")
        return f"waiting for {dep.describe()} to be {dep.condition}" + (
            f" (phase {phase})" if phase else ""
        )
    condition = get_condition(status, dep.condition)
    if condition is None:
        return f"waiting for {dep.describe()} to be {dep.condition}"
    if condition.get("status") == "True":
        return None
    why = ": ".join(str(p) for p in (condition.get("reason"), condition.get("message")) if p)
    return f"{dep.describe()} is not {dep.condition}" + (f": {why}" if why else "")


def _child_condition(condition: str, obj: Object) -> bool:
    """Whether a Process or Job `obj` is `Started` or `Completed` (the module docstring)."""
    status: Mapping[str, Any] = obj.get("status") or {}
    generation = obj["metadata"].get("generation", 1)
    if status.get("startedGeneration") is None or status["startedGeneration"] != generation:
        return False  # no child of its current spec has started
    phase = status.get("phase")
    if condition == "Started":
        return phase != "Starting"  # Starting: its startup probe has not passed yet
    return phase in FINISHED_PHASES and status.get("lastExit") is not None


def unmet(deps: Sequence[Dependency], lookup: Lookup, *, namespace: str) -> str | None:
    """A message naming the first dependency that does not hold (`holds`), or None when
    all hold. `namespace` is the dependent's, used for entries that name none."""
    for dep in deps:
        why = holds(dep, lookup(dep.kind, dep.name, dep.namespace or namespace))
        if why is not None:
            return why
    return None


def dependency_key(kind: str, namespace: str, name: str) -> str:
    """The index value of one object: `Kind/namespace/name`."""
    return f"{kind}/{namespace}/{name}"


def dependency_keys(obj: Object) -> Iterable[str]:
    """Cache index function: `Kind/namespace/name` of every entry of `obj`'s
    `spec.dependsOn` (an entry with no namespace is in `obj`'s)."""
    own = obj["metadata"].get("namespace") or ""
    spec: Mapping[str, Any] = obj.get("spec") or {}
    for entry in spec.get("dependsOn") or ():
        if isinstance(entry, Mapping) and entry.get("kind") and entry.get("name"):
            yield dependency_key(
                str(entry["kind"]), str(entry.get("namespace") or own), str(entry["name"])
            )
