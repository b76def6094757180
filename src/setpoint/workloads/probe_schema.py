"""Probes, pure: their schemas (exec, httpGet, tcpSocket, logLine; timing and thresholds),
which roles a probe may have, and the decision (`observe`: a probe's state after a
result; `due`: when it runs next). No I/O, no clock (`setpoint.workloads.probes` runs
probes).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from setpoint.errors import Invalid
from setpoint.model import Schema
from setpoint.model.fields import OsString
from setpoint.model.patterns import compile_pattern

ProbeResult = Literal["Unknown", "Success", "Failure"]
ProbeRole = Literal["startup", "readiness", "liveness"]

# --- schemas -----------------------------------------------------------------------------


def _no_line_breaks(value: str) -> str:
    if "\r" in value or "\n" in value:
        raise ValueError("must not contain line breaks")
    return value


class ExecAction(Schema):
    """Run `command`, an argv list (no shell: write `["sh", "-c", "..."]`); exit 0 is success."""

    command: list[OsString] = Field(min_length=1)


class HTTPHeader(Schema):
    """One request header of an HTTP probe."""

    name: str = Field(min_length=1)
    value: str

    _check = field_validator("name", "value")(_no_line_breaks)


class HTTPGetAction(Schema):
    """GET `scheme://host:port/path`; status 200 to 399 is success (redirects are not followed).

    HTTPS certificates are not verified, as Kubernetes does not verify them for probes.
    """

    path: str = "/"
    port: int = Field(ge=1, le=65535)
    host: str = "127.0.0.1"
    scheme: Literal["HTTP", "HTTPS"] = "HTTP"
    http_headers: list[HTTPHeader] = []

    @field_validator("path")
    @classmethod
    def _check_path(cls, value: str) -> str:
        if any(c.isspace() for c in value):
            raise ValueError("must not contain spaces or line breaks (percent-encode them)")
        return value if value.startswith("/") else "/" + value

    _check_host = field_validator("host")(_no_line_breaks)


class TCPSocketAction(Schema):
    """Open a TCP connection to `host:port`; success when the connection is accepted."""

    port: int = Field(ge=1, le=65535)
    host: str = "127.0.0.1"


class LogLineAction(Schema):
    """Ready once a line of the child's output (stdout or stderr) matches `pattern`, an
    RE2 regular expression (Go's syntax, as process-compose's `ready_log_line`; see
    `setpoint.model.patterns`) searched in each line: a plain word matches anywhere in it."""

    pattern: str = Field(min_length=1)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            compile_pattern(value)
        except Invalid as exc:
            raise PydanticCustomError("regex", "{why}", {"why": str(exc)}) from None
        return value


_TIMING_FIELDS = {
    "initial_delay_seconds": "initialDelaySeconds",
    "period_seconds": "periodSeconds",
    "timeout_seconds": "timeoutSeconds",
    "success_threshold": "successThreshold",
    "failure_threshold": "failureThreshold",
}


class Probe(Schema):
    """A Kubernetes probe: exactly one handler, and when and how often to run it."""

    exec: ExecAction | None = None
    http_get: HTTPGetAction | None = None
    tcp_socket: TCPSocketAction | None = None
    log_line: LogLineAction | None = None
    initial_delay_seconds: int = Field(default=0, ge=0)
    period_seconds: int = Field(default=10, ge=1)
    timeout_seconds: float = Field(default=1, gt=0)
    success_threshold: int = Field(default=1, ge=1)
    failure_threshold: int = Field(default=3, ge=1)

    @model_validator(mode="after")
    def _exactly_one_handler(self) -> Probe:
        handlers = [
            h for h in (self.exec, self.http_get, self.tcp_socket, self.log_line) if h is not None
        ]
        if len(handlers) != 1:
            raise PydanticCustomError(
                "probe_handler",
                "exactly one of exec, httpGet, tcpSocket, logLine must be set (found {found})",
                {"found": len(handlers)},
            )
        if self.log_line is not None:
            fields = type(self).model_fields
            given = sorted(
                wire
                for name, wire in _TIMING_FIELDS.items()
                if getattr(self, name) != fields[name].default  # stored specs hold defaults
            )
            if given:
                raise PydanticCustomError(
                    "probe_timing",
                    "{fields}: not for a logLine probe (it reads the output as it comes;"
                    " once a line matched, it holds until the child's next start)",
                    {"fields": ", ".join(given)},
                )
        return self


def load_probe(value: Any, field: str = "") -> Probe:
    """Parse a probe from its wire form; raise `Invalid` naming the offending field.

    `field` is where the probe sits in its object (`"spec.readinessProbe"`), so
    the error says `spec.readinessProbe.httpGet.port` rather than `port`.
    """
    try:
        return Probe.model_validate(value)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        path = field
        for part in first["loc"]:
            path += f"[{part}]" if isinstance(part, int) else f".{part}"
        raise Invalid(first["msg"], field=path.lstrip(".") or None) from None


def check_probe_role(probe: Probe, role: ProbeRole, field: str = "") -> None:
    """Refuse what Kubernetes refuses for a role: liveness and startup need `successThreshold`
    1; and a `logLine` probe, which can neither fail nor say when to restart, for them."""
    if role in ("liveness", "startup") and probe.log_line is not None:
        where = f"{field}.logLine".lstrip(".")
        raise Invalid(
            f"is for a readinessProbe only: a line seen once cannot say that a process is"
            f" still alive, nor when to restart it (not for a {role} probe)",
            field=where,
        )
    if role in ("liveness", "startup") and probe.success_threshold != 1:
        where = f"{field}.successThreshold".lstrip(".")
        raise Invalid(f"must be 1 for a {role} probe", field=where)


# --- the decision (pure) -----------------------------------------------------------------


@dataclass(frozen=True)
class ProbeState:
    """What the outcomes of a probe so far add up to. Times are `Clock.monotonic()` seconds.

    `successes` and `failures` count the current run of consecutive outcomes (one
    of them is always 0); `result` is `Unknown` until a threshold is first met;
    `started_at` is when the probed process started; `last_run` when the probe
    last ran (None: not yet).
    """

    started_at: float
    successes: int = 0
    failures: int = 0
    result: ProbeResult = "Unknown"
    last_run: float | None = None


def observe(state: ProbeState, probe: Probe, ok: bool, now: float) -> ProbeState:
    """Fold one outcome, of a run that started at `now`, into `state`.

    The result becomes `Success` once `successThreshold` consecutive runs have
    succeeded, and `Failure` once `failureThreshold` consecutive runs have
    failed; otherwise it stays as it was.
    """
    if ok:
        successes, failures = state.successes + 1, 0
        result = "Success" if successes >= probe.success_threshold else state.result
    else:
        successes, failures = 0, state.failures + 1
        result = "Failure" if failures >= probe.failure_threshold else state.result
    return replace(state, successes=successes, failures=failures, result=result, last_run=now)


def due(state: ProbeState, probe: Probe, now: float) -> float:
    """Seconds from `now` until the probe should next run; 0 means run now. Never negative.

    The first run comes `initialDelaySeconds` after `started_at`; each later one
    `periodSeconds` after the previous run started.
    """
    if state.last_run is None:
        at = state.started_at + probe.initial_delay_seconds
    else:
        at = state.last_run + probe.period_seconds
    return max(0.0, at - now)
