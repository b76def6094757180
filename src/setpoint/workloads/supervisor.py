"""Start, stop, watch and re-adopt local child processes: the I/O layer under Process.

This module does what it is told and reports what happened; it decides
nothing (no restart policy, no backoff, no probes). The Process controller
drives it.

* `start(name, spec, state_dir)` runs `spec.args` in its own process group,
  with its stdout and stderr on a FIFO (`<state_dir>/<name>.out`) read by a
  log holder of its own (`setpoint.workloads.log_holder`, a small process as
  containerd-shim and conmon are) that writes `<log_dir>/<name>.log`, rotated
  by size. It writes `<state_dir>/<name>.json` (pid, pgid, start time from
  `/proc/PID/stat`, marker, argv, the log's absolute path, the holder's pid)
  atomically, and where the child's output begins in its log (`LogStart`: the
  file's inode and size before the child started, so a reader can find this run's
  output after an engine restart and across rotations). It refuses a name whose
  recorded process still runs (`AlreadyExists`) and a command that cannot start
  (`Invalid`, one line, nothing left behind); an OS failure of the machine's (no space, no file
  descriptors, an unwritable state or log directory) is raised as the
  `OSError` it is, for the caller to retry.
* `Running.wait()` returns the `Exit` as soon as the event loop's child
  watcher reports it; nothing polls. `wait_logs_closed()` returns once all
  of the output is in the log file (the holder has exited).
* `stop(child, grace)` sends SIGTERM to the whole group and to whatever
  escaped it (a process carrying the child's `SETPOINT_MARKER`, or a
  descendant of one: a daemon that called `setsid`), SIGKILL after `grace`
  seconds, kills all that is left, checks that nothing of it runs any more,
  waits (a bounded poll: no event says so) until its exited processes are reaped
  too, and removes the state file. Call it also after a child exited on its own:
  it clears up. An adopted child's parent is init (or whatever adopted the orphan),
  which may reap it late; until then its pid still answers `kill(pid, 0)`, and a
  daemon started again at once takes its own lock file for another's (PostgreSQL's
  `postmaster.pid`). One nobody reaps within `_REAP_TIMEOUT` is logged and left.
  `kill(child)` SIGKILLs the group at once (a stop in progress then goes straight
  to killing what is left).
* After an engine restart, `find_adoptable(name, state_dir)` returns an
  `Adopted` handle only for a process that is provably the one recorded
  (same pid, same start time, `SETPOINT_MARKER` in its environment); its exit
  is learnt through a pidfd. Its holder carries on; a dead holder is replaced.
  `stray(name, state_dir)` removes a state file whose process is gone or
  belongs to someone else. `pin_recorded(name, state_dir)` proves the same of a
  recorded process without adopting it, and returns a pidfd on which another
  process (`setpoint down`) learns when it ends.
* `become_subreaper()` makes this process a child subreaper: a daemonizing
  grandchild is re-parented to the engine rather than to init.
  `reap_orphans()` (one pass) and `reap_orphans_forever()` (the engine's
  runnable) reap such re-parented processes once they exit. They wait only
  for pids this module found carrying a child's marker and did not start
  itself, never for `-1`: the event loop's child watcher keeps every exit it
  expects.

The holder, not the engine, reads the FIFO: a child never blocks on its output
while the engine is down, and no line is lost across an engine restart. The
child holds the FIFO open for reading and writing, so it never dies of SIGPIPE,
even if its holder is killed (a new holder is started then). Linux only.

Files are private (`setpoint.files`): the state and log directories are mode 0700 (an
existing one that is a symbolic link or another user's is refused); state files, the FIFO,
log files and their time indexes 0600, none written through a symbolic link (state files
are replaced by rename). A log file (or backup) an earlier version left wider is
tightened before a holder is started on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import pwd
import select
import signal
import stat
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from setpoint.clock import SYSTEM_CLOCK, Clock
from setpoint.errors import AlreadyExists, Invalid
from setpoint.files import (
    check_replaceable,
    ensure_private_dir,
)
from setpoint.runtime.run_as import UserPolicy, command_environment, switch_to
from setpoint.workloads.holders import (
    LogStart,
    _Holder,
    _log_start,
    _LogSettings,
    _record_holder,
    _recorded_log_start,
)
from setpoint.workloads.procfs import (
    MARKER_VARIABLE,
    _check_name,
    _environ_has,
    _fifo_path,
    _members,
    _proc_stat,
    _read_state,
    _state_path,
    _until_readable,
    _write_atomically,
)
from setpoint.workloads.reaper import (
    _reap,
    _started,
    become_subreaper,
    reap_orphans,
    reap_orphans_forever,
)

__all__ = [
    "Adopted",
    "Exit",
    "LogStart",
    "ProcessSpec",
    "Running",
    "become_subreaper",
    "find_adoptable",
    "pin_recorded",
    "reap_orphans",
    "reap_orphans_forever",
    "start",
    "stop",
    "stray",
]

DEFAULT_MAX_LOG_BYTES = 10 * 1024 * 1024
DEFAULT_LOG_BACKUPS = 3
# Variables a child inherits from the engine; everything else comes from spec.env.
_LOG_CLOSE_TIMEOUT = 2.0
_TRANSIENT_ERRNOS = frozenset(
    {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.EAGAIN, errno.ENOSPC, errno.EIO}
)
"""Errors of `fork`/`exec` that say the machine is short of something, not that the command
is wrong: `start` lets them through as `OSError`."""
_KILL_TIMEOUT = 5.0
_KILL_ROUNDS = 5
"""Scan-and-kill passes over a stopped child's processes (each catches what forked meanwhile)."""
_REAP_TIMEOUT = 5.0
"""How long `stop` waits for a parent other than this engine to reap a child's processes."""
_REAP_POLL_MAX = 0.05
"""The longest pause between two looks at whether they are reaped (from 1 ms, doubling)."""
_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProcessSpec:
    """What to run and where its output goes.

    `args` is an argv list (no shell). `env` is merged over a minimal
    inherited environment (PATH, HOME, locale, ...; with the engine's virtual
    environment first on PATH: `setpoint.runtime.run_as.command_environment`). `user` runs
    the child as that user (`setpoint.runtime.run_as`: only possible when the engine is
    root; which users a controller may ask for is its `UserPolicy`'s to say). `marker` is set as
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
# Handles


class _Child:
    """What `Running` and `Adopted` share: identity, output, clean-up."""

    def __init__(
        self,
        name: str,
        state_dir: Path,
        pid: int,
        pgid: int,
        started_at: float,
        marker: str,
        holder: _Holder | None,
    ) -> None:
        self.name = name
        self.state_dir = Path(state_dir)
        self.pid = pid
        self.pgid = pgid
        self.started_at = started_at
        self.marker = marker
        self._holder = holder
        self._logs: asyncio.Task[None] | None = None
        self.log_start: LogStart | None = None
        """Where this child's output begins in its log (None: not known)."""

    def _hold(self, log: _LogSettings) -> None:
        if self._holder is not None:
            self._logs = asyncio.get_running_loop().create_task(
                _keep_holding(self, self._holder, log), name=f"logs of {self.name}"
            )

    async def wait(self) -> Exit:
        raise NotImplementedError

    def _unreaped_leader(self) -> int | None:
        """A pidfd on the group leader if it may have exited without being reaped yet."""
        return None

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
            # Something we could not kill (another user's process) still holds the pipe.
            self._logs.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._logs
            if self._holder is not None:
                self._holder.kill()
                await self._holder.wait()

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
        marker: str,
        holder: _Holder | None,
    ) -> None:
        super().__init__(name, state_dir, process.pid, process.pid, started_at, marker, holder)
        self._process = process

    async def wait(self) -> Exit:
        returncode = await self._process.wait()  # returns once the child watcher reaped it
        _started.discard(self.pid)
        return Exit.from_returncode(returncode)

    def __repr__(self) -> str:
        return f"<Running {self.name} pid={self.pid}>"


