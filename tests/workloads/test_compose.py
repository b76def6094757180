"""process-compose files translated: `setpoint.workloads.compose` (pure: no engine, no files).

Each test is a small project of our own, written as a user writes one, and what setpoint
makes of it: the objects, the warnings, or the one-line refusal naming the field.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.errors import Invalid
from setpoint.model.patterns import compile_pattern
from setpoint.workloads.compose.project import file_kind, interpolate, merge, resolve_extends
from setpoint.workloads.compose.template import render
from setpoint.workloads.compose.translate import translate


def load(text: str) -> Any:
    return yaml.safe_load(textwrap.dedent(text))


def objects(text: str, **options: Any) -> dict[str, dict[str, Any]]:
    """The translated objects of a project written in YAML, by name."""
    return {o["metadata"]["name"]: o for o in translate(load(text), **options).objects}


def warnings(text: str) -> list[str]:
    return translate(load(text)).warnings


def refusal(text: str) -> str:
    with pytest.raises(Invalid) as exc:
        translate(load(text))
    return str(exc.value)


def test_command_runs_through_bash_and_the_global_shell_overrides_it() -> None:
    out = objects("processes: {web: {command: 'echo $HOME && sleep 1'}}")
    assert out["web"]["kind"] == "Process"
    assert out["web"]["spec"]["args"] == ["bash", "-c", "echo $HOME && sleep 1"]
    assert out["web"]["spec"]["restartPolicy"] == "Never"  # process-compose's default: no
    out = objects("shell: {shell_command: sh, shell_argument: -ec}\nprocesses: {w: {command: 'x'}}")
    assert out["w"]["spec"]["args"] == ["sh", "-ec", "x"]


def test_entrypoint_is_the_argv_and_command_wins_over_it_with_a_warning() -> None:
    out = objects("processes: {a: {entrypoint: [python3, -c, 'print(1)']}}")
    assert out["a"]["spec"]["args"] == ["python3", "-c", "print(1)"]
    project = "processes: {a: {entrypoint: [x], command: 'y'}}"
    assert objects(project)["a"]["spec"]["args"] == ["bash", "-c", "y"]
    assert warnings(project) == [
        "processes.a.entrypoint: ignored: command is set too, and wins (as in process-compose)"
    ]
    assert refusal("processes: {a: {working_dir: /tmp}}") == (
        "processes.a: required: command or entrypoint"
    )


def test_environment_list_and_map_over_the_global_one_and_env_files_in_order() -> None:
    project = """
    environment: [SHARED=global, ONLY_GLOBAL=g]
    processes:
      a: {command: x, environment: [SHARED=a, "EQ=x=y"], working_dir: /srv, env_file: a.env}
      b: {command: x, environment: {SHARED: b, N: 3, T: true}, is_dotenv_disabled: true}
    """
    out = objects(project, dotenv_file=".env")
    assert out["a"]["spec"]["env"] == {
        "PC_PROC_NAME": "a", "PC_REPLICA_NUM": "0",
        "SHARED": "a", "ONLY_GLOBAL": "g", "EQ": "x=y",
    }  # fmt: skip
    assert out["a"]["spec"]["envFile"] == [".env", "/srv/a.env"]  # env_file is relative to it
    assert out["a"]["spec"]["cwd"] == "/srv"
    assert out["b"]["spec"]["env"]["SHARED"] == "b"
    assert out["b"]["spec"]["env"]["N"] == "3"
    assert out["b"]["spec"]["env"]["T"] == "true"
    assert "envFile" not in out["b"]["spec"]
    assert warnings(project) == [
        "processes.a.env_file: the global environment wins over it here "
        "(in process-compose env_file wins over the global environment)"
    ]


@pytest.mark.parametrize(
    ("condition", "setpoint"),
    [
        ("process_started", "Started"),
        ("process_completed", "Completed"),
        ("process_completed_successfully", "Complete"),
        ("process_healthy", "Ready"),
        ("process_log_ready", "Ready"),
    ],
)
def test_every_depends_on_condition(condition: str, setpoint: str) -> None:
    project = f"""
    processes:
      db:
        command: x
        ready_log_line: ready
        liveness_probe: {{exec: {{command: 'true'}}}}
      app: {{command: y, depends_on: {{db: {{condition: {condition}}}}}}}
    """
    if condition == "process_completed_successfully":
        project = project.replace("ready_log_line: ready", "").replace(
            "liveness_probe: {exec: {command: 'true'}}", ""
        )
    out = objects(project)
    kind = "Job" if setpoint == "Complete" else "Process"
    assert out["db"]["kind"] == kind
    assert out["app"]["spec"]["dependsOn"] == [{"kind": kind, "name": "db", "condition": setpoint}]


def test_a_depends_on_without_condition_waits_for_completion_as_process_compose() -> None:
    out = objects("processes: {a: {command: x}, b: {command: y, depends_on: {a: {}}}}")
    assert out["b"]["spec"]["dependsOn"] == [
        {"kind": "Process", "name": "a", "condition": "Completed"}
    ]


def test_depends_on_refusals_name_the_field() -> None:
    assert refusal("processes: {a: {command: x, depends_on: {nope: {}}}}") == (
        "processes.a.depends_on.nope: 'nope': no such process"
    )
    healthy = (
        "processes: {a: {command: x}, "
        "b: {command: y, depends_on: {a: {condition: process_healthy}}}}"
    )
    assert refusal(healthy) == (
        "processes.b.depends_on.a.condition: process_healthy: a has no readiness_probe or "
        "liveness_probe"
    )
    assert "process_log_ready: a has no ready_log_line" in refusal(
        healthy.replace("process_healthy", "process_log_ready")
    )
    assert "'process_up': want one of" in refusal(healthy.replace("process_healthy", "process_up"))


def test_a_circular_depends_on_is_refused() -> None:
    project = """
    processes:
      a: {command: x, depends_on: {b: {condition: process_started}}}
      b: {command: x, depends_on: {c: {condition: process_started}}}
      c: {command: x, depends_on: {a: {condition: process_started}}}
    """
    assert refusal(project) == "processes.a.depends_on: circular dependency: a -> b -> c -> a"


def test_probes_and_ready_log_line() -> None:
    project = """
    processes:
      web:
        command: serve
        working_dir: /srv
        readiness_probe:
          http_get: {host: localhost, port: 8080, path: /health, scheme: https,
                     headers: {X-Token: t}}
          period_seconds: 2
          failure_threshold: 0
        liveness_probe:
          exec: {command: 'pg_isready -q'}
          initial_delay_seconds: 5
          timeout_seconds: 3
      logs: {command: serve, ready_log_line: 'listening on [::]:80 (v1.2)'}
    """
    out = objects(project)
    spec = out["web"]["spec"]
    assert spec["readinessProbe"] == {
        "periodSeconds": 2,  # failure_threshold 0 is process-compose's default, 3
        "httpGet": {"port": 8080, "host": "localhost", "path": "/health", "scheme": "HTTPS",
                    "httpHeaders": [{"name": "X-Token", "value": "t"}]},
    }  # fmt: skip
    assert spec["livenessProbe"] == {
        "initialDelaySeconds": 5, "timeoutSeconds": 3,
        "exec": {"command": ["bash", "-c", "pg_isready -q"]},
    }  # fmt: skip
    pattern = out["logs"]["spec"]["readinessProbe"]["logLine"]["pattern"]
    assert compile_pattern(pattern).search("x listening on [::]:80 (v1.2) y")
    assert not compile_pattern(pattern).search("listening on [::]:80 xv1.2y")


def test_availability_maps_onto_restart_policy_and_a_constant_backoff() -> None:
    project = """
    processes:
      a: {command: x, availability: {restart: always, backoff_seconds: 4}}
      b: {command: x, availability: {restart: on_failure}}
      c: {command: x, availability: {restart: exit_on_failure, exit_on_end: true}}
      d: {command: x, availability: {exit_on_skipped: true}, depends_on: {c: {}}}
      e: {command: x, availability: {restart: on_failure, max_restarts: 3}}
      f: {command: x, availability: {restart: always, max_restarts: 3}}
      g: {command: x, availability: {restart: on_failure, max_restarts: 3}, ready_log_line: up}
    """
    out = objects(project)
    assert out["a"]["spec"]["restartPolicy"] == "Always"
    assert out["a"]["spec"]["backoff"] == {"initialSeconds": 4, "maxSeconds": 4}
    assert out["b"]["spec"]["restartPolicy"] == "OnFailure"
    assert out["b"]["spec"]["backoff"] == {"initialSeconds": 1, "maxSeconds": 1}
    assert out["c"]["spec"]["restartPolicy"] == "Never"
    # what ends `setpoint up` is data on the object, read by up (setpoint.cli.run_end)
    assert out["c"]["metadata"]["annotations"] == {
        "setpoint.dev/exit-on-end": "true",
        "setpoint.dev/exit-on-failure": "true",
        "setpoint.dev/compose-project": "process-compose.yaml",
    }
    assert out["d"]["metadata"]["annotations"] == {
        "setpoint.dev/exit-on-skipped": "true",
        "setpoint.dev/compose-project": "process-compose.yaml",
    }
    # every object says which project it is part of: `up` ends once all of them ended
    assert out["a"]["metadata"]["annotations"] == {
        "setpoint.dev/compose-project": "process-compose.yaml"
    }
    named = objects("name: shop\n" + textwrap.dedent(project))
    assert named["a"]["metadata"]["annotations"] == {"setpoint.dev/compose-project": "shop"}
    # at most max_restarts restarts after failures: a Job, whose retries are limited
    assert out["e"]["kind"] == "Job"
    assert out["e"]["spec"]["backoffLimit"] == 3
    assert warnings(project) == [
        "processes.f.availability.max_restarts: ignored: a setpoint Process restarts without "
        "limit, with back-off",
        "processes.g.availability.max_restarts: ignored: a setpoint Process restarts without "
        "limit, with back-off",
    ]
    assert "'sometimes': want one of no, always" in refusal(
        "processes: {a: {command: x, availability: {restart: sometimes}}}"
    )


def test_a_process_others_wait_on_to_complete_successfully_is_a_job() -> None:
    project = """
    processes:
      migrate:
        command: m
        availability: {restart: on_failure, max_restarts: 2, backoff_seconds: 5}
      app: {command: a, depends_on: {migrate: {condition: process_completed_successfully}}}
    """
    job = objects(project)["migrate"]
    assert job["kind"] == "Job"
    assert job["spec"]["backoffLimit"] == 2
    assert job["spec"]["backoff"] == {"initialSeconds": 5, "maxSeconds": 5}
    assert "restartPolicy" not in job["spec"]
    assert "which has no probes" in refusal(
        project.replace("command: m\n", "command: m\n        ready_log_line: done\n")
    )


def test_shutdown() -> None:
    out = objects("processes: {a: {command: x, shutdown: {signal: 2, timeout_seconds: 7}}}")
    assert out["a"]["spec"]["stopSignal"] == "SIGINT"
    assert out["a"]["spec"]["terminationGracePeriodSeconds"] == 7
    assert refusal("processes: {web: {command: x, shutdown: {parent_only: true}}}") == (
        "processes.web.shutdown.parent_only: setpoint signals the process's whole group, "
        "never its parent alone"
    )
    assert refusal("processes: {a: {command: x, shutdown: {command: 'pg_ctl stop'}}}").startswith(
        "processes.a.shutdown.command: setpoint stops a process with a signal"
    )
    assert "SIGSEGV: setpoint stops a process with one of" in refusal(
        "processes: {a: {command: x, shutdown: {signal: 11}}}"
    )


def test_replicas_are_named_as_process_compose_names_them() -> None:
    project = """
    processes:
      web: {command: 'serve --id {{.PC_REPLICA_NUM}}', replicas: 10}
      lb: {command: x, depends_on: {web: {condition: process_started}}}
      one: {command: x, depends_on: {web-03: {condition: process_started}}}
    """
    out = objects(project)
    assert [n for n in out if n.startswith("web")] == [f"web-{n:02d}" for n in range(10)]
    assert out["web-07"]["spec"]["args"][-1] == "serve --id 7"
    assert out["web-07"]["spec"]["env"]["PC_REPLICA_NUM"] == "7"
    assert out["web-07"]["spec"]["env"]["PC_PROC_NAME"] == "web"
    assert [d["name"] for d in out["lb"]["spec"]["dependsOn"]] == [
        f"web-{n:02d}" for n in range(10)
    ]
    assert out["one"]["spec"]["dependsOn"] == [
        {"kind": "Process", "name": "web-03", "condition": "Started"}
    ]
    assert list(objects("processes: {w: {command: x, replicas: 2}}")) == ["w-0", "w-1"]


def test_vars_fill_go_templates() -> None:
    project = """
    vars: {PORT: 8080, HOST: localhost}
    processes:
      a:
        vars: {PORT: 9090, DEBUG: true}
        command: 'serve --port {{ .PORT }} --debug={{.DEBUG}}'
        environment: ['URL=http://{{.HOST}}:{{.PORT}}']
        readiness_probe: {http_get: {port: '{{.PORT}}'}}
      b: {command: 'echo {{.PORT}}', is_template_disabled: true}
    """
    out = objects(project)
    assert out["a"]["spec"]["args"][-1] == "serve --port 9090 --debug=true"
    assert out["a"]["spec"]["env"]["URL"] == "http://localhost:9090"
    assert out["a"]["spec"]["readinessProbe"]["httpGet"]["port"] == 9090
    assert out["b"]["spec"]["args"][-1] == "echo {{.PORT}}"
    assert refusal("processes: {a: {command: 'echo {{.NOPE}}'}}") == (
        "processes.a.command: {{.NOPE}}: no such var (vars: PC_REPLICA_NUM)"
    )
    assert "only {{.NAME}} of vars is supported" in refusal(
        "processes: {a: {command: '{{if .X}}y{{end}}'}}"
    )


def test_disabled_namespace_description_and_what_is_warned() -> None:
    project = """
    processes:
      idle: {command: x, disabled: true}
      main: {command: y, depends_on: {idle: {condition: process_started}}, namespace: db,
           description: the database, log_location: /tmp/on.log, success_exit_codes: [143],
           x-mine: 1, colour: blue}
    """
    out = objects(project)
    assert list(out) == ["main"]
    assert "dependsOn" not in out["main"]["spec"]
    assert out["main"]["metadata"]["labels"] == {"setpoint.dev/compose-namespace": "db"}
    assert out["main"]["metadata"]["annotations"] == {
        "setpoint.dev/description": "the database",
        "setpoint.dev/success-exit-codes": "143",
        "setpoint.dev/compose-project": "process-compose.yaml",
    }
    assert warnings(project) == [
        "processes.idle.disabled: not created: apply it by itself to run it",
        "processes.main.depends_on.idle: idle is disabled: not waited for",
        "processes.main.colour: unknown field, ignored",
        "processes.main.success_exit_codes: only when exit_on_end or exit_on_failure end "
        "setpoint up: a restart, a Job's completion and a dependency count only exit code 0 "
        "as success",
        "processes.main.log_location: ignored: setpoint writes the output to "
        ".setpoint/logs/<namespace>_main.log (setpoint logs main)",
    ]
    assert refusal("is_strict: true\n" + textwrap.dedent(project)) == (
        "processes.main.colour: unknown field (is_strict: true)"
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [("is_daemon", "true"), ("is_elevated", "true"), ("is_interactive", "true"),
     ("schedule", "{cron: '* * * * *'}"), ("watch", "{paths: [src]}")],
)  # fmt: skip
def test_what_setpoint_cannot_run_is_refused_naming_the_field(field: str, value: str) -> None:
    assert refusal(f"processes: {{a: {{command: x, {field}: {value}}}}}").startswith(
        f"processes.a.{field}: "
    )


def test_names_are_lower_case_with_dashes_in_setpoint_and_references_follow() -> None:
    project = """
    processes:
      Web_Server: {command: x, replicas: 2}
      db_init: {command: y}
      app: {command: z, depends_on: {Web_Server: {condition: process_started},
                                     Web_Server-1: {condition: process_started},
                                     db_init: {condition: process_completed_successfully}}}
    """
    out = objects(project)
    assert sorted(out) == ["app", "db-init", "web-server-0", "web-server-1"]
    assert out["web-server-1"]["spec"]["env"]["PC_PROC_NAME"] == "Web_Server"  # the file's
    assert out["app"]["spec"]["dependsOn"] == [
        {"kind": "Job", "name": "db-init", "condition": "Complete"},
        {"kind": "Process", "name": "web-server-0", "condition": "Started"},
        {"kind": "Process", "name": "web-server-1", "condition": "Started"},
    ]
    assert warnings(project)[:2] == [
        "processes.Web_Server: named web-server in setpoint (names there are lower case, "
        "with '-' for '_')",
        "processes.db_init: named db-init in setpoint (names there are lower case, "
        "with '-' for '_')",
    ]
    assert refusal("processes: {a_b: {command: x}, a-b: {command: y}}") == (
        "processes.a_b: a-b: the same setpoint name as processes.a-b"
    )
    assert refusal("processes: {'web server': {command: x}}").endswith(": rename the process")


def test_a_job_retries_as_process_compose_restarts_it() -> None:
    project = """
    processes:
      seed: {command: s, availability: {restart: on_failure}}
      once: {command: o, availability: {restart: always, max_restarts: 2}}
      app:
        command: a
        depends_on:
          seed: {condition: process_completed_successfully}
          once: {condition: process_completed_successfully}
    """
    out = objects(project)
    assert out["seed"]["spec"]["backoffLimit"] == 2**31 - 1  # no limit, as process-compose
    assert out["once"]["spec"]["backoffLimit"] == 2
    assert warnings(project) == [
        "processes.once.availability.restart: always: it runs as a setpoint Job, once after a "
        "success (process-compose runs it again, 3 times in all)",
    ]
    assert "which it then never is" in refusal(project.replace(", max_restarts: 2", ""))


def test_process_extends() -> None:
    project = """
    processes:
      base: {command: serve, environment: [A=1, B=1], availability: {restart: always}}
      child: {extends: base, environment: [B=2], availability: {backoff_seconds: 3}}
    """
    child = objects(project)["child"]["spec"]
    assert child["args"] == ["bash", "-c", "serve"]
    assert child["env"]["A"] == "1"
    assert child["env"]["B"] == "2"
    assert child["restartPolicy"] == "Always"
    assert child["backoff"] == {"initialSeconds": 3, "maxSeconds": 3}
    with pytest.raises(Invalid, match=r"processes.b.extends: circular extends: a -> b -> a"):
        resolve_extends({"a": {"extends": "b"}, "b": {"extends": "a"}})


def test_merge_as_process_compose_merges_an_override() -> None:
    base = load("""
    environment: [A=1, B=1]
    processes:
      web: {command: serve, environment: [X=1], availability: {restart: always, backoff_seconds: 2},
            depends_on: {db: {condition: process_healthy}}, namespace: [a]}
      db: {command: db}
    """)
    override = load("""
    environment: [B=2]
    processes:
      web: {command: serve --debug, environment: [Y=2], availability: {backoff_seconds: 5,
            restart: ''}, depends_on: {db: {condition: process_started}}, namespace: [b]}
      extra: {command: e}
    """)
    merged = merge(base, override)
    assert merged["environment"] == ["A=1", "B=2"]
    web = merged["processes"]["web"]
    assert web["command"] == "serve --debug"
    assert web["environment"] == ["X=1", "Y=2"]
    assert web["availability"] == {"restart": "always", "backoff_seconds": 5}  # "" never overrides
    assert web["depends_on"] == {"db": {"condition": "process_started"}}
    assert web["namespace"] == ["b"]
    assert set(merged["processes"]) == {"web", "db", "extra"}
    assert base["processes"]["web"]["command"] == "serve"  # the inputs are left as they were


def test_interpolate_as_process_compose_does_before_parsing() -> None:
    env = {"USER": "ada", "EMPTY": ""}
    text = "a: $USER ${USER} ${NOPE:-d} ${EMPTY:-e} ${EMPTY-f} ${USER:+set} $$HOME $1 ${NOPE}"
    assert interpolate(text, env.get, "f.yaml") == "a: ada ada d e  set $HOME $1 "
    with pytest.raises(Invalid, match=r"f.yaml: \$\{NOPE\}: needed"):
        interpolate("${NOPE:?needed}", env.get, "f.yaml")
    with pytest.raises(Invalid, match="not a variable setpoint can substitute"):
        interpolate("${USER/a/b}", env.get, "f.yaml")


def test_file_kind() -> None:
    assert file_kind({"processes": {}}) == "process-compose"
    assert file_kind({"services": {}}) == "docker-compose"
    assert file_kind({"apiVersion": "v1", "processes": {}}) is None
    assert file_kind([1]) is None


_names = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)


@settings(deadline=None)  # no timing assert: the suite must pass on a loaded machine
@given(st.dictionaries(_names, st.text(alphabet="abc xyz-=.:/", max_size=20), max_size=5))
def test_vars_render_every_value_and_leave_other_text_alone(variables: dict[str, str]) -> None:
    text = " ".join(f"<{{{{.{k}}}}}>" for k in variables) + " plain $text"
    out = render(text, variables, "f")
    assert out == " ".join(f"<{v}>" for v in variables.values()) + " plain $text"


@settings(deadline=None)  # no timing assert: the suite must pass on a loaded machine
@given(st.text(max_size=40).filter(lambda s: s.strip() and "\n" not in s))
def test_a_ready_log_line_matches_exactly_where_its_text_appears(line: str) -> None:
    project = {"processes": {"a": {"command": "x", "ready_log_line": line}}}
    pattern = translate(project).objects[0]["spec"]["readinessProbe"]["logLine"]["pattern"]
    compiled = compile_pattern(pattern)
    assert compiled.search(f"before {line} after")
    assert bool(compiled.search("zz")) == (line in "zz")


@settings(deadline=None)  # no timing assert: the suite must pass on a loaded machine
@given(st.integers(min_value=2, max_value=120))
def test_replica_names_are_unique_sorted_and_as_wide_as_the_count(count: int) -> None:
    project = {"processes": {"w": {"command": "x", "replicas": count}}}
    names = [o["metadata"]["name"] for o in translate(project).objects]
    assert len(set(names)) == count == len(names)
    assert names == sorted(names)
    assert all(re.fullmatch(rf"w-\d{{{len(str(count))}}}", n) for n in names)


_scalars = st.none() | st.booleans() | st.integers(-5, 70000) | st.text(max_size=8)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_fields = st.sampled_from([
    "command", "entrypoint", "working_dir", "environment", "env_file", "depends_on",
    "readiness_probe", "liveness_probe", "ready_log_line", "availability", "shutdown",
    "replicas", "namespace", "disabled", "is_disabled", "vars", "extends", "description",
    "success_exit_codes", "log_location", "is_daemon", "unknown",
])  # fmt: skip


@settings(deadline=None)  # no timing assert: the suite must pass on a loaded machine
@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "web"]),
        st.dictionaries(_fields, _values, max_size=4).map(lambda c: {"command": "x", **c}),
        min_size=1,
        max_size=3,
    ),
    st.dictionaries(
        st.sampled_from(["environment", "vars", "shell", "is_strict", "x"]), _values, max_size=2
    ),
)
def test_any_file_is_translated_or_refused_in_one_line(
    processes: dict[str, Any], top: dict[str, Any]
) -> None:
    try:
        translation = translate({**top, "processes": processes})
    except Invalid as exc:
        refused = str(exc)
    else:
        assert all(len(w.splitlines()) == 1 for w in translation.warnings)
        return
    assert len(refused.splitlines()) == 1


@settings(deadline=None)  # no timing assert: the suite must pass on a loaded machine
@given(st.text(alphabet="ab${}:-+=?_ \n", max_size=30))
def test_interpolation_substitutes_or_refuses_in_one_line(text: str) -> None:
    env = {"a": "A", "b": ""}
    try:
        out = interpolate(text, env.get, "f.yaml")
    except Invalid as exc:
        refused = str(exc)
    else:
        assert "$$" not in text or "$" in out
        return
    assert refused.startswith("f.yaml: ")
