"""Start, stop, watch and re-adopt local child processes: the I/O layer under Process.

This module does what it is told and reports what happened; it decides
nothing (no restart policy, no backoff, no probes). The Process controller
drives it.

* `start(name, spec, state_dir)` runs `spec.args` in its own process group,
  forwards its stdout and stderr line by line into `<log_dir>/<name>.log`
  (rotated by size), and writes `<state_dir>/<name>.json` (pid, pgid, start
  time from `/proc/PID/stat`, marker, argv) atomically. It refuses a name
  whose recorded process still runs (`AlreadyExists`) and a command that
  cannot start (`Invalid`, one line, nothing left behind); an OS failure of
  the machine's (no space, no file descriptors, an unwritable state or log
  directory) is raised as the `OSError` it is, for the caller to retry.
* `Running.wait()` returns the `Exit` as soon as the event loop's child
  watcher reports it; nothing polls. `wait_logs_closed()` returns once all
  of the output is in the log file.
* `stop(child, grace)` sends SIGTERM to the whole group, SIGKILL after
  `grace` seconds, kills whatever is left of the group, and removes the
  state file. Call it also after a child exited on its own: it clears up.
* After an engine restart, `find_adoptable(name, state_dir)` returns an
  `Adopted` handle only for a process that is provably the one recorded
  (same pid, same start time, `SETPOINT_MARKER` in its environment); its exit
  is learnt through a pidfd. `stray(name, state_dir)` removes a state file
  whose process is gone or belongs to someone else.

Output goes through a FIFO (`<state_dir>/<name>.out`) that the child holds
open for reading and writing, so a child outlives its engine without dying
of SIGPIPE, and a restarted engine resumes forwarding its output. Linux only.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import pwd
import signal
import stat
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import AlreadyExists, Invalid

__all__ = [
    "Adopted",
    "Exit",
    "ProcessSpec",
    "Running",
    "find_adoptable",
    "start",
    "stop",
    "stray",
]

MARKER_VARIABLE = "SETPOINT_MARKER"
DEFAULT_MAX_LOG_BYTES = 10 * 1024 * 1024
DEFAULT_LOG_BACKUPS = 3
# Variables a child inherits from the engine; everything else comes from spec.env.
_INHERITED = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "HOME", "USER", "LOGNAME")
_LOG_CLOSE_TIMEOUT = 2.0
_TRANSIENT_ERRNOS = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN, errno.ENOSPC, errno.EIO}
)
"""Errors of `fork`/`exec` that say the machine is short of something, not that the command
is wrong: `start` lets them through as `OSError`."""
_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProcessSpec:
    """What to run and where its output goes.

    `args` is an argv list (no shell). `env` is merged over a minimal
    inherited environment (PATH, HOME, locale, ...). `user` runs the child as
    that user (only possible when the engine is root). `marker` is set as
    `SETPOINT_MARKER` in the child's environment and proves ownership on
    re-adoption.
    """

    args: Sequence[str]
    log_dir: Path
    marker: str
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    user: str | None = None
    max_log_bytes: int = DEFAULT_MAX_LOG_BYTES
    log_backups: int = DEFAULT_LOG_BACKUPS

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "env", dict(self.env))
        object.__setattr__(self, "log_dir", Path(self.log_dir))
        if self.cwd is not None:
            object.__setattr__(self, "cwd", Path(self.cwd))
        if not self.args:
            raise Invalid("must name a command", field="spec.args")
        if not all(isinstance(a, str) for a in self.args):
            raise Invalid("must be a list of strings", field="spec.args")
        if self.max_log_bytes <= 0:
            raise Invalid("must be positive", field="maxLogBytes")
        if self.log_backups < 1:
            raise Invalid("must be at least 1", field="logBackups")


@dataclass(frozen=True)
class Exit:
    """How a process ended: `code` if it exited, `signal` if a signal killed it."""

    code: int | None
    signal: int | None
    reason: str

    @staticmethod
    def from_returncode(returncode: int) -> Exit:
        if returncode < 0:
            signum = -returncode
            try:
                signame = signal.Signals(signum).name
            except ValueError:
                signame = f"signal {signum}"
            return Exit(None, signum, f"killed by {signame}")
        return Exit(returncode, None, f"exited with code {returncode}")


_ADOPTED_EXIT = Exit(None, None, "exited (adopted; code unknown)")


# ---------------------------------------------------------------------------
# /proc and state files


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, pgid, starttime in clock ticks) of `pid`, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # comm (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rindex(b")") + 2 :].split()
    # fields[0] is field 3 (state); field N is fields[N - 3].
    return fields[0].decode(), int(fields[5 - 3]), int(fields[22 - 3])


def _environ_has(pid: int, entry: str) -> bool | None:
    """Whether /proc/PID/environ holds `entry`; None if it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except PermissionError:
        return None
    except (FileNotFoundError, ProcessLookupError):
        return False
    return entry.encode() in raw.split(b"\0")


