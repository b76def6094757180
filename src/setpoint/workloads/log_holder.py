"""The per-child log holder: copies one child's output from its FIFO into its log file.

The supervisor runs it as a small process of its own, `python -I -S log_holder.py LOG
MAX_BYTES BACKUPS` with the child's FIFO as stdin, as containerd-shim and conmon hold
a container's output: the holder, not the engine, reads the pipe, so a child never
blocks on its output while the engine is down, and no line is lost across an engine
restart. It writes each chunk to `LOG` as soon as it is read (readers see lines as
they come), rotates `LOG` by size only at a line end (`LOG` -> `LOG.1` -> `LOG.2` ...,
`BACKUPS` kept; a line longer than 64 KiB may be cut to rotate anyway), drops what it
cannot write (a full disk) rather than stop reading, and exits once every writer has
closed the FIFO. It makes each log file mode 0600 (the mode `setpoint.files` gives every
private file; this program cannot import it) and never follows a symbolic link to one;
the supervisor tightens files an earlier version left wider before it starts a holder.

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

It must import nothing but `os`, `sys` and `time` (built in: it runs once per child, a
few MB each), and decides nothing about the child: it never signals nor waits for it.
"""

from __future__ import annotations

import os
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


def main(argv: list[str]) -> int:
    _, path, max_bytes, backups = argv
    os.set_blocking(0, True)
    copy(0, LogFile(path, int(max_bytes), int(backups)))
    return 0


if __name__ == "__main__":
    status = main(sys.argv)
    os._exit(status)  # everything is written: skip the interpreter's clean-up, stop() waits for it
