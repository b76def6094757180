"""The one exception tree of setpoint. Every error a user can meet derives from `Error`.

Three families sit under `Error`, in the manner of httpx's exceptions: catch a family to
treat its members alike (`except TransportError`: retry after a pause; `except APIError`:
show the refusal; `except DomainError`: a loop cannot go on as it is).

    Error
    ├── TransportError     the other end could not be reached, or stopped answering: retry
    │   ├── StoreUnavailable   a store's server cannot be reached (retry; re-read first)
    │   ├── StoreClosed        the store was closed
    │   ├── WebhookFailed      an admission webhook could not be called or answered nonsense
    │   └── MetricUnavailable  an Autoscaler's metric could not be read (a one-line reason)
    ├── APIError           a refusal with a status (`code`, `reason`): nothing was written
    │   ├── BadRequest         an HTTP request the API cannot read (a bad query, body, selector)
    │   ├── Unauthorized       no valid credentials (HTTP 401)
    │   ├── Forbidden          valid credentials whose role may not do this (HTTP 403)
    │   ├── NotFound           the object does not exist
    │   ├── AlreadyExists      create of a name that is taken
    │   ├── Conflict           stale resourceVersion: re-read, re-apply, retry
    │   │   └── CheckpointMoved  another recorder moved the timeline's checkpoint: nothing
    │   │                      was written (`Timeline.append_many(after=)`)
    │   ├── Gone               watch history compacted past the requested revision: relist
    │   ├── RequestEntityTooLarge  a request body over the API server's limit
    │   ├── UnsupportedMediaType   a request body of a content type the API does not take
    │   └── Invalid            input refused before anything was written (names the field)
    │       ├── UnknownKind    apiVersion/kind not registered
    │       ├── SecretUnavailable  a Secret (or key) a child's environment needs is missing
    │       └── UserRefused    a `user:` the engine will not run commands as
    │                          (setpoint.runtime.run_as)
    └── DomainError        the engine's own loops cannot go on as they are
        ├── TerminalError      a reconciler cannot progress without a change from outside
        ├── LeadershipLost     a manager lost its leader lease and stopped
        ├── EngineRunning      another engine already runs on this store: stop it first
        └── EnvFileUnavailable a child's envFile cannot be read or parsed (its start is
                               retried)

Each carries a message that says what to do; `code` is the HTTP status the
Kubernetes API would answer with, and `reason` its `Status.reason`. A bad manifest is an
`Invalid`, whichever door it came through (the CLI's parser, the API, a kind's rules): the
same refusal, with the same 422, because admission lives in one place below every front end.

Not in the tree, on purpose: the work queue's `Empty` and `ShutDown`
(`setpoint.runtime.queue`) are control flow between a queue and its workers, as
`asyncio.QueueEmpty` is, and the manifest parser's private `_DuplicateKey` and `_NotJson`
(`setpoint.model.manifests`) become an `Invalid`; none of them reaches a user.
tests/test_errors_tree.py keeps this true.
"""

from __future__ import annotations


class Error(Exception):
    """Base of every setpoint error."""

    code = 500
    reason = "InternalError"


class TransportError(Error):
    """The other end (a store's server, a webhook, a metric's source) could not be reached,
    or the connection broke, or it answered nonsense. Worth a retry after a pause."""

    code = 503
    reason = "ServiceUnavailable"


class StoreUnavailable(TransportError):
    """The store's server (PostgreSQL, etcd) could not be reached, or the connection broke
    during the call. Retryable: the store reconnects by itself. A write that fails with it
    may or may not have been committed, so read the object again before retrying (a blind
    retry of a create may meet `AlreadyExists`, of an update `Conflict`)."""

    code = 503
    reason = "ServiceUnavailable"


class StoreClosed(TransportError):
    code = 503
    reason = "ServiceUnavailable"


class WebhookFailed(TransportError):
    """An admission webhook could not be called (unreachable, timed out, its certificate
    not trusted) or answered with no AdmissionReview; its `failurePolicy: Fail` refuses the
    write with this, `Ignore` lets the write go on."""

    code = 500
    reason = "InternalError"


class MetricUnavailable(TransportError):
    """An Autoscaler's metric could not be read (`setpoint.control.metrics_source`): no
    answer, an HTTP error, a body that is not a number... The message is one line saying
    why; the Autoscaler reports it in `ScalingActive` and tries again next period."""

    code = 503
    reason = "FailedGetMetric"

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class APIError(Error):
    """A refusal with a status: the store or the API server answered `code` (`reason`) and
    wrote nothing. The message says why and what to change."""


class BadRequest(APIError):
    """The HTTP API could not read the request (`setpoint.api`): its message says what."""

    code = 400
    reason = "BadRequest"


class Unauthorized(APIError):
    code = 401
    reason = "Unauthorized"


class Forbidden(APIError):
    code = 403
    reason = "Forbidden"


class NotFound(APIError):
    code = 404
    reason = "NotFound"


class AlreadyExists(APIError):
    code = 409
    reason = "AlreadyExists"


class Conflict(APIError):
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


class Gone(APIError):
    code = 410
    reason = "Expired"


class RequestEntityTooLarge(APIError):
    code = 413
    reason = "RequestEntityTooLarge"


class UnsupportedMediaType(APIError):
    code = 415
    reason = "UnsupportedMediaType"


class Invalid(APIError):
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


class UserRefused(Invalid):
    """A `user:` the engine will not run a command as (`setpoint.runtime.run_as`);
    `condition_reason` is the reason of the condition that reports it (`UserUnknown`,
    `UserNotAllowed`)."""

    def __init__(self, condition_reason: str, message: str) -> None:
        super().__init__(message, field="spec.user")
        self.condition_reason = condition_reason


class DomainError(Error):
    """One of the engine's own loops cannot go on as it is: a reconciler is stuck, a manager
    lost its lease, another engine holds the store, a child's envFile is unreadable."""


class TerminalError(DomainError):
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


class LeadershipLost(DomainError):
    """`Manager.run()` stopped because it lost its leader lease (it stops rather than
    risk two leaders). Restart it to stand for election again."""

    code = 503
    reason = "ServiceUnavailable"


class EngineRunning(DomainError):
    """A second engine was refused: another one holds the store's engine lease. `holder`
    says which (e.g. "pid 1234 on host x")."""

    code = 409
    reason = "Conflict"

    def __init__(self, message: str, *, holder: str) -> None:
        super().__init__(message)
        self.holder = holder


class EnvFileUnavailable(DomainError):
    """A child cannot be started yet (`setpoint.workloads.env_files`): an `envFile` of its
    spec is missing, unreadable or malformed. One line naming the file (and line); the
    start is retried with back-off, since the file, not the spec, has to change."""

    reason = "EnvFileUnavailable"
