"""A process-compose project (its files parsed and merged: `setpoint.workloads.compose.project`)
translated into setpoint objects: `translate(project)` returns the `Process` and `Job`
manifests (wire form) and the warnings, one line each naming the field.

What becomes what (docs/process-compose.md has the whole table):

* each process becomes a `Process` with the name the file gives it (in lower case, `-`
  for `_`, with a warning when that changes it: setpoint's names are DNS names), or, when another
  process waits for it with `process_completed_successfully` (setpoint's `Complete`, a
  condition only a Job reports), a `Job`. `replicas: N` (N > 1) makes N of them, named
  as process-compose names them (`web-0`, `web-1`; `web-00` from ten on), each with
  `PC_REPLICA_NUM`; a `depends_on` naming the process waits for every replica.
* `command` runs as process-compose runs it: `[bash, -c, COMMAND]` (the global `shell`'s
  `shell_command` and `shell_argument` instead when given); `entrypoint` is the argv;
  `working_dir` is `cwd`; `environment` (list or mapping, over the global one, over
  `PC_PROC_NAME` and `PC_REPLICA_NUM`) is `env`; `.env` (when the caller found one) and
  `env_file` (relative to `working_dir`) are `envFile`.
* `vars` (global, then the process's, then `PC_REPLICA_NUM`) fill `{{.NAME}}` in
  `command` (unless `is_template_disabled`), `working_dir`, `environment`, `description`,
  `log_location` and the probes' `exec.command` and `http_get` fields
  (`setpoint.workloads.compose.template`).
* `depends_on` conditions become `dependsOn` conditions
  (`setpoint.workloads.dependencies.PROCESS_COMPOSE_NAMES`); a circle is refused.
* `namespace` (a string or a list) is the label `NAMESPACE_LABEL` (the first one). A
  selection of namespaces (`namespaces=`, as `process-compose -n NS`) keeps only the
  processes in any of them (one that names none is in `default`); a dependency on a
  process left out is not waited for (a warning), as process-compose prunes it; a
  selection that keeps nothing is refused.
* `readiness_probe` / `liveness_probe` (`exec`, `http_get`, timings with
  process-compose's defaults) and `ready_log_line` (a plain substring: written as an
  escaped pattern) become probes; `availability` the restart policy and a constant
  back-off of `backoff_seconds` (at least 1, as process-compose waits); `shutdown.signal`
  and `shutdown.timeout_seconds` the stop signal and grace period. `exit_on_end`,
  `restart: exit_on_failure`, `exit_on_skipped` and `success_exit_codes` become the
  annotations `setpoint up` reads to end its run (`setpoint.model.wellknown.EXIT_ON_END`,
  ...), and every object is annotated with the project's name (`COMPOSE_PROJECT`: `up` ends
  once all of them have ended, as process-compose ends its run).

What setpoint cannot honour is refused (`Invalid` naming the field: what the processes
would do depends on it) or warned about (one line naming the field: only how it is shown
or logged, or when `up` ends, would differ); an unknown field is a warning, refused when
the file says `is_strict: true`. Nothing is silently dropped.

Pure: no I/O, no clock. The caller reads the files, the environment and `.env`.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from setpoint.errors import Invalid
from setpoint.model import Object
from setpoint.model.dependency_graph import find_cycle
from setpoint.model.meta import check_label_value
from setpoint.model.schema import validated
from setpoint.model.wellknown import (
    COMPOSE_NAMESPACE_LABEL,
    COMPOSE_PROJECT,
    DESCRIPTION_ANNOTATION,
    EXIT_ON_END,
    EXIT_ON_FAILURE,
    EXIT_ON_SKIPPED,
    SUCCESS_EXIT_CODES,
)
from setpoint.workloads.compose.fields import (
    _environment,
    _mapping,
    _name,
    _Notes,
    _one_line,
    _probes,
    _rendered,
    _setpoint_name,
    _success_exit_codes,
)
from setpoint.workloads.compose.project import resolve_extends
from setpoint.workloads.depends_on import PROCESS_COMPOSE_NAMES
from setpoint.workloads.job_plan import JobSpecSchema
from setpoint.workloads.kinds import JOB, PROCESS
from setpoint.workloads.process_plan import ProcessSpecSchema

__all__ = ["DEFAULT_NAMESPACE", "DEFAULT_SHELL", "NAMESPACE_LABEL", "Translation", "translate"]

DEFAULT_NAMESPACE = "default"
"""The namespace of a process that names none, as process-compose's `-n default` selects it."""
DEFAULT_SHELL = ("bash", "-c")
"""How process-compose runs a `command` when the file names no `shell`."""
NO_RETRY_LIMIT = 2**31 - 1
"""A Job's `backoffLimit` for `restart: on_failure` with no `max_restarts`: process-compose
restarts it without limit (the largest limit Kubernetes' int32 field holds)."""
NAMESPACE_LABEL = COMPOSE_NAMESPACE_LABEL
"""The label that carries a process's process-compose `namespace`."""

