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
private file; this program cannot import it), and the supervisor tightens files an
earlier version left wider before it starts a holder.

It must import nothing but `os` and `sys` (it runs once per child: a few MB each), and
decides nothing about the child: it never signals nor waits for it.
"""

from __future__ import annotations

import os
import sys

CHUNK_BYTES = 65536
OVERLONG_LINE_BYTES = 65536
"""How far past `MAX_BYTES` a file may grow waiting for a line end before it rotates."""


class LogFile:
    """Appends to `path`; past `max_bytes`, at a line end, it becomes `path.1` (`.1` -> `.2`)."""

    def __init__(self, path: str, max_bytes: int, backups: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._fd = -1
        self._size = 0
        self._open()

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._size = os.fstat(self._fd).st_size

    def write(self, data: bytes) -> None:
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
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            self._size += written
            view = view[written:]

    def _rotate(self) -> None:
        os.close(self._fd)
        try:
            for i in range(self.backups - 1, 0, -1):
                older = f"{self.path}.{i}"
                if os.path.exists(older):
                    os.replace(older, f"{self.path}.{i + 1}")
            os.replace(self.path, f"{self.path}.1")
        finally:
            self._open()


def copy(source: int, log: LogFile) -> None:
    """Copy everything from `source` into `log` until end of file; never stop on a write error."""
    dropping = False
    while True:
        data = os.read(source, CHUNK_BYTES)
        if not data:
            return
        try:
            log.write(data)
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
