"""The `Deployment` kind (setpoint.dev/v1alpha1, short name `deploy`) and its controller:
`replicas` copies of a Process template, rolled from one template to the next.

`spec`: `replicas` (1), `template` ({metadata: {labels, annotations}, spec: a Process
spec}), `selector` ({matchLabels}; default: the template's labels), `portRange`
({start, end}, inclusive: each replica gets a free port from it), `strategy`
(`RollingUpdate` with `maxSurge` / `maxUnavailable`, 25% each by default, or
`Recreate`), `minReadySeconds` (0), `progressDeadlineSeconds` (600),
`revisionHistoryLimit` (10), `remediation` (`none` | `rollback` | `restart`: what to
do when a rollout misses its deadline) and `dependsOn`.

Per-replica values: a replica gets the environment variables `PORT` (from `portRange`)
and `REPLICA` (its name), and every string of the template has `$(PORT)` and
`$(REPLICA)` replaced (a `port` field written `"$(PORT)"` becomes the number, so a
probe's port may be written so); its `spec.ports` is `[PORT]`.

Replicas are Process objects owned by the Deployment, named
`<deployment>-<template hash>-<n>` and labelled `setpoint.dev/deployment` and
`setpoint.dev/template-hash`. Each template the Deployment has run is kept as a
`ControllerRevision` (`<deployment>-<hash>`, with the template in `data` and its
`revision` number), which `setpoint rollout history|undo` read; going back to an
earlier template gives its revision the next number, as Kubernetes does.

`status`: `replicas`, `updatedReplicas`, `readyReplicas`, `availableReplicas`,
`unavailableReplicas`, `terminatingReplicas`, `oldReplicas` (those of earlier templates
still running: fewer of them is progress), `selector` (for the scale subresource),
`currentRevision`, `lastCompleteRevision`, `lastProgressTime`, `observedGeneration`,
and conditions `Available`, `Progressing` (False with reason
`ProgressDeadlineExceeded` once a rollout has made no progress for
`progressDeadlineSeconds`), `ReplicaFailure` (a replica cannot be created or is
failing), `Stalled` (the deadline was missed and no remediation applies) and `Ready`
(complete, available and dependencies met).

Decisions are made by the pure `plan(desired, observed, now)`, Kubernetes' rolling
update rules applied to single replicas: new replicas are created while the total stays
within `replicas + maxSurge`; old ones are removed (unavailable ones first) while at
least `replicas - maxUnavailable` stay available. A replica is available once it has
been Ready for `minReadySeconds`.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
import math
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import AlreadyExists, Conflict, Invalid, NotFound, UnknownKind
from setpoint.model import (
    READY,
    STALLED,
    Kind,
    Object,
    PrinterColumn,
    ScaleSubresource,
    Schema,
    get_condition,
    remove_condition,
    set_condition,
)
from setpoint.runtime.cache import Cache
from setpoint.runtime.controller import Controller
from setpoint.runtime.events import EventRecorder
from setpoint.runtime.lifecycle import is_deleting, owner_reference
from setpoint.runtime.manager import Manager
from setpoint.runtime.reconciler import Request, Result
from setpoint.store import Store
from setpoint.workloads.children import parse_time, timestamp
from setpoint.workloads.dependencies import (
    DEPENDS_ON_INDEX,
    Dependency,
    dependency_keys,
    dependents_of,
    unmet_in_store,
)
from setpoint.workloads.process import PROCESS, ProcessSpecSchema

__all__ = [
    "AVAILABLE",
    "CHANGED_BY",
    "CONTROLLER_REVISION",
    "DEPLOYMENT",
    "DEPLOYMENT_LABEL",
    "HASH_LABEL",
    "PROGRESSING",
    "REPLICA_FAILURE",
    "DeploymentController",
    "DeploymentSpecSchema",
    "Desired",
    "Observed",
    "Plan",
    "Replica",
    "Revision",
    "desired_of",
    "plan",
    "replica_object",
    "resolve_bound",
    "setup",
    "substitute",
    "template_hash",
]

log = logging.getLogger("setpoint.deployment")

AVAILABLE = "Available"
PROGRESSING = "Progressing"
REPLICA_FAILURE = "ReplicaFailure"
DEPLOYMENT_LABEL = "setpoint.dev/deployment"
HASH_LABEL = "setpoint.dev/template-hash"
REVISION_ANNOTATION = "setpoint.dev/revision"
CHANGED_BY = "setpoint.dev/changed-by"
"""Annotation naming who last changed an object's spec (the rollback remediation signs
its change `controller/deployment`)."""

_PERCENT = re.compile(r"^(\d+)%$")
_PLACEHOLDER = re.compile(r"\$\((PORT|REPLICA)\)")

# -- the kinds -----------------------------------------------------------------------


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
    depends_on: list[Dependency] = Field(default_factory=list)

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
            bounds = self.strategy.rolling_update
            need = self.replicas + resolve_bound(bounds.max_surge, self.replicas, up=True)
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


DEPLOYMENT = Kind(
    "setpoint.dev/v1alpha1",
    "Deployment",
    spec=DeploymentSpecSchema,
    status=DeploymentStatusSchema,
    short_names=("deploy",),
    scale=ScaleSubresource(),
    columns=(
        PrinterColumn("REPLICAS", "spec.replicas"),
        PrinterColumn("UP-TO-DATE", "status.updatedReplicas"),
        PrinterColumn("AVAILABLE", "status.availableReplicas"),
        PrinterColumn("REVISION", "status.currentRevision"),
    ),
)
CONTROLLER_REVISION = Kind(
    "setpoint.dev/v1alpha1", "ControllerRevision", body=RevisionBody, short_names=("rev",)
)

# -- pure helpers ------------------------------------------------------------------------


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


# -- observe -> plan -> apply ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Replica:
    """A replica Process as observed: its template hash, port, readiness and state."""

    name: str
    hash: str
    port: int | None = None
    ready: bool = False
    ready_since: float | None = None
    deleting: bool = False
    failure: str | None = None
    """Why it is failing (crash loop, cannot start), if it is."""

    def available(self, now: float, min_ready: float) -> bool:
        return (
            self.ready
            and not self.deleting
            and (self.ready_since is None or now - self.ready_since >= min_ready)
        )


@dataclass(frozen=True, slots=True)
class Revision:
    """A ControllerRevision as observed."""

    name: str
    hash: str
    number: int


@dataclass(frozen=True, slots=True)
class Desired:
    """What the Deployment's spec asks for, as the planner needs it."""

    name: str
    generation: int
    replicas: int
    hash: str
    template: Mapping[str, Any]
    recreate: bool = False
    max_surge: int = 1
    max_unavailable: int = 0
    min_ready_seconds: float = 0.0
    progress_deadline_seconds: float = 600.0
    revision_history_limit: int = 10
    remediation: str = "none"
    ports: tuple[int, int] | None = None
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class Observed:
    """The Deployment's replicas and revisions, its last status, and unmet dependencies."""

    replicas: tuple[Replica, ...] = ()
    revisions: tuple[Revision, ...] = ()
    status: Mapping[str, Any] = field(default_factory=dict)
    unmet: str | None = None
    busy_ports: frozenset[int] = frozenset()
    """Ports of `portRange` that something other than a replica holds on this machine."""


