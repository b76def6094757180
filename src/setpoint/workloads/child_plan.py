"""What a Process's or a Job's plan is made of, pure: the spec fields of a command
(`CommandSchema`: args, env and envFrom, cwd, user, grace period, stop signal), the back-off
arithmetic (`BackoffSchema`, `backoff_delay`), how a child ended (`ExitSchema`, `ChildExit`:
whether the controller stopped it on request is a field, not text in the reason), the
plan's inputs both kinds share (`ChildDesired`: generation, typed spec, deleting, a restart
request; `ChildObserved`: the child, its last exit, unmet dependencies, a failed start,
the stored status) and what a plan is to the child lifecycle (`ChildPlan`: the child
action, besides the status, events, stall and requeue every kind's plan has), and what both
kinds' `status.envFiles` says of the env files a running child read (`EnvFileSeen`,
`EnvFileStatusSchema`, `record_env_files`; `setpoint.workloads.env_file_watch` looks at the
files). No I/O, no clock (`setpoint.workloads.children` does the I/O).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BeforeValidator, Field

from setpoint.model import Object, Schema
from setpoint.model.fields import ByteQuantity, OsString
from setpoint.model.wellknown import RESTARTED_AT
from setpoint.runtime.lifecycle import is_deleting
from setpoint.runtime.plan import Plan, PlannedEvent, parse_time, timestamp
from setpoint.workloads.env_schema import Env, EnvFromSource

__all__ = [
    "ENVIRONMENT_BACKOFF",
    "LAST_LINE_CHARS",
    "LOST_REASON",
    "Action",
    "BackoffSchema",
    "ChildDesired",
    "ChildExit",
    "ChildObserved",
    "ChildPlan",
    "CommandSchema",
    "EnvFileSeen",
    "EnvFileStatusSchema",
    "ExitSchema",
    "StartFailure",
    "StopSignal",
    "backoff_delay",
    "keep_observed_generation",
    "record_env_files",
    "recorded_env_files",
    "restart_request",
    "stopping_reason",
]

StopSignal = Literal["SIGTERM", "SIGINT", "SIGQUIT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGKILL"]
"""The signals a spec's `stopSignal` may name (docker compose's `stop_signal`)."""

LAST_LINE_CHARS = 200
"""How much of a failed child's last output line its exit reason quotes."""


# -- the schemas both kinds share ------------------------------------------------------


class EnvFileStatusSchema(Schema):
    """One env file a running child read, as last seen (`EnvFileSeen`)."""

    path: str
    digest: str | None = None
    changed_keys: list[str] = Field(default_factory=list)
    changed_at: str | None = None


@dataclass(frozen=True, slots=True)
class EnvFileSeen:
    """One env file as last seen: `digest`, what tells its content changed (a keyed HMAC,
    `setpoint.workloads.env_file_watch`; `""`: not known yet), and of its last edit the
    keys it changed (empty: not known, or no edit yet) and when it was noticed
    (`changed_at`, None: no edit seen). Never a value, nor a digest one could reverse."""

    path: str
    digest: str
    changed_keys: tuple[str, ...] = ()
    changed_at: float | None = None

    def wire(self) -> dict[str, Any]:
        """Its `status.envFiles` item."""
        out: dict[str, Any] = {"path": self.path}
        if self.digest:
            out["digest"] = self.digest
        if self.changed_keys:
            out["changedKeys"] = list(self.changed_keys)
        if self.changed_at is not None:
            out["changedAt"] = timestamp(self.changed_at)
        return out


def recorded_env_files(status: Mapping[str, Any]) -> dict[str, EnvFileSeen]:
    """path -> what a stored status's `envFiles` says of each file. Pure."""
    items = status.get("envFiles")
    out: dict[str, EnvFileSeen] = {}
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, Mapping) or not item.get("path"):
            continue
        keys = item.get("changedKeys")
        out[str(item["path"])] = EnvFileSeen(
            str(item["path"]),
            str(item.get("digest") or ""),
            tuple(str(k) for k in keys) if isinstance(keys, list) else (),
            parse_time(item.get("changedAt")),
        )
    return out