# What process-compose has and what setpoint does with it (fields not listed: unknown).
_IGNORED_TOP = frozenset(
    {
        "version",
        "name",
        "is_tui_disabled",
        "disable_env_expansion",
        "ordered_shutdown",
        "processes",
        "environment",
        "shell",
        "is_strict",
        "vars",
    }
)
"""Read by the loader or by `translate`, or without effect on what runs (no TUI; setpoint
always stops dependents first)."""
_WARNED_TOP = {
    "log_location": "setpoint writes each process's output to its own log (setpoint logs NAME)",
    "log_level": "setpoint's own log level is not set by the file",
    "log_length": "setpoint keeps each process's log in a file, rotated at 10 MiB",
    "log_format": "setpoint's own log format is not set by the file",
    "log_configuration": "setpoint writes each process's log as the process prints it",
}
_REFUSED_TOP = {
    "env_cmds": "commands run to make variables are not supported",
    "mcp_server": "setpoint is no MCP server",
    "extends": "not resolved: the files it names are merged before translating "
    "(setpoint.cli.compose_files reads them)",
}
_KNOWN_PROCESS = frozenset(
    {
        "command",
        "entrypoint",
        "working_dir",
        "environment",
        "env_file",
        "depends_on",
        "readiness_probe",
        "liveness_probe",
        "ready_log_line",
        "availability",
        "shutdown",
        "replicas",
        "namespace",
        "disabled",
        "is_disabled",
        "success_exit_codes",
        "log_location",
        "vars",
        "extends",
        "description",
        "is_dotenv_disabled",
        "is_template_disabled",
        "name",
    }
)
_WARNED_PROCESS = {
    "disable_ansi_colors": "setpoint shows output as the process writes it",
    "is_tty": "the process runs without a terminal",
    "launch_timeout_seconds": "only for is_daemon, which setpoint does not run",
    "truncate_log": "setpoint appends to the process's log",
    "log_configuration": "setpoint writes the process's log as the process prints it",
    "monitor_for": "setpoint has no terminal UI to notify",
    "monitor_silence_threshold": "setpoint has no terminal UI to notify",
}
_REFUSED_PROCESS = {
    "is_daemon": "setpoint supervises a process that stays in the foreground: run the "
    "daemon in the foreground (most have a flag for it)",
    "is_foreground": "setpoint runs no process in its own terminal",
    "is_interactive": "setpoint runs no process interactively",
    "is_elevated": "setpoint runs no command through sudo (see user: in docs/workloads.md)",
    "schedule": "scheduled processes are not supported",
    "watch": "restarting on file changes is not supported",
    "mcp": "setpoint is no MCP server",
}
_RESTART_POLICIES = {
    "no": "Never",
    "always": "Always",
    "on_failure": "OnFailure",
    "exit_on_failure": "Never",
}


@dataclass(frozen=True, slots=True)
class Translation:
    """The setpoint objects of a project, in the file's order of processes (sorted by name),
    and the warnings about what they do not honour, one line each naming the field."""

    objects: list[Object]
    warnings: list[str]