def _state_path(name: str, state_dir: Path) -> Path:
    return Path(state_dir) / f"{name}.json"


def _fifo_path(name: str, state_dir: Path) -> Path:
    return Path(state_dir) / f"{name}.out"


def _write_atomically(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_state(name: str, state_dir: Path) -> dict[str, Any] | None:
    path = _state_path(name, state_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}  # unreadable or corrupt: not adoptable, a stray
    return data if isinstance(data, dict) else {}


def _check_name(name: str) -> None:
    if not name or "/" in name or name.startswith(".") or "\0" in name:
        raise Invalid(f"{name!r} cannot name a process's files", field="metadata.name")


# ---------------------------------------------------------------------------
# Logs


class _LogFile:
    """Appends to `<log_dir>/<name>.log`; past `max_bytes` it becomes `.1` (`.1` -> `.2` ...)."""

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "ab")  # noqa: SIM115 - closed by close()
        self._size = self._file.tell()

    def write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()
        self._size += len(data)
        if self._size > self.max_bytes:
            self._rotate()

    def _rotate(self) -> None:
        self._file.close()
        try:
            for i in range(self.backups - 1, 0, -1):
                older = self.path.with_name(f"{self.path.name}.{i}")
                if older.exists():
                    os.replace(older, self.path.with_name(f"{self.path.name}.{i + 1}"))
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        finally:
            self._file = open(self.path, "ab")  # noqa: SIM115 - closed by close()
            self._size = self._file.tell()

    def close(self) -> None:
        self._file.close()


async def _open_fifo(fifo: Path) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    """Open the FIFO's read end as a stream (never blocks, even with no writer yet)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(loop=loop)
    pipe = os.fdopen(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK), "rb", buffering=0)
    try:
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), pipe
        )
    except BaseException:
        pipe.close()
        raise
    return reader, transport


async def _copy_lines(
    reader: asyncio.StreamReader, transport: asyncio.BaseTransport, log: _LogFile
) -> None:
    dropping = False
    try:
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as e:
                line = e.partial  # the last, unterminated line; then end of file
                if not line:
                    return
            except asyncio.LimitOverrunError as e:
                line = await reader.read(max(e.consumed, 1))  # an overlong line, in pieces
                if not line:
                    return
            try:
                log.write(line)
            except (OSError, ValueError) as e:  # a full disk...: keep draining, never block it
                if not dropping:
                    _logger.warning("dropping output for %s: %s", log.path, e)
                dropping = True
    finally:
        transport.close()
        with contextlib.suppress(OSError):
            log.close()


# ---------------------------------------------------------------------------
# Handles


class _Child:
    """What `Running` and `Adopted` share: identity, output forwarding, clean-up."""

    def __init__(
        self,
        name: str,
        state_dir: Path,
        pid: int,
        pgid: int,
        started_at: float,
        logs: asyncio.Task[None] | None,
    ) -> None:
        self.name = name
        self.state_dir = Path(state_dir)
        self.pid = pid
        self.pgid = pgid
        self.started_at = started_at
        self._logs = logs

    async def wait(self) -> Exit:
        raise NotImplementedError

    async def wait_logs_closed(self) -> None:
        """Return once all output is in the log file: every holder of the pipe has exited."""
        if self._logs is not None:
            await asyncio.shield(self._logs)

    async def _close_logs(self) -> None:
        if self._logs is None:
            return
        try:
            await asyncio.wait_for(self.wait_logs_closed(), _LOG_CLOSE_TIMEOUT)
        except TimeoutError:
            # Something that left the group (setsid) still holds the pipe.
            self._logs.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._logs

    def _forget(self) -> None:
        for path in (_state_path(self.name, self.state_dir), _fifo_path(self.name, self.state_dir)):
            path.unlink(missing_ok=True)


class Running(_Child):
    """A child started by this engine. `wait()` reports its exit as soon as it happens."""

    def __init__(
        self,
        name: str,
        state_dir: Path,
        process: asyncio.subprocess.Process,
        started_at: float,
        logs: asyncio.Task[None] | None,
    ) -> None:
        super().__init__(name, state_dir, process.pid, process.pid, started_at, logs)
        self._process = process

    async def wait(self) -> Exit:
        return Exit.from_returncode(await self._process.wait())

    def __repr__(self) -> str:
        return f"<Running {self.name} pid={self.pid}>"


class Adopted(_Child):
    """A process started by an earlier engine, proven ours. Its exit code cannot be known.

    It holds a pidfd until `wait()` (or `stop()`) has seen the exit.
    """

    def __init__(
        self,
        name: str,
        state_dir: Path,
        pid: int,
        pgid: int,
        started_at: float,
        pidfd: int,
        logs: asyncio.Task[None] | None,
    ) -> None:
        super().__init__(name, state_dir, pid, pgid, started_at, logs)
        self._pidfd = pidfd
        self._exited: asyncio.Future[Exit] | None = None

    async def wait(self) -> Exit:
        if self._exited is None:
            loop = asyncio.get_running_loop()
            exited: asyncio.Future[Exit] = loop.create_future()
            self._exited = exited

            def on_exit() -> None:
                loop.remove_reader(self._pidfd)
                os.close(self._pidfd)
                if not exited.done():
                    exited.set_result(_ADOPTED_EXIT)

            loop.add_reader(self._pidfd, on_exit)  # a pidfd turns readable at exit
        return await asyncio.shield(self._exited)

    def __repr__(self) -> str:
        return f"<Adopted {self.name} pid={self.pid}>"


# ---------------------------------------------------------------------------
# Operations


def _child_environment(spec: ProcessSpec, account: pwd.struct_passwd | None) -> dict[str, str]:
    env = {k: os.environ[k] for k in _INHERITED if k in os.environ}
    if account is not None:
        env.update(HOME=account.pw_dir, USER=account.pw_name, LOGNAME=account.pw_name)
    env.update(spec.env)
    env[MARKER_VARIABLE] = spec.marker
    return env


def _account(name: str, user: str | None) -> pwd.struct_passwd | None:
    """The account to switch to, or None to run as the engine's own user."""
    if user is None:
        return None
    try:
        account = pwd.getpwnam(user)
    except KeyError:
        raise Invalid(f"cannot start {name}: no user {user!r}", field="spec.user") from None
    euid = os.geteuid()
    if account.pw_uid == euid:
        return None
    if euid != 0:
        me = pwd.getpwuid(euid).pw_name
        raise Invalid(
            f"cannot start {name} as {user!r}: the engine runs as {me!r}, not root;"
            " run it as root or drop spec.user",
            field="spec.user",
        )
    return account


