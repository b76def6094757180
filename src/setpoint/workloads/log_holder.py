"""The per-child log holder: copies one child's output from its FIFO into its log file.

Each child has a holder, a small process of its own with the child's FIFO as stdin, as
containerd-shim and conmon hold a container's output: the holder, not the engine, reads
the pipe, so a child never blocks on its output while the engine is down, and no line is
lost across an engine restart. It writes each chunk to `LOG` as soon as it is read
(readers see lines as they come), rotates `LOG` by size only at a line end (`LOG` ->
`LOG.1` -> `LOG.2` ..., `BACKUPS` kept; a line longer than 64 KiB may be cut to rotate
anyway), drops what it cannot write (a full disk) rather than stop reading, and exits
once every writer has closed the FIFO. It makes each log file mode 0600 (the mode
`setpoint.files` gives every private file; this program cannot import it) and never
follows a symbolic link to one; the supervisor tightens files an earlier version left
wider before it starts a holder.

A holder is forked by the state directory's fork server (`ForkServer`: `python -I -S
log_holder.py --fork-server IDLE_S SOCKET INODE`, its listening unix socket as stdin), one
long-lived process already initialised, so that each holder shares its pages
copy-on-write and costs only what it dirties (about 0.7 MB, against 3.2 MB for an
interpreter of its own). A client (`setpoint.workloads.holders`) connects and sends the
log path, `MAX_BYTES` and `BACKUPS` with the FIFO's read end attached (SCM_RIGHTS). The
server forks at once; the forked process takes the connection, checks the request (its
own user's only, by SO_PEERCRED), takes its own session, closes every descriptor but the
FIFO, the connection and the standard ones, and answers with its pid; at end of input it
answers its exit status on the same connection (killed, it answers nothing). The kernel
reaps holders (the server ignores SIGCHLD). The server exits once it has had no request
for `IDLE_S` seconds, removing its socket file unless another server's has replaced it;
holders outlive it (re-parented). `python -I -S log_holder.py LOG MAX_BYTES BACKUPS` with
the FIFO as stdin is a holder started directly (when no server can be had).

Beside each log file it keeps a time index, `LOG.times` (`LOG.1.times` for `LOG.1`...,
rotated with it, mode 0600): a header naming the log file's inode, `setpoint-log-times 1
INODE`, then a record `OFFSET NANOSECONDS` per write, written before the bytes it
stamps: the wall-clock time the holder read the chunk that starts at byte OFFSET. Writes
less than `STAMP_EVERY_NS` after the last record share its time and write none, which
keeps the index small when a child prints many short lines. The log itself stays the
child's output, byte for byte; `LogTimes` (below) reads the index back for `setpoint
logs --since/--timestamps`. A line's time is that of the last record at or before its
first byte. A log written by an older holder has no index (or one naming
another inode, after the log was replaced): its lines have no recorded time.

It must import only modules built into the interpreter or written in C (`os`, `sys`,
`time`, and for the fork server `gc`, `select`, `signal`, `_socket`): it runs once per
child. It decides nothing about the child: it never signals nor waits for it.
"""

from __future__ import annotations

import _socket
import gc
import os
import select
import signal
import sys
import time

CHUNK_BYTES = 65536
OVERLONG_LINE_BYTES = 65536
"""How far past `MAX_BYTES` a file may grow waiting for a line end before it rotates."""
STAMP_EVERY_NS = 1_000_000
"""The finest time the index records: a write within 1 ms of the last record shares its time."""
TIMES_SUFFIX = ".times"
"""The time index of `LOG` is `LOG + TIMES_SUFFIX`."""
_HEADER = b"setpoint-log-times 1 %d\n"
FORK_SERVER_FLAG = "--fork-server"
"""`log_holder.py --fork-server IDLE_S SOCKET INODE`: run as the state directory's fork server."""
HOLDER_NAME = b"setpoint-holder"
"""A forked holder's name (`/proc/PID/comm`, what `ps -o comm` and `top` show; its command
line stays the server's)."""
SERVER_NAME = b"setpoint-forker"
"""The fork server's name (`/proc/PID/comm`)."""
REQUEST_TIMEOUT_S = 5.0
"""How long the fork server waits for a connected client to send its request."""


def times_path(log_path: str) -> str:
    """The time index of the log file `log_path` (current or rotated)."""
    return log_path + TIMES_SUFFIX