@dataclass(frozen=True, slots=True)
class _Replica:
    """One process to run: `name` (a replica's name), `base` (the name in the file),
    `number` (`PC_REPLICA_NUM`) and its configuration (extends resolved)."""

    name: str
    base: str
    number: int
    config: Mapping[str, Any]


def translate(
    project: Mapping[str, Any],
    *,
    dotenv_file: str | None = None,
    default_shell: tuple[str, str] = DEFAULT_SHELL,
    project_name: str = "process-compose.yaml",
    namespaces: Sequence[str] = (),
) -> Translation:
    """The setpoint objects of `project` (a parsed, merged process-compose file) and the
    warnings. `dotenv_file`: the `.env` the caller found (every process reads it first,
    unless `is_dotenv_disabled`); `default_shell`: the shell when the file names none
    (process-compose's is `bash -c`, or `$COMPOSE_SHELL -c`); `project_name`: the
    `COMPOSE_PROJECT` annotation of every object when the file gives no `name`;
    `namespaces`: when given, only the processes in any of them, as `process-compose -n
    NS` (module docstring). Raises `Invalid` naming the field for what setpoint cannot
    run as the file says. Every message is one line (a line break in a name of the file
    is written `\\n`)."""
    try:
        return _translate(project, dotenv_file, default_shell, project_name, tuple(namespaces))
    except Invalid as exc:
        if len(str(exc).splitlines()) <= 1:
            raise
        raise Invalid(_one_line(str(exc))) from None


def _translate(
    project: Mapping[str, Any],
    dotenv_file: str | None,
    default_shell: tuple[str, str],
    project_name: str,
    namespaces: tuple[str, ...],
) -> Translation:
    notes = _Notes(strict=project.get("is_strict") is True)
    _check_top(project, notes)
    processes = _mapping(project.get("processes"), "processes")
    if not processes:
        raise Invalid("required: at least one process", field="processes")
    for name in processes:
        if not isinstance(name, str):
            raise Invalid(f"{name!r}: a process's name must be a string", field="processes")
    configs = {name: dict(_mapping(c, f"processes.{name}")) for name, c in processes.items()}
    resolved = resolve_extends(configs)
    shell = _shell(project.get("shell"), default_shell, notes)
    global_env = _environment(project.get("environment"), "environment", {})
    global_vars = _mapping(project.get("vars"), "vars")

    enabled: dict[str, Mapping[str, Any]] = {}
    left_out: dict[str, str] = {}
    for name in sorted(resolved):
        config = resolved[name]
        if _disabled(config, f"processes.{name}"):
            notes.warn(f"processes.{name}.disabled", "not created: apply it by itself to run it")
            left_out[name] = "disabled"
        elif namespaces and not set(namespaces) & set(
            _namespaces(config.get("namespace"), f"processes.{name}") or [DEFAULT_NAMESPACE]
        ):
            left_out[name] = f"in none of the namespaces selected ({', '.join(namespaces)})"
        else:
            enabled[name] = config
    if not enabled and namespaces:
        raise Invalid(
            f"no process is in the namespaces selected ({', '.join(namespaces)})",
            field="processes",
        )
    replicas = {name: _replicas(name, config) for name, config in enabled.items()}
    by_name: dict[str, _Replica] = {}
    for name, group in replicas.items():
        if _setpoint_name(name) != name:
            notes.warn(
                f"processes.{name}",
                f"named {_setpoint_name(name)} in setpoint (names "
                "there are lower case, with '-' for '_')",
            )
        for replica in group:
            other = by_name.get(replica.name)
            if other is not None:
                raise Invalid(
                    f"{replica.name}: the same setpoint name as processes.{other.base}",
                    field=f"processes.{name}",
                )
            by_name[replica.name] = replica
    deps = {r.name: _dependencies(r, left_out, replicas, by_name, notes) for r in by_name.values()}
    cycle = find_cycle({name: [d for d, _ in targets] for name, targets in deps.items()})
    if cycle is not None:
        raise Invalid(
            f"circular dependency: {' -> '.join(cycle)}",
            field=f"processes.{by_name[cycle[0]].base}.depends_on",
        )
    jobs = {target for targets in deps.values() for target, cond in targets if cond == "Complete"}
    jobs |= {name for name, replica in by_name.items() if _retries_until_success(replica.config)}
    kinds = {name: ("Job" if name in jobs else "Process") for name in by_name}

    objects: list[Object] = []
    given = project.get("name")
    name = given if isinstance(given, str) and given else project_name
    for key, replica in by_name.items():
        where = f"processes.{replica.base}"
        objects.append(
            _translate_process(
                replica,
                [(d, kinds[d], c) for d, c in deps[key]],
                _Context(where, notes, shell, global_env, global_vars, dotenv_file, name),
                kinds[key],
            )
        )
    return Translation(objects, list(dict.fromkeys(notes.warnings)))


