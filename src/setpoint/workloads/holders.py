"""Log holders: the small process (`setpoint.workloads.log_holder`) that reads a child's
FIFO and writes its log file with rotation, started beside each child, recorded in its
state file and adopted again by a restarted engine; where a child's output begins
(`LogStart`). Decides nothing (`setpoint.workloads.supervisor` does).

A holder is forked by its state directory's fork server (`log_holder.ForkServer`), which
this module starts on first need: its socket is `<state_dir>/holders.sock` (mode 0600, in
the private state directory, reached through the directory's descriptor so a long path
is no limit), made and bound here and handed to the server as its stdin, so a request can
be sent at once. A server that is not our own user's (SO_PEERCRED) is never used. One
that answers nothing (gone, or exiting idle) is replaced; if none can be had, the holder
is started directly as an interpreter of its own, as before the fork server. The holder
answers its pid, then its exit status, on the connection that asked for it
(`_ExitReport`); killed, it answers none, and its pidfd tells of its end (and reaps it if
it was re-parented to this process, a subreaper, after its server ended). A server this
process started is reaped as it exits (`_Server`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from setpoint.files import (
    make_private,
    open_private,
)
from setpoint.workloads import log_holder
from setpoint.workloads.procfs import (
    _proc_stat,
    _read_state,
    _state_path,
    _until_readable,
    _write_atomically,
)

_HOLDER_PROGRAM = Path(__file__).with_name("log_holder.py")
SERVER_SOCKET = "holders.sock"
"""The fork server's socket in a state directory (a child's files end in .json and .out)."""
SERVER_IDLE_S = 10.0
"""A fork server exits once it has had no request for this long (its holders carry on)."""
_REPLY_TIMEOUT_S = 30.0
"""How long a request waits for the holder's pid (a new server starts up first)."""
_servers: list[_Server] = []
"""The fork servers this process started, reaped once they have ended."""
_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _LogSettings:
    path: Path
    """Absolute: a restarted engine may run from another directory."""
    max_bytes: int
    backups: int

    def files(self) -> list[Path]:
        """The log file and its backups (`.1`, `.2` ...), and the time index of each."""
        rotated = [self.path.with_name(f"{self.path.name}.{i}") for i in range(1, self.backups + 1)]
        logs = [self.path, *rotated]
        return [*logs, *(Path(log_holder.times_path(str(log))) for log in logs)]


@dataclass(frozen=True)
class LogStart:
    """Where a child's output begins: `offset` bytes into the file of inode `inode`, which is
    the log file `path` or, once rotated, one of its `backups` (`path.1`, `path.2` ...)."""

    path: Path
    backups: int
    inode: int
    offset: int


def _log_start(log: _LogSettings) -> LogStart:
    """The end of `log`'s file now (made if missing): where the next child's output begins."""
    fd = open_private(log.path, os.O_WRONLY | os.O_APPEND)
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return LogStart(log.path, log.backups, st.st_ino, st.st_size)


def _recorded_log_start(record: Mapping[str, Any], log: _LogSettings) -> LogStart | None:
    """The `LogStart` a state record holds (None: an earlier version's record, without one)."""
    found = record.get("logStart")
    if not isinstance(found, Mapping):
        return None
    try:
        return LogStart(log.path, log.backups, int(found["inode"]), int(found["offset"]))
    except (KeyError, TypeError, ValueError):
        return None


class _Holder:
    """One child's log holder: a process started by this engine or an earlier one, pinned
    by a pidfd."""

    def __init__(
        self,
        pid: int,
        pidfd: int,
        popen: subprocess.Popen[bytes] | None,
        report: _ExitReport | None = None,
    ) -> None:
        self.pid = pid
        self._pidfd = pidfd
        self._popen = popen
        self._report = report
        self._exited: asyncio.Task[int | None] | None = None

    @staticmethod
    def start(fifo: Path, log: _LogSettings) -> _Holder:
        """Start a holder reading `fifo` (which must have a writer: it exits at end of file),
        forked by the state directory's fork server, or started directly if no server can
        be had. Log files an earlier version left wider than 0600 are tightened first (the
        holder makes new ones 0600)."""
        make_private(*log.files())
        read_end = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)  # never blocks
        try:
            try:
                pid, report = _fork_holder(fifo.parent, read_end, log)
            except (OSError, ValueError) as e:
                _logger.warning(
                    "no log holder fork server in %s (%s): starting the holder on its own",
                    fifo.parent,
                    e,
                )
                return _Holder._start_alone(read_end, log)
        finally:
            os.close(read_end)
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:  # it has ended, and been reaped: its status is reported
            pidfd = -1
        return _Holder(pid, pidfd, None, report)

    @staticmethod
    def _start_alone(read_end: int, log: _LogSettings) -> _Holder:
        """A holder of its own, an interpreter started for it (about 3 MB, not 0.7 MB)."""
        argv = [sys.executable, "-I", "-S", str(_HOLDER_PROGRAM), str(log.path)]
        argv += [str(log.max_bytes), str(log.backups)]
        popen = subprocess.Popen(
            argv,
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env={},
            start_new_session=True,  # no terminal's Ctrl-C reaches it
        )
        return _Holder(popen.pid, os.pidfd_open(popen.pid), popen)

    @staticmethod
    def find(record: Mapping[str, Any]) -> _Holder | None:
        """The holder an earlier engine recorded, if it still runs."""
        try:
            pid, starttime = int(record["pid"]), int(record["starttime"])
            pidfd = os.pidfd_open(pid)
        except (KeyError, TypeError, ValueError, OSError):
            return None
        st = _proc_stat(pid)
        if st is None or st.state in ("Z", "X") or st.starttime != starttime:
            os.close(pidfd)
            return None
        return _Holder(pid, pidfd, None)

    def record(self) -> dict[str, int] | None:
        st = _proc_stat(self.pid)
        return None if st is None else {"pid": self.pid, "starttime": st.starttime}

    async def wait(self) -> int | None:
        """Its exit status (None for an earlier engine's holder: not ours to know)."""
        if self._exited is None:
            self._exited = asyncio.ensure_future(self._wait())
        return await asyncio.shield(self._exited)

    async def _wait(self) -> int | None:
        try:
            reported = None if self._report is None else await self._report.status()
            if self._pidfd < 0:
                return reported
            await _until_readable(self._pidfd)  # it reports just before it exits
            if self._popen is not None:
                return self._popen.wait()
            ended = _reap(self._pidfd)
            return reported if ended is None else ended
        finally:
            if self._pidfd >= 0:
                os.close(self._pidfd)
                self._pidfd = -1  # never signal through a closed (perhaps reused) descriptor

    def kill(self) -> None:
        if self._pidfd >= 0:
            with contextlib.suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)


