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
from pathlib import Path

from setpoint.clock import Clock
from setpoint.model.patterns import compile_pattern
from setpoint.runtime.run_as import switch_to
from setpoint.workloads.probe_schema import (
    ExecAction,
    HTTPGetAction,
    HTTPHeader,
    LogLineAction,
    Probe,
    ProbeResult,
    ProbeRole,
    ProbeState,
    TCPSocketAction,
    check_probe_role,
    due,
    load_probe,
    observe,
)

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
