"""Probes: Kubernetes probe fields, what a run of outcomes means, and running a probe.

Three parts, kept apart:

* the schemas (`Probe` with one of `ExecAction`, `HTTPGetAction`, `TCPSocketAction`,
  and `LogLineAction`, process-compose's `ready_log_line`), camelCase on the wire as
  Kubernetes writes them, with Kubernetes' defaults;
* the decision, pure (no I/O, no clock reads: time is an argument): `ProbeState`,
  `observe` (apply `successThreshold` / `failureThreshold`) and `due` (how long
  until the next run, honouring `initialDelaySeconds` and `periodSeconds`);
* the edge: `run_probe` runs one probe once against the real world, and `Prober`
  loops `due` -> `run_probe` -> `observe` on an injected `Clock`, reporting
  transitions of the result.
  `LogLineScanner` reads a child's output (its log file, from where its run began,
  across rotations) for the first line a `logLine` pattern matches.

What a result means depends on the role the probe plays for a workload:

* **startup**: until it has succeeded once, readiness and liveness probes are
  not run; a `Failure` means the process is restarted.
* **readiness**: the `Ready` condition follows it (`Success` -> True,
  `Unknown` or `Failure` -> False); a failure never restarts anything.
* **liveness**: a `Failure` means the process is restarted.

As in Kubernetes, liveness and startup probes must have `successThreshold` 1
(`check_probe_role`). A `logLine` probe is for readiness only, and has no timing fields:
its result is `Success` from the first matching line for the rest of the child's run
(a line seen once says the process got somewhere, not that it is still alive, so it can
neither fail nor say when to restart). This module decides nothing about restarts or conditions
itself, and must not touch the store: it reports results, supervisors act on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import inspect
import os
import pwd
import signal
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from setpoint.clock import Clock
from setpoint.errors import Invalid
from setpoint.model import Schema
from setpoint.model.fields import OsString
from setpoint.model.patterns import compile_pattern
from setpoint.runtime.run_as import switch_to

__all__ = [
    "ExecAction",
    "HTTPGetAction",
    "HTTPHeader",
    "LogLineAction",
    "LogLineScanner",
    "Probe",
    "ProbeResult",
    "ProbeRole",
    "ProbeRunner",
    "ProbeState",
    "Prober",
    "TCPSocketAction",
    "check_probe_role",
    "due",
    "load_probe",
    "observe",
    "run_probe",
]

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


# --- the edge: running a probe -----------------------------------------------------------


async def run_probe(
    probe: Probe,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    account: pwd.struct_passwd | None = None,
) -> tuple[bool, str]:
    """Run `probe` once and return (ok, a one-line message), within `timeoutSeconds`.

    Never raises for a failing probe: a refused connection, a non-zero exit or a
    timeout are `(False, "connection refused")`, `(False, "exit code 1: <last
    stderr line>")`, `(False, "timed out after 1s")`. `env` (the complete
    environment; None inherits the engine's), `cwd` and `account` (the user to run as,
    switched as `setpoint.runtime.run_as.switch_to` does for the child; None: the
    engine's) apply to exec probes: a Process passes its child's. An
    exec probe runs in its own process group, which is killed if the probe times
    out or is cancelled, so no child of it outlives it.
    """
    try:
        async with asyncio.timeout(probe.timeout_seconds):
            if probe.exec is not None:
                return await _run_exec(probe.exec, env, cwd, account)
            if probe.http_get is not None:
                return await _run_http(probe.http_get)
            if probe.tcp_socket is not None:
                return await _run_tcp(probe.tcp_socket)
            raise ValueError("a logLine probe is not run: a LogLineScanner reads the output")
    except TimeoutError:
        return False, f"timed out after {probe.timeout_seconds:g}s"


async def _run_exec(
    action: ExecAction,
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
    account: pwd.struct_passwd | None,
) -> tuple[bool, str]:
    starting = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *action.command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,  # its own session and process group: pgid == pid
            **switch_to(account),
        )
    )
    try:
        # Shielded: cancelled (or timed out) while the command starts, the command may
        # already run; it is let finish starting, so that its group can be taken down.
        proc = await asyncio.shield(starting)
    except OSError as exc:
        return False, f"cannot run {action.command[0]!r}: {exc.strerror or exc}"
    except asyncio.CancelledError:
        with contextlib.suppress(OSError):
            await _kill_group(await starting)
        raise
    finished = False
    try:
        stdout, stderr = await proc.communicate()
        finished = True
    finally:
        if not finished:
            # Timed out or cancelled, possibly with the command gone but a child of it
            # still holding its output open: take the whole group down.
            await _kill_group(proc)
    code = proc.returncode
    if code == 0:
        return True, _with_line("exit code 0", stdout)
    if code is not None and code < 0:
        return False, f"killed by signal {signal.Signals(-code).name}"
    return False, _with_line(f"exit code {code}", stderr or stdout)


async def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the process group `proc` leads, and reap `proc`."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()


def _with_line(head: str, output: bytes) -> str:
    lines = output.decode(errors="replace").strip().splitlines()
    if not lines:
        return head
    last = lines[-1].strip()
    return f"{head}: {last[:200]}"


async def _run_http(action: HTTPGetAction) -> tuple[bool, str]:
    context: ssl.SSLContext | None = None
    if action.scheme == "HTTPS":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    defaults = {
        "Host": _host_port(action.host, action.port),
        "User-Agent": "setpoint-probe",
        "Accept": "*/*",
        "Connection": "close",
    }
    given = {h.name.lower() for h in action.http_headers}
    lines = [f"GET {action.path} HTTP/1.1"]
    lines += [f"{k}: {v}" for k, v in defaults.items() if k.lower() not in given]
    lines += [f"{h.name}: {h.value}" for h in action.http_headers]
    lines += ["", ""]
    try:
        reader, writer = await asyncio.open_connection(action.host, action.port, ssl=context)
    except OSError as exc:
        return False, _describe(exc, action.host)
    try:
        writer.write("\r\n".join(lines).encode("latin-1", errors="replace"))
        await writer.drain()
        status_line = await reader.readline()
    except OSError as exc:
        return False, _describe(exc, action.host)
    except ValueError:  # the status line overran the stream's limit
        return False, "malformed HTTP response: status line too long"
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    parts = status_line.split()
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        if not status_line:
            return False, "connection closed before a response"
        return False, f"malformed HTTP response: {status_line[:80]!r}"
    status = int(parts[1])
    return 200 <= status <= 399, f"HTTP {status}"


async def _run_tcp(action: TCPSocketAction) -> tuple[bool, str]:
    try:
        _, writer = await asyncio.open_connection(action.host, action.port)
    except OSError as exc:
        return False, _describe(exc, action.host)
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True, f"connected to {_host_port(action.host, action.port)}"


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _describe(exc: OSError, host: str) -> str:
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve {host}: {exc.strerror}"
    # With several addresses asyncio raises one OSError whose text lists each failure.
    if isinstance(exc, ConnectionRefusedError) or f"[Errno {errno.ECONNREFUSED}]" in str(exc):
        return "connection refused"
    text = exc.strerror or str(exc) or type(exc).__name__
    return text.splitlines()[0] if text else type(exc).__name__


# --- the edge: the probe loop ------------------------------------------------------------

ProbeRunner = Callable[[Probe], Awaitable[tuple[bool, str]]]
"""Runs a probe once: `run_probe`, `functools.partial(run_probe, env=..., cwd=...)`, or a fake."""


class Prober:
    """Run one probe for as long as the probed process lives, reporting result transitions.

    `run()` loops until cancelled: sleep on `clock` until `due`, run the probe
    with `runner`, fold the outcome in with `observe`, and call
    `on_change(result, message)` (a plain or async function) only when the
    result changes. The first run comes `initialDelaySeconds` after `run()` is
    entered (or after `started_at`, a `clock.monotonic()` time, if given).
    """

    def __init__(
        self,
        probe: Probe,
        clock: Clock,
        on_change: Callable[[ProbeResult, str], Awaitable[None] | None],
        *,
        runner: ProbeRunner = run_probe,
    ) -> None:
        self.probe = probe
        self._clock = clock
        self._on_change = on_change
        self._runner = runner
        self._state: ProbeState | None = None
        self._message = ""

    @property
    def state(self) -> ProbeState | None:
        """The state after the latest run (None before `run()` starts)."""
        return self._state

    @property
    def message(self) -> str:
        """The message of the latest run ("" before the first)."""
        return self._message

    async def run(self, started_at: float | None = None) -> None:
        start = self._clock.monotonic() if started_at is None else started_at
        self._state = state = ProbeState(started_at=start)
        while True:
            await self._clock.sleep(due(state, self.probe, self._clock.monotonic()))
            ran_at = self._clock.monotonic()
            ok, self._message = await self._runner(self.probe)
            new = observe(state, self.probe, ok, ran_at)
            self._state = new
            if new.result != state.result:
                outcome = self._on_change(new.result, self._message)
                if inspect.isawaitable(outcome):
                    await outcome
            state = new


# --- the edge: a logLine probe ----------------------------------------------------------

MAX_LINE_BYTES = 4096
"""How much of one output line a `logLine` pattern is searched in (the rest is skipped)."""
SCAN_BYTES_PER_LOOK = 1024 * 1024
"""The most output one `LogLineScanner.look` reads: a chatty child cannot hold up the engine."""


class LogLineScanner:
    """Finds the first line of a child's output that a `logLine` pattern matches.

    The output is the log file `path` and its rotated `backups` (`path.1` is the newest
    of them). It is read from `offset` bytes into the file of inode `inode` (where the
    child's run began: `setpoint.workloads.supervisor.LogStart`), or, with `inode` None,
    from the end of `path` at the first look. Each `look()` reads what was written since
    the last one, at most `SCAN_BYTES_PER_LOOK`, following the output into the next file
    when the log was rotated. A line counts once it is complete (ends with a line feed);
    it is decoded as UTF-8 (anything else replaced), and one longer than `MAX_LINE_BYTES`
    is searched in its first `MAX_LINE_BYTES` only. Never raises for a missing or
    unreadable file: it looks again next time.
    """

    def __init__(
        self, pattern: str, path: Path, backups: int, inode: int | None, offset: int = 0
    ) -> None:
        self._pattern = compile_pattern(pattern)
        self._path = Path(path)
        self._backups = backups
        self._inode = inode
        self._offset = offset
        self._line = bytearray()

    def look(self) -> str | None:
        """The first matching line written since the last look, or None (none yet)."""
        if self._inode is None:
            try:
                st = os.stat(self._path)
            except OSError:
                return None
            self._inode, self._offset = st.st_ino, st.st_size
        files = self._files()
        budget = SCAN_BYTES_PER_LOOK
        while budget > 0:
            inodes = [inode for inode, _ in files]
            if self._inode not in inodes:
                if not files:
                    return None
                # Rotated past the last backup: the oldest file there is was written since.
                self._inode, self._offset = files[0][0], 0
                continue
            at = inodes.index(self._inode)
            data = self._read(files[at][1], budget)
            if data is None:
                return None  # rotated between the listing and the read: next look
            if data:
                self._offset += len(data)
                budget -= len(data)
                found = self._feed(data)
                if found is not None:
                    return found
                continue
            if at + 1 == len(files):
                return None  # at the end of the newest file
            self._inode, self._offset = files[at + 1][0], 0

        return None

    def _files(self) -> list[tuple[int, Path]]:
        """(inode, path) of the log's files that exist, oldest first."""
        paths = [
            self._path.with_name(f"{self._path.name}.{i}") for i in range(self._backups, 0, -1)
        ]
        found = []
        for path in [*paths, self._path]:
            try:
                found.append((os.stat(path).st_ino, path))
            except OSError:
                continue
        return found

    def _read(self, path: Path, budget: int) -> bytes | None:
        """Up to `budget` bytes of `path` from the offset, if it is still our file."""
        try:
            with path.open("rb") as f:
                if os.fstat(f.fileno()).st_ino != self._inode:
                    return None
                f.seek(self._offset)
                return f.read(budget)
        except OSError:
            return None

    def _feed(self, data: bytes) -> str | None:
        start = 0
        while True:
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            room = MAX_LINE_BYTES - len(self._line)
            if room > 0:
                self._line += piece[:room]
            if end < 0:
                return None
            line = self._line.decode("utf-8", "replace").rstrip("\r")
            self._line.clear()
            if self._pattern.search(line):
                return line
            start = end + 1
