"""`setpoint get`: tables, -o wide/yaml/json/name, names, selectors, namespaces, kind names."""

from __future__ import annotations

import pytest
from cli_kit import CLI, columns, greeting


def test_table_lists_every_object_sorted_by_name(applied: CLI) -> None:
    lines = applied.ok("get", "greetings").lines
    assert columns(lines[0]) == ["NAME", "READY", "AGE"]
    assert [columns(line)[:2] for line in lines[1:]] == [["bonjour", "-"], ["hello", "-"]]
    assert lines[0].index("READY") == lines[1].index("-")  # aligned columns


def test_kinds_separated_by_commas_print_one_table_each(applied: CLI) -> None:
    applied.ok("apply", "-f", str(applied.write("proc.yaml", PROC)))
    lines = applied.ok("get", "greetings,proc,gr").lines
    assert [(columns(line) or [""])[0] for line in lines] == [
        "NAME", "bonjour", "hello", "", "NAME", "p",
    ]  # fmt: skip
    only = applied.ok("get", "all").lines  # the workload kinds that have objects
    assert [(columns(line) or [""])[0] for line in only] == ["NAME", "p"]
    refused = applied("get", "greetings,proc", "-o", "yaml")
    assert refused.code == 1
    assert "no NAME, -w or -o" in refused.err


PROC = {
    "apiVersion": "setpoint.dev/v1alpha1",
    "kind": "Process",
    "metadata": {"name": "p"},
    "spec": {"args": ["true"]},
}


@pytest.mark.parametrize(
    "name", ["greetings", "greeting", "Greeting", "gr", "greetings.example.com"]
)
def test_kind_by_any_of_its_names(applied: CLI, name: str) -> None:
    assert len(applied.ok("get", name).lines) == 3


def test_wide_adds_generation_resource_version_and_labels(applied: CLI) -> None:
    lines = applied.ok("get", "greetings", "-o", "wide").lines
    assert columns(lines[0]) == [
        "NAME",
        "READY",
        "AGE",
        "REASON",
        "GENERATION",
        "RESOURCEVERSION",
        "LABELS",
    ]
    hello = applied.ok("get", "greeting", "hello", "-o", "json").json()
    row = columns(lines[2])
    assert row[0] == "hello"
    assert row[4:] == ["1", hello["metadata"]["resourceVersion"], "app=hello,lang=en"]


def test_yaml_and_json_of_all_is_a_list_with_the_revision(applied: CLI) -> None:
    for output, parse in (("yaml", "yaml"), ("json", "json")):
        result = applied.ok("get", "greetings", "-o", output)
        doc = getattr(result, parse)()
        assert doc["kind"] == "List"
        assert [i["metadata"]["name"] for i in doc["items"]] == ["bonjour", "hello"]
        assert int(doc["metadata"]["resourceVersion"]) >= 2


def test_yaml_and_json_of_one_name_is_the_object(applied: CLI) -> None:
    as_yaml = applied.ok("get", "greeting", "hello", "-o", "yaml").yaml()
    as_json = applied.ok("get", "greeting/hello", "-o", "json").json()
    assert as_yaml == as_json
    assert as_json["kind"] == "Greeting"
    assert as_json["spec"] == {"message": "Hello, world!", "repeat": 2}
    assert isinstance(as_json["metadata"]["resourceVersion"], str)


def test_names_select_objects(applied: CLI) -> None:
    applied.ok("apply", "-f", str(applied.write("x.yaml", greeting("extra"))))
    lines = applied.ok("get", "greetings", "hello", "extra").lines
    assert [columns(line)[0] for line in lines[1:]] == ["hello", "extra"]
    assert applied.ok("get", "greeting/hello", "greeting/extra", "-o", "name").lines == [
        "greeting.example.com/hello",
        "greeting.example.com/extra",
    ]


@pytest.mark.parametrize(
    ("selector", "names"),
    [
        ("lang=fr", ["bonjour"]),
        ("lang!=fr", ["hello"]),
        ("lang in (en,fr),app=hello", ["bonjour", "hello"]),
        ("!lang", []),
    ],
)
def test_label_selector(applied: CLI, selector: str, names: list[str]) -> None:
    result = applied.ok("get", "greetings", "-l", selector, "-o", "name")
    assert result.lines == [f"greeting.example.com/{n}" for n in names]


def test_nothing_found_says_so_on_stderr_and_succeeds(cli: CLI) -> None:
    cli.ok("apply", "-f", str(cli.write("a.yaml", greeting("elsewhere", namespace="other"))))
    result = cli("get", "greetings")
    assert (result.code, result.out) == (0, "")
    assert result.err_lines == ["No resources found in default namespace."]
    assert cli.ok("get", "greetings", "-o", "json").json()["items"] == []


def test_all_namespaces_adds_the_namespace_column(cli: CLI) -> None:
    cli.ok("apply", "-f", str(cli.write("a.yaml", greeting("a", namespace="one"))))
    cli.ok("apply", "-f", str(cli.write("b.yaml", greeting("b"))))
    lines = cli.ok("get", "greetings", "-A").lines
    assert columns(lines[0]) == ["NAMESPACE", "NAME", "READY", "AGE"]
    assert [columns(line)[:2] for line in lines[1:]] == [["default", "b"], ["one", "a"]]
    assert [columns(line)[0] for line in cli.ok("get", "greetings").lines[1:]] == ["b"]


def test_a_missing_name_is_an_error_but_the_others_are_shown(applied: CLI) -> None:
    result = applied("get", "greetings", "hello", "nope")
    assert result.code == 1
    assert [columns(line)[0] for line in result.lines[1:]] == ["hello"]
    assert len(result.err_lines) == 1
    assert result.err_lines[0].startswith("error: ")
    assert "nope" in result.err_lines[0]


def test_built_in_kinds_need_no_kinds_module(cli: CLI) -> None:
    """Event and Lease are known to the CLI without --kinds, and an Event applied by hand
    lists."""
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "hello.1"},
        "involvedObject": {"apiVersion": "example.com/v1", "kind": "Greeting", "name": "hello"},
        "reason": "Shown",
        "message": "shown twice",
        "type": "Normal",
        "count": 1,
        "firstTimestamp": "2026-11-29T22:00:00Z",
        "lastTimestamp": "2026-11-29T22:00:00Z",
        "source": {"component": "test"},
    }
    applied = cli("apply", "-f", str(cli.write("event.yaml", event)), kinds=False)
    assert (applied.code, applied.err) == (0, ""), applied
    listed = cli("get", "events", "-o", "name", kinds=False)
    assert (listed.code, listed.out.split()) == (0, ["event/hello.1"])
    leases = cli("get", "leases", kinds=False)
    assert leases.code == 0, leases
