"""The `setpoint` command: parse arguments, load kinds, run one verb, and turn errors into one line.

`VERBS` is the table of verbs: name, module (in `setpoint.cli`), one-line summary and the
examples its `--help` ends with. Only the chosen verb's module is imported and only its
parser is built; every other verb is a name and a summary from the table, which is all
`setpoint --help` shows. So `--help` imports no verb module, and a verb imports only what
it uses (`get` no pydantic, YAML only for `-o yaml`).

A `setpoint.errors.Error`, an unreadable manifest, an unknown kind or a bad
argument ends the command with `error: <message>` on stderr and exit status 1,
never a traceback (an unexpected exception too: it is a bug, reported in one line;
SETPOINT_DEBUG=1 shows its traceback). Everything printed is escaped for the
terminal. Global options may be given before or after the verb.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys

from setpoint import __version__
from setpoint.cli.escaping import EscapedOutput
from setpoint.cli.store_location import DEFAULT_STORE

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: `--help` needs none
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any, NoReturn

    from setpoint.cli.context import Context


class Verb:
    """One verb of the table: its name, the module of `setpoint.cli` that defines it (its
    `add_parser(verbs, parents)` adds the verb's parser, whose `run(ctx, args)` runs it and
    returns the exit status, or a coroutine that does, which then runs on an event loop),
    a one-line summary for `setpoint --help`, and the example command lines its `--help`
    ends with. (A plain class: `dataclasses` costs `--help` more than the whole table.)"""

    __slots__ = ("examples", "module", "name", "summary")

    def __init__(self, name: str, module: str, summary: str, examples: tuple[str, ...]) -> None:
        self.name = name
        self.module = module
        self.summary = summary
        self.examples = examples


# fmt: off
VERBS: tuple[Verb, ...] = (
    Verb("apply", "plan", "create or update objects from manifests", (
        "setpoint apply -f examples/webapp/webapp.yaml",
        "setpoint apply -f examples/webapp/      # every *.yaml, *.yml, *.json of a directory",
        "cat app.yaml | setpoint apply -f -",
    )),
    Verb("plan", "plan", "show the steps the controllers will take if manifests are applied", (
        "setpoint plan -f examples/webapp/webapp.yaml",
        "setpoint plan -f app.yaml -o json",
        "setpoint apply --dry-run=plan -f app.yaml",
    )),
    Verb("get", "get", "show objects of one kind", (
        "setpoint get processes",
        "setpoint get deploy,proc                # one table per kind",
        "setpoint get process db -o yaml",
        "setpoint get processes -l app=web -w    # then every change, until Ctrl-C",
        "setpoint get all -A",
    )),
    Verb("ps", "ps", "show every workload as `up` does, once: readiness, phase, pid, what it waits for", (  # noqa: E501
        "setpoint ps",
        "setpoint ps -A -l app=web",
    )),
    Verb("describe", "describe", "show objects in detail, with their conditions and events", (
        "setpoint describe process/db",
        "setpoint describe deployments",
    )),
    Verb("events", "events", "show events, oldest first, of a namespace or about one object", (
        "setpoint events",
        "setpoint events --for job/db-init",
        "setpoint events -A -w",
    )),
    Verb("delete", "plan", "delete objects by name, by label selector, or as listed in manifests", (
        "setpoint delete process db",
        "setpoint delete processes -l app=web",
        "setpoint delete -f examples/webapp/",
        "setpoint delete process db --dry-run=plan  # what it does to what depends on db",
    )),
    Verb("logs", "logs", "print the output of Processes and Jobs", (
        "setpoint logs web-0                 # one Process's (or Job's) output",
        "setpoint logs deployment/web -f     # every replica of a Deployment, and follow",
        "setpoint logs                       # every Process and Job of the namespace",
        "setpoint logs -l tier=db --since 10m --timestamps",
    )),
    Verb("wait", "wait", "wait until objects have a condition, or are deleted", (
        "setpoint wait --for=condition=Ready process/web --timeout 60s",
        "setpoint wait --for=condition=Complete job/migrate",
        "setpoint wait --for=condition=Ready=False deployment/web",
        "setpoint wait --for=delete process -l tier=cache",
    )),
    Verb("rollout", "rollout", "manage the rollout of a Deployment (status, history, undo, restart)", (  # noqa: E501
        "setpoint rollout status deployment/web",
        "setpoint rollout history deployment/web",
        "setpoint rollout undo deployment/web --to-revision 1",
        "setpoint rollout restart deployment/web",
    )),
    Verb("scale", "rollout", "set the replicas of an object with a scale subresource (e.g. a Deployment)", (  # noqa: E501
        "setpoint scale deployment/web --replicas 3",
    )),
    Verb("restart", "restart", "restart a Process, run a Job again, or roll every replica of a Deployment", (  # noqa: E501
        "setpoint restart process/web",
        "setpoint restart job/migrate           # run the migrations again",
        "setpoint restart deployment/web        # rolling, as kubectl rollout restart",
        "setpoint restart process web worker    # several of one kind",
    )),
    Verb("stop", "suspend", "stop Processes and Jobs and keep them stopped (spec.suspend) until `start`", (  # noqa: E501
        "setpoint stop web worker",
        "setpoint stop job/migrate",
        "setpoint start web",
    )),
    Verb("start", "suspend", "start Processes and Jobs `stop` stopped", (
        "setpoint start web",
    )),
    Verb("up", "up", "run the workload controllers, apply manifests, show them converge", (
        "setpoint up examples/webapp        # in the foreground, Ctrl-C stops it",
        "setpoint up -d examples/webapp     # in the background, then `logs -f`, `down`",
        "setpoint up examples/webapp --logs # the children's output under the live view",
        "setpoint up --metrics-address 127.0.0.1:9090 app/   # /metrics, /healthz, /readyz",
    )),
    Verb("run", "run", "run the controllers of Python files (setup(manager)) until Ctrl-C", (
        "setpoint run examples/custom-controller/managedfile.py",
        "setpoint --server https://127.0.0.1:6443 run controllers.py",
    )),
    Verb("convert", "convert", "print the setpoint manifests equivalent to process-compose files", (
        "setpoint convert process-compose.yaml > app.yaml",
        "setpoint convert process-compose.yaml process-compose.override.yaml",
    )),
    Verb("serve", "serve", "serve the store over a Kubernetes-compatible HTTP API (kubectl works against it)", (  # noqa: E501
        "setpoint serve --port 8080 --token-file tokens.csv",
        "KUBECONFIG=.setpoint/kubeconfig kubectl get processes",
    )),
    Verb("dashboard", "dashboard", "open the dashboard of the running server, logged in", (
        "setpoint dashboard            # opens it in your browser (or prints the link)",
        "setpoint dashboard --print",
    )),
    Verb("kubeconfig", "kubeconfig", "print or write a kubeconfig for a setpoint API server", (
        "setpoint kubeconfig --server http://127.0.0.1:8080 --token-file tokens.csv",
    )),
    Verb("down", "down", "stop the engine running on the store and every child (objects are kept)", (  # noqa: E501
        "setpoint up -d app/ && setpoint down",
        "setpoint down --timeout 30s    # give up waiting then (a second `down` kills the rest)",
    )),
    Verb("timeline", "timeline", "show what happened (changes, conditions, events, exits, log lines), oldest first", (  # noqa: E501
        "setpoint timeline --since 10m",
        "setpoint timeline process/db --type exit,log",
        "setpoint timeline -o jsonl > timeline.jsonl",
    )),
    Verb("explain", "explain", "rank the probable causes of an object's failure (what changed before it broke)", (  # noqa: E501
        "setpoint explain deployment/web",
        "setpoint explain job/migrate -o json",
    )),
    Verb("rca", "rca", "rank the likely root causes of a metric anomaly over a call graph", (
        "setpoint rca --graph graph.csv --abnormal abnormal.csv --normal normal.csv \\",
        "    --target web --metric latency",
    )),
    Verb("tune", "tune", "relay auto-tuning: find Ku and Tu of a plant, propose PID gains", (
        "setpoint tune --plant sim",
        "setpoint tune --thermostat office --apply",
    )),
    Verb("completion", "completion", "print a shell completion script (bash, zsh or fish)", (
        "source <(setpoint completion bash)                       # bash, this shell",
        "setpoint completion bash > ~/.local/share/bash-completion/completions/setpoint",
        'setpoint completion zsh > "${fpath[1]}/_setpoint"         # zsh',
        "setpoint completion fish > ~/.config/fish/completions/setpoint.fish",
    )),
)
"""Every verb, in the order `setpoint --help` lists them."""
# fmt: on

EXAMPLES = (
    "setpoint up examples/webapp            # apply, run, watch it converge",
    "setpoint get processes",
    "setpoint logs db -f",
    "setpoint explain deployment/web",
)
"""The examples `setpoint --help` ends with."""


def _terminal_width() -> int:
    """What `shutil.get_terminal_size` answers, without importing shutil (and bz2, lzma...),
    which argparse does for every parser it builds."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return columns or 80


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_terminal_width() - 2)


