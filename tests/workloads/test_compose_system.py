"""What process-compose's own fixtures (fixtures-code/) exercise, in files of our own,
translated (`setpoint.workloads.compose.translate`: pure, no engine): namespaces (one or
several per process, and a selection of them, as `process-compose -n NS`), dependencies
across namespaces, process `extends` in a chain, a project with no circle, and
`success_exit_codes`.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
import yaml

from setpoint.errors import Invalid
from setpoint.workloads.compose.translate import translate


def translated(text: str, *namespaces: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The objects (by name) and warnings of a project written in YAML."""
    project = yaml.safe_load(textwrap.dedent(text))
    out = translate(project, namespaces=namespaces) if namespaces else translate(project)
    return {o["metadata"]["name"]: o for o in out.objects}, out.warnings


def namespace_of(obj: dict[str, Any]) -> str | None:
    labels: dict[str, str] = obj["metadata"].get("labels", {})
    return labels.get("setpoint.dev/compose-namespace")


SEVERAL = """
processes:
  foo: {command: echo foo, namespace: [foo, foobar]}
  bar: {command: echo bar, namespace: [bar, foobar]}
  baz: {command: echo baz, namespace: baz}
  plain: {command: echo plain}
"""


def test_several_namespaces_per_process_and_a_selection_of_them() -> None:
    """fixtures-code multi-namespace: a process in several namespaces is selected by any
    of them; a process that names none is in `default`."""
    objects, warnings = translated(SEVERAL)
    assert {name: namespace_of(o) for name, o in objects.items()} == {
        "bar": "bar", "baz": "baz", "foo": "foo", "plain": None,
    }  # fmt: skip
    assert warnings == [
        "processes.bar.namespace: several: the label setpoint.dev/compose-namespace holds "
        "the first, 'bar' (a selection of namespaces reads them all)",
        "processes.foo.namespace: several: the label setpoint.dev/compose-namespace holds "
        "the first, 'foo' (a selection of namespaces reads them all)",
    ]
    assert list(translated(SEVERAL, "foo")[0]) == ["foo"]
    assert list(translated(SEVERAL, "foobar")[0]) == ["bar", "foo"]
    assert list(translated(SEVERAL, "baz", "bar")[0]) == ["bar", "baz"]
    assert list(translated(SEVERAL, "default")[0]) == ["plain"]
    with pytest.raises(Invalid) as exc:
        translated(SEVERAL, "nothere")
    assert str(exc.value) == "processes: no process is in the namespaces selected (nothere)"


ACROSS = """
processes:
  api:
    command: echo api
    namespace: front
    depends_on:
      db: {condition: process_completed_successfully}
  api_helper: {command: echo helper, namespace: front}
  db: {command: echo db, namespace: back}
"""


def test_a_dependency_in_a_namespace_left_out_is_not_waited_for() -> None:
    """fixtures-code namespace-deps: with every namespace, a dependency across namespaces
    holds (db, waited for to complete successfully, is a Job); selecting api's namespace
    alone leaves db out and api starts without it, as process-compose prunes it."""
    objects, warnings = translated(ACROSS)
    assert objects["db"]["kind"] == "Job"
    assert objects["api"]["spec"]["dependsOn"] == [
        {"kind": "Job", "name": "db", "condition": "Complete"}
    ]
    objects, warnings = translated(ACROSS, "front")
    assert sorted(objects) == ["api", "api-helper"]
    assert "dependsOn" not in objects["api"]["spec"]
    assert "processes.api.depends_on.db: db is in none of the namespaces selected (front): " \
        "not waited for" in warnings  # fmt: skip


PROFILES = """
processes:
  shared_db: {command: echo db, namespace: infra}
  customer_api: {command: sleep 30, namespace: customer}
  admin_api:
    command: echo admin-api
    namespace: admin
    depends_on:
      shared_db: {condition: process_completed_successfully}
  admin_ui:
    command: echo admin-ui
    namespace: admin
    depends_on:
      admin_api: {condition: process_completed_successfully}
"""