def _retries_until_success(config: Mapping[str, Any]) -> bool:
    """Whether a process runs as a Job because it restarts only after a failure, at most
    `max_restarts` times (a Process would restart without limit), and has no probes (a
    Job has none)."""
    availability = config.get("availability")
    if not isinstance(availability, Mapping) or availability.get("restart") != "on_failure":
        return False
    limit = availability.get("max_restarts")
    probed = any(config.get(k) for k in ("readiness_probe", "liveness_probe", "ready_log_line"))
    return isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 and not probed


def _check_top(project: Mapping[str, Any], notes: _Notes) -> None:
    for key in project:
        if key in _IGNORED_TOP or str(key).startswith("x-"):
            continue
        if key in _REFUSED_TOP:
            raise Invalid(_REFUSED_TOP[key], field=str(key))
        if key in _WARNED_TOP:
            notes.warn(str(key), f"ignored: {_WARNED_TOP[key]}")
        else:
            notes.unknown(str(key))


def _shell(value: Any, default: tuple[str, str], notes: _Notes) -> tuple[str, str]:
    if value is None:
        return default
    shell = _mapping(value, "shell")
    for key in shell:
        if key not in (
            "shell_command",
            "shell_argument",
            "elevated_shell_command",
            "elevated_shell_argument",
        ):
            notes.unknown(f"shell.{key}")
    command = shell.get("shell_command") or default[0]
    argument = shell.get("shell_argument") or default[1]
    if not isinstance(command, str) or not isinstance(argument, str):
        raise Invalid("shell_command and shell_argument must be strings", field="shell")
    return command, argument


def _disabled(config: Mapping[str, Any], where: str) -> bool:
    flag = config.get("is_disabled")
    if flag in ("true", "false"):  # process-compose's string form wins
        return bool(flag == "true")
    if flag not in (None, ""):
        raise Invalid(f"{flag!r}: want 'true' or 'false'", field=f"{where}.is_disabled")
    return bool(config.get("disabled") is True)


def _replicas(name: str, config: Mapping[str, Any]) -> list[_Replica]:
    """The processes `name` runs as: itself, or `name-0` ... with process-compose's
    zero-padding (one digit more per power of ten of `replicas`)."""
    count = config.get("replicas") or 1
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise Invalid(
            f"{count!r}: want a whole number of at least 1", field=f"processes.{name}.replicas"
        )
    base = _name(_setpoint_name(name), f"processes.{name}")
    if count == 1:
        return [_Replica(base, name, 0, config)]
    width = len(str(count))  # process-compose's 1 + log10(replicas)
    return [_Replica(f"{base}-{n:0{width}d}", name, n, config) for n in range(count)]