@dataclass(frozen=True, slots=True)
class NewReplica:
    name: str
    port: int | None


@dataclass(slots=True)
class Plan:
    """What to do now: replicas to create and delete, revisions to write and delete, the
    status to record, events, a remediation, and when to look again."""

    create: list[NewReplica] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    revision: int = 0
    """The number the current template's revision must carry."""
    create_revision: bool = False
    renumber_revision: bool = False
    delete_revisions: list[str] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, str, str]] = field(default_factory=list)
    """(type, reason, message)."""
    rollback_to: int | None = None
    """Revision whose template the spec should go back to (remediation `rollback`)."""
    requeue_after: float | None = None


def desired_of(obj: Object) -> Desired:
    """The `Desired` of a stored (already validated) Deployment."""
    spec = obj["spec"]
    replicas = int(spec.get("replicas", 1))
    strategy = spec.get("strategy") or {}
    rolling = strategy.get("rollingUpdate") or {}
    surge = resolve_bound(rolling.get("maxSurge", "25%"), replicas, up=True)
    unavailable = resolve_bound(rolling.get("maxUnavailable", "25%"), replicas, up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1  # as Kubernetes: a rollout must be able to move
    port_range = spec.get("portRange")
    template = spec["template"]
    return Desired(
        name=obj["metadata"]["name"],
        generation=int(obj["metadata"].get("generation", 1)),
        replicas=replicas,
        hash=template_hash(template),
        template=template,
        recreate=strategy.get("type") == "Recreate",
        max_surge=surge,
        max_unavailable=unavailable,
        min_ready_seconds=float(spec.get("minReadySeconds", 0)),
        progress_deadline_seconds=float(spec.get("progressDeadlineSeconds", 600)),
        revision_history_limit=int(spec.get("revisionHistoryLimit", 10)),
        remediation=str(spec.get("remediation", "none")),
        ports=None if not port_range else (int(port_range["start"]), int(port_range["end"])),
        deleting=is_deleting(obj),
    )


def _order_for_removal(replicas: Sequence[Replica], now: float, min_ready: float) -> list[Replica]:
    """Replicas to remove first come first: failing, not ready, not yet available; then
    the youngest (as Kubernetes' ActivePods ordering)."""

    def key(r: Replica) -> tuple[bool, bool, bool, float, str]:
        return (
            r.failure is None,
            r.ready,
            r.available(now, min_ready),
            -(r.ready_since or 0.0),
            r.name,
        )

    return sorted(replicas, key=key)


def _free_names(desired: Desired, taken: set[str], count: int) -> list[str]:
    names: list[str] = []
    n = 0
    while len(names) < count:
        name = f"{desired.name}-{desired.hash}-{n}"
        if name not in taken:
            names.append(name)
        n += 1
    return names


def _free_ports(
    desired: Desired, replicas: Sequence[Replica], busy: frozenset[int], count: int
) -> list[int | None]:
    if desired.ports is None:
        return [None] * count
    used = {r.port for r in replicas} | busy
    start, end = desired.ports
    free: list[int | None] = [p for p in range(start, end + 1) if p not in used]
    return free[:count]


def plan(desired: Desired, observed: Observed, now: float) -> Plan:
    """The next step for a Deployment: pure, from what is wanted and what is observed."""
    out = Plan()
    if desired.deleting:
        return out  # the garbage collector removes the replicas and revisions
    min_ready = desired.min_ready_seconds
    live = [r for r in observed.replicas if not r.deleting]
    terminating = [r for r in observed.replicas if r.deleting]
    new = [r for r in live if r.hash == desired.hash]
    old = [r for r in live if r.hash != desired.hash]
    previous = observed.status
    waiting = observed.unmet is not None and not live

    # revisions: the current template's must exist and carry the highest number
    numbers = {r.hash: r.number for r in observed.revisions}
    highest = max(numbers.values(), default=0)
    current = numbers.get(desired.hash)
    if current is None:
        out.create_revision, out.revision = True, highest + 1
    elif current < highest:
        out.renumber_revision, out.revision = True, highest + 1
    else:
        out.revision = current
    in_use = {r.hash for r in observed.replicas} | {desired.hash}
    stale = sorted((r for r in observed.revisions if r.hash not in in_use), key=lambda r: r.number)
    keep = desired.revision_history_limit
    out.delete_revisions = [r.name for r in stale[: max(0, len(stale) - keep)]]

    # replicas
    failures: list[str] = []
    if not waiting:
        if desired.recreate:
            _recreate(desired, new, old, terminating, out)
        else:
            _roll(desired, new, old, now, out)
        if len(out.create) and desired.ports is not None:
            ports = _free_ports(desired, observed.replicas, observed.busy_ports, len(out.create))
            if len(ports) < len(out.create):
                failures.append(
                    f"no free port in portRange {desired.ports[0]}-{desired.ports[1]} "
                    f"for {len(out.create) - len(ports)} replica(s)"
                )
                out.create = out.create[: len(ports)]
            out.create = [NewReplica(c.name, p) for c, p in zip(out.create, ports, strict=False)]
    failures += [f"{r.name}: {r.failure}" for r in live if r.failure]

    # status
    available = [r for r in live if r.available(now, min_ready)]
    updated_available = [r for r in new if r.available(now, min_ready)]
    counts = {
        "replicas": len(live),
        "updatedReplicas": len(new),
        "readyReplicas": sum(r.ready for r in live),
        "availableReplicas": len(available),
        "unavailableReplicas": max(0, desired.replicas - len(available)),
        "terminatingReplicas": len(terminating),
    }
    complete = (
        len(new) == desired.replicas
        and len(live) == desired.replicas
        and len(updated_available) == desired.replicas
    )
    status: dict[str, Any] = copy.deepcopy(dict(previous))
    status.update(counts)
    status["currentRevision"] = out.revision
    new_generation = previous.get("observedGeneration") != desired.generation
    progressed = (
        new_generation
        or any(
            counts[k] > int(previous.get(k, 0))
            for k in ("updatedReplicas", "readyReplicas", "availableReplicas")
        )
        or len(old) < int(previous.get("oldReplicas", len(old)))
    )
    status["oldReplicas"] = len(old)
    if progressed or "lastProgressTime" not in status:
        status["lastProgressTime"] = timestamp(now)
    last_progress = parse_time(status["lastProgressTime"])
    if last_progress is None:
        last_progress = now
    gen = desired.generation
    status["observedGeneration"] = gen

    def cond(type_: str, value: bool, reason: str, message: str) -> None:
        set_condition(status, type_, value, reason=reason, message=message, now=now,
                      observed_generation=gen)  # fmt: skip

    min_available = max(0, desired.replicas - desired.max_unavailable)
    if len(available) >= min_available:
        cond(AVAILABLE, True, "MinimumReplicasAvailable",
             f"{len(available)} of {desired.replicas} available")  # fmt: skip
    else:
        cond(AVAILABLE, False, "MinimumReplicasUnavailable",
             f"{len(available)} available, {min_available} needed")  # fmt: skip

    exceeded = False
    if complete:
        status["lastCompleteRevision"] = out.revision
        cond(PROGRESSING, True, "NewReplicaSetAvailable",
             f"revision {out.revision} is rolled out")  # fmt: skip
    elif waiting:
        cond(PROGRESSING, True, "WaitingForDependency", observed.unmet or "")
        status["lastProgressTime"] = timestamp(now)
    elif now - last_progress > desired.progress_deadline_seconds:
        exceeded = True
        was = get_condition(status, PROGRESSING) or {}
        message = (
            f"revision {out.revision} made no progress for "
            f"{desired.progress_deadline_seconds:g}s ({len(updated_available)} of "
            f"{desired.replicas} updated replicas available)"
        )
        if was.get("reason") != "ProgressDeadlineExceeded":
            out.events.append(("Warning", "ProgressDeadlineExceeded", message))
            _remediate(desired, new, status, now, message, out)
        cond(PROGRESSING, False, "ProgressDeadlineExceeded", message)
    else:
        done = f"{len(updated_available)} of {desired.replicas} updated replicas available"
        cond(PROGRESSING, True, "ReplicaSetUpdated", done)
        remaining = desired.progress_deadline_seconds - (now - last_progress)
        out.requeue_after = max(0.001, remaining + 0.001)

    if failures:
        cond(REPLICA_FAILURE, True, "ReplicaFailure", "; ".join(failures))
    else:
        remove_condition(status, REPLICA_FAILURE)
    if exceeded and out.rollback_to is None and desired.remediation != "restart":
        cond(STALLED, True, "ProgressDeadlineExceeded", _stall_message(desired, status))
    else:
        remove_condition(status, STALLED)

    ready, reason, message = _readiness(desired, observed, status, complete, exceeded)
    cond(READY, ready, reason, message)
    out.status = status

    # an available-to-be replica is waiting out minReadySeconds: look again then
    if min_ready:
        pending = [
            r.ready_since + min_ready - now
            for r in live
            if r.ready and r.ready_since is not None and not r.available(now, min_ready)
        ]
        if pending:
            wake = max(0.001, min(pending) + 0.001)
            out.requeue_after = min(out.requeue_after or wake, wake)
    return out


def _roll(desired: Desired, new: list[Replica], old: list[Replica], now: float, out: Plan) -> None:
    """Kubernetes' rolling update, one replica at a time: scale the new template up within
    `replicas + maxSurge`, the old ones down keeping `replicas - maxUnavailable` available."""
    min_ready = desired.min_ready_seconds
    total = len(new) + len(old)
    taken = {r.name for r in new} | {r.name for r in old}
    if len(new) < desired.replicas:
        room = desired.replicas + desired.max_surge - total if old else desired.replicas - total
        count = max(0, min(desired.replicas - len(new), room))
        out.create = [NewReplica(n, None) for n in _free_names(desired, taken, count)]
    elif len(new) > desired.replicas:
        extra = _order_for_removal(new, now, min_ready)[: len(new) - desired.replicas]
        out.delete += [r.name for r in extra]
    if not old:
        return
    min_available = desired.replicas - desired.max_unavailable
    new_unavailable = sum(not r.available(now, min_ready) for r in new)
    budget = total - min_available - new_unavailable
    if budget <= 0:
        return
    ordered = _order_for_removal(old, now, min_ready)
    unhealthy = [r for r in ordered if not r.available(now, min_ready)][:budget]
    out.delete += [r.name for r in unhealthy]
    available = sum(r.available(now, min_ready) for r in new + old)
    can_remove = min(budget - len(unhealthy), available - min_available)
    healthy = [r for r in ordered if r.available(now, min_ready)]
    out.delete += [r.name for r in healthy[: max(0, can_remove)]]


def _recreate(
    desired: Desired,
    new: list[Replica],
    old: list[Replica],
    terminating: list[Replica],
    out: Plan,
) -> None:
    """`Recreate`: remove every old replica, wait until they are gone, then create."""
    if old:
        out.delete += [r.name for r in old]
        return
    if terminating and any(r.hash != desired.hash for r in terminating):
        return
    taken = {r.name for r in new} | {r.name for r in terminating}
    if len(new) < desired.replicas:
        names = _free_names(desired, taken, desired.replicas - len(new))
        out.create = [NewReplica(n, None) for n in names]
    elif len(new) > desired.replicas:
        out.delete += sorted(r.name for r in new)[desired.replicas :]


def _remediate(
    desired: Desired,
    new: list[Replica],
    status: dict[str, Any],
    now: float,
    message: str,
    out: Plan,
) -> None:
    """What `spec.remediation` does when the rollout missed its deadline."""
    if desired.remediation == "rollback":
        good = status.get("lastCompleteRevision")
        if isinstance(good, int) and good != out.revision:
            out.rollback_to = good
            out.events.append(("Warning", "RolledBack",
                               f"rolling back to revision {good}: {message}"))  # fmt: skip
    elif desired.remediation == "restart":
        failing = [r.name for r in new if not r.ready]
        out.delete += [n for n in failing if n not in out.delete]
        status["lastProgressTime"] = timestamp(now)
        restarting = f"restarting {len(failing)} replica(s) not ready: {message}"
        out.events.append(("Warning", "Restarted", restarting))


def _stall_message(desired: Desired, status: Mapping[str, Any]) -> str:
    message = (get_condition(status, PROGRESSING) or {}).get("message") or (
        f"no progress for {desired.progress_deadline_seconds:g}s"
    )
    if desired.remediation == "rollback":
        return f"{message}; no earlier revision completed, nothing to roll back to"
    return f"{message}; remediation is none: fix the template or roll back"


def _readiness(
    desired: Desired,
    observed: Observed,
    status: Mapping[str, Any],
    complete: bool,
    exceeded: bool,
) -> tuple[bool, str, str]:
    if observed.unmet is not None:
        running = any(not r.deleting for r in observed.replicas)
        reason = "DependencyNotReady" if running else "WaitingForDependency"
        return False, reason, observed.unmet
    if exceeded:
        message = (get_condition(status, PROGRESSING) or {}).get("message") or ""
        return False, "ProgressDeadlineExceeded", message
    available = get_condition(status, AVAILABLE) or {}
    if available.get("status") != "True":
        return False, "ReplicasUnavailable", str(available.get("message") or "")
    if not complete:
        return (
            False,
            "RollingUpdate",
            str((get_condition(status, PROGRESSING) or {}).get("message") or "rolling out"),
        )
    return True, "Available", f"{desired.replicas} replicas available"


def replica_object(deployment: Object, replica: NewReplica, revision: int) -> Object:
    """The Process object of a new replica of `deployment`."""
    spec = deployment["spec"]
    template = spec["template"]
    meta = template.get("metadata") or {}
    process_spec = substitute(template["spec"], port=replica.port, replica=replica.name)
    env = dict(process_spec.get("env") or {})
    env["REPLICA"] = replica.name
    if replica.port is not None:
        env["PORT"] = str(replica.port)
        process_spec["ports"] = [replica.port]
    process_spec["env"] = env
    dmeta = deployment["metadata"]
    labels = dict(meta.get("labels") or {})
    labels.update({DEPLOYMENT_LABEL: dmeta["name"], HASH_LABEL: template_hash(template)})
    annotations = dict(meta.get("annotations") or {})
    annotations[REVISION_ANNOTATION] = str(revision)
    return {
        "apiVersion": PROCESS.api_version,
        "kind": PROCESS.kind,
        "metadata": {
            "name": replica.name,
            "namespace": dmeta.get("namespace") or "default",
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(deployment)],
        },
        "spec": process_spec,
    }


