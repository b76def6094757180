"""`setpoint up [PATH...]`: the main job. Runs the engine (`setpoint.engine`: every built-in
controller and the timeline recorder) on the local store, applies the manifests and shows
them converging until stopped. With no PATH it runs the working directory's
process-compose file (`process-compose.yaml` and the other names process-compose looks
for, with its override: `setpoint.cli.load.compose_project_here`), as process-compose does
with no `-f`; with none there, what the store already declares. A NAME among the
arguments (no file of that name: `up web`, `up app.yaml web`) applies only the objects of
that name and what they depend on (`spec.dependsOn`, transitively), as `process-compose up
web` starts a subset; what the store already declares runs as ever.

The store is the CLI's (by default `sqlite:///.setpoint/state.db`), so `get`,
`describe`, `events`, `logs`, `delete` and `apply` run from the same directory reach
it with no flags. Children's state files and logs go beside the SQLite file
(`setpoint.engine.workspace_of`), in directories of mode 0700.

One engine per store: if another `up` already runs on the store, this one prints one line
naming it (`error: an engine (pid 1234 on host x) already runs on ...; follow it with
`setpoint logs -f` ..., stop it with `setpoint down``) and exits 1 before applying anything
or touching a child: the engine's claim comes first, so the manifests are applied by the
engine that runs them, never half by one that is then refused.

`-d` (detach) starts the engine in the background instead (`setpoint.cli.background`: a new
session, its output appended to `.setpoint/engine.log`), waits until it holds the store, has
applied the manifests and runs its controllers, prints its pid and exits; `setpoint down`
stops it.
It also serves the Kubernetes-compatible API (`setpoint.api`) on 127.0.0.1 (a free port,
or `--api-port`) with a new random admin token, and writes the workspace's `kubeconfig`
(mode 0600), so `KUBECONFIG=.setpoint/kubeconfig kubectl get processes` works with no
other flag while the engine runs; it serves loopback Host names only (`--accept-hosts`
adds others, as `serve`).
`--ha leader|shard --identity NAME` runs this engine as one of several sharing the store
(PostgreSQL or etcd across hosts, or one SQLite file on one host) instead of refusing a
second: `leader` runs each controller in one engine at a time, the others standing by;
`shard` splits every controller's objects among the live engines by consistent hashing
(`setpoint.runtime.coordination`). NAME, unique per engine and the same across its
restarts, names its leases and its workspace (`run/members/NAME/`). Such engines run in the
foreground (under a service manager): no `-d`, and `setpoint down` does not stop them.

`--metrics-address HOST:PORT` serves `/metrics`, `/healthz` and `/readyz`
(`setpoint.runtime.health`); a bare PORT listens on 127.0.0.1. Those need no token: a
HOST beyond loopback (`:PORT`, `0.0.0.0:PORT`) is allowed, with a warning line on stderr
saying what it opens.

Stopping: the first SIGINT or SIGTERM stops the engine gracefully (in-flight reconciles
finish, then every child gets its `stopSignal`, SIGTERM by default, and SIGKILL after its
own `terminationGracePeriodSeconds`), and `up` exits 0. A second one stops the rest at once
(SIGKILL), as docker compose does. If `up` dies without stopping (SIGKILL, a crash) the
children keep running and the next `up` re-adopts them.

Ending by itself, as process-compose does: when a Process or Job annotated
`setpoint.dev/exit-on-end` ends, or one annotated `setpoint.dev/exit-on-failure` fails
(`setpoint.cli.run_end`; the process-compose translator writes them), `up` prints one line
naming it, stops everything as on SIGTERM and exits with that child's exit code (0 for a
success). And when `up` applied a process-compose project (objects annotated
`setpoint.dev/compose-project`), it ends as process-compose ends its run: once every one of
them has ended or been skipped (`setpoint.cli.run_end.project_end`), with exit code 0, unless
`--keep-project`; a project member that had ended in an earlier run is run again (a
restart request), as process-compose runs every process of the file on each `up`.

This module is the terminal's part only: manifests, the live view, signals and messages.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import re
import signal
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

from setpoint.api.auth import is_loopback
from setpoint.api.serving import ServeOptions, serve_api
from setpoint.cli.apply import (
    apply_object,
    check_manifests,
    local_actor,
    refuse_dependency_cycles,
)
from setpoint.cli.background import START_TIMEOUT, Readiness, start_engine
from setpoint.cli.context import Context
from setpoint.cli.dashboard import dashboard_line
from setpoint.cli.live import StatusBoard, view_for
from setpoint.cli.load import (
    MANIFEST_SUFFIXES,
    add_compose_namespace_option,
    compose_project_here,
    read_manifests,
)
from setpoint.cli.render import object_ref
from setpoint.cli.restart import request_restart
from setpoint.cli.run_end import FINISHED, RunEnd, project_end, run_end
from setpoint.cli.serve import accept_hosts, add_accept_hosts, workspace_base
from setpoint.clock import SYSTEM_CLOCK
from setpoint.control.kinds import AUTOSCALER, THERMOSTAT
from setpoint.engine import Engine, EngineSettings, workspace_of
from setpoint.engine.claim import engine_running, running_engine
from setpoint.errors import Conflict, Invalid, NotFound
from setpoint.model import Kind, Object, Registry
from setpoint.model.dependency_graph import Node, dependencies_of, node_of
from setpoint.model.wellknown import COMPOSE_PROJECT
from setpoint.runtime.coordination import Coordination
from setpoint.runtime.health import split_address
from setpoint.runtime.informer import InformerEvent
from setpoint.runtime.leases import micro_time
from setpoint.runtime.manager import ManagerOptions
from setpoint.runtime.run_as import UserPolicy
from setpoint.store import Store
from setpoint.tasks import cancel_and_wait
from setpoint.workloads.kinds import DEPLOYMENT, JOB, PROCESS, SERVICE

SHOWN = (DEPLOYMENT, PROCESS, JOB, SERVICE, THERMOSTAT, AUTOSCALER)
"""The kinds the live view shows."""


def add_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    p = verbs.add_parser(
        "up",
        parents=parents,
        description="Apply the manifests in each PATH (a file or a directory of them, or "
        "process-compose files; none: the process-compose.yaml of this directory, with its "
        "process-compose.override.yaml, as process-compose finds it, else what the store "
        "already declares), run every built-in controller in this process and "
        "show each object's readiness until Ctrl-C or SIGTERM, which stop every child cleanly, "
        "dependents first (a second one kills them at once). A Process or Job marked "
        "setpoint.dev/exit-on-end (process-compose's exit_on_end) or exit-on-failure "
        "ends it the same way, with that child's exit code; a process-compose project ends "
        "once every process has ended, as with process-compose (--keep-project: not). "
        "Running it again adopts children that still run; only one engine runs on a store "
        "at a time.",
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH|NAME",
        help="a manifest file or a directory of them; a NAME (no such file): start only "
        "that object and what it depends on, from the files given or this directory's "
        "process-compose.yaml",
    )
    p.add_argument(
        "-d",
        "--detach",
        action="store_true",
        help="run the engine in the background (its output goes to .setpoint/engine.log); "
        "stop it with `setpoint down`",
    )
    p.add_argument(
        "--metrics-address",
        metavar="HOST:PORT",
        help="serve /metrics (Prometheus), /healthz and /readyz there (a bare PORT: on "
        "127.0.0.1; HOST 0.0.0.0 or an empty HOST listens on every interface, with no token: "
        "a warning on stderr says so)",
    )
    p.add_argument(
        "--keep-project",
        action="store_true",
        help="keep running when every process of a process-compose file has ended (as "
        "process-compose's --keep-project); setpoint's own manifests always do",
    )
    add_compose_namespace_option(p)
    p.add_argument(
        "--logs",
        action="store_true",
        help="show the children's output too: the newest lines under the live view "
        "(each after its object's name), or as lines of their own when not on a terminal",
    )
    p.add_argument(
        "--ha",
        choices=[Coordination.LEADER.value, Coordination.SHARD.value],
        help="share the store with other engines started with the same --ha: leader (one "
        "engine runs each controller, the others stand by) or shard (each object is "
        "reconciled by one live engine); needs --identity",
    )
    p.add_argument(
        "--identity",
        metavar="NAME",
        help="with --ha: this engine's name, unique among them and kept across restarts "
        "(letters, digits, '.', '_', '-')",
    )
    p.add_argument(
        "--api-port",
        type=int,
        default=0,
        metavar="PORT",
        help="serve the Kubernetes-compatible API (kubectl) on 127.0.0.1:PORT (default: a "
        "free port), with a new token written to the workspace's kubeconfig",
    )
    add_accept_hosts(p)
    p.add_argument(
        "--allow-user",
        action="append",
        metavar="NAME",
        dest="allow_users",
        help="(repeatable) a user Processes, Jobs and Deployments may run as (`user:`); "
        "when given, only the users listed, root included (a spec without `user:` on an "
        "engine run as root), default: the engine's own user, and any user when run as root",
    )
    p.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)  # set by `up -d`
    p.set_defaults(run=run)


def metrics_address(given: str | None) -> str | None:
    """`--metrics-address` as HOST:PORT (a bare PORT is on loopback), or `Invalid` naming
    the option."""
    if given is None:
        return None
    address = f"127.0.0.1:{given}" if given.isdigit() else given
    try:
        split_address(address)
    except ValueError as exc:
        raise Invalid(f"--metrics-address: {exc}") from None
    return address


def metrics_warning(address: str) -> str | None:
    """The warning `up` prints when `--metrics-address` listens beyond loopback (None on
    loopback): those endpoints need no token."""
    host, _ = split_address(address)
    if is_loopback(host):
        return None
    where = "every interface" if host in ("", "0.0.0.0", "::") else host
    return (
        f"warning: --metrics-address {address} serves /metrics, /healthz and /readyz on "
        f"{where} with no token: anyone who can reach it reads the engine's metrics; "
        "give 127.0.0.1:PORT to keep them on this machine"
    )


def coordination(ha: str | None, identity: str | None, *, detach: bool) -> ManagerOptions:
    """The manager options `--ha` and `--identity` ask for (`Invalid` naming the option)."""
    if ha is None:
        if identity is not None:
            raise Invalid("--identity names an engine among several: give --ha leader|shard")
        return ManagerOptions()
    if detach:
        raise Invalid("--ha engines run in the foreground (under a service manager): drop -d")
    if not identity or not _IDENTITY.fullmatch(identity):
        raise Invalid(
            f"--identity: want a name of letters, digits, '.', '_' or '-' (got {identity!r})"
        )
    return ManagerOptions(coordination=Coordination(ha), identity=identity)


_IDENTITY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


async def run(ctx: Context, args: argparse.Namespace) -> int:
    readiness = Readiness(args.ready_fd)
    address = metrics_address(args.metrics_address)
    warning = metrics_warning(address) if address is not None else None
    if warning is not None:
        print(warning, file=sys.stderr, flush=True)
    options = replace(
        coordination(args.ha, args.identity, detach=args.detach), health_address=address
    )
    UserPolicy.of(_allowed(args))  # refused here, not in the log of an engine sent away
    args.paths, args.names = paths_and_names(args.paths)
    if not args.paths:
        args.paths = compose_project_here()
    if args.names and not args.paths:
        raise Invalid(
            f"up {' '.join(args.names)}: no manifests to find them in: give the files "
            "(setpoint up FILE NAME...), or run it beside a process-compose.yaml"
        )
    if args.detach and "-" in args.paths:
        raise Invalid("up -d reads no manifests from stdin (`-`): give files or directories")
    objects = _checked_objects(ctx, args.paths, args.compose_namespaces)
    if objects is None:
        return 1
    if args.names:
        objects = with_dependencies(ctx.registry, objects, args.names)
    async with ctx.open_store(create=bool(args.paths)) as store:
        await refuse_dependency_cycles(store, [obj for _, obj in objects])
        if args.detach:
            holder = await running_engine(store, now=SYSTEM_CLOCK.now())
            if holder is not None:
                raise engine_running(ctx.store_url, str(holder))
        else:
            settings = EngineSettings(
                store_url=ctx.store_url, manager=options, allowed_users=_allowed(args)
            )
            async with (
                Engine(store, settings) as engine,
                serve_api(store, _api_options(ctx, args)) as api,
            ):
                print(f"serving the API on {api.url} (KUBECONFIG={_api_kubeconfig(ctx)})")
                # an engine `up -d` started writes to its log: no login code there
                print(dashboard_line(api, to_log=args.ready_fd is not None), flush=True)
                return await _run_engine(
                    engine, objects, readiness, logs=args.logs, keep_project=args.keep_project
                )
    return await _detach(ctx, args)


_NAME = re.compile(r"[A-Za-z0-9_][-A-Za-z0-9_.]*")


def paths_and_names(given: list[str]) -> tuple[list[str], list[str]]:
    """`up`'s arguments split: a PATH is `-`, something on disk, or has a `/` or a manifest
    suffix; the rest, when it looks like a name, is a NAME to start (with what it depends
    on)."""
    paths, names = [], []
    for arg in given:
        on_disk = arg == "-" or os.path.exists(arg) or "/" in arg
        if on_disk or arg.endswith(MANIFEST_SUFFIXES) or not _NAME.fullmatch(arg):
            paths.append(arg)
        else:
            names.append(arg)
    return paths, names


def with_dependencies(
    registry: Registry, objects: list[tuple[Kind, Object]], names: list[str]
) -> list[tuple[Kind, Object]]:
    """The objects named `names` and those they depend on (`spec.dependsOn`, transitively)
    among `objects`, in their order; `Invalid` naming a name no object has. A name is an
    object's, or a process-compose process's as the file spells it (`PC_PROC_NAME`: every
    replica of `worker`, `db_init` for `db-init`)."""
    by_node = {node_of(kind, obj): (kind, obj) for kind, obj in objects}
    wanted: set[Node] = set()
    for name in names:
        found = [
            node for node, (_, obj) in by_node.items() if name in (node[2], _compose_name(obj))
        ]
        if not found:
            raise Invalid(f"up {name}: no object of that name in the manifests given")
        wanted.update(found)
    unread = list(wanted)
    while unread:
        kind, obj = by_node[unread.pop()]
        for target in dependencies_of(registry, kind, obj):
            if target in by_node and target not in wanted:
                wanted.add(target)
                unread.append(target)
    return [(kind, obj) for node, (kind, obj) in by_node.items() if node in wanted]


def _compose_name(obj: Object) -> str | None:
    """The process-compose name an object was translated from (its `PC_PROC_NAME`)."""
    env = (obj.get("spec") or {}).get("env")
    name = env.get("PC_PROC_NAME") if isinstance(env, dict) else None
    return name if isinstance(name, str) else None


def _api_options(ctx: Context, args: argparse.Namespace) -> ServeOptions:
    """The API `up` serves: loopback, one new admin token, the kubeconfig in the workspace."""
    port = args.api_port
    if not 0 <= port <= 65535:
        raise Invalid(f"--api-port {port}: want 0 to 65535")
    base = workspace_base(ctx)
    return ServeOptions(
        port=port,
        kubeconfig=base / "kubeconfig",
        tls_directory=base / "tls",
        accept_hosts=accept_hosts(args.accept_hosts),
    )


def _api_kubeconfig(ctx: Context) -> str:
    """The kubeconfig `up` writes, as the user would type it (relative when below here)."""
    return _shown_path(workspace_base(ctx) / "kubeconfig")


def _checked_objects(
    ctx: Context, paths: list[str], compose_namespaces: list[str]
) -> list[tuple[Kind, Object]] | None:
    """The objects in the manifests at `paths`, validated; None (each problem printed) if
    any is not valid."""
    if not paths:
        return []
    manifests = read_manifests(paths, compose_namespaces=compose_namespaces)
    if not manifests:
        raise Invalid(f"{' '.join(paths)}: no manifests (*.yaml, *.yml, *.json) found")
    checked, problems = check_manifests(
        manifests, ctx.registry, ctx.namespace, ctx.namespace_explicit
    )
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return None if problems else [(kind, obj) for _, kind, obj in checked]


async def _detach(ctx: Context, args: argparse.Namespace) -> int:
    """Start this `up` again in the background (`setpoint.cli.background`) and report."""
    workspace = workspace_of(ctx.store_url)
    workspace.make_private()
    log_file = workspace.engine_log
    environ = {**os.environ, "SETPOINT_STORE": ctx.store_url}  # not in argv: a password
    started = await start_engine(  # would show in every user's `ps`
        _engine_argv(ctx, args), log_file, within=START_TIMEOUT, environ=environ
    )
    shown = _shown_path(log_file)
    if started.applied is None:
        print(f"error: the engine did not start; from {shown}:", file=sys.stderr)
        print(started.failure, file=sys.stderr)
        return 1
    for line in started.applied:
        print(line)
    print(
        f"engine running in the background (pid {started.pid}, log {shown}): follow it "
        "with `setpoint logs -f`, stop it with `setpoint down`"
    )
    return 0


def _engine_argv(ctx: Context, args: argparse.Namespace) -> list[str]:
    """The arguments of the `setpoint up` that `up -d` starts in the background: the same
    kinds, namespace, manifests and options (the store goes in its environment)."""
    argv = []
    for kinds in getattr(args, "kinds", []) + getattr(args, "kinds_after", []):
        argv += ["--kinds", kinds]
    if ctx.namespace_explicit:
        argv += ["--namespace", ctx.namespace]
    argv += ["up", *(os.path.abspath(p) for p in args.paths), *args.names]
    if args.keep_project:
        argv.append("--keep-project")
    for namespace in args.compose_namespaces:
        argv += ["--compose-namespace", namespace]
    if args.metrics_address is not None:
        argv += ["--metrics-address", args.metrics_address]
    if args.api_port:
        argv += ["--api-port", str(args.api_port)]
    for hosts in args.accept_hosts:
        argv += ["--accept-hosts", hosts]
    for user in args.allow_users or ():
        argv += ["--allow-user", user]
    return argv


def _allowed(args: argparse.Namespace) -> frozenset[str] | None:
    """`--allow-user` as `EngineSettings.allowed_users` (None when not given)."""
    return None if args.allow_users is None else frozenset(args.allow_users)


def _shown_path(path: Path) -> str:
    """`path` relative to the working directory when it is below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