def _reap(pidfd: int) -> int | None:
    """The exit status of the ended process `pidfd`, reaped, if it is this process's child
    (a holder whose fork server died, re-parented to this subreaper); else None."""
    try:
        ended = os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG)
    except ChildProcessError:
        return None
    if ended is None:
        return None
    return ended.si_status if ended.si_code == os.CLD_EXITED else -ended.si_status


class _ExitReport:
    """The connection on which a forked holder reports how it ended: a line with its exit
    status; end of file without one if it was killed."""

    def __init__(self, conn: socket.socket, received: bytes) -> None:
        self._conn = conn
        self._received = received
        conn.setblocking(False)

    async def status(self) -> int | None:
        try:
            while b"\n" not in self._received:
                await _until_readable(self._conn.fileno())
                try:
                    data = self._conn.recv(64)
                except BlockingIOError:
                    continue
                except OSError:
                    return None
                if not data:
                    return None
                self._received += data
            return int(self._received.split(b"\n", 1)[0])
        except ValueError:
            return None
        finally:
            self._conn.close()


def _fork_holder(state_dir: Path, read_end: int, log: _LogSettings) -> tuple[int, _ExitReport]:
    """Ask `state_dir`'s fork server for a holder reading `read_end`, starting a server if
    none answers: the holder's pid, and where its exit status will come."""
    directory = os.open(state_dir, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        address = f"/proc/self/fd/{directory}/{SERVER_SOCKET}"  # of any length
        for attempt in range(2):
            conn = _connect(address)
            if conn is None:
                _start_server(state_dir, address)
                conn = _connect(address)
                if conn is None:
                    raise ConnectionRefusedError("the fork server it started refuses it")
            try:
                conn.settimeout(_REPLY_TIMEOUT_S)
                asked = log_holder.request(str(log.path), log.max_bytes, log.backups)
                socket.send_fds(conn, [asked], [read_end])
                received = b""
                while b"\n" not in received:
                    data = conn.recv(64)
                    if not data:
                        raise ConnectionResetError("the fork server ended before it answered")
                    received += data
                pid, _, rest = received.partition(b"\n")
                return int(pid), _ExitReport(conn, rest)
            except (OSError, ValueError):
                conn.close()
                if attempt:  # a server exiting idle may have dropped the first: once more
                    raise
        raise AssertionError("unreachable")
    finally:
        os.close(directory)


def _connect(address: str) -> socket.socket | None:
    """A connection to the fork server at `address`; None if none listens there."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        conn.connect(address)
        uid = log_holder.peer_uid(conn)
        if uid != os.getuid():
            raise PermissionError(f"its socket is another user's (uid {uid}): not using it")
    except (FileNotFoundError, ConnectionRefusedError):
        conn.close()
        return None
    except BaseException:
        conn.close()
        raise
    return conn


def _start_server(state_dir: Path, address: str) -> None:
    """Make the fork server's socket at `address` (in `state_dir`), replacing a file nobody
    listens on, and start a server on it."""
    for ended in [server for server in _servers if server.reap()]:
        _servers.remove(ended)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(address)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        listener.bind(address)
        os.chmod(address, 0o600)
        listener.listen(64)
        inode = os.stat(address).st_ino
        argv = [sys.executable, "-I", "-S", str(_HOLDER_PROGRAM), log_holder.FORK_SERVER_FLAG]
        argv += [str(SERVER_IDLE_S), str(state_dir.absolute() / SERVER_SOCKET), str(inode)]
        server = subprocess.Popen(
            argv,
            stdin=listener.fileno(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env={},
            start_new_session=True,  # as a holder: it outlives this engine
        )
    finally:
        listener.close()
    _servers.append(_Server(server))


class _Server:
    """A fork server this process started, reaped as soon as it exits (idle) by the event
    loop it was started from, or else at the next server's start: no zombie is left beside
    an engine's children."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen
        self._pidfd = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        try:
            self._loop = asyncio.get_running_loop()
            self._pidfd = os.pidfd_open(popen.pid)
        except (RuntimeError, OSError):
            return
        self._loop.add_reader(self._pidfd, self.reap)

    def reap(self) -> bool:
        """Reap it if it has ended (and stop watching it); whether it had."""
        if self.popen.poll() is None:
            return False
        if self._pidfd >= 0:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1
        return True


def _record_holder(name: str, state_dir: Path, holder: _Holder) -> None:
    """Write `holder` into `name`'s state file: the next engine finds it, and starts no other."""
    record = _read_state(name, state_dir)
    if record:
        with contextlib.suppress(OSError):
            _write_atomically(_state_path(name, state_dir), {**record, "holder": holder.record()})