class LogTimes:
    """The records of one log file's time index, fed as it grows (`feed`): when each byte
    offset was read. Records of an index that names another inode than `inode` are ignored."""

    def __init__(self, inode: int) -> None:
        self.inode = inode
        self.offsets: list[int] = []
        self.times: list[int] = []
        self._rest = b""
        self._header: bool | None = None  # None: not read yet

    def feed(self, data: bytes) -> None:
        """Take the next bytes of the index file (a partial last record is kept for later)."""
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        for line in lines:
            if self._header is None:
                self._header = line + b"\n" == _HEADER % self.inode
                continue
            offset, _, ns = line.partition(b" ")
            if self._header and offset.isdigit() and ns.isdigit():
                self.offsets.append(int(offset))
                self.times.append(int(ns))

    def at(self, offset: int) -> int | None:
        """The time (ns since the epoch) of the last record at or before byte `offset`;
        None when none is (an older holder's output, or no index)."""
        low, high = 0, len(self.offsets)
        while low < high:  # the first record past `offset`
            mid = (low + high) // 2
            if self.offsets[mid] <= offset:
                low = mid + 1
            else:
                high = mid
        return self.times[low - 1] if low else None

    def first(self) -> int | None:
        """The earliest recorded time, if any."""
        return self.times[0] if self.times else None


class LogFile:
    """Appends to `path`, stamping each write in its time index; past `max_bytes`, at a
    line end, both become `path.1` and `path.1.times` (`.1` -> `.2`)."""

    def __init__(self, path: str, max_bytes: int, backups: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._fd = -1
        self._times = -1
        self._size = 0
        self._at_ns = 0
        self._stamped = 0
        self._open()

    def _open(self) -> None:
        flags = os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        self._fd = os.open(self.path, os.O_WRONLY | flags, 0o600)
        st = os.fstat(self._fd)
        self._size = st.st_size
        self._stamped = -STAMP_EVERY_NS  # the time of the file's last record: none yet
        self._times = os.open(times_path(self.path), os.O_RDWR | flags, 0o600)
        header = _HEADER % st.st_ino
        if os.pread(self._times, len(header), 0) != header:  # new, or of another log file
            os.ftruncate(self._times, 0)
            os.write(self._times, header)

    def write(self, data: bytes, at_ns: int) -> None:
        """Append `data`, read at `at_ns` (ns since the epoch)."""
        self._at_ns = at_ns
        while data:
            room = self.max_bytes - self._size
            end = data.find(b"\n", max(room, 0))  # the line end that takes it past max_bytes
            if end < 0:
                if self._size + len(data) <= self.max_bytes + OVERLONG_LINE_BYTES:
                    self._append(data)
                    return
                end = max(self.max_bytes + OVERLONG_LINE_BYTES - self._size, 1) - 1
            self._append(data[: end + 1])
            data = data[end + 1 :]
            self._rotate()

    def _append(self, data: bytes) -> None:
        if not 0 <= self._at_ns - self._stamped < STAMP_EVERY_NS:  # before the bytes:
            os.write(self._times, b"%d %d\n" % (self._size, self._at_ns))  # readers that
            self._stamped = self._at_ns  # see them see their time
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            self._size += written
            view = view[written:]

    def close(self) -> None:
        os.close(self._fd)
        os.close(self._times)

    def _rotate(self) -> None:
        self.close()
        try:
            for i in range(self.backups - 1, 0, -1):
                _move(f"{self.path}.{i}", f"{self.path}.{i + 1}")
            _move(self.path, f"{self.path}.1")
        finally:
            self._open()


def _move(log: str, to: str) -> None:
    """Rename a log file and its time index (each if it exists)."""
    for source, target in ((times_path(log), times_path(to)), (log, to)):
        if os.path.exists(source):
            os.replace(source, target)


def copy(source: int, log: LogFile) -> None:
    """Copy everything from `source` into `log` until end of file; never stop on a write error."""
    dropping = False
    while True:
        data = os.read(source, CHUNK_BYTES)
        if not data:
            return
        try:
            log.write(data, time.time_ns())
        except OSError as e:  # a full disk...: keep draining, never block the child
            if not dropping:
                sys.stderr.write(f"dropping output for {log.path}: {e}\n")
            dropping = True


def hold(path: str, max_bytes: int, backups: int) -> int:
    """Be a holder: copy stdin (the child's FIFO) into the log file `path` until end of file."""
    os.set_blocking(0, True)
    copy(0, LogFile(path, max_bytes, backups))
    return 0


# ---------------------------------------------------------------------------
# The fork server


def peer_uid(conn: _socket.socket) -> int:
    """The user id of the process at the other end of the unix socket `conn`."""
    creds = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)  # pid, uid, gid
    return int.from_bytes(creds[4:8], sys.byteorder)


def _received_fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    """The descriptors an SCM_RIGHTS message carried."""
    fds = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds += [int.from_bytes(data[i : i + 4], sys.byteorder) for i in range(0, usable, 4)]
    return fds


def _gone(conn: _socket.socket) -> bool:
    """Whether the other end of `conn` has closed it (it sends nothing after its request)."""
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLRDHUP)
    return bool(poller.poll(0))  # POLLRDHUP, POLLHUP or POLLERR: it has closed