def observe_replica(obj: Object) -> Replica:
    """A replica Process as the planner sees it."""
    meta = obj["metadata"]
    status = obj.get("status") or {}
    ready = get_condition(status, READY) or {}
    stalled = get_condition(status, STALLED) or {}
    ports = (obj.get("spec") or {}).get("ports") or []
    failure = None
    if stalled.get("status") == "True":
        failure = f"{stalled.get('reason')}: {stalled.get('message')}"
    elif status.get("phase") in ("CrashLoopBackOff", "Failed"):
        last = status.get("lastExit") or {}
        failure = f"{status['phase']} ({last.get('reason') or 'exited'})"
    is_ready = ready.get("status") == "True"
    return Replica(
        name=meta["name"],
        hash=(meta.get("labels") or {}).get(HASH_LABEL, ""),
        port=int(ports[0]) if ports else None,
        ready=is_ready,
        ready_since=parse_time(ready.get("lastTransitionTime")) if is_ready else None,
        deleting=is_deleting(obj),
        failure=failure,
    )


# -- the controller ----------------------------------------------------------------------


class DeploymentController:
    """Reconciles Deployments: observes replicas and revisions, plans, applies."""

    def __init__(self, store: Store, events: EventRecorder, *, clock: Clock = SYSTEM_CLOCK):
        self.store = store
        self.events = events
        self.clock = clock
        self.controller: Controller | None = None
        self._caches: dict[str, Cache] = {}

    def _owned(self, kind_name: str, obj: Object) -> list[Object]:
        """The cached objects (`process` or `revision`) that `obj` owns."""
        return self._caches[kind_name].by_index("owner", obj["metadata"].get("uid", ""))

    async def reconcile(self, request: Request) -> Result | None:
        try:
            obj = await self.store.get(
                DEPLOYMENT.api_version, DEPLOYMENT.kind, request.name, request.namespace or None
            )
        except NotFound:
            return None
        desired = desired_of(obj)
        if desired.deleting:
            return None
        replicas = tuple(observe_replica(p) for p in self._owned("process", obj))
        revisions = tuple(
            Revision(
                r["metadata"]["name"],
                (r["metadata"].get("labels") or {}).get(HASH_LABEL, ""),
                int(r.get("revision", 0)),
            )
            for r in self._owned("revision", obj)
        )
        observed = Observed(
            replicas=replicas,
            revisions=revisions,
            status=obj.get("status") or {},
            unmet=await unmet_in_store(self.store, obj),
            busy_ports=_busy_ports(desired, replicas),
        )
        step = plan(desired, observed, self.clock.now())
        await self._apply(obj, desired, step)
        if step.requeue_after is not None:
            return Result(requeue_after=step.requeue_after)
        return None

    async def _apply(self, obj: Object, desired: Desired, step: Plan) -> None:
        namespace = obj["metadata"].get("namespace") or "default"
        if step.create_revision or step.renumber_revision:
            await self._write_revision(obj, desired, step.revision)
        for replica in step.create:
            try:
                await self.store.create(replica_object(obj, replica, step.revision))
            except AlreadyExists:
                continue  # created by an earlier look whose cache had not caught up
            except Invalid as exc:
                await self.events.warning(obj, "FailedCreate", f"{replica.name}: {exc}")
                set_condition(step.status, REPLICA_FAILURE, True, reason="FailedCreate",
                              message=f"{replica.name}: {exc}", now=self.clock.now(),
                              observed_generation=desired.generation)  # fmt: skip
                break
            await self.events.normal(
                obj, "ScalingReplicaSet", f"created replica {replica.name} (revision "
                f"{step.revision}{'' if replica.port is None else f', port {replica.port}'})"
            )  # fmt: skip
        for name in step.delete:
            try:
                await self.store.delete(PROCESS.api_version, PROCESS.kind, name, namespace)
            except NotFound:
                continue
            await self.events.normal(obj, "ScalingReplicaSet", f"removed replica {name}")
        for name in step.delete_revisions:
            with contextlib.suppress(NotFound):
                await self.store.delete(
                    CONTROLLER_REVISION.api_version, CONTROLLER_REVISION.kind, name, namespace
                )
        for type_, reason, message in step.events:
            if type_ == "Warning":
                await self.events.warning(obj, reason, message)
            else:
                await self.events.normal(obj, reason, message)
        step.status["selector"] = ",".join(f"{k}={v}" for k, v in sorted(_selector(obj).items()))
        if obj.get("status") != step.status:
            obj["status"] = step.status
            try:
                obj = await self.store.update_status(obj)
            except (Conflict, NotFound):
                return  # a newer version is queued already
        if step.rollback_to is not None:
            await self._roll_back(obj, step.rollback_to)

    async def _write_revision(self, obj: Object, desired: Desired, number: int) -> None:
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        name = f"{meta['name']}-{desired.hash}"
        try:
            revision = await self.store.get(
                CONTROLLER_REVISION.api_version, CONTROLLER_REVISION.kind, name, namespace
            )
        except NotFound:
            cause = (meta.get("annotations") or {}).get("kubernetes.io/change-cause")
            annotations = {"kubernetes.io/change-cause": cause} if cause else {}
            await self.store.create(
                {
                    "apiVersion": CONTROLLER_REVISION.api_version,
                    "kind": CONTROLLER_REVISION.kind,
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "labels": {DEPLOYMENT_LABEL: meta["name"], HASH_LABEL: desired.hash},
                        "annotations": annotations,
                        "ownerReferences": [owner_reference(obj)],
                    },
                    "revision": number,
                    "data": {"template": copy.deepcopy(dict(desired.template))},
                }
            )
            return
        if revision.get("revision") != number:
            revision["revision"] = number
            await self.store.update(revision)

    async def _roll_back(self, obj: Object, number: int) -> None:
        """Put the template of revision `number` back into the spec (remediation)."""
        meta = obj["metadata"]
        for revision in self._owned("revision", obj):
            if revision.get("revision") == number:
                obj = copy.deepcopy(obj)
                obj["spec"]["template"] = copy.deepcopy(revision["data"]["template"])
                obj["metadata"].setdefault("annotations", {})[CHANGED_BY] = "controller/deployment"
                try:
                    await self.store.update(obj)
                except (Conflict, NotFound):
                    return  # changed meanwhile: the next look decides again
                log.info("deployment %s: rolled back to revision %d", meta["name"], number)
                return

    def attach(self, manager: Manager) -> Controller:
        """Wire this reconciler into `manager`; return the controller."""
        cache = manager.cache(DEPLOYMENT)
        cache.add_index(DEPENDS_ON_INDEX, dependency_keys)
        self._caches = {
            "process": manager.cache(PROCESS),
            "revision": manager.cache(CONTROLLER_REVISION),
        }
        builder = (
            manager.controller("deployment")
            .for_(DEPLOYMENT)
            .owns(PROCESS)
            .owns(CONTROLLER_REVISION)
            .watches(PROCESS, dependents_of(cache))
        )
        try:
            job = manager.store.registry.get(PROCESS.api_version, "Job")
            builder.watches(job, dependents_of(cache))
        except UnknownKind:
            pass
        self.controller = builder.complete(self)
        return self.controller


def _busy_ports(desired: Desired, replicas: Sequence[Replica]) -> frozenset[int]:
    """The ports of `desired`'s range, not held by a replica, that cannot be bound now:
    another program has them, and a replica given one would only crash-loop."""
    if desired.ports is None or len(replicas) >= desired.replicas + desired.max_surge:
        return frozenset()
    held = {r.port for r in replicas}
    busy = set()
    for port in range(desired.ports[0], desired.ports[1] + 1):
        if port in held:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                busy.add(port)
    return frozenset(busy)


def _selector(obj: Object) -> dict[str, str]:
    spec = obj["spec"]
    selector = (spec.get("selector") or {}).get("matchLabels")
    return dict(selector or (spec["template"].get("metadata") or {}).get("labels") or {})


def setup(manager: Manager, *, clock: Clock = SYSTEM_CLOCK) -> Controller:
    """Run the Deployment controller in `manager`."""
    reconciler = DeploymentController(
        manager.store, manager.event_recorder("deployment-controller"), clock=clock
    )
    return reconciler.attach(manager)
