"""Local workloads: supervised processes, their probes and their dependencies.

`probes` (Kubernetes exec/httpGet/tcpSocket probes: schemas, a pure threshold
state machine, runners), `supervisor` (child processes in their own process
groups: start, exit notification, graceful stop, logs, re-adoption; who a child runs
as and with what environment is `setpoint.runtime.run_as`'s rule),
`dependencies` (`dependsOn`: pure evaluation and cycle detection), `secret` (the
`Secret` kind and how `env`/`envFrom` take values from it), `children` (the child
lifecycle the Process and Job controllers share), `process` and `job` (the `Process`
and `Job` kinds and their controllers), `deployment` (replicas of a Process template,
rolling updates) and `service` (a TCP proxy in front of Ready replicas). Each
controller keeps observe -> plan -> apply apart; plan functions are pure.

`kinds` declares the kinds without importing the rest; `register(registry)` adds them to a
registry; importing registers nothing.
"""

from setpoint.workloads.kinds import KINDS, register

__all__ = ["KINDS", "register"]
