"""Which files of one directory changed: the names inotify reported since the last look, so
that a follower of many files (`setpoint.insight.recorder.LogTailer`) reads only those
instead of a `stat` of every file on every look.

`DirectoryChanges(path)` watches `path` (created, written, truncated, moved in or out,
deleted files); `take()` returns the names reported since the last call without waiting,
or None when it cannot say (no inotify, the directory is not there yet or was replaced,
the kernel's queue overflowed): the caller then looks at every file. A watch that could
not be made is tried again at the next `take()`. It owns one file descriptor, closed by
`close()`. Linux only; it never blocks and starts no thread.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from pathlib import Path

__all__ = ["DirectoryChanges"]

_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_IN_MODIFY = 0x00000002
_IN_ATTRIB = 0x00000004
_IN_CLOSE_WRITE = 0x00000008
_IN_MOVED_FROM = 0x00000040
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_DELETE = 0x00000200
_IN_DELETE_SELF = 0x00000400
_IN_MOVE_SELF = 0x00000800
_IN_Q_OVERFLOW = 0x00004000
_IN_IGNORED = 0x00008000
_IN_ONLYDIR = 0x01000000
_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
)
_LOST = _IN_Q_OVERFLOW | _IN_IGNORED | _IN_DELETE_SELF | _IN_MOVE_SELF
"""Events after which the names reported say nothing of what happened since."""
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1  # noqa: B018 - present only on Linux
    except (OSError, AttributeError):
        return None
    return libc


class DirectoryChanges:
    """The names of the files of `path` that changed since the last `take()` (see the
    module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._libc = _libc()
        self._fd = -1
        self._wd = -1
        if self._libc is not None:
            fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
            if fd >= 0:
                self._fd = fd
        self._add_watch()

    def _add_watch(self) -> bool:
        if self._fd < 0 or self._libc is None:
            return False
        wd: int = self._libc.inotify_add_watch(self._fd, os.fsencode(self.path), _MASK)
        self._wd = wd
        return wd >= 0

    def take(self) -> set[str] | None:
        """The names reported since the last call (an empty set: nothing changed), or None
        if they cannot be known: look at every file then."""
        if self._fd < 0:
            return None
        if self._wd < 0:
            self._drain()  # events of a watch now gone say nothing
            self._add_watch()
            return None  # what happened before the watch is not known
        names = self._drain()
        if names is None:
            self._add_watch()  # the directory was replaced, or the queue overflowed
        return names

    def _drain(self) -> set[str] | None:
        names: set[str] | None = set()
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return names
            except OSError as e:
                if e.errno == errno.EINTR:
                    continue
                raise
            if not data:
                return names
            offset = 0
            while offset + _EVENT.size <= len(data):
                _, mask, _, size = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size
                name = data[offset : offset + size].rstrip(b"\0")
                offset += size
                if mask & _LOST:
                    if mask & (_IN_IGNORED | _IN_DELETE_SELF | _IN_MOVE_SELF):
                        self._wd = -1
                    names = None
                elif names is not None and name:
                    names.add(os.fsdecode(name))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
