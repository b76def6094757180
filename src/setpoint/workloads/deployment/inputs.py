"""What the Deployment planner works from: `Desired` (the validated spec, and the hash of
its template) and `Observed` (the replicas and revisions the Deployment owns, its last
status, unmet dependencies, ports taken by others), with the pure conversions from
stored objects. No I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from setpoint.model import READY, STALLED, Object, get_condition
from setpoint.model.wellknown import HASH_LABEL
from setpoint.runtime.lifecycle import is_deleting
from setpoint.runtime.plan import parse_time
from setpoint.workloads.deployment.kind import DeploymentSpecSchema, template_hash


@dataclass(frozen=True, slots=True)
class Desired:
    """What the Deployment asks for: its spec, read through the schema (which holds every
    default), and the hash of its template (`desired_of` computes it)."""

    name: str
    generation: int
    spec: DeploymentSpecSchema
    hash: str
    deleting: bool = False

    @property
    def ports(self) -> tuple[int, int] | None:
        """`portRange` as (start, end), inclusive."""
        port_range = self.spec.port_range
        return None if port_range is None else (port_range.start, port_range.end)

    @property
    def selector(self) -> str:
        """The replicas' label selector, as the scale subresource shows it."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.spec.selector_labels.items()))


def desired_of(obj: Object) -> Desired:
    """The `Desired` of a stored (already validated) Deployment."""
    spec = DeploymentSpecSchema.of(obj)
    return Desired(
        name=obj["metadata"]["name"],
        generation=int(obj["metadata"].get("generation", 1)),
        spec=spec,
        hash=template_hash(spec.template.wire()),
        deleting=is_deleting(obj),
    )


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


@dataclass(frozen=True, slots=True)
class Revision:
    """A ControllerRevision as observed: its name, template hash, number and template."""

    name: str
    hash: str
    number: int
    template: Mapping[str, Any] = field(default_factory=dict)


def observe_revision(obj: Object) -> Revision:
    """A ControllerRevision as the planner sees it."""
    return Revision(
        name=obj["metadata"]["name"],
        hash=(obj["metadata"].get("labels") or {}).get(HASH_LABEL, ""),
        number=int(obj.get("revision", 0)),
        template=(obj.get("data") or {}).get("template") or {},
    )


@dataclass(frozen=True, slots=True)
class Observed:
    """The Deployment's replicas and revisions, its last status, unmet dependencies, and
    whether its template's `user:` is refused."""

    replicas: tuple[Replica, ...] = ()
    revisions: tuple[Revision, ...] = ()
    status: Mapping[str, Any] = field(default_factory=dict)
    unmet: str | None = None
    busy_ports: frozenset[int] = frozenset()
    """Ports of `portRange` that something other than a replica holds on this machine."""
    refused: tuple[str, str] | None = None
    """(reason, message) when this engine may not run the template's `user:`
    (`setpoint.runtime.run_as.UserPolicy`): no replica of it is created."""


@dataclass(frozen=True, slots=True)
class ReplicaSets:
    """The observed replicas sorted for the planner: `live` (not being deleted) split into
    `new` (the desired template) and `old`, and `terminating`."""

    live: tuple[Replica, ...]
    new: tuple[Replica, ...]
    old: tuple[Replica, ...]
    terminating: tuple[Replica, ...]

    @classmethod
    def of(cls, desired: Desired, observed: Observed) -> ReplicaSets:
        live = tuple(r for r in observed.replicas if not r.deleting)
        return cls(
            live=live,
            new=tuple(r for r in live if r.hash == desired.hash),
            old=tuple(r for r in live if r.hash != desired.hash),
            terminating=tuple(r for r in observed.replicas if r.deleting),
        )
