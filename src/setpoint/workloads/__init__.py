"""Local workloads: supervised processes, their probes and their dependencies.

`probes` (Kubernetes exec/httpGet/tcpSocket probes: schemas, a pure threshold
state machine, runners), `supervisor` (child processes in their own process
groups: start, exit notification, graceful stop, logs, re-adoption),
`dependencies` (`dependsOn`: pure evaluation and cycle detection), `children`
(the table of supervised children both controllers keep), `secret` (the `Secret`
kind and how `env`/`envFrom` take values from it), `process` and `job`
(the `Process` and `Job` kinds and their controllers). Each controller keeps
observe -> plan -> apply apart; plan functions are pure. Deployment comes next.
"""