async def _run_engine(
    engine: Engine,
    objects: list[tuple[Kind, Object]],
    readiness: Readiness,
    *,
    logs: bool,
    keep_project: bool,
) -> int:
    board = StatusBoard(SHOWN)
    for kind in SHOWN:
        engine.manager.informer(kind).add_handler(board.on_change)
    signalled = _on_signals(engine)
    project = [] if keep_project else _project_members(objects)
    now = SYSTEM_CLOCK.now()
    ended = _on_run_end(engine, project, since=math.floor(now * 1000) / 1000)
    try:
        actor = local_actor()
        for kind, obj in objects:
            try:
                result = await apply_object(engine.store, obj, actor=actor)
            except Conflict as exc:  # being deleted: the engine finishes that first
                print(f"error: {exc}", file=sys.stderr, flush=True)
                continue
            line = f"{object_ref(kind, obj['metadata']['name'])} {result}"
            print(line, flush=True)
            readiness.applied(line)
        await _run_ended_again(engine.store, _project_members(objects), micro_time(now))
        log_dir = engine.workspace.log_dir if logs else None
        tasks = [
            asyncio.create_task(view_for(board, log_dir=log_dir).run()),
            asyncio.create_task(_once_started(engine, readiness)),
        ]
        try:
            await engine.run()
        finally:
            await cancel_and_wait(tasks)
    finally:
        _restore_signals()
    if ended:
        return ended[0].code
    if not signalled.is_set():
        print("error: the engine stopped by itself; see the messages above", file=sys.stderr)
        return 1
    return 0


