"""Local workloads: supervised processes, their probes and their dependencies.

`probes` (Kubernetes exec/httpGet/tcpSocket probes: schemas, a pure threshold
state machine, runners), `supervisor` (child processes in their own process
groups: start, exit notification, graceful stop, logs, re-adoption),
`dependencies` (`dependsOn`: pure evaluation and cycle detection), `secret` (the
`Secret` kind and how `env`/`envFrom` take values from it), `children` (the child
lifecycle the Process and Job controllers share), `process` and `job` (the `Process`
and `Job` kinds and their controllers), `deployment` (replicas of a Process template,
rolling updates) and `service` (a TCP proxy in front of Ready replicas). Each
controller keeps observe -> plan -> apply apart; plan functions are pure.

`register(registry)` adds this package's kinds to a registry; importing registers nothing.
"""

from setpoint.model import Registry
from setpoint.workloads.deployment import CONTROLLER_REVISION, DEPLOYMENT
from setpoint.workloads.job import JOB
from setpoint.workloads.process import PROCESS
from setpoint.workloads.secret import SECRET
from setpoint.workloads.service import SERVICE

KINDS = (PROCESS, JOB, DEPLOYMENT, CONTROLLER_REVISION, SERVICE, SECRET)
"""The kinds this package defines."""


def register(registry: Registry) -> None:
    """Add Process, Job, Deployment, ControllerRevision, Service and Secret to `registry`."""
    for kind in KINDS:
        registry.register(kind)


__all__ = ["KINDS", "register"]
