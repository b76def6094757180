"""What `setpoint plan` shows, decided purely: the steps the controllers will take to bring
the stored objects to the proposed ones, in order, with their reasons.

`forecast(current, proposed, now)` runs the kinds' own pure plans forward over a simulated
world built from the stored objects alone, until no plan has an action left (a fixpoint) or
`budget` plans have run. What it covers today:

- a Deployment: its own `plan` (`setpoint.workloads.deployment.plan`), over its replica
  Processes and ControllerRevisions as stored; a replica it creates becomes Ready at once
  (its probe is assumed to pass: `Forecast.assumptions` says so), one it deletes is gone;
  with `minReadySeconds`, the simulated clock moves on by the plan's `requeue_after`;
- a Process not owned by a Deployment: new (start, then Ready), its spec changed (restart,
  naming the changed fields, then Ready), and the Processes that depend on it (`dependsOn`)
  are not Ready until it is;
- a new Job: it runs; whether it succeeds is not known before it runs, so the step gives
  the most attempts it may make (`backoffLimit` + 1) and says the outcome is unknown;
- a new or changed Service: its own plan (`setpoint.workloads.service.plan`): where it
  will listen, and whether it is Ready, by the Processes as stored;
- nothing else yet (a changed Job, Thermostat, Autoscaler): a changed object is
  listed as "not-forecast" rather than guessed.

`forecast_deletion(current, deleted)` says what deleting stored objects does: each one
stops (a Deployment's replicas go with it, by their owner references; a Service stops
listening), then the Processes that depend on what went are kept running but not Ready,
and in turn the Processes that depend on those being Ready.

No I/O, no clock: `now` is an argument (an import-linter contract holds it to that).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from setpoint.model import READY, Object, get_condition
from setpoint.workloads.depends_on import dependency_key
from setpoint.workloads.deployment.inputs import (
    Observed,
    Replica,
    Revision,
    desired_of,
    observe_replica,
    observe_revision,
)
from setpoint.workloads.deployment.plan import plan as deployment_plan
from setpoint.workloads.kinds import CONTROLLER_REVISION, DEPLOYMENT, JOB, PROCESS, SERVICE
from setpoint.workloads.service.plan import ServiceObserved, endpoints_of, target_of
from setpoint.workloads.service.plan import desired_of as service_desired
from setpoint.workloads.service.plan import plan as service_plan

__all__ = [
    "BUDGET",
    "KEPT_RUNNING",
    "PROBES_PASS",
    "Forecast",
    "Step",
    "forecast",
    "forecast_deletion",
]

BUDGET = 200
"""Plans one forecast may run before it says it did not settle."""

PROBES_PASS = "a started process is assumed to become Ready (its probes pass)"
KEPT_RUNNING = "a running Process whose dependency goes is kept running, not Ready until it is back"
JOB_OUTCOME = "a Job's outcome is not known before it runs: its attempts are an upper bound"

Key = tuple[str, str, str]  # (kind, namespace, name)


@dataclass(frozen=True, slots=True)
class Step:
    """One step a controller will take: `order` (from 1), the object it acts for (`kind`,
    `name`), what it does (`action`: start, ready, stop, restart, not-ready, not-forecast)
    and why (`reason`)."""

    order: int
    kind: str
    name: str
    action: str
    reason: str
    target: str = ""
    """The object the action is on, when it is not the acting object (a Deployment's replica)."""
    attempts: int | None = None
    """For a Job's `run`: the most attempts it may make (its outcome is unknown)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "order": self.order,
            "kind": self.kind,
            "name": self.name,
            "action": self.action,
            "target": self.target or self.name,
            "reason": self.reason,
            **({} if self.attempts is None else {"attempts": self.attempts}),
        }


@dataclass(frozen=True, slots=True)
class Forecast:
    """The steps in order; `settled`: every plan reached a fixpoint within the budget; the
    assumptions the steps rest on."""

    steps: tuple[Step, ...]
    settled: bool
    assumptions: tuple[str, ...]


def _key(obj: Object) -> Key:
    meta = obj["metadata"]
    return (str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta["name"]))


def _owner(obj: Object, kind: str) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == kind:
            return str(ref.get("name"))
    return None


class _Steps:
    def __init__(self) -> None:
        self.items: list[Step] = []

    def add(
        self,
        kind: str,
        name: str,
        action: str,
        reason: str,
        target: str = "",
        attempts: int | None = None,
    ) -> None:
        self.items.append(Step(len(self.items) + 1, kind, name, action, reason, target, attempts))


def forecast(
    current: Sequence[Object], proposed: Sequence[Object], now: float, *, budget: int = BUDGET
) -> Forecast:
    """The steps that take `current` (the stored objects) to `proposed` (the objects of a
    manifest as the store would write them), in order. Pure."""
    stored = {_key(o): o for o in current}
    steps = _Steps()
    settled = True
    assumptions: list[str] = []
    left = budget
    for obj in _dependencies_first(proposed):
        kind = obj.get("kind")
        if kind == DEPLOYMENT.kind:
            used, ok = _deployment(obj, current, now, steps, left)
            left -= used
            settled = settled and ok
            if any(s.action == "start" for s in steps.items) and PROBES_PASS not in assumptions:
                assumptions.append(PROBES_PASS)
        elif kind == PROCESS.kind and _owner(obj, DEPLOYMENT.kind) is None:
            started = _process(obj, stored.get(_key(obj)), proposed, current, steps)
            if started and PROBES_PASS not in assumptions:
                assumptions.append(PROBES_PASS)
        elif kind == JOB.kind and _key(obj) not in stored:
            limit = int((obj.get("spec") or {}).get("backoffLimit", 6))
            steps.add(JOB.kind, obj["metadata"]["name"], "run",
                      f"new; on failure retried up to {limit} times (backoffLimit), "
                      "outcome unknown until it runs", attempts=limit + 1)  # fmt: skip
            if JOB_OUTCOME not in assumptions:
                assumptions.append(JOB_OUTCOME)
        elif kind == SERVICE.kind:
            _service(obj, stored.get(_key(obj)), current, now, steps)
        elif kind not in (PROCESS.kind, CONTROLLER_REVISION.kind):
            old = stored.get(_key(obj))
            if old is None or old.get("spec") != obj.get("spec"):
                steps.add(str(kind), obj["metadata"]["name"], "not-forecast",
                          f"setpoint plan does not forecast a {kind} yet")  # fmt: skip
    return Forecast(tuple(steps.items), settled, tuple(assumptions))


def _service(
    obj: Object, old: Object | None, current: Sequence[Object], now: float, steps: _Steps
) -> None:
    """A new or changed Service: its own plan, over the Processes as stored (their
    readiness as stored: the Processes the same manifests start are not counted yet)."""
    if old is not None and old.get("spec") == obj.get("spec"):
        return
    desired = service_desired(obj)
    target = desired.target
    listening = None if old is None else (target_of(old).host, target_of(old).port)
    processes = [o for o in current if o.get("kind") == PROCESS.kind]
    observed = ServiceObserved(
        listening, endpoints_of(processes, target), (old or {}).get("status")
    )
    step = service_plan(desired, observed, now)
    name = obj["metadata"]["name"]
    if step.listen:
        was = "" if listening is None else f" (was {listening[0]}:{listening[1]})"
        steps.add(SERVICE.kind, name, "listen", f"on {target.address}{was}")
    ready = get_condition(step.status, READY) or {}
    count = len(observed.endpoints)
    why = f"{count} ready endpoint(s) among the stored Processes"
    steps.add(SERVICE.kind, name, "ready" if ready.get("status") == "True" else "not-ready", why)


def _depends_on(obj: Object) -> list[str]:
    """The names of the Processes `obj` depends on (same namespace)."""
    names = []
    for dep in (obj.get("spec") or {}).get("dependsOn") or []:
        if isinstance(dep, Mapping) and dep.get("kind", PROCESS.kind) == PROCESS.kind:
            names.append(str(dep.get("name")))
    return names


def _dependencies_first(objects: Sequence[Object]) -> list[Object]:
    """`objects` in their order, but a Process after the Processes it depends on (a
    Process waits for its dependencies before it starts)."""
    by_key = {_key(o): o for o in objects}
    done: dict[Key, Object] = {}

    def visit(key: Key, seen: frozenset[Key]) -> None:
        if key in done or key in seen or key not in by_key:
            return
        obj = by_key[key]
        if key[0] == PROCESS.kind:
            for dep in _depends_on(obj):
                visit((PROCESS.kind, key[1], dep), seen | {key})
        done[key] = obj

    for key in by_key:
        visit(key, frozenset())
    return list(done.values())


def _changed_fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    return sorted(k for k in {*old, *new} if old.get(k) != new.get(k))


def _process(
    obj: Object,
    old: Object | None,
    proposed: Sequence[Object],
    current: Sequence[Object],
    steps: _Steps,
) -> bool:
    """A Process's steps; True if it (re)starts."""
    name = obj["metadata"]["name"]
    spec = obj.get("spec") or {}
    after = _depends_on(obj)
    waits = f"; after {', '.join(f'Process/{d}' for d in after)} Ready" if after else ""
    if old is None:
        steps.add(PROCESS.kind, name, "start", f"new{waits}")
    else:
        changed = _changed_fields(old.get("spec") or {}, spec)
        if not changed:
            return False
        if spec.get("suspend"):
            steps.add(PROCESS.kind, name, "stop", "suspended")
            return False
        steps.add(PROCESS.kind, name, "restart", f"{', '.join(changed)} changed")
        dependents = _dependents(obj, proposed, current)
        for dependent in dependents:
            steps.add(PROCESS.kind, dependent, "not-ready", f"until Process/{name} is Ready")
        steps.add(PROCESS.kind, name, "ready", "its probes are assumed to pass")
        for dependent in dependents:
            steps.add(PROCESS.kind, dependent, "ready", f"Process/{name} is Ready again")
        return True
    steps.add(PROCESS.kind, name, "ready", "its probes are assumed to pass")
    return True


def _dependents(obj: Object, proposed: Sequence[Object], current: Sequence[Object]) -> list[str]:
    """The names of the Processes (stored or proposed) that depend on `obj` being Ready."""
    name = obj["metadata"]["name"]
    namespace = obj["metadata"].get("namespace") or ""
    found: dict[str, None] = {}
    by_key = {_key(o): o for o in current}
    by_key.update({_key(o): o for o in proposed})
    for key, other in by_key.items():
        if key[0] != PROCESS.kind or key[1] != namespace:
            continue
        if name in _depends_on(other):
            found[key[2]] = None
    return list(found)


def _deployment(
    obj: Object, current: Sequence[Object], now: float, steps: _Steps, budget: int
) -> tuple[int, bool]:
    """Run the Deployment's plan forward; (plans run, settled)."""
    desired = desired_of(obj)
    name = desired.name
    namespace = obj["metadata"].get("namespace") or ""

    def mine(o: Object) -> bool:
        same_ns = (o["metadata"].get("namespace") or "") == namespace
        return same_ns and _owner(o, DEPLOYMENT.kind) == name

    replicas = {
        r.name: r
        for r in (observe_replica(o) for o in current if o.get("kind") == PROCESS.kind and mine(o))
    }
    revisions = {
        r.name: r
        for r in (
            observe_revision(o)
            for o in current
            if o.get("kind") == CONTROLLER_REVISION.kind and mine(o)
        )
    }
    status: Mapping[str, Any] = next(
        (o.get("status") or {} for o in current if o.get("kind") == DEPLOYMENT.kind
         and (o["metadata"].get("namespace") or "") == namespace
         and o["metadata"]["name"] == name),
        {},
    )  # fmt: skip
    idle = False
    for used in range(1, budget + 1):
        observed = Observed(
            replicas=tuple(replicas.values()), revisions=tuple(revisions.values()), status=status
        )
        step = deployment_plan(desired, observed, now)
        if step.create_revision:
            rev_name = f"{name}-{desired.hash}"
            revisions[rev_name] = Revision(rev_name, desired.hash, step.revision)
        elif step.renumber_revision:
            for rev in list(revisions.values()):
                if rev.hash == desired.hash:
                    revisions[rev.name] = replace(rev, number=step.revision)
        for gone in step.delete_revisions:
            revisions.pop(gone, None)
        for new in step.create:
            steps.add(DEPLOYMENT.kind, name, "start", f"revision {step.revision}", new.name)
        for old in step.delete:
            if old in replicas:
                why = "scale down" if replicas[old].hash == desired.hash else "replaced"
                steps.add(DEPLOYMENT.kind, name, "stop", why, old)
                del replicas[old]
        for new in step.create:  # the simulated world: it runs, its probe passes
            replicas[new.name] = Replica(new.name, desired.hash, new.port, True, now)
            steps.add(DEPLOYMENT.kind, name, "ready", "its probes are assumed to pass", new.name)
        status = step.status or status
        if step.create or step.delete:
            idle = False
            continue
        if idle or not step.requeue_after or step.requeue_after <= 0:
            return used, True
        now += step.requeue_after  # a replica may become available meanwhile: look once more
        idle = True
    return budget, False


def forecast_deletion(current: Sequence[Object], deleted: Sequence[Object]) -> Forecast:
    """The steps that follow deleting `deleted` (stored objects) from `current` (the stored
    objects), in order: each deleted object stops (a Deployment's replicas with it), then
    each Ready Process that depends on one that went becomes not Ready (the engine keeps it
    running), then those that depend on these being Ready, and so on. Pure."""
    steps = _Steps()
    gone: set[str] = set()  # dependency keys of what goes, replicas included
    for obj in deleted:
        kind, namespace, name = _key(obj)
        gone.add(dependency_key(kind, namespace, name))
        if kind == DEPLOYMENT.kind:
            for replica in _replicas(obj, current):
                steps.add(kind, name, "stop", "deleted with its Deployment", _key(replica)[2])
                gone.add(dependency_key(*_key(replica)))
        elif kind == SERVICE.kind:
            steps.add(kind, name, "stop", f"deleted: stops listening on {target_of(obj).address}")
        elif kind in (PROCESS.kind, JOB.kind):
            steps.add(kind, name, "stop", "deleted: its child is stopped, then it goes")
        else:
            steps.add(kind, name, "delete", "deleted")
    down = _not_ready_after(current, gone, steps)
    return Forecast(tuple(steps.items), True, (KEPT_RUNNING,) if down else ())


def _replicas(deployment: Object, current: Sequence[Object]) -> list[Object]:
    _, namespace, name = _key(deployment)
    return [
        o
        for o in current
        if o.get("kind") == PROCESS.kind
        and _key(o)[1] == namespace
        and _owner(o, DEPLOYMENT.kind) == name
    ]


def _not_ready_after(current: Sequence[Object], gone: set[str], steps: _Steps) -> bool:
    """Add a `not-ready` step for each Ready Process (not itself gone) that depends on a
    key of `gone` (whatever the condition: what is gone meets none), then for each that
    depends on one of those being Ready, breadth first; True if any."""
    processes = [o for o in current if o.get("kind") == PROCESS.kind]
    down: set[str] = set()
    frontier = [(key, "") for key in sorted(gone)]
    while frontier:
        key, why = frontier.pop(0)
        for obj in processes:
            own = dependency_key(*_key(obj))
            if own in gone or own in down or not _ready(obj):
                continue
            if not any(k == key and (not why or c == READY) for k, c in _dependencies(obj)):
                continue
            down.add(own)
            frontier.append((own, "not Ready"))
            kind, _, name = key.split("/", 2)
            reason = f"{kind}/{name} is {why or 'deleted'}; kept running"
            owner = _owner(obj, DEPLOYMENT.kind)
            if owner is None:
                steps.add(PROCESS.kind, _key(obj)[2], "not-ready", reason)
            else:
                steps.add(DEPLOYMENT.kind, owner, "not-ready", reason, _key(obj)[2])
    return bool(down)


def _dependencies(obj: Object) -> list[tuple[str, str]]:
    """(dependency key, condition) of each `spec.dependsOn` entry of `obj` (an entry with
    no namespace is in `obj`'s)."""
    own = _key(obj)[1]
    return [
        (
            dependency_key(str(e["kind"]), str(e.get("namespace") or own), str(e["name"])),
            str(e.get("condition") or READY),
        )
        for e in (obj.get("spec") or {}).get("dependsOn") or ()
        if isinstance(e, Mapping) and e.get("kind") and e.get("name")
    ]


def _ready(obj: Object) -> bool:
    return (get_condition(obj.get("status") or {}, READY) or {}).get("status") == "True"
