"""The `Service` kind (setpoint.dev/v1alpha1, namespaced, short name `svc`) and its
controller: one address (`host:port`, a TCP listener inside the engine) that reaches the
Ready Processes a label selector picks, as a Kubernetes Service and kube-proxy do.

`spec`: `selector` (label -> value, required, non-empty: label equality, as a Kubernetes
Service), `port` (required), `host` ("127.0.0.1"), `targetPort` (optional; default: each
selected Process's `spec.ports[0]`).

`status`: `endpoints` ([{name, port}] of the Ready Processes, by name),
`readyEndpoints`, `observedGeneration`, condition `Ready` (True with at least one
endpoint; False with reason `NoReadyEndpoints`, or `ListenFailed` with the error, e.g.
the port is in use, when `Stalled` is True too; a listen that failed is tried again
every `LISTEN_RETRY_SECONDS` and on any change, writing nothing while it keeps failing).

An *endpoint* is a Process in the Service's namespace whose labels match the selector,
whose `Ready` condition is True, which is not being deleted (no `deletionTimestamp`) and
which has a port (`targetPort`, or its `spec.ports[0]`). The proxy reads endpoints from
the manager's Process cache when each connection arrives, so traffic follows readiness
at the speed of the informer, not of a reconcile: a Process marked for deletion gets no
new connection from the moment the mark reaches the cache, before its child is even
signalled.

Each accepted connection goes to the next endpoint round-robin; a connect that fails
(refused, or not accepted within `CONNECT_TIMEOUT_SECONDS`) moves on to the next one,
each tried at most once, and if none accepts, the client connection is reset (RST, as
Kubernetes rejects a connection to a Service with no endpoints). Then bytes flow both
ways until both sides are done, with back-pressure, and a half-close is passed on (EOF
from the client -> `write_eof` to the backend, and vice versa); a reset on one side
resets the other.

The package keeps observe -> plan -> apply apart: `kind` (the schemas, every default
once), `plan` (pure: `target_of`, `endpoints_of`, `rotation`, `service_status`, and
`plan(desired, observed, now)`, which says whether to open the listener and what status
to record), `proxy`
(`ServiceProxy`: one listener and its connections, I/O) and `controller`
(`ServiceController`, on the reconciler kit: one proxy per Service, opened, moved when
host or port change, closed when the Service goes; the kit writes the status). The
listeners live only in this engine's memory, so deletion needs no finalizer: a Service
that is gone (or being deleted) has its listener closed; connections already in flight
finish on their own.
When the manager stops, every listener closes and connections in flight get
`SHUTDOWN_GRACE_SECONDS`.
"""

from setpoint.workloads.kinds import SERVICE
from setpoint.workloads.service.controller import (
    LISTEN_RETRY_SECONDS,
    SHUTDOWN_GRACE_SECONDS,
    ServiceController,
    services_selecting,
    setup,
)
from setpoint.workloads.service.kind import (
    EndpointSchema,
    ServiceSpecSchema,
    ServiceStatusSchema,
)
from setpoint.workloads.service.plan import (
    Endpoint,
    ServiceDesired,
    ServiceObserved,
    ServicePlan,
    Target,
    desired_of,
    endpoints_of,
    plan,
    rotation,
    selects,
    service_status,
    target_of,
)
from setpoint.workloads.service.proxy import (
    BACKEND_HOST,
    CONNECT_TIMEOUT_SECONDS,
    ProxyStatistics,
    ServiceProxy,
)

__all__ = [
    "BACKEND_HOST",
    "CONNECT_TIMEOUT_SECONDS",
    "LISTEN_RETRY_SECONDS",
    "SERVICE",
    "SHUTDOWN_GRACE_SECONDS",
    "Endpoint",
    "EndpointSchema",
    "ProxyStatistics",
    "ServiceController",
    "ServiceDesired",
    "ServiceObserved",
    "ServicePlan",
    "ServiceProxy",
    "ServiceSpecSchema",
    "ServiceStatusSchema",
    "Target",
    "desired_of",
    "endpoints_of",
    "plan",
    "rotation",
    "selects",
    "service_status",
    "services_selecting",
    "setup",
    "target_of",
]