def parse_request(message: bytes) -> tuple[str, int, int] | None:
    """A fork request's log path, `MAX_BYTES` and `BACKUPS` (None if it is not one)."""
    parts = message.split(b"\0")
    if len(parts) != 3 or not parts[0].startswith(b"/"):
        return None
    try:
        return os.fsdecode(parts[0]), int(parts[1]), int(parts[2])
    except ValueError:
        return None


def request(path: str, max_bytes: int, backups: int) -> bytes:
    """A fork request for a holder of the log file `path` (absolute)."""
    return b"\0".join([os.fsencode(path), b"%d" % max_bytes, b"%d" % backups])


class ForkServer:
    """Forks a holder for each connection to `listener`; the holder itself takes the request.

    Between two forks the server does as little as it can (poll, fork, read one byte): a
    page it writes after a fork stays the earlier holders' own, so whatever it touched per
    request would be paid again by every holder. The forked process accepts the
    connection, tells the server it has (so that it forks again only for the next one),
    checks the request and becomes the holder. The kernel reaps holders (SIGCHLD ignored):
    the server never waits for one."""

    def __init__(self, listener: _socket.socket, idle_s: float, path: str, inode: int) -> None:
        self.listener = listener
        self.idle_s = idle_s
        self.path = path
        self.inode = inode
        self.accepted = -1
        """The pipe on which a forked process says it has taken its connection."""

    def serve(self) -> None:
        _name_this_process(SERVER_NAME)
        self.listener.setblocking(False)
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # holders are reaped as they end
        accepted, self.accepted = os.pipe2(os.O_CLOEXEC)
        poller = select.poll()
        poller.register(self.listener.fileno(), select.POLLIN)
        timeout_ms = int(self.idle_s * 1000)
        gc.freeze()  # holders share these objects' pages: the collector must not touch them
        while poller.poll(timeout_ms):
            if os.fork() == 0:
                self._become_holder()
            os.read(accepted, 1)  # it has taken the connection (or failed to)
        self.listener.close()  # refuse what comes now: the client starts another server
        try:  # the socket file, unless another server's has replaced it since
            if os.lstat(self.path).st_ino == self.inode:
                os.unlink(self.path)
        except OSError:
            pass

    def _become_holder(self) -> None:
        """In the forked process: take the next connection's request and hold its FIFO;
        report the pid, then the exit status, on the connection."""
        status = 1
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.setsid()  # no terminal's Ctrl-C reaches it, as a directly started holder
            _name_this_process(HOLDER_NAME)
            try:
                conn = _socket.socket(fileno=self.listener._accept()[0])  # type: ignore[attr-defined]
            finally:
                os.write(self.accepted, b".")  # the server may fork for the next one now
            conn.settimeout(REQUEST_TIMEOUT_S)  # a stuck client holds up only this process
            if peer_uid(conn) != os.getuid():
                raise PermissionError("another user's request")
            message, ancillary, _, _ = conn.recvmsg(8192, _socket.CMSG_SPACE(4 * 4))
            fds = _received_fds(ancillary)
            asked = parse_request(message)
            if asked is None or len(fds) != 1:
                raise ValueError("not a fork request")
            if _gone(conn):  # it gave up waiting (and may have started a holder of its own)
                raise ConnectionResetError("the client has gone")
            os.dup2(fds[0], 0)
            keep = conn.fileno()  # the server's socket and pipe, the request's descriptors:
            os.closerange(3, keep)  # closed
            os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
            conn.settimeout(None)
            conn.sendall(b"%d\n" % os.getpid())
            status = 0
            try:
                hold(*asked)
            except BaseException:
                status = 1
                raise
            finally:
                conn.sendall(b"%d\n" % status)
        finally:
            os._exit(status)


def _name_this_process(name: bytes) -> None:
    try:
        comm = os.open("/proc/self/comm", os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.write(comm, name)
    except OSError:
        pass  # only a name
    finally:
        os.close(comm)


def serve_forks(argv: list[str]) -> int:
    """Be the fork server of a state directory: stdin is its listening socket."""
    _, _, idle_s, path, inode = argv
    listener = _socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # a holder's stdin is its FIFO: the listener stays here only
    os.close(null)
    ForkServer(listener, float(idle_s), path, int(inode)).serve()
    return 0


def main(argv: list[str]) -> int:
    if argv[1:2] == [FORK_SERVER_FLAG]:
        return serve_forks(argv)
    _, path, max_bytes, backups = argv
    return hold(path, int(max_bytes), int(backups))


if __name__ == "__main__":
    status = main(sys.argv)
    os._exit(status)  # everything is written: skip the interpreter's clean-up, stop() waits for it
