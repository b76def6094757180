"""What a Service should be, decided purely: its `Target` (where it listens, what it
selects), its endpoints among the Processes, the round-robin order of a connection, its
status, and `plan(desired, observed, now)`, which says what the controller must do now.
No I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from setpoint.model import READY, STALLED, Object, get_condition, remove_condition, set_condition
from setpoint.runtime.lifecycle import is_deleting
from setpoint.runtime.plan import Plan
from setpoint.workloads.service.kind import ServiceSpecSchema


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A Ready Process (`name`) and the port its connections go to."""

    name: str
    port: int


@dataclass(frozen=True, slots=True)
class Target:
    """What one Service says: where it listens (`host`, `port`) and what it selects
    (Processes in `namespace` with every label of `selector`, reached on `target_port`
    or, when None, on each Process's `spec.ports[0]`)."""

    namespace: str
    selector: tuple[tuple[str, str], ...]
    host: str
    port: int
    target_port: int | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def selector_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.selector)


def target_of(obj: Object) -> Target:
    """The `Target` of a stored (so already validated) Service, read through its schema."""
    spec = ServiceSpecSchema.of(obj)
    return Target(
        namespace=obj["metadata"].get("namespace") or "",
        selector=tuple(sorted(spec.selector.items())),
        host=spec.host,
        port=spec.port,
        target_port=spec.target_port,
    )


def selects(selector: Iterable[tuple[str, str]], labels: Mapping[str, str] | None) -> bool:
    """Whether `labels` has every label of `selector` (an empty selector selects nothing)."""
    labels = labels or {}
    pairs = list(selector)
    return bool(pairs) and all(labels.get(k) == v for k, v in pairs)


def _is_ready(obj: Object) -> bool:
    cond = get_condition(obj.get("status"), READY)
    return cond is not None and cond.get("status") == "True" and not is_deleting(obj)


def endpoints_of(processes: Iterable[Object], target: Target) -> list[Endpoint]:
    """The endpoints of `target` among `processes` (see the module docstring), by name."""
    found = []
    for obj in processes:
        meta = obj["metadata"]
        if (meta.get("namespace") or "") != target.namespace:
            continue
        if not selects(target.selector, meta.get("labels")) or not _is_ready(obj):
            continue
        port = target.target_port
        if port is None:
            ports = (obj.get("spec") or {}).get("ports") or []
            if not ports:
                continue
            port = int(ports[0])
        found.append(Endpoint(meta["name"], port))
    return sorted(found, key=lambda e: e.name)


def rotation(endpoints: Sequence[Endpoint], turn: int) -> list[Endpoint]:
    """`endpoints` in the order connection number `turn` tries them: round-robin, the
    next one first, each once."""
    if not endpoints:
        return []
    start = turn % len(endpoints)
    return [*endpoints[start:], *endpoints[:start]]


def service_status(
    previous: Mapping[str, Any] | None,
    target: Target,
    endpoints: Sequence[Endpoint],
    *,
    generation: int,
    listen_error: str | None,
    now: float,
) -> dict[str, Any]:
    """The status a Service should have: `previous` (kept for its conditions' transition
    times) updated with `endpoints` and whether listening failed (`listen_error`)."""
    status: dict[str, Any] = {
        "conditions": [dict(c) for c in (previous or {}).get("conditions") or []]
    }
    shown = [] if listen_error is not None else list(endpoints)
    status["endpoints"] = [{"name": e.name, "port": e.port} for e in shown]
    status["readyEndpoints"] = len(shown)
    status["observedGeneration"] = generation
    if listen_error is not None:
        for type_, value in ((STALLED, True), (READY, False)):
            set_condition(status, type_, value, reason="ListenFailed", message=listen_error,
                          now=now, observed_generation=generation)  # fmt: skip
        return status
    remove_condition(status, STALLED)
    if shown:
        count = f"{len(shown)} ready endpoint{'s' if len(shown) != 1 else ''}"
        set_condition(status, READY, True, reason="EndpointsReady",
                      message=f"listening on {target.address}; {count}",
                      now=now, observed_generation=generation)  # fmt: skip
    else:
        set_condition(status, READY, False, reason="NoReadyEndpoints",
                      message=f"listening on {target.address}; no Ready Process "
                      f"matches {target.selector_text}",
                      now=now, observed_generation=generation)  # fmt: skip
    return status


@dataclass(frozen=True, slots=True)
class ServiceDesired:
    """What a Service asks for: its `Target`, at spec `generation`."""

    target: Target
    generation: int


def desired_of(obj: Object) -> ServiceDesired:
    """The desired state of a stored Service."""
    return ServiceDesired(target_of(obj), int(obj["metadata"].get("generation", 1)))


@dataclass(frozen=True, slots=True)
class ServiceObserved:
    """What is: where the Service's proxy listens (`listening`, None: nowhere), the
    `endpoints` its selector picks now, and the status as stored (`previous`)."""

    listening: tuple[str, int] | None
    endpoints: Sequence[Endpoint]
    previous: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ServicePlan(Plan):
    """What to do for one Service now: `listen` (open a listener at `target`'s address,
    closing the one elsewhere first; otherwise the listener stays and serves `target`),
    and the `status` to record once it listens."""

    target: Target
    listen: bool


def plan(desired: ServiceDesired, observed: ServiceObserved, now: float) -> ServicePlan:
    """The next step for a Service whose proxy listens at `observed.listening` and whose
    selector picks `observed.endpoints` now."""
    target = desired.target
    status = service_status(
        observed.previous,
        target,
        observed.endpoints,
        generation=desired.generation,
        listen_error=None,
        now=now,
    )
    listen = observed.listening != (target.host, target.port)
    return ServicePlan(target=target, listen=listen, status=status)