def record_env_files(status: dict[str, Any], env_files: tuple[EnvFileSeen, ...] | None) -> None:
    """Write what a running child's env files were seen to hold to `status.envFiles` (none:
    the field goes). With no child running (`env_files` None) what the status says stays,
    for the next child's watch to start from, but for a digest of the old form (a bare
    SHA-256 of the content, which a reader could reverse by trying values): that goes.
    Pure."""
    if env_files is None:
        items = status.get("envFiles")
        if isinstance(items, list):
            status["envFiles"] = [_without_old_digest(item) for item in items]
    elif env_files:
        status["envFiles"] = [seen.wire() for seen in env_files]
    else:
        status.pop("envFiles", None)


def _without_old_digest(item: Any) -> Any:
    """`item` without its `digest` when it is not of the keyed form (`KEYID:MAC`, or
    `missing`)."""
    if not isinstance(item, Mapping):
        return item
    digest = item.get("digest")
    if digest is None or (isinstance(digest, str) and (digest == "missing" or ":" in digest)):
        return item
    return {k: v for k, v in item.items() if k != "digest"}


class BackoffSchema(Schema):
    """The wait before a retry: `initialSeconds`, doubling up to `maxSeconds`."""

    initial_seconds: float = Field(default=10.0, gt=0)
    max_seconds: float = Field(default=300.0, gt=0)


ENVIRONMENT_BACKOFF = BackoffSchema(initial_seconds=1.0, max_seconds=60.0)
"""The wait before retrying a start that failed for a reason of the machine's (an OS error)."""


def backoff_delay(count: int, backoff: BackoffSchema) -> float:
    """Seconds to wait before the next try, after `count` failures in a row: 0 after none,
    then `initialSeconds`, doubling, capped at `maxSeconds`."""
    if count <= 0:
        return 0.0
    return float(min(backoff.max_seconds, backoff.initial_seconds * 2.0 ** min(count - 1, 60)))


def _one_or_more(value: Any) -> Any:
    """`envFile: .env` as `[".env"]`, as docker compose takes one path or a list."""
    return [value] if isinstance(value, str) else value


EnvFiles = Annotated[list[Annotated[OsString, Field(min_length=1)]], BeforeValidator(_one_or_more)]
"""A spec's `envFile`: one path, or a list of them."""


class LimitsSchema(Schema):
    """`resources.limits`: `memory`, the most the child's process group may hold in memory
    (a quantity: `64Mi`, `1Gi`); over it the child is killed (`setpoint.workloads.memory`)."""

    memory: ByteQuantity | None = None


class ResourcesSchema(Schema):
    """`resources`, as a Kubernetes container's (only `limits.memory` for now)."""

    limits: LimitsSchema = Field(default_factory=LimitsSchema)


class CommandSchema(Schema):
    """What to run, and how to stop it: the spec fields of a Process and of a Job. `env`
    values and `envFrom` may come from Secrets (`setpoint.workloads.secret`), `envFile`
    from files (`setpoint.workloads.env_files`); `resources.limits.memory` caps its memory
    (`setpoint.workloads.memory`)."""

    args: list[OsString] = Field(min_length=1)
    env: Env = Field(default_factory=dict)
    env_from: list[EnvFromSource] = Field(default_factory=list)
    env_file: EnvFiles = Field(default_factory=list)
    cwd: OsString | None = None
    user: OsString | None = None
    termination_grace_period_seconds: float = Field(default=30.0, ge=0)
    stop_signal: StopSignal = "SIGTERM"
    resources: ResourcesSchema = Field(default_factory=ResourcesSchema)


class ExitSchema(Schema):
    """How the last child ended: `code` if it exited, `signal` if a signal killed it;
    `stoppedOnRequest` when the controller stopped it (`stopReason` says why); `message`
    beside a `reason` that is one word (`OOMKilled`: how far over which limit)."""

    code: int | None = None
    signal: int | None = None
    reason: str = ""
    message: str | None = None
    finished_at: str | None = None
    stopped_on_request: bool = False
    stop_reason: str | None = None


