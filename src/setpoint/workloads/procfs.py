"""What the supervisor reads of processes and keeps of its children: `/proc` (a process's
stat, environment and marker; the live processes; the members of a process group) and the
state files and FIFOs in a state directory, written atomically. Decides nothing
(`setpoint.workloads.supervisor` does).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any, NamedTuple

from setpoint.errors import Invalid
from setpoint.files import (
    write_private,
)

MARKER_VARIABLE = "SETPOINT_MARKER"
"""The environment variable whose value marks a child (and its descendants) as ours."""
_KTHREADD = 2
"""The parent of every kernel thread (whose environment is empty: not worth a read)."""


class _Stat(NamedTuple):
    state: str
    ppid: int
    pgid: int
    sid: int
    starttime: int
    """In clock ticks since boot."""


def _read_proc(pid: int, name: str) -> bytes:
    """/proc/PID/NAME, whole (raw `os` calls: a scan of /proc reads hundreds of these)."""
    fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _proc_stat(pid: int) -> _Stat | None:
    """What /proc/PID/stat says of `pid`, or None if it is gone."""
    try:
        raw = _read_proc(pid, "stat")
    except (FileNotFoundError, ProcessLookupError):
        return None
    if not raw:
        return None
    # comm (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rindex(b")") + 2 :].split()
    # fields[0] is field 3 (state); field N is fields[N - 3].
    state, ppid, pgid, sid, starttime = fields[0], fields[1], fields[2], fields[3], fields[22 - 3]
    return _Stat(state.decode(), int(ppid), int(pgid), int(sid), int(starttime))


def _environ(pid: int) -> list[bytes] | None:
    """The entries of /proc/PID/environ; None if it cannot be read."""
    try:
        return _read_proc(pid, "environ").split(b"\0")
    except PermissionError:
        return None
    except (FileNotFoundError, ProcessLookupError):
        return []


def _environ_has(pid: int, entry: str) -> bool | None:
    """Whether /proc/PID/environ holds `entry`; None if it cannot be read."""
    environ = _environ(pid)
    return None if environ is None else entry.encode() in environ


def _marker_of(pid: int) -> str | None:
    """The `SETPOINT_MARKER` in `pid`'s environment, if it has one (and it can be read)."""
    prefix = f"{MARKER_VARIABLE}=".encode()
    for entry in _environ(pid) or []:
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode(errors="replace")
    return None


def _live_processes() -> dict[int, _Stat]:
    """Every process that runs (not a zombie) but this one, by pid."""
    me = os.getpid()
    found: dict[int, _Stat] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            st = _proc_stat(int(entry))
            if st is not None and st.state not in ("Z", "X"):
                found[int(entry)] = st
    return found


def _members(pgid: int, marker: str) -> dict[int, _Stat]:
    """What runs of one child: its process group, every process carrying its marker (one
    that escaped the group with `setsid`), and their descendants (one that also cleared
    its environment, while its parent lives).

    Only a process that may have left its parent's session (a session leader, or one whose
    parent is gone or in another session) can carry the marker outside the group without
    descending from a member: only those environments are read."""
    processes = _live_processes()
    entry = f"{MARKER_VARIABLE}={marker}"

    def may_carry_marker(pid: int, st: _Stat) -> bool:
        parent = processes.get(st.ppid)
        if st.ppid == _KTHREADD or (parent is not None and parent.sid == st.sid != pid):
            return False
        return _environ_has(pid, entry) is True

    members = {
        pid: st for pid, st in processes.items() if st.pgid == pgid or may_carry_marker(pid, st)
    }
    grew = True
    while grew:
        descendants = {
            pid: st for pid, st in processes.items() if st.ppid in members and pid not in members
        }
        members.update(descendants)
        grew = bool(descendants)
    return members


def _state_path(name: str, state_dir: Path) -> Path:
    return Path(state_dir) / f"{name}.json"


def _fifo_path(name: str, state_dir: Path) -> Path:
    return Path(state_dir) / f"{name}.out"


def _write_atomically(path: Path, data: dict[str, Any]) -> None:
    write_private(path, (json.dumps(data, sort_keys=True) + "\n").encode())


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


async def _until_readable(fd: int) -> None:
    """Return once `fd` (a pidfd: at its process's exit) turns readable."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def on_readable() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, on_readable)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
