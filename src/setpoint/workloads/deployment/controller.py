"""The Deployment controller, on the reconciler kit (`setpoint.runtime.kit`): observe (the
replicas and revisions the Deployment owns from the caches, its dependencies, ports other
programs hold, whether its `UserPolicy` allows the template's `user:`), `plan` (pure,
`setpoint.workloads.deployment.plan`), then act: carry the plan out and nothing more
(create and delete replicas and revisions, roll the spec back, after writing the status
that says why); the kit records the plan's events and writes its status.

Act decides nothing. What it learns while carrying the plan out (a replica the store
refuses) it reports, as an event and a `ReplicaFailure` condition, and the next look
plans again.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import AlreadyExists, Conflict, Invalid, NotFound, UnknownKind
from setpoint.model import Object
from setpoint.model.wellknown import (
    CHANGE_CAUSE,
    CHANGED_BY,
    DEPLOYMENT_LABEL,
    HASH_LABEL,
    REVISION_ANNOTATION,
)
from setpoint.runtime.cache import Cache
from setpoint.runtime.controller import Controller
from setpoint.runtime.events import EventRecorder
from setpoint.runtime.kit import Acted, KindRules, KitReconciler
from setpoint.runtime.lifecycle import owner_reference
from setpoint.runtime.manager import Manager
from setpoint.runtime.run_as import UserPolicy, UserRefused, user_of
from setpoint.store import Store
from setpoint.workloads.children import DEPENDABLE_KINDS
from setpoint.workloads.dependencies import (
    DEPENDS_ON_INDEX,
    dependency_keys,
    dependents_of,
    unmet_in_store,
)
from setpoint.workloads.deployment.inputs import (
    Desired,
    Observed,
    Replica,
    desired_of,
    observe_replica,
    observe_revision,
)
from setpoint.workloads.deployment.kind import substitute
from setpoint.workloads.deployment.plan import NewReplica, Plan, plan
from setpoint.workloads.deployment.progress import Rollback, with_failed_create
from setpoint.workloads.kinds import CONTROLLER_REVISION, DEPLOYMENT, PROCESS

log = logging.getLogger("setpoint.deployment")

ACTOR = "controller/deployment"
"""How the controller signs the spec changes it makes (the rollback remediation)."""


def replica_object(
    deployment: Object, desired: Desired, replica: NewReplica, revision: int
) -> Object:
    """The Process object of a new replica of `deployment` (whose `Desired` is `desired`):
    the template with `$(PORT)` and `$(REPLICA)` replaced, `PORT` and `REPLICA` in its
    environment, labelled with the Deployment and the template hash."""
    template = desired.spec.template
    process_spec = substitute(template.spec, port=replica.port, replica=replica.name)
    env = dict(process_spec.get("env") or {})
    env["REPLICA"] = replica.name
    if replica.port is not None:
        env["PORT"] = str(replica.port)
        process_spec["ports"] = [replica.port]
    process_spec["env"] = env
    meta = deployment["metadata"]
    labels = {**template.metadata.labels, DEPLOYMENT_LABEL: meta["name"], HASH_LABEL: desired.hash}
    annotations = {**template.metadata.annotations, REVISION_ANNOTATION: str(revision)}
    return {
        "apiVersion": PROCESS.api_version,
        "kind": PROCESS.kind,
        "metadata": {
            "name": replica.name,
            "namespace": meta.get("namespace") or "default",
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(deployment)],
        },
        "spec": process_spec,
    }


@dataclass(frozen=True, slots=True)
class DeploymentSettings:
    """Whom a Deployment's replicas may run as (`users`; default: `UserPolicy()`, the
    engine's own rule)."""

    users: UserPolicy = field(default_factory=UserPolicy)


