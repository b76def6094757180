"""`setpoint up -d`'s two halves: start an engine in the background, and (in that engine)
say when it is up.

The parent (`start_engine`) runs `setpoint up` again as a new session with stdin from
/dev/null and stdout and stderr appended to `.setpoint/engine.log` (mode 0600; one that has
grown past `LOG_KEEP_BYTES` is first moved to `engine.log.1`), and hands it
the write end of a pipe through the hidden option `--ready-fd`. The engine writes what it
applied to that pipe, then, once its controllers run (it holds the store's engine lease, has
applied the manifests and serves its metrics address, if any), `READY`, and closes it
(`Readiness`). The parent waits for the end of the pipe, not a
sleep: `READY` means the engine runs; an end without it means the engine stopped first (it
was refused, or failed), and the tail of the log says why.

Process plumbing only: no store access, no manifests, no decisions about what is applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from setpoint.files import open_private

READY = "READY"
"""The last line an engine writes to its ready pipe once it runs."""
START_TIMEOUT = 120.0
"""Seconds `up -d` waits for the engine to claim its store, apply the manifests and start."""
_HEADER = "--- setpoint up -d, "
"""Starts the line written to the log before each engine started in the background."""
LOG_TAIL_LINES = 20
"""Lines of the engine's log shown when it stopped before it was up."""
LOG_KEEP_BYTES = 10 * 1024 * 1024
"""An engine log this big when an engine starts is moved to `engine.log.1` (replacing the
one there), so the log of engines started again and again stays bounded."""


@dataclass(frozen=True, slots=True)
class Started:
    """An engine started in the background: `pid`, and what it printed about the
    manifests it applied (`applied`, one line each), or `None` in `applied` when it did not
    come up (`failure` then says how)."""

    pid: int
    applied: list[str] | None
    failure: str = ""


async def start_engine(
    argv: Sequence[str],
    log_file: Path,
    *,
    within: float,
    environ: Mapping[str, str] | None = None,
) -> Started:
    """Run `setpoint ARGV --ready-fd N` in the background (see the module docstring), with
    `environ` (default: this process's), and wait up to `within` seconds until it is up or
    has stopped."""
    read_end, write_end = os.pipe()
    try:
        proc = _spawn(argv, log_file, write_end, environ)
    finally:
        os.close(write_end)
    said = await _read_to_end(read_end, within)
    if said is None:
        return Started(
            proc.pid,
            None,
            f"the engine (pid {proc.pid}) is not up after {within:.0f} s; it may still "
            f"come up: see {log_file}",
        )
    lines = said.decode(errors="replace").splitlines()
    if lines[-1:] == [READY]:
        return Started(proc.pid, lines[:-1])
    # It closed the pipe by ending: reap it (it is our child), then show why.
    await asyncio.to_thread(proc.wait)
    return Started(proc.pid, None, log_tail(log_file))


def _spawn(
    argv: Sequence[str], log_file: Path, ready_fd: int, environ: Mapping[str, str] | None
) -> subprocess.Popen[bytes]:
    """`setpoint ARGV --ready-fd READY_FD` in a new session, its output appended to
    `log_file` after a header line (`log_file` moved aside first when it is too big)."""
    with contextlib.suppress(FileNotFoundError):
        if log_file.stat().st_size >= LOG_KEEP_BYTES:
            log_file.replace(log_file.with_name(log_file.name + ".1"))
    log_fd = open_private(log_file, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(log_fd, f"{_HEADER}{time.strftime('%Y-%m-%d %H:%M:%S %z')}\n".encode())
        return subprocess.Popen(
            [sys.executable, "-m", "setpoint", *argv, "--ready-fd", str(ready_fd)],
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            start_new_session=True,
            pass_fds=(ready_fd,),
            env=environ,
        )
    finally:
        os.close(log_fd)


async def _read_to_end(fd: int, within: float) -> bytes | None:
    """Everything written to the pipe `fd` until its writers closed it (which closes `fd`),
    or None after `within` seconds."""
    os.set_blocking(fd, False)
    loop = asyncio.get_running_loop()
    chunks: list[bytes] = []
    ended: asyncio.Future[None] = loop.create_future()

    def on_readable() -> None:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        if data:
            chunks.append(data)
        elif not ended.done():
            ended.set_result(None)

    loop.add_reader(fd, on_readable)
    try:
        await asyncio.wait_for(ended, within)
    except TimeoutError:
        return None
    finally:
        loop.remove_reader(fd)
        os.close(fd)
    return b"".join(chunks)


def log_tail(log_file: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of the engine's log, after the last start's header."""
    try:
        text = log_file.read_text(errors="replace")
    except OSError as exc:
        return f"the engine stopped at once, and its log is unreadable: {exc}"
    text = text.rpartition(_HEADER)[2].partition("\n")[2]
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "the engine stopped at once, saying nothing"


class Readiness:
    """The engine's end of the ready pipe (`--ready-fd`): `applied(line)` for each manifest
    applied, then `ready()` once the engine runs. Without a pipe, both do nothing."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd
        if fd is not None:
            os.set_inheritable(fd, False)  # the engine's children must not hold it open

    def applied(self, line: str) -> None:
        if self._fd is not None:
            os.write(self._fd, (line + "\n").encode())

    def ready(self) -> None:
        if self._fd is not None:
            os.write(self._fd, f"{READY}\n".encode())
            os.close(self._fd)
            self._fd = None