class _Parser(argparse.ArgumentParser):
    examples: tuple[str, ...] = ()
    """Example command lines, printed last by `--help`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"error: {message} (see '{self.prog} --help')\n")

    def format_help(self) -> str:
        text = super().format_help()
        if self.examples:
            text += "\nExamples:\n" + "".join(f"  {line}\n" for line in self.examples)
        return text


def _global_options(suffix: str) -> argparse.ArgumentParser:
    """The options every verb takes; `suffix` keeps values given before and after the verb apart."""
    p = _Parser(add_help=False, argument_default=argparse.SUPPRESS)
    p.add_argument(
        "--store",
        dest="store" + suffix,
        metavar="URL",
        help=f"memory://, sqlite:///relative.db, sqlite:////abs.db, postgresql://host/db or "
        f"etcd://host:port (default: $SETPOINT_STORE, else {DEFAULT_STORE} in the nearest "
        "of this directory and its parents that has one)",
    )
    p.add_argument(
        "--server",
        dest="server" + suffix,
        metavar="URL",
        help="an API server (setpoint serve) to use as the store, e.g. http://127.0.0.1:8443 "
        "(default: the kubeconfig in .setpoint/, else $KUBECONFIG, when no local store is found)",
    )
    p.add_argument(
        "--token",
        dest="token" + suffix,
        metavar="TOKEN",
        help="the bearer token for --server (default: the kubeconfig's)",
    )
    p.add_argument(
        "--kinds",
        dest="kinds" + suffix,
        action="append",
        metavar="MODULE_OR_FILE",
        help="a Python module or file that registers kinds (repeatable; "
        "also $SETPOINT_KINDS, comma-separated)",
    )
    p.add_argument(
        "-n",
        "--namespace",
        dest="namespace" + suffix,
        metavar="NAMESPACE",
        help='the namespace to work in (default: "default")',
    )
    return p


def build_parser(chosen: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser: with `chosen`, only those verbs, with their full parsers
    (their modules are imported); without, every verb as only its name and summary: enough
    for `setpoint --help` and to tell which verb a command line runs."""
    parser = _Parser(
        prog="setpoint",
        parents=[_global_options("")],
        description="Declare what you want; controllers make it so. kubectl-like verbs over "
        "a setpoint store.",
    )
    parser.examples = EXAMPLES
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    verbs = parser.add_subparsers(
        title="verbs", metavar="VERB", dest="verb", required=True, parser_class=_Parser
    )
    parents = [_global_options("_after")]
    if chosen is None:
        for verb in VERBS:
            verbs.add_parser(verb.name, help=verb.summary, add_help=False)
        return parser
    wanted = set(chosen)
    for module in dict.fromkeys(v.module for v in VERBS if v.name in wanted):
        importlib.import_module(f"setpoint.cli.{module}").add_parser(verbs, parents)
    # A module may add several verbs (`plan`: apply, plan, delete): keep the table's order.
    order = {v.name: i for i, v in enumerate(VERBS)}
    built = sorted(verbs.choices.items(), key=lambda item: order.get(item[0], len(order)))
    verbs.choices.clear()
    verbs.choices.update(built)
    for verb in VERBS:
        verb_parser = verbs.choices.get(verb.name)
        if isinstance(verb_parser, _Parser):
            verb_parser.examples = verb.examples
    return parser