def _project_members(objects: list[tuple[Kind, Object]]) -> list[tuple[Kind, Object]]:
    """The Processes and Jobs of a process-compose project among `objects`."""
    return [
        (kind, obj)
        for kind, obj in objects
        if kind in (PROCESS, JOB) and COMPOSE_PROJECT in (obj["metadata"].get("annotations") or {})
    ]


async def _run_ended_again(store: Store, members: list[tuple[Kind, Object]], stamp: str) -> None:
    """Ask for a restart of each member whose child ended in an earlier run (phase
    Succeeded or Failed), as process-compose runs every process of the file on each `up`."""
    for kind, obj in members:
        metadata = obj["metadata"]
        try:
            stored = await store.get(
                kind.api_version, kind.kind, metadata["name"], metadata.get("namespace")
            )
        except NotFound:  # not applied: it was being deleted
            continue
        if (stored.get("status") or {}).get("phase") in FINISHED:
            await request_restart(
                store, kind, metadata["name"], metadata.get("namespace") or "", stamp
            )


def _on_run_end(
    engine: Engine, project: list[tuple[Kind, Object]], *, since: float
) -> list[RunEnd]:
    """Stop `engine` gracefully once a Process or Job says the run ends
    (`setpoint.cli.run_end`: process-compose's `exit_on_end`, `exit_on_failure`), or the
    process-compose project `project` has ended (`project_end`); the list returned then
    holds why, and the exit code `up` ends with."""
    ended: list[RunEnd] = []
    caches = {kind.kind: engine.manager.informer(kind).cache for kind in (PROCESS, JOB)}

    def members() -> dict[str, Object] | None:
        found = {}
        for kind, obj in project:
            metadata = obj["metadata"]
            cached = caches[kind.kind].get(metadata["name"], metadata.get("namespace"))
            if cached is None:
                return None  # not applied yet, or deleted
            found[f"{kind.kind}/{metadata['name']}"] = cached
        return found

    def on_change(kind: Kind, event: InformerEvent) -> None:
        if ended or event.type == "DELETED":
            return
        end = run_end(kind, event.object, since)
        if end is None and project:
            current = members()
            end = project_end(current) if current is not None else None
        if end is not None:
            ended.append(end)
            print(end.why, file=sys.stderr, flush=True)
            engine.stop()

    for kind in (PROCESS, JOB):
        engine.manager.informer(kind).add_handler(partial(on_change, kind))
    return ended