@dataclass(frozen=True, slots=True)
class ChildExit:
    """How a child ended, at `finished_at` (epoch seconds). `started_at` None: its start is
    unknown; `stop_reason` None: it ended by itself, not on the controller's request."""

    code: int | None
    signal: int | None
    reason: str
    finished_at: float
    started_at: float | None = None
    stop_reason: str | None = None
    pid: int | None = None
    message: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.code == 0

    @property
    def ran_for(self) -> float | None:
        return None if self.started_at is None else max(0.0, self.finished_at - self.started_at)

    def wire(self) -> dict[str, Any]:
        """The status's `lastExit` (the `ExitSchema` wire form)."""
        out: dict[str, Any] = {"reason": self.reason, "finishedAt": timestamp(self.finished_at)}
        if self.message is not None:
            out["message"] = self.message
        if self.code is not None:
            out["code"] = self.code
        if self.signal is not None:
            out["signal"] = self.signal
        out["stoppedOnRequest"] = self.stop_reason is not None
        if self.stop_reason is not None:
            out["stopReason"] = self.stop_reason
        return out

    @staticmethod
    def from_wire(
        last: Any, *, started_at: float | None = None, now: float = 0.0
    ) -> ChildExit | None:
        """The exit a status's `lastExit` records (None when it records none)."""
        if not isinstance(last, Mapping):
            return None
        return ChildExit(
            last.get("code"),
            last.get("signal"),
            str(last.get("reason") or "exited"),
            parse_time(last.get("finishedAt")) or now,
            started_at,
            last.get("stopReason") if last.get("stoppedOnRequest") else None,
            message=last.get("message") if isinstance(last.get("message"), str) else None,
        )


LOST_REASON = "ended while the engine was not running (exit code unknown)"


# -- what a plan is, to this module -------------------------------------------------------


T = TypeVar("T", bound=CommandSchema)
SpecT = TypeVar("SpecT")


class Action(StrEnum):
    """What to do with the child. RESTART stops it; the next look starts the new one."""

    START = "start"
    STOP = "stop"
    RESTART = "restart"
    WAIT = "wait"
    NOTHING = "nothing"


def keep_observed_generation(status: dict[str, Any], stored: Mapping[str, Any]) -> None:
    """Give a stopping status (`status`) the `observedGeneration` of the `stored` one: while
    the old child still runs, the status still describes it; the status that records its
    exit moves on to the new generation. Pure."""
    previous = stored.get("observedGeneration")
    if previous is None:
        status.pop("observedGeneration", None)
    else:
        status["observedGeneration"] = previous


def stopping_reason(action: Action, deleting: bool) -> str:
    """The `Ready` reason of a child that a plan stops (`action` STOP or RESTART), while
    it stops: `Terminating` when its object is being deleted, `Restarting` when it is
    replaced, `Stopping` otherwise (a failed liveness probe, a deadline). Pure."""
    if deleting:
        return "Terminating"
    return "Restarting" if action is Action.RESTART else "Stopping"


@dataclass(frozen=True, slots=True)
class StartFailure:
    """A start that failed, for the spec `generation`, `count` times in a row, last at `at`.
    `transient`: an OS failure, retried; `secret_reason` (`SecretMissing`, `SecretInvalid`):
    a Secret the spec needs is missing or unusable, tried again when it changes; otherwise
    the spec must change."""

    message: str
    transient: bool
    generation: int
    count: int = 1
    at: float = 0.0
    secret_reason: str | None = None

    @property
    def reason(self) -> str:
        """The reason of the conditions that report it: `StartFailed`, or the Secret's."""
        return self.secret_reason or "StartFailed"


@dataclass(frozen=True, slots=True)
class ChildPlan(Plan):
    """What `ChildLifecycle` carries out: the plan of a Process or of a Job, `action` for
    `reason`, besides what every kind's plan says (`setpoint.runtime.plan.Plan`).

    `status` is the whole new status (None: write nothing); for a stop, the status while
    the child stops (`Ready=False`, `stopping_reason`), written before the stop signal is
    sent; the next look records the exit. When a child starts, its `pid` (and `startTime`
    unless the plan set one) are added to it. `stall` (reason, message): the object cannot
    progress until its spec changes (the kit records `Stalled`). `wait_seconds` > 0: look
    again then (a back-off, a deadline: `plan_child` makes it the `requeue_after`)."""

    action: Action
    reason: str
    wait_seconds: float = field(default=0.0, kw_only=True)