def test_a_namespace_is_selected_with_its_own_dependencies_only() -> None:
    """fixtures-code namespace-profiles: selecting `admin` runs its two processes, in
    their order, and not the `infra` process one of them depends on."""
    objects, _ = translated(PROFILES, "admin")
    assert {name: o["kind"] for name, o in objects.items()} == {
        "admin-api": "Job",  # admin-ui waits for it to complete successfully
        "admin-ui": "Process",
    }
    assert "dependsOn" not in objects["admin-api"]["spec"]
    assert objects["admin-ui"]["spec"]["dependsOn"] == [
        {"kind": "Job", "name": "admin-api", "condition": "Complete"}
    ]
    assert translated(PROFILES)[0]["shared-db"]["kind"] == "Job"  # all: it is waited for


def test_a_selection_leaves_out_a_disabled_process_and_says_why_per_dependency() -> None:
    objects, warnings = translated(
        """
        processes:
          a: {command: x, namespace: n, depends_on: {b: {}, c: {}}}
          b: {command: x, namespace: n, disabled: true}
          c: {command: x, namespace: m}
        """,
        "n",
    )
    assert list(objects) == ["a"]
    assert warnings == [
        "processes.b.disabled: not created: apply it by itself to run it",
        "processes.a.depends_on.b: b is disabled: not waited for",
        "processes.a.depends_on.c: c is in none of the namespaces selected (n): not waited for",
    ]


def test_extends_in_a_chain_merges_each_level_over_the_one_it_extends() -> None:
    """fixtures-code process-extends: `derived` extends `base`, `top` extends `derived`:
    each gets what it does not say from the level below, transitively."""
    objects, _ = translated(
        """
        processes:
          base:
            command: echo base
            working_dir: /tmp
            environment: [FOO=bar, SHARED=base]
            availability: {restart: always}
          derived:
            extends: base
            environment: [FOO=override, EXTRA=2]
          top:
            extends: derived
            command: echo top
        """
    )
    env = {"EXTRA": "2", "FOO": "override", "SHARED": "base"}
    for name, command in (("derived", "echo base"), ("top", "echo top")):
        spec = objects[name]["spec"]
        assert spec["args"] == ["bash", "-c", command]
        assert spec["cwd"] == "/tmp"
        assert spec["restartPolicy"] == "Always"
        assert {k: v for k, v in spec["env"].items() if not k.startswith("PC_")} == env
        assert spec["env"]["PC_PROC_NAME"] == name


def test_a_project_without_a_circle_is_translated() -> None:
    """fixtures-code non-circular (beside circular, which is refused: test_compose)."""
    objects, warnings = translated(
        """
        processes:
          one: {command: echo one}
          three:
            command: echo three
            depends_on:
              one: {condition: process_completed_successfully}
        """
    )
    assert (objects["one"]["kind"], objects["three"]["kind"]) == ("Job", "Process")
    assert warnings == []


def test_success_exit_codes_are_noted_for_up_and_the_difference_is_warned() -> None:
    """fixtures-code success-exit-codes: process-compose counts a listed code as success
    for `on_failure` too; setpoint counts it only where `up` ends (setpoint.dev/
    success-exit-codes), and says so: a retry counts only 0 as success."""
    objects, warnings = translated(
        """
        processes:
          allowed:
            command: exit 130
            success_exit_codes: [130]
            availability: {restart: on_failure, max_restarts: 3}
          control:
            command: exit 130
            availability: {restart: on_failure, backoff_seconds: 1}
        """
    )
    allowed, control = objects["allowed"], objects["control"]
    assert allowed["metadata"]["annotations"]["setpoint.dev/success-exit-codes"] == "130"
    assert (allowed["kind"], allowed["spec"]["backoffLimit"]) == ("Job", 3)  # 130 is retried
    assert "setpoint.dev/success-exit-codes" not in control["metadata"]["annotations"]
    assert warnings == [
        "processes.allowed.success_exit_codes: only when exit_on_end or exit_on_failure end "
        "setpoint up: a restart, a Job's completion and a dependency count only exit code 0 "
        "as success"
    ]
