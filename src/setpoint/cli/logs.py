"""`setpoint logs NAME [-f] [--tail N]`: print a Process's (or Job's) output from its log file.

The file is `<log_dir>/<namespace>_<name>.log`, `log_dir` being where `setpoint up`
on the same store puts logs (`setpoint.engine.workspace_of`). Without `--tail` the
rotated files (`.log.3`, `.log.2`, `.log.1`) come first, oldest first; `--tail N`
prints the last N lines of them all. `-f` then follows the file, reading it every
0.2 s and reopening it when it is rotated, until Ctrl-C or SIGTERM (exit 0). The name
and namespace are checked object names, so no path outside the log directory is ever
read. Reads files only: no store, no processes. The output is the child's, byte for
byte (as `kubectl logs`): it is not escaped.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import BinaryIO

from setpoint.cli.context import Context, check_name, count, until_signalled
from setpoint.engine import workspace_of
from setpoint.errors import Invalid, NotFound
from setpoint.model.wellknown import child_log_file

FOLLOW_SECONDS = 0.2
"""How often `-f` reads the log file again."""


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "logs",
        parents=parents,
        help="print the output of a Process or Job",
        description="Print the output of a Process or Job run by `setpoint up` on this "
        "store: its log file, rotated files first; -f follows it.",
    )
    p.add_argument("name", metavar="NAME", help="the Process or Job (also KIND/NAME)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new output")
    p.add_argument("--tail", type=count, metavar="N", help="only the last N lines")
    p.set_defaults(run=run)


def log_files(log_dir: Path, namespace: str, name: str) -> list[Path]:
    """The existing files of one log, oldest first (`.log.N` ... `.log.1`, `.log`).

    `namespace` and `name` must be checked names (no `/`, no `..`): they are part of a
    file name. Files are matched by exact name, never by a pattern."""
    current = log_dir / child_log_file(namespace, name)
    rotated: list[tuple[int, Path]] = []
    prefix = current.name + "."
    entries = sorted(log_dir.iterdir()) if log_dir.is_dir() else []
    for path in entries:
        suffix = path.name[len(prefix) :]
        if path.name.startswith(prefix) and suffix.isdigit():
            rotated.append((int(suffix), path))
    files = [p for _, p in sorted(rotated, reverse=True)]
    return [*files, current] if current.is_file() else files


def last_lines(chunks: list[bytes], count: int) -> bytes:
    """The last `count` lines of the concatenation of `chunks` (pure)."""
    if count <= 0:
        return b""
    data = b"".join(chunks)
    lines = data.splitlines(keepends=True)
    return b"".join(lines[-count:])


async def run(ctx: Context, args: argparse.Namespace) -> int:
    kind, _, name = args.name.rpartition("/")
    if not name or "/" in kind:
        raise Invalid(f"{args.name!r}: want NAME or KIND/NAME")
    check_name(name)
    if args.tail is not None and args.tail < 0:
        raise Invalid("--tail: want a number of lines, 0 or more")
    log_dir = workspace_of(ctx.store_url).log_dir
    files = log_files(log_dir, ctx.namespace, name)
    current = log_dir / child_log_file(ctx.namespace, name)
    if not files:
        raise NotFound(
            f'no log for "{name}" in namespace "{ctx.namespace}" ({current} does not exist; '
            "logs exist once `setpoint up` has started it)"
        )
    out = sys.stdout.buffer
    if not args.follow:
        _print(files, args.tail, out)
        return 0
    # The signal handlers go in first: a signal right after the first lines still ends it cleanly.
    return await until_signalled(_print_and_follow(files, args.tail, current, out))


def _print(files: list[Path], tail: int | None, out: BinaryIO) -> None:
    if tail is not None:
        out.write(last_lines(_tail_chunks(files, tail), tail))
    else:
        for path in files:
            out.write(path.read_bytes())
    out.flush()


async def _print_and_follow(
    files: list[Path], tail: int | None, current: Path, out: BinaryIO
) -> int:
    """Print, then follow from exactly where the printing stopped: the current file is
    opened first and read through that handle, so a line appended meanwhile is not lost."""
    f = _open(current)
    head = f.read() if f is not None else b""
    older = [path for path in files if path != current]
    if tail is None:
        for path in older:
            out.write(path.read_bytes())
        out.write(head)
    else:
        out.write(last_lines([*_tail_chunks(older, tail), head], tail))
    out.flush()
    return await _follow(current, out, f)


def _tail_chunks(files: list[Path], count: int) -> list[bytes]:
    """Enough of `files` (newest last) to hold their last `count` lines."""
    chunks: list[bytes] = []
    lines = 0
    for path in reversed(files):
        data = path.read_bytes()
        chunks.insert(0, data)
        lines += data.count(b"\n")
        if lines > count:
            break
    return chunks


async def _follow(path: Path, out: BinaryIO, f: BinaryIO | None) -> int:
    """Print what is appended to `path` (read through `f`, if open) until cancelled, across
    rotations."""
    try:
        while True:
            await asyncio.sleep(FOLLOW_SECONDS)
            if f is not None:
                _copy(f, out)
                if _replaced(f, path):
                    f.close()
                    f = None
            if f is None:
                f = _open(path)
                if f is not None:
                    _copy(f, out)
    finally:
        if f is not None:
            f.close()


def _open(path: Path) -> BinaryIO | None:
    try:
        return open(path, "rb")  # closed by _follow
    except FileNotFoundError:
        return None


def _copy(f: BinaryIO, out: BinaryIO) -> None:
    if os.fstat(f.fileno()).st_size < f.tell():
        f.seek(0)  # truncated: start again
    data = f.read()
    if data:
        out.write(data)
        out.flush()


def _replaced(f: BinaryIO, path: Path) -> bool:
    """Whether `path` is no longer the file `f` reads (rotated away)."""
    try:
        return os.stat(path).st_ino != os.fstat(f.fileno()).st_ino
    except FileNotFoundError:
        return True
