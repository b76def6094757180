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

The package keeps observe -> plan -> apply apart:

* `kind`: the schemas (every default of the spec, once); the kinds are declared in
  `setpoint.workloads.kinds`;
* `inputs`: what the planner works from (`Desired`, `Observed`), pure;
* `plan`: the plan, pure: Kubernetes' rolling update rules applied to single
  replicas, returning a frozen `Plan` with everything to do;
* `progress`: progress, deadline, remediation, status and conditions, pure;
* `controller`: observes, plans, and carries the plan out.

The names below are the package's public surface; its modules may change.
"""

from setpoint.model.wellknown import CHANGED_BY, DEPLOYMENT_LABEL, HASH_LABEL
from setpoint.runtime.plan import PlannedEvent
from setpoint.workloads.deployment.controller import (
    DeploymentController,
    DeploymentSettings,
    replica_object,
    setup,
)
from setpoint.workloads.deployment.inputs import (
    Desired,
    Observed,
    Replica,
    Revision,
    desired_of,
    observe_replica,
    observe_revision,
)
from setpoint.workloads.deployment.kind import (
    AVAILABLE,
    PROGRESSING,
    REPLICA_FAILURE,
    DeploymentSpecSchema,
    resolve_bound,
    substitute,
    template_hash,
)
from setpoint.workloads.deployment.plan import NewReplica, Plan, plan
from setpoint.workloads.deployment.progress import Rollback
from setpoint.workloads.kinds import CONTROLLER_REVISION, DEPLOYMENT

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
    "DeploymentSettings",
    "DeploymentSpecSchema",
    "Desired",
    "NewReplica",
    "Observed",
    "Plan",
    "PlannedEvent",
    "Replica",
    "Revision",
    "Rollback",
    "desired_of",
    "observe_replica",
    "observe_revision",
    "plan",
    "replica_object",
    "resolve_bound",
    "setup",
    "substitute",
    "template_hash",
]
