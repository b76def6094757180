"""Local workloads: supervised processes, their probes and their dependencies.

`probes` (Kubernetes exec/httpGet/tcpSocket probes: schemas, a pure threshold
state machine, runners), `supervisor` (child processes in their own process
groups: start, exit notification, graceful stop, logs, re-adoption),
`dependencies` (`dependsOn`: pure evaluation and cycle detection) and
`process` (the `Process` kind and its controller). Each controller keeps
observe -> plan -> apply apart; plan functions are pure. Job and Deployment
come next.
"""
