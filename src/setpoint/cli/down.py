"""`setpoint down`: stop the engine that runs on the store, and with it every child.

It finds the engine from the store's engine lease (`setpoint.engine.claim.running_engine`:
its pid), pins it and every running child with a pidfd (children as their state files in the
store's workspace record them, proven as the supervisor proves them before adopting), sends
the engine SIGTERM, as Ctrl-C on `setpoint up` would, and waits until the engine has exited
and every child is gone. The engine stops dependents before their dependencies
(`setpoint.engine.shutdown`). It prints one line per child as it ends (`stopped
Process/web`), then one for the engine.

Objects stay: the store keeps what was declared, and `setpoint up -d` with no manifests runs
it again. (docker compose's `down` removes containers, which are its runtime state; here the
children are the runtime state, and the objects are the setpoint.) `setpoint delete` removes
objects.

With no engine running it says so in one line and exits 0; but if an earlier engine left
children running (it was killed), it runs an engine here that adopts and stops them, in the
same order. An engine on another host is not signalled from here. If the engine has not
finished within `--timeout`, it says what still runs and exits 1; a second `down` is a
second signal, which stops the rest at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

from setpoint.cli.context import Context
from setpoint.clock import SYSTEM_CLOCK
from setpoint.engine import Engine, EngineHolder, EngineSettings, workspace_of
from setpoint.engine.claim import running_engine
from setpoint.errors import Error, NotFound
from setpoint.model.durations import format_duration, parse_duration
from setpoint.workloads import supervisor

DEFAULT_TIMEOUT = 300.0
"""Seconds `down` waits by default: children may take their own grace periods to stop."""


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "down",
        parents=parents,
        description="Stop the engine that `setpoint up` (or `up -d`) runs on this store, as "
        "Ctrl-C would: every child gets its stop signal, dependents before their "
        "dependencies, and SIGKILL after its own grace period. Waits until the engine and "
        "every child are gone and says what it stopped. The objects stay in the store: "
        "`setpoint up -d` runs them again, `setpoint delete` removes them.",
    )
    p.add_argument(
        "--timeout",
        default=format_duration(DEFAULT_TIMEOUT),
        metavar="DURATION",
        help="how long to wait for everything to stop, e.g. 90s or 2m "
        f"(default {format_duration(DEFAULT_TIMEOUT)})",
    )
    p.set_defaults(run=run)


async def run(ctx: Context, args: argparse.Namespace) -> int:
    timeout = parse_duration(args.timeout, "--timeout")
    try:
        async with ctx.open_store() as store:
            holder = await running_engine(store, now=SYSTEM_CLOCK.now())
    except NotFound:
        holder = None
    if holder is None:
        return await _stop_left_behind(ctx, timeout)
    if not holder.on_this_host:
        raise Error(
            f"the engine on {ctx.store_shown} runs on host {holder.host} (pid {holder.pid}): "
            "run `setpoint down` there"
        )
    with _pinned(holder) as engine_fd:
        if engine_fd is None:
            print(f"no engine runs on {ctx.store_shown}: nothing to stop")
            return 0
        with _pinned_children(ctx.store_url) as children:
            try:
                signal.pidfd_send_signal(engine_fd, signal.SIGTERM)
            except PermissionError:
                raise Error(
                    f"the engine on {ctx.store_shown} (pid {holder.pid}) is another user's: "
                    "run `setpoint down` as that user"
                ) from None
            ended = await _wait_ended([*children, engine_fd], timeout, _say(children))
    if len(ended) == len(children) + 1:
        print(f"stopped the engine (pid {holder.pid})")
        return 0
    still = sorted(ref for fd, ref in children.items() if fd not in ended)
    running = f"; still running: {', '.join(still)}" if still else ""
    raise Error(
        f"the engine (pid {holder.pid}) has not stopped within "
        f"{format_duration(timeout)}{running}. "
        "Children get their own grace period to stop; `setpoint down` again stops the rest "
        "at once (SIGKILL)"
    )


@contextlib.contextmanager
def _pinned(holder: EngineHolder) -> Iterator[int | None]:
    """A pidfd of the engine, or None if it ended meanwhile (or its pid is another's now)."""
    try:
        fd = os.pidfd_open(holder.pid)
    except OSError:
        yield None
        return
    try:
        yield fd if holder.runs() else None
    finally:
        os.close(fd)


@contextlib.contextmanager
def _pinned_children(store_url: str) -> Iterator[dict[int, str]]:
    """pidfd -> `Kind/name` of every child running now, as the workspace records them."""
    workspace = workspace_of(store_url)
    pinned: dict[int, str] = {}
    try:
        for kind, directory in (("Process", workspace.state_dir), ("Job", workspace.job_state_dir)):
            for name in _recorded(directory):
                fd = supervisor.pin_recorded(name, directory)
                if fd is not None:
                    namespace, _, obj_name = name.partition("_")
                    shown = obj_name if namespace == "default" else f"{namespace}/{obj_name}"
                    pinned[fd] = f"{kind}/{shown}"
        yield pinned
    finally:
        for fd in pinned:
            os.close(fd)


def _recorded(directory: Path) -> list[str]:
    """The names of the children with a state file in `directory`."""
    try:
        return sorted(p.stem for p in directory.glob("*.json"))
    except OSError:
        return []


async def _stop_left_behind(ctx: Context, within: float) -> int:
    """With no engine running: stop the children an earlier engine left (killed, or lost
    its lease), by running one here that stops at once, in the same order."""
    with _pinned_children(ctx.store_url) as children:
        if not children:
            print(f"no engine runs on {ctx.store_shown}: nothing to stop")
            return 0
        print(f"no engine runs on {ctx.store_shown}; stopping what an earlier one left running")
        settings = EngineSettings(store_url=ctx.store_url, record_timeline=False)
        async with ctx.open_store() as store, Engine(store, settings) as engine:
            engine.stop()
            ending = asyncio.create_task(_wait_ended(list(children), within, _say(children)))
            await engine.run()
            ended = await ending
    if len(ended) < len(children):
        still = sorted(ref for fd, ref in children.items() if fd not in ended)
        raise Error(f"still running after {within:g} s: {', '.join(still)}")
    return 0


def _say(children: dict[int, str]) -> Callable[[int], None]:
    """Print `stopped Kind/name` for a pidfd of `children` that ended."""

    def say(fd: int) -> None:
        if fd in children:
            print(f"stopped {children[fd]}", flush=True)

    return say


async def _wait_ended(pidfds: list[int], within: float, on_end: Callable[[int], None]) -> list[int]:
    """Wait until every pidfd of `pidfds` says its process ended, or `within` seconds
    passed; call `on_end(pidfd)` as each ends; return those that ended, in that order."""
    loop = asyncio.get_running_loop()
    ended: list[int] = []
    all_ended = loop.create_future()

    def readable(fd: int) -> None:
        loop.remove_reader(fd)
        ended.append(fd)
        on_end(fd)
        if len(ended) == len(pidfds) and not all_ended.done():
            all_ended.set_result(None)

    for fd in pidfds:
        loop.add_reader(fd, readable, fd)
    try:
        await asyncio.wait_for(all_ended, within)
    except TimeoutError:
        pass
    finally:
        for fd in pidfds:
            if fd not in ended:
                loop.remove_reader(fd)
    return ended