@dataclass(frozen=True, slots=True)
class ChildDesired(Generic[SpecT]):
    """What an object asks for: its spec generation and spec (defaults filled, as the
    kind's schema defines them), and whether it is being deleted."""

    generation: int
    spec: SpecT
    deleting: bool = False
    restarted_at: str | None = None
    """The object's `setpoint.dev/restartedAt` annotation (`setpoint restart`): a child
    started before it was set to this value is started again, once."""

    @staticmethod
    def of(obj: Object, schema: type[T]) -> ChildDesired[T]:
        """The desired state of an object in wire form, its spec read through `schema`."""
        return ChildDesired(
            int(obj["metadata"].get("generation", 1)),
            schema.model_validate(obj["spec"]),
            is_deleting(obj),
            restart_request(obj),
        )

    def restart_requested(self, status: Mapping[str, Any]) -> bool:
        """Whether a restart was asked for that the child (running, or the last to run) was
        not started under: the annotation differs from the status' `restartedAt`."""
        return self.restarted_at is not None and status.get("restartedAt") != self.restarted_at

    def record_start(self, status: dict[str, Any]) -> None:
        """Note in `status` (of a child being started) the restart request it honours."""
        if self.restarted_at is not None:
            status["restartedAt"] = self.restarted_at


def restart_request(obj: Object) -> str | None:
    """The object's `setpoint.dev/restartedAt` annotation, if any."""
    value = (obj["metadata"].get("annotations") or {}).get(RESTARTED_AT)
    return None if value is None else str(value)


@dataclass(frozen=True, slots=True)
class ChildObserved:
    """What is, as far as a plan cares, of an object's child: whether it runs, the spec
    `generation` it runs (or the last one ran, when none runs) and its `pid`; `last_exit`
    how the last child ended (None when none ran, or one runs), `exit_is_new` when the
    status does not record it yet; `unmet` the message of the first dependency that does
    not hold; `start_failure` the last start that failed; `status` the status as stored;
    `refused` (reason, message) when this engine may not run the spec's command as its
    `user:`: nothing is started or stopped for the spec (a child already running goes on);
    `env_files` what a running child's env files were last seen to hold."""

    running: bool = False
    generation: int | None = None
    pid: int | None = None
    last_exit: ChildExit | None = None
    exit_is_new: bool = False
    unmet: str | None = None
    start_failure: StartFailure | None = None
    status: Mapping[str, Any] = field(default_factory=dict)
    refused: tuple[str, str] | None = None
    env_files: tuple[EnvFileSeen, ...] = ()

    def exit_events(self) -> tuple[PlannedEvent, ...]:
        """`Exited`, when the status does not record the last exit yet."""
        exit_ = self.last_exit
        if not self.exit_is_new or exit_ is None:
            return ()
        pid = f"pid {exit_.pid} " if exit_.pid is not None else ""
        return (PlannedEvent("Exited", f"{pid}{exit_.reason}", warning=not exit_.succeeded),)


DesiredT = TypeVar("DesiredT", bound=ChildDesired[Any])
ObservedT = TypeVar("ObservedT", bound=ChildObserved)
PlanT = TypeVar("PlanT", bound=ChildPlan)


def plan_child(
    decide: Callable[[DesiredT, ObservedT, float], PlanT],
    finish: Callable[[DesiredT, ObservedT, PlanT, list[PlannedEvent], float], PlanT],
    desired: DesiredT,
    observed: ObservedT,
    now: float,
) -> PlanT:
    """What a Process's and a Job's `plan` share: `decide` the action (and the kind's
    phase and back-off); unless there is nothing to do for a child that runs under a
    command this engine refuses (its stored status describes that child: it stays), let
    `finish` write the whole status and the events (given the last exit's first); then
    look again after the step's `wait_seconds`. Pure."""
    step = decide(desired, observed, now)
    if not (observed.refused is not None and step.action is Action.NOTHING and observed.running):
        step = finish(desired, observed, step, list(observed.exit_events()), now)
    return dataclasses.replace(step, requeue_after=step.wait_seconds or None)
