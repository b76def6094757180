"""The workloads' kinds (`Process`, `Job`, `Deployment`, `ControllerRevision`, `Service`,
`Secret`) and `register`, which adds them to a registry.

Process, Job and Deployment declare `spec.dependsOn` as their dependency edges
(`Kind.depends_on`): the store refuses a write of one of them that closes a cycle.

Only declarations: each schema stays beside its controller (`process`, `job`,
`deployment.kind`, `service.kind`, `secret`) and is named lazily, so naming these kinds
(the CLI's `get`, `builtin_kinds()`) imports neither pydantic nor the controllers. No I/O.
"""

from __future__ import annotations

from setpoint.model.kinds import Kind, PrinterColumn, Registry, ScaleSubresource

_API = "setpoint.dev/v1alpha1"

PROCESS = Kind(
    _API,
    "Process",
    spec="setpoint.workloads.process:ProcessSpecSchema",
    status="setpoint.workloads.process:ProcessStatusSchema",
    namespaced=True,
    plural="processes",
    short_names=("proc",),
    depends_on="spec.dependsOn",
    columns=(
        PrinterColumn("PHASE", "status.phase"),
        PrinterColumn("RESTARTS", "status.restarts"),
        PrinterColumn("PID", "status.pid"),
    ),
)
"""The `Process` kind."""

JOB = Kind(
    _API,
    "Job",
    namespaced=True,
    plural="jobs",
    depends_on="spec.dependsOn",
    spec="setpoint.workloads.job:JobSpecSchema",
    status="setpoint.workloads.job:JobStatusSchema",
    columns=(
        PrinterColumn("PHASE", "status.phase"),
        PrinterColumn("ATTEMPTS", "status.attempts"),
    ),
)
"""The `Job` kind."""

DEPLOYMENT = Kind(
    _API,
    "Deployment",
    spec="setpoint.workloads.deployment.kind:DeploymentSpecSchema",
    status="setpoint.workloads.deployment.kind:DeploymentStatusSchema",
    short_names=("deploy",),
    depends_on="spec.dependsOn",
    scale=ScaleSubresource(),
    columns=(
        PrinterColumn("REPLICAS", "spec.replicas"),
        PrinterColumn("UP-TO-DATE", "status.updatedReplicas"),
        PrinterColumn("AVAILABLE", "status.availableReplicas"),
        PrinterColumn("REVISION", "status.currentRevision"),
    ),
)
"""The `Deployment` kind."""

CONTROLLER_REVISION = Kind(
    _API,
    "ControllerRevision",
    body="setpoint.workloads.deployment.kind:RevisionBody",
    short_names=("rev",),
)
"""The `ControllerRevision` kind: one template a Deployment has run, and its number."""

SERVICE = Kind(
    _API,
    "Service",
    spec="setpoint.workloads.service.kind:ServiceSpecSchema",
    status="setpoint.workloads.service.kind:ServiceStatusSchema",
    namespaced=True,
    plural="services",
    short_names=("svc",),
    columns=(
        PrinterColumn("PORT", "spec.port"),
        PrinterColumn("ENDPOINTS", "status.readyEndpoints"),
    ),
)
"""The `Service` kind."""

SECRET = Kind(
    "v1",
    "Secret",
    plural="secrets",
    namespaced=True,
    body="setpoint.workloads.secret:SecretBody",
    columns=(PrinterColumn("TYPE", "type"),),
    secret_fields=("data",),
)
"""The `Secret` kind (core group, as Kubernetes)."""

KINDS = (PROCESS, JOB, DEPLOYMENT, CONTROLLER_REVISION, SERVICE, SECRET)
"""The kinds this package defines."""


def register(registry: Registry) -> None:
    """Add Process, Job, Deployment, ControllerRevision, Service and Secret to `registry`."""
    for kind in KINDS:
        registry.register(kind)