def _dependencies(
    replica: _Replica,
    left_out: Mapping[str, str],
    replicas: Mapping[str, list[_Replica]],
    by_name: Mapping[str, _Replica],
    notes: _Notes,
) -> list[tuple[str, str]]:
    """(name, setpoint condition) of what `replica` waits for, replica names expanded as
    process-compose expands them; a dependency on a process left out (`left_out`: why,
    by name: disabled, or in no namespace selected) is dropped, with a warning:
    process-compose does not wait for it either."""
    where = f"processes.{replica.base}.depends_on"
    out: dict[str, str] = {}
    for dep, entry in _mapping(replica.config.get("depends_on"), where).items():
        here = f"{where}.{dep}"
        entry = _mapping(entry, here)
        for key in entry:
            if key != "condition":
                notes.unknown(f"{here}.{key}")
        raw = entry.get("condition") or "process_completed"  # process-compose's zero value
        condition = PROCESS_COMPOSE_NAMES.get(raw) if isinstance(raw, str) else None
        if condition is None:
            raise Invalid(
                f"{raw!r}: want one of {', '.join(PROCESS_COMPOSE_NAMES)}",
                field=f"{here}.condition",
            )
        if dep in replicas:
            targets = [r.name for r in replicas[dep]]
        elif isinstance(dep, str) and _setpoint_name(dep) in by_name:
            targets = [_setpoint_name(dep)]  # one replica, by its name
        elif dep in left_out:
            notes.warn(here, f"{dep} is {left_out[dep]}: not waited for")
            continue
        else:
            raise Invalid(f"{dep!r}: no such process", field=here)
        target = by_name[targets[0]].config
        if raw == "process_healthy" and not (
            target.get("readiness_probe") or target.get("liveness_probe")
        ):
            raise Invalid(
                f"process_healthy: {dep} has no readiness_probe or liveness_probe",
                field=f"{here}.condition",
            )
        if raw == "process_log_ready" and not target.get("ready_log_line"):
            raise Invalid(
                f"process_log_ready: {dep} has no ready_log_line", field=f"{here}.condition"
            )
        for name in targets:
            out.setdefault(name, condition)
    return sorted(out.items())


@dataclass(frozen=True, slots=True)
class _Context:
    """What translating one process needs besides its own configuration."""

    where: str
    notes: _Notes
    shell: tuple[str, str]
    global_env: Mapping[str, str]
    global_vars: Mapping[str, Any]
    dotenv_file: str | None
    project: str


def _translate_process(
    replica: _Replica, deps: Sequence[tuple[str, str, str]], ctx: _Context, kind: str
) -> Object:
    config, where, notes = replica.config, ctx.where, ctx.notes
    for key in config:
        if key in _REFUSED_PROCESS:
            if config[key] not in (None, False, ""):
                raise Invalid(_REFUSED_PROCESS[key], field=f"{where}.{key}")
        elif key in _WARNED_PROCESS:
            if config[key] not in (None, False, "", 0):
                notes.warn(f"{where}.{key}", f"ignored: {_WARNED_PROCESS[key]}")
        elif key not in _KNOWN_PROCESS and not str(key).startswith("x-"):
            notes.unknown(f"{where}.{key}")
    variables = {
        **ctx.global_vars,
        **_mapping(config.get("vars"), f"{where}.vars"),
        "PC_REPLICA_NUM": replica.number,
    }

    def rendered(key: str) -> str:
        return _rendered(config.get(key), variables, f"{where}.{key}")

    spec: dict[str, Any] = {"args": _args(config, where, ctx, rendered)}
    cwd = rendered("working_dir")
    if cwd:
        spec["cwd"] = cwd
    env = {"PC_PROC_NAME": replica.base, "PC_REPLICA_NUM": str(replica.number)}
    env.update(ctx.global_env)
    env.update(_environment(config.get("environment"), f"{where}.environment", variables))
    spec["env"] = env
    env_files = []
    if ctx.dotenv_file and config.get("is_dotenv_disabled") is not True:
        env_files.append(ctx.dotenv_file)
    env_file = config.get("env_file")
    if env_file:
        if not isinstance(env_file, str):
            raise Invalid("must be a string (one file)", field=f"{where}.env_file")
        relative = cwd and not env_file.startswith("/")
        env_files.append(f"{cwd.rstrip('/')}/{env_file}" if relative and cwd else env_file)
        if ctx.global_env:
            notes.warn(
                f"{where}.env_file",
                "the global environment wins over it here "
                "(in process-compose env_file wins over the global environment)",
            )
    if env_files:
        spec["envFile"] = env_files
    _shutdown(config, where, notes, spec)
    annotations = _availability(config, where, notes, spec, kind)
    annotations[COMPOSE_PROJECT] = ctx.project
    codes = _success_exit_codes(config.get("success_exit_codes"), f"{where}.success_exit_codes")
    if codes:
        notes.warn(
            f"{where}.success_exit_codes",
            "only when exit_on_end or exit_on_failure end setpoint up: a restart, "
            "a Job's completion and a dependency count only exit code 0 as success",
        )
        annotations[SUCCESS_EXIT_CODES] = ",".join(str(c) for c in codes)
    if rendered("log_location"):
        notes.warn(
            f"{where}.log_location",
            "ignored: setpoint writes the output to "
            f".setpoint/logs/<namespace>_{replica.name}.log (setpoint logs {replica.name})",
        )
    if deps:
        spec["dependsOn"] = [{"kind": k, "name": n, "condition": c} for n, k, c in deps]
    if kind == "Process":
        _probes(config, where, notes, spec, variables, ctx.shell)
        schema: type[ProcessSpecSchema | JobSpecSchema] = ProcessSpecSchema
        api_version = PROCESS.api_version
    else:
        for key in ("readiness_probe", "liveness_probe", "ready_log_line"):
            if config.get(key):
                raise Invalid(
                    "others wait for this process with process_completed_successfully, "
                    "so it runs as a setpoint Job, which has no probes",
                    field=f"{where}.{key}",
                )
        schema = JobSpecSchema
        api_version = JOB.api_version
    metadata: dict[str, Any] = {"name": replica.name}
    namespace = _namespace(config.get("namespace"), where, notes)
    if namespace:
        metadata["labels"] = {NAMESPACE_LABEL: namespace}
    description = rendered("description")
    if description:
        annotations[DESCRIPTION_ANNOTATION] = description
    if annotations:
        metadata["annotations"] = annotations
    try:
        validated(schema, spec, "spec")
    except Invalid as exc:
        raise Invalid(f"as a setpoint {kind}: {exc}", field=where) from None
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}