class DeploymentController(KitReconciler[Desired, Observed, Plan]):
    """Reconciles Deployments on the kit: observes replicas and revisions, plans, acts."""

    def __init__(
        self,
        store: Store,
        events: EventRecorder,
        caches: Mapping[str, Cache],
        *,
        clock: Clock = SYSTEM_CLOCK,
        settings: DeploymentSettings | None = None,
    ):
        self.users = (settings or DeploymentSettings()).users
        self._caches = dict(caches)
        """The caches of the kinds a Deployment owns, by name: `process` and `revision`."""
        super().__init__(
            store,
            KindRules(DEPLOYMENT, desired_of, self.observe, plan, self.act),
            events,
            clock=clock,
        )

    def _owned(self, kind_name: str, obj: Object) -> list[Object]:
        """The cached objects (`process` or `revision`) that `obj` owns."""
        return self._caches[kind_name].by_index("owner", obj["metadata"].get("uid", ""))

    async def observe(self, obj: Object, desired: Desired) -> Observed:
        replicas = tuple(observe_replica(p) for p in self._owned("process", obj))
        refused = None
        try:
            self.users.account(user_of(obj))
        except UserRefused as exc:
            message = str(exc).replace("spec.user", "spec.template.spec.user")
            refused = (exc.condition_reason, message)
        return Observed(
            refused=refused,
            replicas=replicas,
            revisions=tuple(observe_revision(r) for r in self._owned("revision", obj)),
            status=obj.get("status") or {},
            unmet=await unmet_in_store(self.store, obj),
            busy_ports=_busy_ports(desired, replicas),
        )

    async def act(self, obj: Object, step: Plan) -> Acted[Plan]:
        """Write revisions, create and delete replicas, prune revisions; a replica the store
        refuses amends the plan's status (`ReplicaFailure`); a rollback is made once the
        status that explains it is written."""
        assert self.events is not None
        desired = desired_of(obj)
        namespace = obj["metadata"].get("namespace") or "default"
        status = step.status or {}
        if step.create_revision or step.renumber_revision:
            await self._write_revision(obj, desired, step.revision)
        for replica in step.create:
            try:
                await self.store.create(replica_object(obj, desired, replica, step.revision))
            except AlreadyExists:
                continue  # created by an earlier look whose cache had not caught up
            except Invalid as exc:
                message = f"{replica.name}: {exc}"
                await self.events.warning(obj, "FailedCreate", message)
                status = with_failed_create(
                    status, message, generation=desired.generation, now=self.clock.now()
                )
                break
            port = "" if replica.port is None else f", port {replica.port}"
            await self.events.normal(
                obj,
                "ScalingReplicaSet",
                f"created replica {replica.name} (revision {step.revision}{port})",
            )
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
        if status is not step.status:
            step = dataclasses.replace(step, status=status)
        if step.rollback is None:
            return Acted(obj, step)
        try:
            written = await self.write_status(obj, status, step.stall)
        except Conflict:
            return Acted(None, step)  # a newer version is queued already
        if written is None:
            return Acted(None, step)
        await self._roll_back(written, step.rollback)  # the rolled-back spec: the next look's
        return Acted(written, step)

    async def _write_revision(self, obj: Object, desired: Desired, number: int) -> None:
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        name = f"{meta['name']}-{desired.hash}"
        try:
            revision = await self.store.get(
                CONTROLLER_REVISION.api_version, CONTROLLER_REVISION.kind, name, namespace
            )
        except NotFound:
            cause = (meta.get("annotations") or {}).get(CHANGE_CAUSE)
            await self.store.create(
                {
                    "apiVersion": CONTROLLER_REVISION.api_version,
                    "kind": CONTROLLER_REVISION.kind,
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "labels": {DEPLOYMENT_LABEL: meta["name"], HASH_LABEL: desired.hash},
                        "annotations": {CHANGE_CAUSE: cause} if cause else {},
                        "ownerReferences": [owner_reference(obj)],
                    },
                    "revision": number,
                    "data": {"template": desired.spec.template.wire()},
                }
            )
            return
        if revision.get("revision") != number:
            revision["revision"] = number
            await self.store.update(revision)

    async def _roll_back(self, obj: Object, rollback: Rollback) -> None:
        """Put the template of `rollback.revision` back into the spec, signed."""
        obj = copy.deepcopy(obj)
        obj["spec"]["template"] = copy.deepcopy(dict(rollback.template))
        obj["metadata"].setdefault("annotations", {})[CHANGED_BY] = ACTOR
        try:
            await self.store.update(obj)
        except (Conflict, NotFound):
            return  # changed meanwhile: the next look decides again
        log.info(
            "deployment %s: rolled back to revision %d", obj["metadata"]["name"], rollback.revision
        )


def _busy_ports(desired: Desired, replicas: Sequence[Replica]) -> frozenset[int]:
    """The ports of `desired`'s range, not held by a replica, that cannot be bound now:
    another program has them, and a replica given one would only crash-loop."""
    spec = desired.spec
    if desired.ports is None or len(replicas) >= spec.replicas + spec.max_surge:
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


def setup(manager: Manager, settings: DeploymentSettings | None = None) -> Controller:
    """Run the Deployment controller in `manager` (`settings`: whom its replicas may run
    as); return the controller. It owns Processes and ControllerRevisions, and a change of
    a Process or Job wakes the Deployments that depend on it."""
    cache = manager.cache(DEPLOYMENT)
    cache.add_index(DEPENDS_ON_INDEX, dependency_keys)
    reconciler = DeploymentController(
        manager.store,
        manager.event_recorder("deployment-controller"),
        {"process": manager.cache(PROCESS), "revision": manager.cache(CONTROLLER_REVISION)},
        clock=manager.clock,
        settings=settings,
    )
    builder = (
        manager.controller("deployment").for_(DEPLOYMENT).owns(PROCESS).owns(CONTROLLER_REVISION)
    )
    for kind in DEPENDABLE_KINDS:  # what a Deployment may depend on (a Service too)
        with contextlib.suppress(UnknownKind):  # a kind that is not registered here
            watched = manager.store.registry.get(PROCESS.api_version, kind)
            builder.watches(watched, dependents_of(cache))
    return builder.complete(reconciler)
