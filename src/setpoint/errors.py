"""The one exception tree of setpoint. Every error a user can meet derives from `Error`.

    Error
    ├── Invalid            input refused before anything was written (names the field)
    │   ├── UnknownKind    apiVersion/kind not registered
    │   ├── SecretUnavailable  a Secret (or key) a child's environment needs is missing
    │   └── UserRefused    a `user:` the engine will not run commands as (setpoint.runtime.run_as)
    ├── NotFound           the object does not exist
    ├── AlreadyExists      create of a name that is taken
    ├── Conflict           stale resourceVersion: re-read, re-apply, retry
    │   └── CheckpointMoved  another recorder moved the timeline's checkpoint: nothing was
    │                      written (`Timeline.append_many(after=)`)
    ├── Gone               watch history compacted past the requested revision: relist
    ├── BadRequest         an HTTP request the API cannot read (a bad query, body or selector)
    ├── Unauthorized       no valid credentials (HTTP 401)
    ├── Forbidden          valid credentials whose role may not do this (HTTP 403)
    ├── UnsupportedMediaType  a request body of a content type the API does not take
    ├── RequestEntityTooLarge a request body over the API server's limit
    ├── WebhookFailed      an admission webhook could not be called or answered nonsense
    ├── StoreClosed        the store was closed
    ├── StoreUnavailable   a store's server cannot be reached (retry; re-read first)
    ├── LeadershipLost     a manager lost its leader lease and stopped
    ├── MetricUnavailable  an Autoscaler's metric could not be read (a one-line reason)
    ├── EngineRunning      another engine already runs on this store: stop it first
    ├── EnvFileUnavailable a child's envFile cannot be read or parsed (its start is retried)
    └── TerminalError      a reconciler cannot progress without a change from outside

Each carries a message that says what to do; `code` is the HTTP status the
Kubernetes API would answer with, and `reason` its `Status.reason`.

Not in the tree, on purpose: the work queue's `Empty` and `ShutDown`
(`setpoint.runtime.queue`) are control flow between a queue and its workers, as
`asyncio.QueueEmpty` is, the health server's private `_BadRequest` becomes a
400 answer, and the manifest parser's private `_DuplicateKey` and `_NotJson`
(`setpoint.model.manifests`) an `Invalid`; none of them reaches a user.
tests/test_errors_tree.py keeps this true.
"""

from __future__ import annotations


class Error(Exception):
    """Base of every setpoint error."""

    code = 500
    reason = "InternalError"


class Invalid(Error):
    """The input was refused and nothing was written. `field` names the offending path."""

    code = 422
    reason = "Invalid"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field


class UnknownKind(Invalid):
    """No kind with this apiVersion and kind is registered."""

    code = 404
    reason = "NotFound"


class SecretUnavailable(Invalid):
    """A child cannot be started (`setpoint.workloads.secret`): a Secret or key its spec
    needs is missing (`condition_reason` `SecretMissing`), or holds a value an environment
    cannot (`SecretInvalid`)."""

    def __init__(self, message: str, *, reason: str = "SecretMissing") -> None:
        super().__init__(message)
        self.condition_reason = reason


class NotFound(Error):
    code = 404
    reason = "NotFound"


class AlreadyExists(Error):
    code = 409
    reason = "AlreadyExists"


class Conflict(Error):
    """A stale write, or (server-side apply, `setpoint.model.managed_fields`) fields another
    manager owns: `causes` then names each field and its owner, as a Kubernetes `Status`'s
    `details.causes` (`reason`, `message`, `field`)."""

    code = 409
    reason = "Conflict"

    def __init__(self, message: str = "", *, causes: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.causes: list[dict[str, str]] = list(causes or ())


class CheckpointMoved(Conflict):
    """Another recorder saved a timeline checkpoint since this one read it: nothing was
    written (`setpoint.insight.timeline.Timeline.append_many`)."""


class Gone(Error):
    code = 410
    reason = "Expired"


class BadRequest(Error):
    """The HTTP API could not read the request (`setpoint.api`): its message says what."""

    code = 400
    reason = "BadRequest"


class Unauthorized(Error):
    code = 401
    reason = "Unauthorized"


class Forbidden(Error):
    code = 403
    reason = "Forbidden"


class UnsupportedMediaType(Error):
    code = 415
    reason = "UnsupportedMediaType"


class RequestEntityTooLarge(Error):
    code = 413
    reason = "RequestEntityTooLarge"


class WebhookFailed(Error):
    """An admission webhook could not be called (unreachable, timed out, its certificate
    not trusted) or answered with no AdmissionReview; its `failurePolicy: Fail` refuses the
    write with this, `Ignore` lets the write go on."""

    code = 500
    reason = "InternalError"


class StoreClosed(Error):
    code = 503
    reason = "ServiceUnavailable"


class StoreUnavailable(Error):
    """The store's server (PostgreSQL, etcd) could not be reached, or the connection broke
    during the call. Retryable: the store reconnects by itself. A write that fails with it
    may or may not have been committed, so read the object again before retrying (a blind
    retry of a create may meet `AlreadyExists`, of an update `Conflict`)."""

    code = 503
    reason = "ServiceUnavailable"


class LeadershipLost(Error):
    """`Manager.run()` stopped because it lost its leader lease (it stops rather than
    risk two leaders). Restart it to stand for election again."""

    code = 503
    reason = "ServiceUnavailable"


class MetricUnavailable(Error):
    """An Autoscaler's metric could not be read (`setpoint.control.metrics_source`): no
    answer, an HTTP error, a body that is not a number... The message is one line saying
    why; the Autoscaler reports it in `ScalingActive` and tries again next period."""

    code = 503
    reason = "FailedGetMetric"

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class EngineRunning(Error):
    """A second engine was refused: another one holds the store's engine lease. `holder`
    says which (e.g. "pid 1234 on host x")."""

    code = 409
    reason = "Conflict"

    def __init__(self, message: str, *, holder: str) -> None:
        super().__init__(message)
        self.holder = holder


class EnvFileUnavailable(Error):
    """A child cannot be started yet (`setpoint.workloads.env_files`): an `envFile` of its
    spec is missing, unreadable or malformed. One line naming the file (and line); the
    start is retried with back-off, since the file, not the spec, has to change."""

    reason = "EnvFileUnavailable"


class TerminalError(Error):
    """Raised by a reconciler that cannot progress without a change from outside.

    It is not retried with back-off; the object's `Stalled` condition records `reason`
    (a CamelCase word, e.g. "PermissionDenied") and the message. `retry_after` (seconds)
    asks for one more look that much later, for a cause outside the object that may go
    away by itself (a port another program holds).
    """

    def __init__(
        self, message: str, *, reason: str = "TerminalError", retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry_after = retry_after


class UserRefused(Invalid):
    """A `user:` the engine will not run a command as (`setpoint.runtime.run_as`);
    `condition_reason` is the reason of the condition that reports it (`UserUnknown`,
    `UserNotAllowed`)."""

    def __init__(self, condition_reason: str, message: str) -> None:
        super().__init__(message, field="spec.user")
        self.condition_reason = condition_reason