class Adopted(_Child):
    """A process started by an earlier engine, proven ours. Its exit code cannot be known.

    It holds a pidfd until `stop()` has seen it exit and be reaped (by its parent: not us).
    """

    def __init__(
        self,
        name: str,
        state_dir: Path,
        pid: int,
        pgid: int,
        started_at: float,
        marker: str,
        pidfd: int,
        holder: _Holder | None,
    ) -> None:
        super().__init__(name, state_dir, pid, pgid, started_at, marker, holder)
        self._pidfd = pidfd
        self._exited: asyncio.Future[Exit] | None = None

    async def wait(self) -> Exit:
        if self._exited is None:
            loop = asyncio.get_running_loop()
            exited: asyncio.Future[Exit] = loop.create_future()
            self._exited = exited

            def on_exit() -> None:
                loop.remove_reader(self._pidfd)
                if not exited.done():
                    exited.set_result(_ADOPTED_EXIT)

            loop.add_reader(self._pidfd, on_exit)  # a pidfd turns readable at exit
        return await asyncio.shield(self._exited)

    def _unreaped_leader(self) -> int | None:
        return self._pidfd if self._pidfd >= 0 else None

    def _forget(self) -> None:
        super()._forget()
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1

    def __repr__(self) -> str:
        return f"<Adopted {self.name} pid={self.pid}>"