GLOBAL_VALUED = ("--store", "--server", "--token", "--kinds", "-n", "--namespace")
"""The global options (`_global_options`) that take a value."""


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line, built with the chosen verb's parser only. The verb is the
    first argument that is no global option nor the value of one (`verb_of`); when that is
    not plain (`--help`, `--version`, no verb, an unknown one), a parser of the whole table
    answers or finds it. (Every parser argparse builds costs: it looks up translations.)"""
    verb = verb_of(argv) or build_parser().parse_known_args(argv)[0].verb
    return build_parser([verb]).parse_args(argv)


def verb_of(argv: Sequence[str]) -> str | None:
    """The verb of `argv` if it is plain to see: the first argument after global options
    that take a value (in any form argparse takes: `--store URL`, `--store=URL`, `-nNS`,
    an abbreviation such as `--kin FILE`); None at any other option (`--help`,
    `--version`, a mistake) or an argument that is no verb."""
    verbs = {v.name for v in VERBS}
    value_next = False
    for arg in argv:
        if value_next:
            value_next = False
        elif not arg.startswith("-") or arg == "-":
            return arg if arg in verbs else None
        elif _global_valued(arg):
            value_next = True
        elif not _global_valued(arg.partition("=")[0]) and not _attached_short(arg):
            return None
    return None


def _global_valued(option: str) -> bool:
    """`option` is a global option that takes a value, or an abbreviation of one."""
    long = option.startswith("--") and len(option) > 2
    return any(o == option or (long and o.startswith(option)) for o in GLOBAL_VALUED)


def _attached_short(arg: str) -> bool:
    """`arg` is a short global option with its value attached (`-nprod`)."""
    return any(len(o) == 2 and arg.startswith(o) and len(arg) > 2 for o in GLOBAL_VALUED)


def _option(args: argparse.Namespace, name: str) -> Any:
    return getattr(args, name + "_after", getattr(args, name, None))


def make_context(args: argparse.Namespace) -> Context:
    """Register the built-in kinds and the user's, and resolve the global options against
    the environment."""
    from setpoint.cli.context import (
        STORELESS_VERBS,
        Context,
        credentials_of,
        learn_served_kinds,
    )
    from setpoint.cli.kind_modules import load_kinds
    from setpoint.cli.store_location import locate
    from setpoint.engine.kinds import builtin_kinds
    from setpoint.store import read_kinds

    kinds = os.environ.get("SETPOINT_KINDS", "").split(",")
    kinds += getattr(args, "kinds", []) + getattr(args, "kinds_after", [])
    registry = builtin_kinds()
    load_kinds(kinds, registry)
    namespace = _option(args, "namespace")
    location = locate(
        _option(args, "store"),
        _option(args, "server"),
        _option(args, "token"),
        os.environ,
        os.getcwd(),
    )
    ctx = Context(
        store_url=location.url,
        store_searched=location.searched,
        namespace=namespace or location.namespace or "default",
        namespace_explicit=namespace is not None,
        registry=registry,
        credentials=credentials_of(location),
    )
    ctx.check_verb(args.verb)
    # Kinds defined by CRDs in the store, or served by the server, are read when a kind is
    # not found (not before: built-in kinds cost no read).
    if not ctx.remote:
        registry.refresh = functools.partial(read_kinds, ctx.store_url, registry)
    elif args.verb not in STORELESS_VERBS:
        registry.refresh = functools.partial(learn_served_kinds, ctx)
    return ctx


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: `sys.argv[1:]`); return the exit status.
    Everything it prints is escaped for the terminal (`escaping.EscapedOutput`)."""
    raw_out, raw_err = sys.stdout, sys.stderr
    sys.stdout = EscapedOutput(raw_out)
    sys.stderr = EscapedOutput(raw_err)
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    finally:
        sys.stdout, sys.stderr = raw_out, raw_err


def _main(argv: Sequence[str]) -> int:
    args = parse(argv)
    import sqlite3  # here, after parsing: `--help` and `--version` need none of these

    from setpoint.cli.kind_modules import KINDS_HINT
    from setpoint.errors import Error, UnknownKind

    try:
        ctx = make_context(args)
        outcome = args.run(ctx, args)
        if isinstance(outcome, int):
            status = outcome
        else:  # a coroutine: the verb needs an event loop
            import asyncio  # here: a verb that needs none (`get`) imports no asyncio

            status = asyncio.run(outcome)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`setpoint get -w | head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except UnknownKind as exc:
        return _fail(f"{exc} ({KINDS_HINT})")
    except Error as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc))
    except sqlite3.Error as exc:  # the machine's, e.g. a full or read-only disk under the store
        return _fail(f"the store's database: {exc}")
    except Exception as exc:
        if os.environ.get("SETPOINT_DEBUG"):
            raise
        return _fail(
            f"internal error: {type(exc).__name__}: {exc} (a bug in setpoint; "
            "SETPOINT_DEBUG=1 shows the traceback)"
        )
    return status


def _fail(message: str) -> int:
    print("error: " + " ".join(message.split()), file=sys.stderr)
    return 1