async def _once_started(engine: Engine, readiness: Readiness) -> None:
    """Once the engine's manager runs (controllers started, /metrics served): say where
    /metrics, /healthz and /readyz are (the port the system chose for port 0), and that the
    engine is up (`up -d` waits for that)."""
    await engine.manager.wait_started()
    server = engine.manager.health_server
    if server is not None:
        print(f"serving /metrics, /healthz and /readyz on {server.url}", flush=True)
    readiness.ready()


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _on_signals(engine: Engine) -> asyncio.Event:
    """The first SIGINT or SIGTERM stops `engine` gracefully; the second kills what is left
    at once. The event returned is set once one arrived."""
    loop = asyncio.get_running_loop()
    signalled = asyncio.Event()

    def stop() -> None:
        if signalled.is_set():
            print("stopping the rest at once (SIGKILL)", file=sys.stderr, flush=True)
            engine.kill()
            return
        signalled.set()
        running = engine.running_children()
        if running:
            print(
                f"stopping {running} processes ... (again to kill them at once)",
                file=sys.stderr,
                flush=True,
            )
        engine.stop()

    for sig in _SIGNALS:
        loop.add_signal_handler(sig, stop)
    return signalled


def _restore_signals() -> None:
    loop = asyncio.get_running_loop()
    for sig in _SIGNALS:
        with contextlib.suppress(Exception):
            loop.remove_signal_handler(sig)
