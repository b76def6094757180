"""Well-known names: the annotations, labels and finalizers setpoint writes on objects and
reads back, and the name of a Process's or Job's child and its log file, defined once for
every layer (the workloads that write them, the CLI, the timeline that reads them). Names
only: no I/O.

Annotations a user may write too: `CHANGED_BY` (sign a change so the timeline names its
actor), `CHANGE_CAUSE` (why, shown by `rollout history`) and the three that end a
`setpoint up` run (`EXIT_ON_END`, `EXIT_ON_FAILURE`, `EXIT_ON_SKIPPED`, `SUCCESS_EXIT_CODES`:
the process-compose translator writes them, with `COMPOSE_PROJECT`).
"""

from __future__ import annotations

__all__ = [
    "CHANGED_AT",
    "CHANGED_BY",
    "CHANGE_CAUSE",
    "COMPOSE_NAMESPACE_LABEL",
    "COMPOSE_PROJECT",
    "COORDINATION_LABEL",
    "DEPLOYMENT_LABEL",
    "DESCRIPTION_ANNOTATION",
    "EXIT_ON_END",
    "EXIT_ON_FAILURE",
    "EXIT_ON_SKIPPED",
    "HASH_LABEL",
    "JOB_FINALIZER",
    "PROCESS_FINALIZER",
    "RESTARTED_AT",
    "REVISION_ANNOTATION",
    "SHARD_GROUP_LABEL",
    "SHARD_INCARNATION",
    "SHARD_MEMBERS",
    "SHARD_VIEW",
    "STORED_WRITER",
    "SUCCESS_EXIT_CODES",
    "child_log_file",
    "child_name",
]

# -- annotations ---------------------------------------------------------------------

CHANGED_BY = "setpoint.dev/changed-by"
"""Who last changed an object's spec: `alice@host`, `setpoint rollout`, or
`controller/deployment` (the rollback remediation). The timeline records it as the
change's actor."""
CHANGED_AT = "setpoint.dev/changed-at"
"""When a signed change was made: keeps each signed write distinct when `CHANGED_BY`
stays the same."""
CHANGE_CAUSE = "kubernetes.io/change-cause"
"""Why a Deployment's template changed (Kubernetes' name), copied onto its
ControllerRevision and shown by `setpoint rollout history`."""
RESTARTED_AT = "setpoint.dev/restartedAt"
"""A restart request, set to the time it was asked by `setpoint restart` (and `setpoint
rollout restart`): on a Deployment's template, a new template, so every replica is
replaced; on a Process or a Job, its child is started again once (the start records the
value it honours in `status.restartedAt`)."""
REVISION_ANNOTATION = "setpoint.dev/revision"
"""On a Deployment's replica: the revision number of the template it runs."""

EXIT_ON_END = "setpoint.dev/exit-on-end"
"""On a Process or a Job, `"true"`: once its child has ended by itself (not stopped by the
controller) and is not started again (phase Succeeded or Failed), the foreground `setpoint
up` stops everything and exits with that child's exit code, 0 for a success
(process-compose's `availability.exit_on_end`)."""
EXIT_ON_FAILURE = "setpoint.dev/exit-on-failure"
"""On a Process or a Job, `"true"`: once its child has failed (ended by itself, not a
success) and is not started again, the foreground `setpoint up` stops everything and exits
with that child's exit code (process-compose's `availability.restart: exit_on_failure`)."""
EXIT_ON_SKIPPED = "setpoint.dev/exit-on-skipped"
"""On a Process or a Job of a process-compose project (`COMPOSE_PROJECT`), `"true"`: once it
is skipped (it never started and never will: a dependency ended without meeting its
condition), the foreground `setpoint up` stops everything and exits with 1
(process-compose's `availability.exit_on_skipped`)."""
COMPOSE_PROJECT = "setpoint.dev/compose-project"
"""On a Process or a Job translated from a process-compose file: the file's name. A
foreground `setpoint up` that applied such objects ends, as process-compose does, once each
of them has ended or been skipped (`setpoint.cli.run_end.project_end`), unless
`--keep-project`."""
SUCCESS_EXIT_CODES = "setpoint.dev/success-exit-codes"
"""On a Process or a Job: the exit codes besides 0 that count as a success when `EXIT_ON_END`
or `EXIT_ON_FAILURE` end the run, comma-separated (`"3,143"`; process-compose's
`success_exit_codes`)."""

SHARD_INCARNATION = "setpoint.dev/shard-incarnation"
"""On a shard member's Lease: its incarnation (new on every join)."""
SHARD_VIEW = "setpoint.dev/shard-view"
"""On a shard member's Lease: the digest of the view it adopted and drained for."""
SHARD_MEMBERS = "setpoint.dev/shard-members"
"""On a shard member's Lease: that view's members (for people; the digest decides)."""

DESCRIPTION_ANNOTATION = "setpoint.dev/description"
"""A person's description of an object (a process-compose process's `description`)."""

# -- labels --------------------------------------------------------------------------

DEPLOYMENT_LABEL = "setpoint.dev/deployment"
"""On a Deployment's replicas and ControllerRevisions: the Deployment's name."""
HASH_LABEL = "setpoint.dev/template-hash"
"""On a Deployment's replicas and ControllerRevisions: the hash of their template."""

SHARD_GROUP_LABEL = "setpoint.dev/shard-group"
"""On a shard member's Lease: the name of its group."""
COORDINATION_LABEL = "setpoint.dev/coordination"
"""On every lease a `leader` or `shard` manager holds (value: the mode), so that a `single`
one can tell that coordinated managers run on its store."""

COMPOSE_NAMESPACE_LABEL = "setpoint.dev/compose-namespace"
"""On the objects made from a process-compose file: the process's `namespace` there."""

# -- inside a stored value -------------------------------------------------------------

STORED_WRITER = "setpoint.dev/writer"
"""The member an etcd store appends to an object's stored JSON for who wrote it (stripped on
every read; never seen by a client)."""

# -- finalizers ----------------------------------------------------------------------

PROCESS_FINALIZER = "setpoint.dev/process"
"""Held by a Process until its child has been stopped."""
JOB_FINALIZER = "setpoint.dev/job"
"""Held by a Job until its running attempt has been stopped."""

# -- a child's name and its log file ------------------------------------------------------


def child_name(namespace: str, name: str) -> str:
    """`<namespace>_<name>`: what a Process's or Job's child is called in the supervisor's
    state and log directories (`_` cannot occur in a namespace or name, so the pair is
    unambiguous)."""
    return f"{namespace or 'default'}_{name}"


def child_log_file(namespace: str, name: str) -> str:
    """The file name of a Process's or Job's current log (rotated ones add `.1`, `.2`, ...)."""
    return f"{child_name(namespace, name)}.log"