def _args(
    config: Mapping[str, Any], where: str, ctx: _Context, rendered: Callable[[str], str]
) -> list[str]:
    """The argv, as process-compose builds it: `command` through the shell (it wins over
    `entrypoint`, with a warning, as process-compose warns), else `entrypoint`."""
    entrypoint = config.get("entrypoint")
    if entrypoint is not None and (
        not isinstance(entrypoint, list) or not all(isinstance(a, str) for a in entrypoint)
    ):
        raise Invalid("must be a list of strings", field=f"{where}.entrypoint")
    raw = config.get("command")
    if raw:
        if config.get("is_template_disabled") is True:
            if not isinstance(raw, str):
                raise Invalid("must be a string", field=f"{where}.command")
            command = raw
        else:
            command = rendered("command")
        if entrypoint:
            ctx.notes.warn(
                f"{where}.entrypoint",
                "ignored: command is set too, and wins (as in process-compose)",
            )
        return [*ctx.shell, command]
    if entrypoint:
        return list(entrypoint)
    raise Invalid("required: command or entrypoint", field=where)


def _shutdown(config: Mapping[str, Any], where: str, notes: _Notes, spec: dict[str, Any]) -> None:
    shutdown = _mapping(config.get("shutdown"), f"{where}.shutdown")
    here = f"{where}.shutdown"
    for key, value in shutdown.items():
        if key == "command" and value:
            raise Invalid(
                "setpoint stops a process with a signal (shutdown.signal), not a command",
                field=f"{here}.command",
            )
        if key == "parent_only" and value is True:
            raise Invalid(
                "setpoint signals the process's whole group, never its parent alone",
                field=f"{here}.parent_only",
            )
        if key == "send_keys" and value:
            raise Invalid("setpoint runs no process interactively", field=f"{here}.send_keys")
        if key not in ("command", "parent_only", "send_keys", "signal", "timeout_seconds"):
            notes.unknown(f"{here}.{key}")
    number = shutdown.get("signal")
    if number:
        try:
            name = signal.Signals(number).name
        except (ValueError, TypeError):
            raise Invalid(f"{number!r}: not a signal number", field=f"{here}.signal") from None
        allowed = ("SIGTERM", "SIGINT", "SIGQUIT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGKILL")
        if name not in allowed:
            raise Invalid(
                f"{name}: setpoint stops a process with one of {', '.join(allowed)}",
                field=f"{here}.signal",
            )
        if name != "SIGTERM":
            spec["stopSignal"] = name
    timeout = shutdown.get("timeout_seconds")
    if timeout:
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout < 0:
            raise Invalid(f"{timeout!r}: want a number of seconds", field=f"{here}.timeout_seconds")
        spec["terminationGracePeriodSeconds"] = timeout