async def start(
    name: str, spec: ProcessSpec, state_dir: Path, *, clock: Clock = SYSTEM_CLOCK
) -> Running:
    """Start `spec.args` as `name` in its own process group and record it in `state_dir`.

    Raises `Invalid` (one line, nothing left behind) if the command cannot be
    started as specified (no such command, user or directory; NUL bytes), `OSError`
    when the machine fails it (the state or log directory cannot be written, no space,
    no file descriptors, no memory: transient, retry later), and `AlreadyExists` if
    `state_dir` records a process of ours for `name` that still runs (adopt or stop it
    first: never two of one name). `clock.now()` stamps `started_at`.
    """
    _check_name(name)
    account = _account(name, spec.user)
    state_dir = Path(state_dir)
    earlier = _verify(name, state_dir)
    if earlier is not None:
        os.close(earlier[1])
        raise AlreadyExists(
            f"cannot start {name}: pid {earlier[0]['pid']} started for it earlier still runs;"
            " adopt or stop it first"
        )
    fifo = _fifo_path(name, state_dir)
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo, 0o600)
        log = _LogFile(spec.log_dir / f"{name}.log", spec.max_log_bytes, spec.log_backups)
    except OSError:
        fifo.unlink(missing_ok=True)
        raise  # the machine's (state or log directory, FIFO), not the spec's: transient
    try:
        reader, transport = await _open_fifo(fifo)
    except BaseException:
        log.close()
        fifo.unlink(missing_ok=True)
        raise
    # The child's stdout/stderr holds both ends, so it never gets SIGPIPE, even after we die.
    out = os.open(fifo, os.O_RDWR)
    identity: dict[str, Any] = {}
    if account is not None:
        identity = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
    try:
        process = await asyncio.create_subprocess_exec(
            *spec.args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            cwd=None if spec.cwd is None else str(spec.cwd),
            env=_child_environment(spec, account),
            start_new_session=True,
            **identity,
        )
    except BaseException as e:
        transport.close()
        log.close()
        fifo.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno in _TRANSIENT_ERRNOS:
            raise
        if isinstance(e, OSError | ValueError | subprocess.SubprocessError):
            raise Invalid(f"cannot start {name}: {e}") from None
        raise
    finally:
        os.close(out)
    logs = asyncio.create_task(_copy_lines(reader, transport, log), name=f"logs of {name}")
    started_at = clock.now()
    running = Running(name, state_dir, process, started_at, logs)
    proc = _proc_stat(process.pid)
    if proc is None:  # already gone: nothing to adopt later
        return running
    record = {
        "name": name,
        "pid": process.pid,
        "pgid": process.pid,
        "starttime": proc[2],
        "startedAt": started_at,
        "marker": spec.marker,
        "argv": list(spec.args),
        "log": str(log.path),
        "maxLogBytes": spec.max_log_bytes,
        "logBackups": spec.log_backups,
    }
    try:
        _write_atomically(_state_path(name, state_dir), record)
    except OSError as e:
        # Unrecorded, it could not be told from a stranger after a restart: do not keep it.
        await stop(running, grace=0)
        raise OSError(e.errno, f"cannot write its state file: {e.strerror}", e.filename) from e
    return running


