"""Every way a command can fail: exactly one `error: ...` line on stderr, exit status 1,
no traceback, and (for apply) nothing written."""

from __future__ import annotations

import pytest
from cli_kit import CLI, GREETINGS, Result, greeting


def one_error(result: Result) -> str:
    """The single error line, after checking the shape every failure shares."""
    assert result.code == 1, result
    assert len(result.err_lines) == 1, result.err
    assert result.err_lines[0].startswith("error: "), result.err
    assert "Traceback" not in result.err
    return result.err_lines[0]


def nothing_stored(cli: CLI) -> bool:
    """No store was created, or it holds no greeting."""
    if not (cli.directory / "state.db").exists():
        return True
    return cli.ok("get", "greetings", "-A", "-o", "json").json()["items"] == []


def test_unknown_kind_in_get(cli: CLI) -> None:
    line = one_error(cli("get", "widgets"))
    assert '"widgets"' in line
    assert "--kinds" in line


def test_no_kinds_loaded(cli: CLI) -> None:
    line = one_error(cli("apply", "-f", str(cli.write("a.yaml", greeting("a"))), kinds=False))
    assert 'no kind "Greeting"' in line
    assert "--kinds" in line


def test_unknown_kind_in_a_manifest_names_the_file_and_line(cli: CLI) -> None:
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    path = cli.write("w.yaml", greeting("fine"), widget)
    line = one_error(cli("apply", "-f", str(path)))
    assert f"{path}:8:" in line  # the second document starts on line 8
    assert 'no kind "Widget"' in line
    assert nothing_stored(cli)


@pytest.mark.parametrize("missing", ["apiVersion", "kind"])
def test_missing_api_version_or_kind(cli: CLI, missing: str) -> None:
    doc = greeting("a")
    del doc[missing]
    line = one_error(cli("apply", "-f", str(cli.write("a.yaml", doc))))
    assert f"{missing}: required" in line


def test_schema_violation_names_the_field_and_its_line_and_writes_nothing(cli: CLI) -> None:
    path = cli.write("bad.yaml", greeting("good"), greeting("bad", repeat=0))
    line = one_error(cli("apply", "-f", str(path)))
    assert "spec.repeat" in line
    assert "greater than or equal to 1" in line
    assert f"{path}:14:" in line  # `  repeat: 0`
    assert "greeting.example.com/bad" in line
    assert nothing_stored(cli)  # the good document before it was not written either


def test_unknown_spec_field(cli: CLI) -> None:
    line = one_error(cli("apply", "-f", str(cli.write("a.yaml", greeting("a", colour="red")))))
    assert "spec.colour" in line


def test_missing_required_spec_field(cli: CLI) -> None:
    doc = greeting("a")
    del doc["spec"]["message"]
    line = one_error(cli("apply", "-f", str(cli.write("a.yaml", doc))))
    assert "spec.message" in line


def test_invalid_name(cli: CLI) -> None:
    line = one_error(cli("apply", "-f", str(cli.write("a.yaml", greeting("Not_A_Name")))))
    assert "metadata.name" in line


def test_bad_yaml_names_the_file_and_line(cli: CLI) -> None:
    path = cli.write(
        "bad.yaml",
        "apiVersion: example.com/v1\nkind: Greeting\nmetadata:\n  name: a\n   labels: x\n",
    )
    line = one_error(cli("apply", "-f", str(path)))
    assert f"{path}:5:" in line
    assert "YAML" in line


def test_bad_json_names_the_file_and_line(cli: CLI) -> None:
    path = cli.directory / "bad.json"
    path.write_text('{\n  "apiVersion": "example.com/v1",\n  "kind": \n}\n')
    line = one_error(cli("apply", "-f", str(path)))
    assert f"{path}:4:" in line
    assert "JSON" in line


def test_a_document_that_is_not_an_object(cli: CLI) -> None:
    line = one_error(cli("apply", "-f", str(cli.write("l.yaml", "- a\n- b\n"))))
    assert "must be an object" in line


def test_missing_file(cli: CLI) -> None:
    line = one_error(cli("apply", "-f", "nope.yaml"))
    assert "nope.yaml: no such file or directory" in line


def test_empty_input(cli: CLI) -> None:
    line = one_error(cli("apply", "-f", str(cli.write("empty.yaml", "# nothing\n"))))
    assert "no objects" in line


def test_namespace_in_the_manifest_differs_from_the_flag(cli: CLI) -> None:
    path = cli.write("a.yaml", greeting("a", namespace="one"))
    line = one_error(cli("apply", "-n", "two", "-f", str(path)))
    assert '"one"' in line
    assert '"two"' in line


def test_missing_kinds_file(cli: CLI) -> None:
    line = one_error(cli("--kinds", "nowhere/kinds.py", "get", "greetings", kinds=False))
    assert "nowhere/kinds.py" in line


def test_missing_kinds_module(cli: CLI) -> None:
    line = one_error(cli("--kinds", "no_such_module_here", "get", "greetings", kinds=False))
    assert "no_such_module_here" in line


def test_a_kinds_file_that_raises_names_where(cli: CLI) -> None:
    path = cli.directory / "broken.py"
    path.write_text("x = 1\nraise ValueError('oops')\n")
    line = one_error(cli("--kinds", str(path), "get", "greetings", kinds=False))
    assert "ValueError" in line
    assert "broken.py:2" in line
    assert "oops" in line


def test_bad_label_selector(cli: CLI) -> None:
    line = one_error(cli("get", "greetings", "-l", "tier in (web"))
    assert "labelSelector" in line


def test_get_a_missing_name(applied: CLI) -> None:
    line = one_error(applied("get", "greeting", "nope"))
    assert "nope" in line


def test_unknown_store_url(cli: CLI) -> None:
    line = one_error(cli("--store", "bogus://x", "get", "greetings", store=False))
    assert "bogus://x" in line


def test_a_store_file_that_is_not_a_database(cli: CLI) -> None:
    (cli.directory / "state.db").write_text("not sqlite at all\n" * 100)
    line = one_error(cli("get", "greetings"))
    assert "cannot open" in line
    assert "state.db" in line
    assert "not a database" in line


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("get",),
        ("frobnicate",),
        ("get", "greetings", "-o", "xml"),
        ("delete", "greetings"),
        ("delete", "-f", str(GREETINGS), "greeting"),
        ("get", "greetings", "hello", "-l", "a=b"),
        ("get", "greetings", "hello", "-A"),
    ],
)
def test_usage_errors(cli: CLI, args: tuple[str, ...]) -> None:
    one_error(cli(*args))