def _availability(
    config: Mapping[str, Any], where: str, notes: _Notes, spec: dict[str, Any], kind: str
) -> dict[str, str]:
    """`availability` into `spec` (restart policy, back-off; a Job's retries); returns the
    annotations that end a `setpoint up` run (`exit_on_end`, `restart: exit_on_failure`)."""
    here = f"{where}.availability"
    availability = _mapping(config.get("availability"), here)
    for key in availability:
        if key not in (
            "restart",
            "backoff_seconds",
            "max_restarts",
            "exit_on_end",
            "exit_on_skipped",
        ):
            notes.unknown(f"{here}.{key}")
    restart = availability.get("restart") or "no"
    if restart not in _RESTART_POLICIES:
        raise Invalid(
            f"{restart!r}: want one of {', '.join(_RESTART_POLICIES)}", field=f"{here}.restart"
        )
    backoff = availability.get("backoff_seconds") or 1
    if not isinstance(backoff, int | float) or isinstance(backoff, bool):
        raise Invalid(f"{backoff!r}: want a number of seconds", field=f"{here}.backoff_seconds")
    seconds = max(backoff, 1)
    max_restarts = availability.get("max_restarts") or 0
    if not isinstance(max_restarts, int) or isinstance(max_restarts, bool) or max_restarts < 0:
        raise Invalid(f"{max_restarts!r}: want a whole number", field=f"{here}.max_restarts")
    annotations: dict[str, str] = {}
    if availability.get("exit_on_skipped") is True:
        annotations[EXIT_ON_SKIPPED] = "true"
    if availability.get("exit_on_end") is True:
        annotations[EXIT_ON_END] = "true"
    if restart == "exit_on_failure":
        annotations[EXIT_ON_FAILURE] = "true"
    if kind == "Job":
        if restart == "always" and not max_restarts:
            raise Invalid(
                "always: others wait for this process with "
                "process_completed_successfully, which it then never is",
                field=f"{here}.restart",
            )
        limit = 0
        if restart == "always":
            limit = max_restarts
            notes.warn(
                f"{here}.restart",
                "always: it runs as a setpoint Job, once after a "
                f"success (process-compose runs it again, {max_restarts + 1} times in all)",
            )
        if restart == "on_failure":
            limit = max_restarts or NO_RETRY_LIMIT
        spec["backoffLimit"] = limit
        spec["backoff"] = {"initialSeconds": seconds, "maxSeconds": seconds}
        return annotations
    spec["restartPolicy"] = _RESTART_POLICIES[restart]
    if restart in ("always", "on_failure"):
        spec["backoff"] = {"initialSeconds": seconds, "maxSeconds": seconds}
        if max_restarts:
            notes.warn(
                f"{here}.max_restarts",
                "ignored: a setpoint Process restarts without limit, with back-off",
            )
    return annotations


def _namespaces(value: Any, where: str) -> list[str]:
    """A process's `namespace` (a string or a list of them) as a list without repeats or
    empty names (none: the process names none; process-compose's `default`)."""
    names = [value] if isinstance(value, str) else value
    if not names:
        return []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise Invalid("must be a string or a list of strings", field=f"{where}.namespace")
    return [n for n in dict.fromkeys(names) if n]


def _namespace(value: Any, where: str, notes: _Notes) -> str | None:
    names = _namespaces(value, where)
    if not names:
        return None
    if len(names) > 1:
        notes.warn(
            f"{where}.namespace",
            f"several: the label {NAMESPACE_LABEL} holds the first, {names[0]!r} "
            "(a selection of namespaces reads them all)",
        )
    check_label_value(names[0], f"{where}.namespace")
    return names[0]