async def _keep_holding(child: _Child, holder: _Holder, log: _LogSettings) -> None:
    """Wait for `holder` to exit; if it was killed while the output may still be open, start
    another on the same FIFO (the child never dies of it: it holds both ends).

    An earlier engine's holder leaves no exit status: it is replaced only if the child
    still runs. A holder that finds no writer exits at once, so this ends."""
    fifo = _fifo_path(child.name, child.state_dir)
    while True:
        status = await holder.wait()
        if status is not None and status >= 0:
            return  # end of file: every writer has closed the FIFO
        if status is None:
            leader = _proc_stat(child.pid)
            if leader is None or leader.state in ("Z", "X"):
                return
        try:
            holder = _Holder.start(fifo, log)
        except OSError as e:
            _logger.warning("cannot restart the log holder of %s: %s", child.name, e)
            return
        child._holder = holder
        _record_holder(child.name, child.state_dir, holder)
        _logger.info("restarted the log holder of %s (pid %d)", child.name, holder.pid)


# ---------------------------------------------------------------------------
# Operations


def _child_environment(spec: ProcessSpec, account: pwd.struct_passwd | None) -> dict[str, str]:
    env = command_environment(account, spec.env)
    env[MARKER_VARIABLE] = spec.marker
    return env


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
    account = UserPolicy().account(spec.user)
    state_dir = Path(state_dir)
    earlier = _verify(name, state_dir)
    if earlier is not None:
        os.close(earlier[1])
        raise AlreadyExists(
            f"cannot start {name}: pid {earlier[0]['pid']} started for it earlier still runs;"
            " adopt or stop it first"
        )
    fifo = _fifo_path(name, state_dir)
    log = _LogSettings(
        (spec.log_dir / f"{name}.log").absolute(), spec.max_log_bytes, spec.log_backups
    )
    # The child's stdout/stderr holds both ends, so it never gets SIGPIPE, even after we die.
    try:
        ensure_private_dir(state_dir)
        ensure_private_dir(log.path.parent)
        # Before the child runs: a child that ends at once is never recorded, so the state
        # file's own check would come too late to keep it from running.
        check_replaceable(_state_path(name, state_dir))
        log_start = _log_start(log)
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo, 0o600)
        out = os.open(fifo, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        fifo.unlink(missing_ok=True)
        raise  # the machine's (state or log directory, FIFO), not the spec's: transient
    holder: _Holder | None = None
    try:
        holder = _Holder.start(fifo, log)
        process = await asyncio.create_subprocess_exec(
            *spec.args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            cwd=None if spec.cwd is None else str(spec.cwd),
            env=_child_environment(spec, account),
            start_new_session=True,
            **switch_to(account),
        )
    except BaseException as e:
        os.close(out)  # the holder sees the end of its input and exits
        if holder is not None:
            await holder.wait()
        fifo.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno in _TRANSIENT_ERRNOS:
            raise
        if isinstance(e, OSError | ValueError | subprocess.SubprocessError):
            raise Invalid(f"cannot start {name}: {e}") from None
        raise
    os.close(out)
    _started.add(process.pid)
    started_at = clock.now()
    running = Running(name, state_dir, process, started_at, spec.marker, holder)
    running.log_start = log_start
    running._hold(log)
    proc = _proc_stat(process.pid)
    if proc is None:  # already gone: nothing to adopt later
        return running
    record = {
        "name": name,
        "pid": process.pid,
        "pgid": process.pid,
        "starttime": proc.starttime,
        "startedAt": started_at,
        "marker": spec.marker,
        "argv": list(spec.args),
        "log": str(log.path),
        "maxLogBytes": log.max_bytes,
        "logBackups": log.backups,
        "holder": holder.record(),
        "logStart": {"inode": log_start.inode, "offset": log_start.offset},
    }
    try:  # its fsync off the event loop: a thousand starts do not queue behind the disk
        await asyncio.to_thread(_write_atomically, _state_path(name, state_dir), record)
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


_Pinned = dict[tuple[int, int], int]
"""(pid, start time) -> a pidfd on that very process: a recycled pid is never signalled."""


def _pin_members(child: _Child, pinned: _Pinned) -> None:
    """Add every process of `child` that runs now (see `_members`) to `pinned`."""
    for pid, st in _members(child.pgid, child.marker).items():
        if (pid, st.starttime) in pinned:
            continue
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            continue  # gone meanwhile
        now = _proc_stat(pid)
        if now is None or now.starttime != st.starttime:
            os.close(pidfd)
            continue
        pinned[pid, st.starttime] = pidfd


def _signal_pinned(
    pinned: _Pinned, signum: int, *, but_group: int | None = None
) -> list[tuple[int, int]]:
    """Send `signum` to every pinned process that has not exited (but those in process group
    `but_group`, signalled already); return those it reached."""
    reached = []
    for key, pidfd in pinned.items():
        if select.select([pidfd], [], [], 0)[0]:
            continue  # exited
        st = _proc_stat(key[0])  # the pidfd pins it: this pid is not reused yet
        if but_group is not None and st is not None and st.pgid == but_group:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            signal.pidfd_send_signal(pidfd, signum)
            reached.append(key)
    return reached


async def _kill_members(child: _Child, pinned: _Pinned) -> None:
    """SIGKILL every process of `child` (those pinned earlier, and any found now) until none
    is left; reap those that were re-parented to this engine.

    A process forked between a scan and its SIGKILL is found by the next scan. If nothing
    of `child` ran when `pinned` was taken, nothing could fork since: no scan is needed."""
    if not pinned:
        return
    me = os.getpid()
    for _ in range(_KILL_ROUNDS):
        _pin_members(child, pinned)
        killed = _signal_pinned(pinned, signal.SIGKILL)
        if not killed:
            return
        with contextlib.suppress(TimeoutError):
            waits = [_until_readable(pinned[key]) for key in killed]
            await asyncio.wait_for(asyncio.gather(*waits), _KILL_TIMEOUT)
        for pid, _ in killed:
            st = _proc_stat(pid)
            if st is not None and st.state == "Z" and st.ppid == me and pid not in _started:
                _reap(pid)  # an escaped process, re-parented to this subreaper
    left = sorted(_members(child.pgid, child.marker))
    if left:
        _logger.warning("%s: pids %s outlived its stop (another user's?)", child.name, left)


def _unreaped(pidfd: int) -> bool:
    """Whether the process of `pidfd` exists still (running, or exited and not reaped: a
    zombie, which `kill(pid, 0)` still finds)."""
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's: it exists
    return True


async def _wait_reaped(child: _Child, exited: Sequence[tuple[int, int]]) -> None:
    """Return once every process of `exited` ((pid, pidfd) of processes that exited) is
    reaped, reaping those re-parented to this engine; after `_REAP_TIMEOUT`, log those
    left and return.

    Their parent (init, say) tells nobody when it reaps: this polls, from 1 ms to
    `_REAP_POLL_MAX` apart."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _REAP_TIMEOUT
    me = os.getpid()
    pause = 0.001
    while left := [(pid, fd) for pid, fd in exited if _unreaped(fd)]:
        for pid, _ in left:
            st = _proc_stat(pid)  # the pidfd pins it: this pid is not reused yet
            if st is not None and st.ppid == me and pid not in _started:
                _reap(pid)  # re-parented to this subreaper
        if loop.time() >= deadline:
            pids = sorted(pid for pid, _ in left)
            _logger.warning(
                "%s: pids %s exited but their parent has not reaped them in %gs; going on",
                child.name, pids, _REAP_TIMEOUT,
            )  # fmt: skip
            return
        await asyncio.sleep(pause)
        pause = min(pause * 2, _REAP_POLL_MAX)


def kill(child: Running | Adopted) -> None:
    """SIGKILL the child's whole group now; a `stop` of it in progress then returns at once."""
    _signal_group(child.pgid, signal.SIGKILL)


async def stop(child: Running | Adopted, grace: float, stop_signal: int = signal.SIGTERM) -> Exit:
    """Send `stop_signal` (SIGTERM) to the child's group and whatever escaped it, SIGKILL
    them after `grace` seconds; leave nothing behind.

    Returns how the group leader ended. Safe to call after it already exited:
    it still kills what is left of its processes and removes its state file.
    """
    pinned: _Pinned = {}
    exit_task = asyncio.ensure_future(child.wait())
    try:
        _pin_members(child, pinned)  # before any dies: its descendants are known by parent
        _signal_group(child.pgid, stop_signal)
        # Once each: a second SIGINT may find a child that handled the first one (Python's
        # `sys.exit` in a handler) finalizing, back on the default action: killed by it.
        _signal_pinned(pinned, stop_signal, but_group=child.pgid)
        try:
            await asyncio.wait_for(asyncio.shield(exit_task), max(0.0, grace))
        except TimeoutError:
            _signal_group(child.pgid, signal.SIGKILL)
        ended = await exit_task
        _signal_group(child.pgid, signal.SIGKILL)  # members that outlived the leader
        await _kill_members(child, pinned)  # and those that escaped its group
        exited = [(pid, fd) for (pid, _), fd in pinned.items() if select.select([fd], [], [], 0)[0]]
        leader = child._unreaped_leader()
        await _wait_reaped(child, exited if leader is None else [(child.pid, leader), *exited])
    finally:
        if not exit_task.done():
            exit_task.cancel()
        for pidfd in pinned.values():
            os.close(pidfd)
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
        and proc.state not in ("Z", "X")
        and proc.starttime == starttime
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
    Its log holder carries on; if it is gone, another is started (and
    recorded). Call this from the event loop.
    """
    _check_name(name)
    verified = _verify(name, state_dir)
    if verified is None:
        return None
    record, pidfd = verified
    try:
        asyncio.get_running_loop()  # the holder is watched from the event loop
        holder, log = _adopt_holder(name, Path(state_dir), record)
    except BaseException:
        os.close(pidfd)
        raise
    adopted = Adopted(
        name,
        Path(state_dir),
        int(record["pid"]),
        int(record["pgid"]),
        float(record.get("startedAt", 0.0)),
        str(record["marker"]),
        pidfd,
        holder,
    )
    if log is not None:
        adopted.log_start = _recorded_log_start(record, log)
        adopted._hold(log)
    return adopted


def pin_recorded(name: str, state_dir: Path) -> int | None:
    """An open pidfd of the process recorded for `name`, if it still runs and is provably the
    one recorded (as `find_adoptable` checks), or None. Nothing is adopted or signalled: it
    lets a process that does not supervise the child watch it end. The caller closes it."""
    _check_name(name)
    verified = _verify(name, state_dir)
    return None if verified is None else verified[1]


def _adopt_holder(
    name: str, state_dir: Path, record: dict[str, Any]
) -> tuple[_Holder | None, _LogSettings | None]:
    """The recorded child's log holder, started anew (and recorded) if it is gone."""
    fifo = _fifo_path(name, state_dir)
    path = record.get("log")
    try:
        is_fifo = stat.S_ISFIFO(fifo.stat().st_mode)
    except OSError:
        is_fifo = False
    if not isinstance(path, str) or not is_fifo:
        return None, None
    log = _LogSettings(
        # Recorded absolute since this version; an older record was relative to its cwd.
        Path(path).absolute(),
        int(record.get("maxLogBytes", DEFAULT_MAX_LOG_BYTES)),
        int(record.get("logBackups", DEFAULT_LOG_BACKUPS)),
    )
    recorded = record.get("holder")
    holder = _Holder.find(recorded) if isinstance(recorded, Mapping) else None
    if holder is None:
        try:
            holder = _Holder.start(fifo, log)
        except OSError as e:
            _logger.warning("cannot restart the log holder of %s: %s", name, e)
            return None, None
        _record_holder(name, state_dir, holder)
    return holder, log


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
