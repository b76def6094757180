"""`setpoint logs [NAME | KIND/NAME | -l SELECTOR] [-f] [--tail N] [--since D] [--timestamps]`:
print the output of Processes and Jobs from their log files.

A Process's or Job's log is `<log_dir>/<namespace>_<name>.log` and its rotated files
(`.log.1` ...), `log_dir` being where `setpoint up` on the same store puts logs
(`setpoint.engine.workspace_of`). `logs NAME` (or `process/NAME`, `job/NAME`) prints one
log from its files alone (the store is asked only when there is no such log, whether NAME
is a Deployment). `logs deployment/NAME` (or a bare NAME that is a Deployment) prints its
replicas' logs; no NAME, every Process's and Job's of the namespace; `-l SELECTOR`, those
whose labels match. Several logs are
interleaved in the order their lines were written, each line behind its object's name in
a colour of its own (`setpoint.cli.logstream`; `--prefix/--no-prefix` to choose).

`--since 10m` keeps the lines written in the last 10 minutes, `--tail N` the last N of each
log, `--timestamps` prints each line's time (RFC 3339, as kubectl). `-f` then prints what
is appended, reading the files every `FOLLOW_SECONDS` (across rotations), and with
several logs also starts on the objects created meanwhile (a store watch), until Ctrl-C
or SIGTERM (exit 0). Names are checked object names, so no path outside the log
directory is ever read. The child's output is printed byte for byte, not escaped (as
`kubectl logs`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Container, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from setpoint.cli.context import Context, check_name, count, until_signalled
from setpoint.cli.logstream import LineStyle, LogFollower, LogLine, in_time_order, use_colour
from setpoint.engine import workspace_of
from setpoint.errors import Invalid, NotFound
from setpoint.model import Kind, Selector, parse_selector
from setpoint.model.durations import parse_duration
from setpoint.model.wellknown import DEPLOYMENT_LABEL, child_log_file
from setpoint.store.base import Store

FOLLOW_SECONDS = 0.2
"""How often `-f` reads the log files again."""


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "logs",
        parents=parents,
        description="Print the output of a Process or Job run by `setpoint up` on this store, "
        "of a Deployment's replicas, or of every Process and Job (or those -l selects), "
        "interleaved in time order; -f follows.",
    )
    p.add_argument(
        "name",
        nargs="?",
        metavar="NAME",
        help="a Process or Job (also KIND/NAME), or deployment/NAME; none: all of them",
    )
    p.add_argument("-l", "--selector", metavar="SELECTOR", help="only objects with these labels")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new output")
    p.add_argument("--tail", type=count, metavar="N", help="only the last N lines of each log")
    p.add_argument(
        "--since", metavar="DURATION", help="only lines written in the last DURATION, e.g. 10m"
    )
    p.add_argument(
        "--timestamps", action="store_true", help="start each line with its time (RFC 3339)"
    )
    p.add_argument(
        "--prefix",
        action=argparse.BooleanOptionalAction,
        help="start each line with its object's name (default: when several logs are shown)",
    )
    p.set_defaults(run=run)


@dataclass(frozen=True)
class _Objects:
    """The Processes and Jobs of a namespace that `selector` matches (every one if empty)."""

    kinds: tuple[Kind, ...]
    namespace: str
    selector: Selector


async def run(ctx: Context, args: argparse.Namespace) -> int:
    since = None
    if args.since is not None:
        since = time.time_ns() - round(parse_duration(args.since, "--since") * 1e9)
    log_dir = workspace_of(ctx.store_url).log_dir
    target = await _target(ctx, args, log_dir)
    style = LineStyle(
        prefix=args.prefix if args.prefix is not None else isinstance(target, _Objects),
        colour=use_colour(sys.stdout),
        timestamps=args.timestamps,
    )
    out = sys.stdout.buffer
    if isinstance(target, LogFollower):
        if not args.follow:
            _print(target.backlog(tail=args.tail, since=since), style, out)
            return 0

        async def show_and_follow() -> int:
            _print(target.backlog(tail=args.tail, since=since, final=False), style, out)
            return await _follow({target.name: target}, style, out, None)

        # The signal handlers go in first: a signal right after the first lines ends it cleanly.
        return await until_signalled(show_and_follow())
    async with ctx.open_store() as store:
        if not args.follow:
            if not await _show(store, target, log_dir, args.tail, since, style, out, final=True):
                print(f"No resources found in {ctx.namespace} namespace.", file=sys.stderr)
            return 0

        async def show_all_and_follow() -> int:
            """`_show`, then follow those logs and the logs of objects made from then on."""
            started = time.time_ns()  # objects found later were made after it: lines before are old
            revision = await store.revision()  # before the lists: what changes after them is seen
            followers = await _show(
                store, target, log_dir, args.tail, since, style, out, final=False
            )
            found: asyncio.Queue[str] = asyncio.Queue()
            watches = [
                asyncio.create_task(_watch(store, target, kind, revision, found))
                for kind in target.kinds
            ]
            try:
                new = _New(found, log_dir, target.namespace, max(since or 0, started))
                return await _follow(followers, style, out, new)
            finally:
                for watch in watches:
                    watch.cancel()
                await asyncio.gather(*watches, return_exceptions=True)

        return await until_signalled(show_all_and_follow())


async def _show(
    store: Store,
    target: _Objects,
    log_dir: Path,
    tail: int | None,
    since: int | None,
    style: LineStyle,
    out: BinaryIO,
    *,
    final: bool,
) -> dict[str, LogFollower]:
    """Print the logs of the objects, interleaved; return a follower of each, by name."""
    names = await _names(store, target)
    followers = {n: LogFollower(log_dir, target.namespace, n) for n in sorted(names)}
    style.fit(followers)
    backlogs = [f.backlog(tail=tail, since=since, final=final) for f in followers.values()]
    _print(in_time_order(backlogs), style, out)
    return followers


async def _target(ctx: Context, args: argparse.Namespace, log_dir: Path) -> LogFollower | _Objects:
    """One log (a named Process or Job), or the objects whose logs to print."""
    selector = parse_selector(args.selector)
    if args.name is None:
        return _Objects(_logged_kinds(ctx), ctx.namespace, selector)
    if selector.requirements:
        raise Invalid("give a NAME or a selector (-l), not both")
    kind_name, _, name = args.name.rpartition("/")
    if not name or "/" in kind_name:
        raise Invalid(f"{args.name!r}: want NAME or KIND/NAME")
    check_name(name)
    kind = ctx.registry.resolve(kind_name) if kind_name else None
    if kind is not None and kind == _deployment_kind(ctx):
        if not await _is_deployment(ctx, name):
            raise NotFound(f'Deployment "{name}" not found in namespace "{ctx.namespace}"')
        return _replicas_of(ctx, name)
    if kind is not None and kind not in _logged_kinds(ctx):
        raise Invalid(f"{args.name!r}: only Processes, Jobs and Deployments have logs")
    one = LogFollower(log_dir, ctx.namespace, name)
    if one.exists():
        return one
    if kind is None and await _is_deployment(ctx, name):
        return _replicas_of(ctx, name)
    current = log_dir / child_log_file(ctx.namespace, name)
    raise NotFound(
        f'no log for "{name}" in namespace "{ctx.namespace}" ({current} does not exist; '
        "logs exist once `setpoint up` has started it)"
    )


def _logged_kinds(ctx: Context) -> tuple[Kind, ...]:
    return tuple(ctx.registry.resolve(k) for k in ("processes.setpoint.dev", "jobs.setpoint.dev"))


def _deployment_kind(ctx: Context) -> Kind:
    return ctx.registry.resolve("deployments.setpoint.dev")


def _replicas_of(ctx: Context, deployment: str) -> _Objects:
    process = ctx.registry.resolve("processes.setpoint.dev")
    return _Objects((process,), ctx.namespace, parse_selector(f"{DEPLOYMENT_LABEL}={deployment}"))


async def _is_deployment(ctx: Context, name: str) -> bool:
    """Whether a Deployment `name` exists (False when there is no store to ask)."""
    try:
        ctx.require_store()
    except NotFound:
        return False
    kind = _deployment_kind(ctx)
    async with ctx.open_store() as store:
        try:
            await store.get(kind.api_version, kind.kind, name, ctx.namespace)
        except NotFound:
            return False
    return True


async def _names(store: Store, objects: _Objects) -> set[str]:
    """The names of the objects."""
    names: set[str] = set()
    for kind in objects.kinds:
        items, _ = await store.list(
            kind.api_version,
            kind.kind,
            namespace=objects.namespace,
            label_selector=objects.selector,
        )
        names.update(str(o["metadata"]["name"]) for o in items)
    return names


async def _watch(
    store: Store, objects: _Objects, kind: Kind, revision: int, found: asyncio.Queue[str]
) -> None:
    """Put the name of every object of `kind` created (or newly matching) after `revision`."""
    changes = store.watch(
        kind.api_version,
        kind.kind,
        namespace=objects.namespace,
        since=revision,
        label_selector=objects.selector,
    )
    async for change in changes:
        if change.type != "DELETED":
            found.put_nowait(str(change.object["metadata"]["name"]))


@dataclass(frozen=True)
class _New:
    """Where `_follow` learns of objects to follow from now on, and how to read their logs:
    the lines written at or after `since` (an earlier object of the same name wrote those
    before)."""

    names: asyncio.Queue[str]
    log_dir: Path
    namespace: str
    since: int

    def followers(self, known: Container[str]) -> list[LogFollower]:
        out: list[LogFollower] = []
        while not self.names.empty():
            name = self.names.get_nowait()
            if name not in known and all(f.name != name for f in out):
                out.append(LogFollower(self.log_dir, self.namespace, name))
        return out


async def _follow(
    followers: dict[str, LogFollower], style: LineStyle, out: BinaryIO, new: _New | None
) -> int:
    """Print what is appended to every log, in time order within each look, until
    cancelled; with `new`, also the logs of the objects it names."""
    try:
        while True:
            await asyncio.sleep(FOLLOW_SECONDS)
            lines: list[LogLine] = []
            if new is not None:
                for follower in new.followers(followers):
                    followers[follower.name] = follower
                    style.fit([follower.name])
                    lines += follower.backlog(since=new.since, final=False)
            for follower in followers.values():
                lines += follower.poll()
            lines.sort(key=lambda line: line.at)
            _print(lines, style, out)
    finally:
        for follower in followers.values():
            follower.close()


def _print(lines: Iterable[LogLine], style: LineStyle, out: BinaryIO) -> None:
    for line in lines:
        out.write(style.render(line))
    out.flush()