def last_line(log: Path, tail_bytes: int = 4096) -> str | None:
    """The last non-blank line of the log file `log` (None if there is none)."""
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - tail_bytes))
            tail = f.read().decode(errors="replace")
    except OSError:
        return None
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1] if lines else None


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signum)


async def stop(child: Running | Adopted, grace: float, stop_signal: int = signal.SIGTERM) -> Exit:
    """Send `stop_signal` (SIGTERM) to the child's group, SIGKILL it after `grace` seconds;
    leave nothing behind.

    Returns how the group leader ended. Safe to call after it already exited:
    it still kills what is left of its group and removes its state file.
    """
    exit_task = asyncio.ensure_future(child.wait())
    try:
        _signal_group(child.pgid, stop_signal)
        try:
            await asyncio.wait_for(asyncio.shield(exit_task), max(0.0, grace))
        except TimeoutError:
            _signal_group(child.pgid, signal.SIGKILL)
        ended = await exit_task
    finally:
        if not exit_task.done():
            exit_task.cancel()
    _signal_group(child.pgid, signal.SIGKILL)  # members that outlived the leader
    await child._close_logs()
    child._forget()
    return ended


def _verify(name: str, state_dir: Path) -> tuple[dict[str, Any], int] | None:
    """The state record and an open pidfd if the recorded process is provably ours."""
    record = _read_state(name, state_dir)
    if not record:
        return None
    try:
        pid, starttime = int(record["pid"]), int(record["starttime"])
        marker = str(record["marker"])
        int(record["pgid"])
    except (KeyError, TypeError, ValueError):
        return None
    try:
        pidfd = os.pidfd_open(pid)  # pins this very process: checks below cannot race a reuse
    except OSError:  # gone, or not a valid pid
        return None
    proc = _proc_stat(pid)
    ours = (
        proc is not None
        and proc[0] not in ("Z", "X")
        and proc[2] == starttime
        and _environ_has(pid, f"{MARKER_VARIABLE}={marker}") is not False
    )
    if not ours:
        os.close(pidfd)
        return None
    return record, pidfd


def find_adoptable(name: str, state_dir: Path) -> Adopted | None:
    """The process recorded for `name`, if it still runs and is provably the one recorded.

    Ours means: /proc/PID exists, its start time equals the recorded one (pids
    are recycled), and its environment (where readable) holds the marker.
    Output forwarding resumes, so call this from the event loop.
    """
    _check_name(name)
    verified = _verify(name, state_dir)
    if verified is None:
        return None
    record, pidfd = verified
    logs: asyncio.Task[None] | None = None
    fifo = _fifo_path(name, state_dir)
    log_path = record.get("log")
    try:
        loop = asyncio.get_running_loop()
        if isinstance(log_path, str) and fifo.exists() and stat.S_ISFIFO(fifo.stat().st_mode):
            log = _LogFile(
                Path(log_path),
                int(record.get("maxLogBytes", DEFAULT_MAX_LOG_BYTES)),
                int(record.get("logBackups", DEFAULT_LOG_BACKUPS)),
            )
            logs = loop.create_task(_follow_adopted(fifo, log))
    except BaseException:
        os.close(pidfd)
        raise
    return Adopted(
        name,
        Path(state_dir),
        int(record["pid"]),
        int(record["pgid"]),
        float(record.get("startedAt", 0.0)),
        pidfd,
        logs,
    )


async def _follow_adopted(fifo: Path, log: _LogFile) -> None:
    try:
        reader, transport = await _open_fifo(fifo)
    except BaseException:
        log.close()
        raise
    await _copy_lines(reader, transport, log)


def stray(name: str, state_dir: Path) -> bool:
    """Remove `name`'s state file if its process is gone or someone else's.

    Returns True if a file was removed; False if there was none, or if the
    process is still ours (adopt or stop it instead).
    """
    _check_name(name)
    path = _state_path(name, state_dir)
    if not path.exists():
        return False
    verified = _verify(name, state_dir)
    if verified is not None:
        os.close(verified[1])
        return False
    path.unlink(missing_ok=True)
    _fifo_path(name, state_dir).unlink(missing_ok=True)
    return True
